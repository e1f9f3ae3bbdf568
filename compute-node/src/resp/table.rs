//! The command table: every command SplitKV has, with what `COMMAND`
//! reports about it (arity, flags, key positions, ACL categories, tips,
//! key specifications, subcommands) and what `COMMAND DOCS` and the README
//! say about it. The entries are Redis 7's own for the same commands, so
//! that cluster-aware clients and redis-cli read the same facts; dispatch,
//! arity checks, `COMMAND` and the README's command list all come from here.

/// What a command is, for dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Get,
    Set,
    Del,
    Exists,
    Mget,
    Mset,
    Ping,
    Echo,
    Dbsize,
    Info,
    Command,
    CommandCount,
    CommandDocs,
    CommandInfo,
    CommandList,
    Auth,
    Quit,
    Select,
    Config,
    ConfigGet,
    ConfigSet,
    ConfigResetstat,
    Client,
    ClientId,
    ClientSetname,
    ClientGetname,
    ClientInfo,
    ClientList,
    ClientSetinfo,
    ClientKill,
    ClientNoEvict,
    ClientNoTouch,
    ClientReply,
    Hello,
    Reset,
    Time,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    Unlink,
    Type,
    Touch,
    Rename,
    Renamenx,
    Copy,
    Flushall,
    Flushdb,
    Keys,
    Randomkey,
    Scan,
}

/// One key specification, as `COMMAND INFO` reports it: the keys start at
/// argument `begin_index` and run to `last_key` (negative: counted from the
/// end) in steps of `key_step`.
#[derive(Debug)]
pub struct KeySpec {
    /// The argument the first key is at.
    pub begin_index: i64,
    /// A note Redis attaches to the spec, if any.
    pub notes: Option<&'static str>,
    /// Access flags (`RO`, `RW`, `OW`, `RM`, `access`, `update`, …).
    pub flags: &'static [&'static str],
    /// Last key argument, relative to the first (negative: from the end).
    pub last_key: i64,
    /// Arguments from one key to the next.
    pub key_step: i64,
    /// Limit on the keys found (0: none).
    pub limit: i64,
}

/// What `COMMAND DOCS` says about a command.
#[derive(Debug)]
pub struct Docs {
    /// One line on what it does.
    pub summary: &'static str,
    /// The Redis version that introduced it.
    pub since: &'static str,
    /// The command group (`string`, `generic`, `connection`, …).
    pub group: &'static str,
    /// Its time complexity.
    pub complexity: Option<&'static str>,
}

/// A command (or a subcommand, named `parent|sub`), as `COMMAND` reports it.
#[derive(Debug)]
pub struct CommandInfo {
    /// What it is, for dispatch.
    pub kind: Kind,
    /// Its lower-case name.
    pub name: &'static str,
    /// Argument count including the name (and the subcommand); negative
    /// means at least that many.
    pub arity: i64,
    /// Command flags.
    pub flags: &'static [&'static str],
    /// First key, last key, key step (legacy key positions).
    pub keys: (i64, i64, i64),
    /// ACL categories.
    pub categories: &'static [&'static str],
    /// Tips for clients and proxies.
    pub tips: &'static [&'static str],
    /// Key specifications.
    pub key_specs: &'static [KeySpec],
    /// Subcommands (for container commands).
    pub subcommands: &'static [CommandInfo],
    /// Documentation.
    pub docs: Docs,
}

impl CommandInfo {
    /// True if `argc` arguments (name included) fit the arity.
    pub fn arity_allows(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc as i64 == self.arity
        } else {
            argc as i64 >= -self.arity
        }
    }

    /// The subcommand named `name`, in any letter case.
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static CommandInfo> {
        self.subcommands.iter().find(|s| {
            s.name
                .split_once('|')
                .is_some_and(|(_, sub)| name.eq_ignore_ascii_case(sub.as_bytes()))
        })
    }
}

/// The command named `name` (a top-level one), in any letter case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    COMMANDS
        .iter()
        .find(|c| name.eq_ignore_ascii_case(c.name.as_bytes()))
}

/// The command named `name` or `parent|sub`, as COMMAND INFO and DOCS
/// accept them.
pub fn lookup_full(name: &[u8]) -> Option<&'static CommandInfo> {
    match name.iter().position(|&b| b == b'|') {
        Some(bar) => lookup(&name[..bar])?.subcommand(&name[bar + 1..]),
        None => lookup(name),
    }
}

