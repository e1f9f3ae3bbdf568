//! The command table: every command SplitKV has, with what `COMMAND`
//! reports about it (arity, flags, key positions, ACL categories, tips,
//! key specifications, subcommands) and what `COMMAND DOCS` and the README
//! say about it. The entries are Redis 7's own for the same commands, so
//! that cluster-aware clients and redis-cli read the same facts; dispatch,
//! arity checks, `COMMAND` and the README's command list all come from here.
//!
//! The entries are in one file per Redis command group (the docs' `group`),
//! each a static of that group's commands; [`commands`] lists them all, in
//! the order of [`GROUPS`], and [`lookup`] finds one by name through a map
//! built on first use. `scripts/command-table.py` prints entries from a
//! running redis-server's `COMMAND INFO` and `COMMAND DOCS`.

mod connection;
mod generic;
mod hash;
mod list;
mod server;
mod set;
mod sorted_set;
mod sorted_set_ops;
mod string;
mod transactions;

use std::sync::OnceLock;

use hashbrown::HashMap;

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
    Role,
    Replicaof,
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
    Setnx,
    Getset,
    Getdel,
    Msetnx,
    Strlen,
    Append,
    Getrange,
    Setrange,
    Lcs,
    Incr,
    Decr,
    Incrby,
    Decrby,
    Incrbyfloat,
    Setex,
    Psetex,
    Getex,
    Expire,
    Pexpire,
    Expireat,
    Pexpireat,
    Ttl,
    Pttl,
    Expiretime,
    Pexpiretime,
    Persist,
    // OBJECT and its subcommands (generic).
    Object,
    ObjectEncoding,
    ObjectHelp,
    // Hashes.
    Hset,
    Hsetnx,
    Hmset,
    Hget,
    Hmget,
    Hgetall,
    Hdel,
    Hlen,
    Hexists,
    Hkeys,
    Hvals,
    Hstrlen,
    Hincrby,
    Hincrbyfloat,
    Hrandfield,
    Hscan,
    // Lists.
    Lpush,
    Rpush,
    Lpushx,
    Rpushx,
    Lpop,
    Rpop,
    Llen,
    Lrange,
    Lindex,
    Lset,
    Linsert,
    Lrem,
    Ltrim,
    Lpos,
    Lmove,
    Rpoplpush,
    Lmpop,
    Blpop,
    Brpop,
    Blmove,
    Brpoplpush,
    Blmpop,
    // Sets.
    Sadd,
    Srem,
    Smembers,
    Sismember,
    Smismember,
    Scard,
    Spop,
    Srandmember,
    Smove,
    Sinter,
    Sunion,
    Sdiff,
    Sinterstore,
    Sunionstore,
    Sdiffstore,
    Sintercard,
    Sscan,
    // Sorted sets.
    Zadd,
    Zincrby,
    Zrem,
    Zscore,
    Zmscore,
    Zcard,
    Zcount,
    Zlexcount,
    Zrange,
    Zrangestore,
    Zrevrange,
    Zrangebyscore,
    Zrevrangebyscore,
    Zrangebylex,
    Zrevrangebylex,
    Zrank,
    Zrevrank,
    Zremrangebyrank,
    Zremrangebyscore,
    Zremrangebylex,
    Zpopmin,
    Zpopmax,
    Bzpopmin,
    Bzpopmax,
    Zmpop,
    Bzmpop,
    Zunion,
    Zinter,
    Zdiff,
    Zunionstore,
    Zinterstore,
    Zdiffstore,
    Zintercard,
    Zrandmember,
    Zscan,
}

/// One key specification, as `COMMAND INFO` reports it: where the search
/// for the keys begins, and how the keys are found from there.
#[derive(Debug)]
pub struct KeySpec {
    /// A note Redis attaches to the spec, if any.
    pub notes: Option<&'static str>,
    /// Access flags (`RO`, `RW`, `OW`, `RM`, `access`, `update`, …).
    pub flags: &'static [&'static str],
    /// Where the search for the keys begins.
    pub begin_search: BeginSearch,
    /// How the keys are found from where the search begins.
    pub find_keys: FindKeys,
}

/// Where the search for a key specification's keys begins (Redis's
/// `begin_search`).
#[derive(Debug)]
pub enum BeginSearch {
    /// At this argument (Redis's `index`, its `pos`).
    Index(i64),
    /// Just after the argument `keyword`, looked for from argument
    /// `startfrom` on (Redis's `keyword`).
    #[allow(
        dead_code,
        reason = "Redis's form for keys after a word (GEORADIUS's STORE); no command of the table has it yet"
    )]
    Keyword {
        /// The word the keys follow.
        keyword: &'static str,
        /// The argument the search for the word starts at (negative:
        /// counted from the end, and the search goes backwards).
        startfrom: i64,
    },
    /// Nowhere a rule can tell (Redis's `unknown`: SORT's BY and GET).
    #[allow(
        dead_code,
        reason = "Redis's form for keys no rule finds; no command of the table has it yet"
    )]
    Unknown,
}