/// Subcommands SplitKV has.
static COMMAND_SUBCOMMANDS: &[CommandInfo] = &[
    CommandInfo {
        kind: Kind::CommandList,
        name: "command|list",
        arity: -2,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &["nondeterministic_output_order"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get an array of Redis command names",
            since: "7.0.0",
            group: "server",
            complexity: Some("O(N) where N is the total number of Redis commands"),
        },
    },
    CommandInfo {
        kind: Kind::CommandDocs,
        name: "command|docs",
        arity: -2,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &["nondeterministic_output_order"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get array of specific Redis command documentation",
            since: "7.0.0",
            group: "server",
            complexity: Some("O(N) where N is the number of commands to look up"),
        },
    },
    CommandInfo {
        kind: Kind::CommandCount,
        name: "command|count",
        arity: 2,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get total number of Redis commands",
            since: "2.8.13",
            group: "server",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::CommandInfo,
        name: "command|info",
        arity: -2,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &["nondeterministic_output_order"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get array of specific Redis command details, or all when no argument is given.",
            since: "2.8.13",
            group: "server",
            complexity: Some("O(N) where N is the number of commands to look up"),
        },
    },
];
/// Subcommands SplitKV has.
static CONFIG_SUBCOMMANDS: &[CommandInfo] = &[
    CommandInfo {
        kind: Kind::ConfigGet,
        name: "config|get",
        arity: -3,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@admin", "@slow", "@dangerous"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get the values of configuration parameters",
            since: "2.0.0",
            group: "server",
            complexity: Some("O(N) when N is the number of configuration parameters provided"),
        },
    },
    CommandInfo {
        kind: Kind::ConfigResetstat,
        name: "config|resetstat",
        arity: 2,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@admin", "@slow", "@dangerous"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Reset the stats returned by INFO",
            since: "2.0.0",
            group: "server",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ConfigSet,
        name: "config|set",
        arity: -4,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@admin", "@slow", "@dangerous"],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Set configuration parameters to the given values",
            since: "2.0.0",
            group: "server",
            complexity: Some("O(N) when N is the number of configuration parameters provided"),
        },
    },
];
/// Subcommands SplitKV has.
static CLIENT_SUBCOMMANDS: &[CommandInfo] = &[
    CommandInfo {
        kind: Kind::ClientList,
        name: "client|list",
        arity: -2,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@admin", "@slow", "@dangerous", "@connection"],
        tips: &["nondeterministic_output"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get the list of client connections",
            since: "2.4.0",
            group: "connection",
            complexity: Some("O(N) where N is the number of client connections"),
        },
    },
    CommandInfo {
        kind: Kind::ClientKill,
        name: "client|kill",
        arity: -3,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@admin", "@slow", "@dangerous", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Kill the connection of a client",
            since: "2.4.0",
            group: "connection",
            complexity: Some("O(N) where N is the number of client connections"),
        },
    },
    CommandInfo {
        kind: Kind::ClientInfo,
        name: "client|info",
        arity: 2,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &["nondeterministic_output"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Returns information about the current client connection.",
            since: "6.2.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientId,
        name: "client|id",
        arity: 2,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Returns the client ID for the current connection",
            since: "5.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientGetname,
        name: "client|getname",
        arity: 2,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get the current connection name",
            since: "2.6.9",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientSetname,
        name: "client|setname",
        arity: 3,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Set the current connection name",
            since: "2.6.9",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientReply,
        name: "client|reply",
        arity: 3,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Instruct the server whether to reply to commands",
            since: "3.2.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientNoEvict,
        name: "client|no-evict",
        arity: 3,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@admin", "@slow", "@dangerous", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Set client eviction mode for the current connection",
            since: "7.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientSetinfo,
        name: "client|setinfo",
        arity: -4,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Set client or connection specific info",
            since: "7.2.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::ClientNoTouch,
        name: "client|no-touch",
        arity: 3,
        flags: &["noscript", "loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Controls whether commands sent by the client affect the LRU/LFU of accessed keys",
            since: "7.2.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
];
/// Every command SplitKV has, in the order COMMAND lists them.
pub static COMMANDS: &[CommandInfo] = &[
    CommandInfo {
        kind: Kind::Get,
        name: "get",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        categories: &["@read", "@string", "@fast"],
        tips: &[],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RO", "access"],
            last_key: 0,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Get the value of a key",
            since: "1.0.0",
            group: "string",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Set,
        name: "set",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: (1, 1, 1),
        categories: &["@write", "@string", "@slow"],
        tips: &[],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: Some("RW and ACCESS due to the optional `GET` argument"),
            flags: &["RW", "access", "update", "variable_flags"],
            last_key: 0,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Set the string value of a key",
            since: "1.0.0",
            group: "string",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Del,
        name: "del",
        arity: -2,
        flags: &["write"],
        keys: (1, -1, 1),
        categories: &["@keyspace", "@write", "@slow"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RM", "delete"],
            last_key: -1,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Delete a key",
            since: "1.0.0",
            group: "generic",
            complexity: Some(
                "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
            ),
        },
    },
    CommandInfo {
        kind: Kind::Exists,
        name: "exists",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: (1, -1, 1),
        categories: &["@keyspace", "@read", "@fast"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RO"],
            last_key: -1,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Determine if a key exists",
            since: "1.0.0",
            group: "generic",
            complexity: Some("O(N) where N is the number of keys to check."),
        },
    },
    CommandInfo {
        kind: Kind::Mget,
        name: "mget",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: (1, -1, 1),
        categories: &["@read", "@string", "@fast"],
        tips: &["request_policy:multi_shard"],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RO", "access"],
            last_key: -1,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Get the values of all the given keys",
            since: "1.0.0",
            group: "string",
            complexity: Some("O(N) where N is the number of keys to retrieve."),
        },
    },
    CommandInfo {
        kind: Kind::Mset,
        name: "mset",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: (1, -1, 2),
        categories: &["@write", "@string", "@slow"],
        tips: &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["OW", "update"],
            last_key: -1,
            key_step: 2,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Set multiple keys to multiple values",
            since: "1.0.1",
            group: "string",
            complexity: Some("O(N) where N is the number of keys to set."),
        },
    },
    CommandInfo {
        kind: Kind::Ping,
        name: "ping",
        arity: -1,
        flags: &["fast"],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Ping the server",
            since: "1.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Echo,
        name: "echo",
        arity: 2,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Echo the given string",
            since: "1.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Dbsize,
        name: "dbsize",
        arity: 1,
        flags: &["readonly", "fast"],
        keys: (0, 0, 0),
        categories: &["@keyspace", "@read", "@fast"],
        tips: &["request_policy:all_shards", "response_policy:agg_sum"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Return the number of keys in the selected database",
            since: "1.0.0",
            group: "server",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Flushall,
        name: "flushall",
        arity: -1,
        flags: &["write"],
        keys: (0, 0, 0),
        categories: &["@keyspace", "@write", "@slow", "@dangerous"],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Remove all keys from all databases",
            since: "1.0.0",
            group: "server",
            complexity: Some("O(N) where N is the total number of keys in all databases"),
        },
    },
    CommandInfo {
        kind: Kind::Flushdb,
        name: "flushdb",
        arity: -1,
        flags: &["write"],
        keys: (0, 0, 0),
        categories: &["@keyspace", "@write", "@slow", "@dangerous"],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Remove all keys from the current database",
            since: "1.0.0",
            group: "server",
            complexity: Some("O(N) where N is the number of keys in the selected database"),
        },
    },
    CommandInfo {
        kind: Kind::Info,
        name: "info",
        arity: -1,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@dangerous"],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Get information and statistics about the server",
            since: "1.0.0",
            group: "server",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Command,
        name: "command",
        arity: -1,
        flags: &["loading", "stale"],
        keys: (0, 0, 0),
        categories: &["@slow", "@connection"],
        tips: &["nondeterministic_output_order"],
        key_specs: &[],
        subcommands: COMMAND_SUBCOMMANDS,
        docs: Docs {
            summary: "Get array of Redis command details",
            since: "2.8.13",
            group: "server",
            complexity: Some("O(N) where N is the total number of Redis commands"),
        },
    },
    CommandInfo {
        kind: Kind::Auth,
        name: "auth",
        arity: -2,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Authenticate to the server",
            since: "1.0.0",
            group: "connection",
            complexity: Some("O(N) where N is the number of passwords defined for the user"),
        },
    },
    CommandInfo {
        kind: Kind::Quit,
        name: "quit",
        arity: -1,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Close the connection",
            since: "1.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Select,
        name: "select",
        arity: 2,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Change the selected database for the current connection",
            since: "1.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Config,
        name: "config",
        arity: -2,
        flags: &[],
        keys: (0, 0, 0),
        categories: &["@slow"],
        tips: &[],
        key_specs: &[],
        subcommands: CONFIG_SUBCOMMANDS,
        docs: Docs {
            summary: "A container for server configuration commands",
            since: "2.0.0",
            group: "server",
            complexity: Some("Depends on subcommand."),
        },
    },
    CommandInfo {
        kind: Kind::Client,
        name: "client",
        arity: -2,
        flags: &[],
        keys: (0, 0, 0),
        categories: &["@slow"],
        tips: &[],
        key_specs: &[],
        subcommands: CLIENT_SUBCOMMANDS,
        docs: Docs {
            summary: "A container for client connection commands",
            since: "2.4.0",
            group: "connection",
            complexity: Some("Depends on subcommand."),
        },
    },
    CommandInfo {
        kind: Kind::Hello,
        name: "hello",
        arity: -1,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Handshake with Redis",
            since: "6.0.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Reset,
        name: "reset",
        arity: 1,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: (0, 0, 0),
        categories: &["@fast", "@connection"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Reset the connection",
            since: "6.2.0",
            group: "connection",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Time,
        name: "time",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: (0, 0, 0),
        categories: &["@fast"],
        tips: &["nondeterministic_output"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Return the current server time",
            since: "2.6.0",
            group: "server",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Multi,
        name: "multi",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (0, 0, 0),
        categories: &["@fast", "@transaction"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Mark the start of a transaction block",
            since: "1.2.0",
            group: "transactions",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Exec,
        name: "exec",
        arity: 1,
        flags: &["noscript", "loading", "stale", "skip_slowlog"],
        keys: (0, 0, 0),
        categories: &["@slow", "@transaction"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Execute all commands issued after MULTI",
            since: "1.2.0",
            group: "transactions",
            complexity: Some("Depends on commands in the transaction"),
        },
    },
    CommandInfo {
        kind: Kind::Discard,
        name: "discard",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (0, 0, 0),
        categories: &["@fast", "@transaction"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Discard all commands issued after MULTI",
            since: "2.0.0",
            group: "transactions",
            complexity: Some("O(N), when N is the number of queued commands"),
        },
    },
    CommandInfo {
        kind: Kind::Watch,
        name: "watch",
        arity: -2,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (1, -1, 1),
        categories: &["@fast", "@transaction"],
        tips: &[],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RO"],
            last_key: -1,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Watch the given keys to determine execution of the MULTI/EXEC block",
            since: "2.2.0",
            group: "transactions",
            complexity: Some("O(1) for every key."),
        },
    },
    CommandInfo {
        kind: Kind::Unwatch,
        name: "unwatch",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: (0, 0, 0),
        categories: &["@fast", "@transaction"],
        tips: &[],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Forget about all watched keys",
            since: "2.2.0",
            group: "transactions",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Unlink,
        name: "unlink",
        arity: -2,
        flags: &["write", "fast"],
        keys: (1, -1, 1),
        categories: &["@keyspace", "@write", "@fast"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RM", "delete"],
            last_key: -1,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
            since: "4.0.0",
            group: "generic",
            complexity: Some(
                "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
            ),
        },
    },
    CommandInfo {
        kind: Kind::Type,
        name: "type",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        categories: &["@keyspace", "@read", "@fast"],
        tips: &[],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RO"],
            last_key: 0,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Determine the type stored at key",
            since: "1.0.0",
            group: "generic",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Touch,
        name: "touch",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: (1, -1, 1),
        categories: &["@keyspace", "@read", "@fast"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[KeySpec {
            begin_index: 1,
            notes: None,
            flags: &["RO"],
            last_key: -1,
            key_step: 1,
            limit: 0,
        }],
        subcommands: &[],
        docs: Docs {
            summary: "Alters the last access time of a key(s). Returns the number of existing keys specified.",
            since: "3.2.1",
            group: "generic",
            complexity: Some("O(N) where N is the number of keys that will be touched."),
        },
    },
    CommandInfo {
        kind: Kind::Rename,
        name: "rename",
        arity: 3,
        flags: &["write"],
        keys: (1, 2, 1),
        categories: &["@keyspace", "@write", "@slow"],
        tips: &[],
        key_specs: &[
            KeySpec {
                begin_index: 1,
                notes: None,
                flags: &["RW", "access", "delete"],
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            KeySpec {
                begin_index: 2,
                notes: None,
                flags: &["OW", "update"],
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
        ],
        subcommands: &[],
        docs: Docs {
            summary: "Rename a key",
            since: "1.0.0",
            group: "generic",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Renamenx,
        name: "renamenx",
        arity: 3,
        flags: &["write", "fast"],
        keys: (1, 2, 1),
        categories: &["@keyspace", "@write", "@fast"],
        tips: &[],
        key_specs: &[
            KeySpec {
                begin_index: 1,
                notes: None,
                flags: &["RW", "access", "delete"],
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            KeySpec {
                begin_index: 2,
                notes: None,
                flags: &["OW", "insert"],
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
        ],
        subcommands: &[],
        docs: Docs {
            summary: "Rename a key, only if the new key does not exist",
            since: "1.0.0",
            group: "generic",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Copy,
        name: "copy",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: (1, 2, 1),
        categories: &["@keyspace", "@write", "@slow"],
        tips: &[],
        key_specs: &[
            KeySpec {
                begin_index: 1,
                notes: None,
                flags: &["RO", "access"],
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            KeySpec {
                begin_index: 2,
                notes: None,
                flags: &["OW", "update"],
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
        ],
        subcommands: &[],
        docs: Docs {
            summary: "Copy a key",
            since: "6.2.0",
            group: "generic",
            complexity: Some(
                "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
            ),
        },
    },
    CommandInfo {
        kind: Kind::Keys,
        name: "keys",
        arity: 2,
        flags: &["readonly"],
        keys: (0, 0, 0),
        categories: &["@keyspace", "@read", "@slow", "@dangerous"],
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Find all keys matching the given pattern",
            since: "1.0.0",
            group: "generic",
            complexity: Some(
                "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
            ),
        },
    },
    CommandInfo {
        kind: Kind::Randomkey,
        name: "randomkey",
        arity: 1,
        flags: &["readonly"],
        keys: (0, 0, 0),
        categories: &["@keyspace", "@read", "@slow"],
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Return a random key from the keyspace",
            since: "1.0.0",
            group: "generic",
            complexity: Some("O(1)"),
        },
    },
    CommandInfo {
        kind: Kind::Scan,
        name: "scan",
        arity: -2,
        flags: &["readonly"],
        keys: (0, 0, 0),
        categories: &["@keyspace", "@read", "@slow"],
        tips: &["nondeterministic_output", "request_policy:special"],
        key_specs: &[],
        subcommands: &[],
        docs: Docs {
            summary: "Incrementally iterate the keys space",
            since: "2.8.0",
            group: "generic",
            complexity: Some(
                "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            ),
        },
    },
];

/// The README's list of commands: a Markdown table of every command and
/// subcommand, with Redis's summary of it.
#[cfg(test)]
fn markdown_command_list() -> String {
    let mut text = String::from("| Command | Arity | What it does |\n|---|---|---|\n");
    for command in COMMANDS.iter() {
        let rows = std::iter::once(command).chain(command.subcommands.iter());
        for entry in rows {
            let name = entry.name.replace('|', " ").to_uppercase();
            text.push_str(&format!(
                "| `{name}` | {} | {} |\n",
                entry.arity, entry.docs.summary
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_lists_the_commands_of_the_table() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("read README.md");
        let list = markdown_command_list();
        assert!(
            readme.contains(&list),
            "README.md's command list is not the table's; put this in its place:\n{list}"
        );
    }

    #[test]
    fn every_name_is_found_in_any_case_and_subcommands_under_their_parent() {
        for command in COMMANDS {
            assert!(std::ptr::eq(
                lookup(command.name.to_uppercase().as_bytes()).expect("found"),
                command
            ));
            for sub in command.subcommands {
                let (parent, name) = sub.name.split_once('|').expect("parent|sub");
                assert_eq!(parent, command.name);
                assert!(std::ptr::eq(
                    command.subcommand(name.as_bytes()).expect("sub"),
                    sub
                ));
                assert!(std::ptr::eq(
                    lookup_full(sub.name.as_bytes()).expect("full"),
                    sub
                ));
            }
        }
        assert!(lookup(b"hset").is_none());
        assert!(lookup_full(b"client|pause").is_none());
    }
}