/// How a key specification's keys are found from where the search began
/// (Redis's `find_keys`).
#[derive(Debug)]
pub enum FindKeys {
    /// The keys run to `lastkey`, in steps of `keystep` (Redis's `range`).
    Range {
        /// Last key argument, relative to the first (negative: counted
        /// from the end of the arguments).
        lastkey: i64,
        /// Arguments from one key to the next.
        keystep: i64,
        /// With `lastkey` -1: only the first 1/`limit` of the keys to the
        /// end (0 and 1: all of them).
        limit: i64,
    },
    /// An argument tells how many keys there are (Redis's `keynum`).
    Keynum {
        /// The argument with the number of keys, relative to where the
        /// search began.
        keynumidx: i64,
        /// The first key, relative to where the search began.
        firstkey: i64,
        /// Arguments from one key to the next.
        keystep: i64,
    },
    /// No rule finds them (Redis's `unknown`).
    #[allow(
        dead_code,
        reason = "Redis's form for keys no rule finds; no command of the table has it yet"
    )]
    Unknown,
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

/// The groups' statics, in the order [`commands`] lists them (COMMAND's
/// order).
pub static GROUPS: &[&[CommandInfo]] = &[
    string::STRING_COMMANDS,
    generic::GENERIC_COMMANDS,
    hash::HASH_COMMANDS,
    list::LIST_COMMANDS,
    set::SET_COMMANDS,
    sorted_set::SORTED_SET_COMMANDS,
    sorted_set_ops::SORTED_SET_OPS_COMMANDS,
    transactions::TRANSACTIONS_COMMANDS,
    connection::CONNECTION_COMMANDS,
    server::SERVER_COMMANDS,
];

/// The longest name [`lookup`] finds (Redis's longest is 20 bytes).
const LONGEST_NAME: usize = 32;

/// Every top-level command, and the same by lower-case name.
struct Table {
    commands: Vec<&'static CommandInfo>,
    by_name: HashMap<&'static str, &'static CommandInfo>,
}

/// The table, built on first use.
fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let commands: Vec<&'static CommandInfo> = GROUPS.iter().flat_map(|g| g.iter()).collect();
        let mut by_name = HashMap::with_capacity(commands.len());
        for &command in &commands {
            assert!(
                command.name.len() <= LONGEST_NAME
                    && !command.name.bytes().any(|b| b.is_ascii_uppercase()),
                "{}: names are lower case, at most {LONGEST_NAME} bytes",
                command.name
            );
            let twice = by_name.insert(command.name, command);
            assert!(twice.is_none(), "{} is in the table twice", command.name);
        }
        Table { commands, by_name }
    })
}

/// Every top-level command SplitKV has, in the order COMMAND lists them.
pub fn commands() -> &'static [&'static CommandInfo] {
    &table().commands
}

/// The command named `name` (a top-level one), in any letter case: one
/// map look-up, the name lower-cased on the stack.
pub fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    let mut buffer = [0u8; LONGEST_NAME];
    let lower = buffer.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let name = std::str::from_utf8(lower).ok()?;
    table().by_name.get(name).copied()
}

/// The command named `name` or `parent|sub`, as COMMAND INFO and DOCS
/// accept them.
pub fn lookup_full(name: &[u8]) -> Option<&'static CommandInfo> {
    match name.iter().position(|&b| b == b'|') {
        Some(bar) => lookup(&name[..bar])?.subcommand(&name[bar + 1..]),
        None => lookup(name),
    }
}

/// The README's list of commands: a Markdown table of every command and
/// subcommand, with Redis's summary of it.
#[cfg(test)]
fn markdown_command_list() -> String {
    let mut text = String::from("| Command | Arity | What it does |\n|---|---|---|\n");
    for &command in commands() {
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
        for &command in commands() {
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
        assert!(lookup(b"nosuch").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'z'; LONGEST_NAME + 1]).is_none());
        assert!(lookup("zünion".as_bytes()).is_none());
        assert_eq!(lookup(b"ZunIoN").expect("zunion").kind, Kind::Zunion);
        assert_eq!(
            lookup_full(b"OBJECT|Encoding")
                .expect("object|encoding")
                .kind,
            Kind::ObjectEncoding
        );
        assert!(lookup_full(b"client|pause").is_none());
    }

    #[test]
    fn each_group_static_holds_one_redis_group() {
        for group in GROUPS {
            let name = group[0].docs.group;
            for command in group.iter() {
                for entry in std::iter::once(command).chain(command.subcommands) {
                    assert_eq!(entry.docs.group, name, "{}", entry.name);
                }
            }
        }
    }

    #[test]
    fn commands_whose_keys_an_argument_counts_say_so() {
        for name in [
            "zunion",
            "zinter",
            "zdiff",
            "zintercard",
            "sintercard",
            "lmpop",
            "zmpop",
        ] {
            let spec = &lookup(name.as_bytes()).expect(name).key_specs[0];
            assert!(matches!(spec.begin_search, BeginSearch::Index(1)), "{name}");
            assert!(
                matches!(
                    spec.find_keys,
                    FindKeys::Keynum {
                        keynumidx: 0,
                        firstkey: 1,
                        keystep: 1
                    }
                ),
                "{name}"
            );
        }
        let blmpop = &lookup(b"blmpop").expect("blmpop").key_specs[0];
        assert!(matches!(blmpop.begin_search, BeginSearch::Index(2)));
    }
}
