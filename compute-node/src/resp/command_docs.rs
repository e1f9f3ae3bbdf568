//! What `COMMAND DOCS` says of each command beyond its summary, version,
//! group and complexity (those are in the command table): its history and
//! its argument list, nested as Redis nests them. Made by
//! `scripts/command-docs.py` from Redis 7.0.15's own `COMMAND DOCS` (CLIENT
//! SETINFO and NO-TOUCH, newer, from Redis 7.2's command files); a test
//! checks that every command of the table is here.

/// One argument of a command, as `COMMAND DOCS` describes it.
#[derive(Debug)]
pub struct Arg {
    /// Its name.
    pub name: &'static str,
    /// Its type (`key`, `string`, `integer`, `pattern`, `pure-token`,
    /// `oneof`, `block`, …), Redis's `type` field.
    pub kind: &'static str,
    /// The key specification it is the key of, for keys.
    pub key_spec_index: Option<i64>,
    /// The word that comes before it, if any.
    pub token: Option<&'static str>,
    /// What it is for, if Redis says.
    pub summary: Option<&'static str>,
    /// The Redis version that added it, if later than the command.
    pub since: Option<&'static str>,
    /// The Redis version that deprecated it, if any.
    pub deprecated_since: Option<&'static str>,
    /// `optional`, `multiple`, `multiple_token`.
    pub flags: &'static [&'static str],
    /// Its own arguments (for `oneof` and `block`).
    pub arguments: &'static [Arg],
}

/// A command's history and arguments.
#[derive(Debug)]
pub struct MoreDocs {
    /// (Redis version, what changed), oldest first.
    pub history: &'static [(&'static str, &'static str)],
    /// Its arguments, in order.
    pub arguments: &'static [Arg],
}

/// The history and arguments of the command named `name` (`parent|sub`
/// for a subcommand).
pub fn more_docs(name: &str) -> Option<&'static MoreDocs> {
    MORE_DOCS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, docs)| docs)
}

/// An argument named `name` of type `kind`, with nothing more said of it.
const fn arg(name: &'static str, kind: &'static str) -> Arg {
    Arg {
        name,
        kind,
        key_spec_index: None,
        token: None,
        summary: None,
        since: None,
        deprecated_since: None,
        flags: &[],
        arguments: &[],
    }
}

/// Every command's history and arguments, by name.
static MORE_DOCS: &[(&str, MoreDocs)] = &[
    (
        "client|list",
        MoreDocs {
            history: &[
                ("2.8.12", "Added unique client `id` field."),
                ("5.0.0", "Added optional `TYPE` filter."),
                ("6.0.0", "Added `user` field."),
                (
                    "6.2.0",
                    "Added `argv-mem`, `tot-mem`, `laddr` and `redir` fields and the optional `ID` filter.",
                ),
                (
                    "7.0.0",
                    "Added `resp`, `multi-mem`, `rbs` and `rbp` fields.",
                ),
                ("7.0.3", "Added `ssub` field."),
            ],
            arguments: &[
                Arg {
                    token: Some("TYPE"),
                    since: Some("5.0.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NORMAL"),
                            ..arg("normal", "pure-token")
                        },
                        Arg {
                            token: Some("MASTER"),
                            ..arg("master", "pure-token")
                        },
                        Arg {
                            token: Some("REPLICA"),
                            ..arg("replica", "pure-token")
                        },
                        Arg {
                            token: Some("PUBSUB"),
                            ..arg("pubsub", "pure-token")
                        },
                    ],
                    ..arg("normal_master_replica_pubsub", "oneof")
                },
                Arg {
                    token: Some("ID"),
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    arguments: &[Arg {
                        flags: &["multiple"],
                        ..arg("client-id", "integer")
                    }],
                    ..arg("id", "block")
                },
            ],
        },
    ),
    (
        "client|kill",
        MoreDocs {
            history: &[
                ("2.8.12", "Added new filter format."),
                ("2.8.12", "`ID` option."),
                ("3.2.0", "Added `master` type in for `TYPE` option."),
                (
                    "5.0.0",
                    "Replaced `slave` `TYPE` with `replica`. `slave` still supported for backward compatibility.",
                ),
                ("6.2.0", "`LADDR` option."),
            ],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        deprecated_since: Some("2.8.12"),
                        ..arg("ip:port", "string")
                    },
                    Arg {
                        flags: &["multiple"],
                        arguments: &[
                            Arg {
                                token: Some("ID"),
                                since: Some("2.8.12"),
                                flags: &["optional"],
                                ..arg("client-id", "integer")
                            },
                            Arg {
                                token: Some("TYPE"),
                                since: Some("2.8.12"),
                                flags: &["optional"],
                                arguments: &[
                                    Arg {
                                        token: Some("NORMAL"),
                                        ..arg("normal", "pure-token")
                                    },
                                    Arg {
                                        token: Some("MASTER"),
                                        since: Some("3.2.0"),
                                        ..arg("master", "pure-token")
                                    },
                                    Arg {
                                        token: Some("SLAVE"),
                                        ..arg("slave", "pure-token")
                                    },
                                    Arg {
                                        token: Some("REPLICA"),
                                        since: Some("5.0.0"),
                                        ..arg("replica", "pure-token")
                                    },
                                    Arg {
                                        token: Some("PUBSUB"),
                                        ..arg("pubsub", "pure-token")
                                    },
                                ],
                                ..arg("normal_master_slave_pubsub", "oneof")
                            },
                            Arg {
                                token: Some("USER"),
                                flags: &["optional"],
                                ..arg("username", "string")
                            },
                            Arg {
                                token: Some("ADDR"),
                                flags: &["optional"],
                                ..arg("ip:port", "string")
                            },
                            Arg {
                                token: Some("LADDR"),
                                since: Some("6.2.0"),
                                flags: &["optional"],
                                ..arg("ip:port", "string")
                            },
                            Arg {
                                token: Some("SKIPME"),
                                flags: &["optional"],
                                ..arg("yes/no", "string")
                            },
                        ],
                        ..arg("new-format", "oneof")
                    },
                ],
                ..arg("filter", "oneof")
            }],
        },
    ),
    (
        "client|info",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "client|id",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "client|getname",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "client|setname",
        MoreDocs {
            history: &[],
            arguments: &[arg("connection-name", "string")],
        },
    ),
    (
        "client|reply",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        token: Some("ON"),
                        ..arg("on", "pure-token")
                    },
                    Arg {
                        token: Some("OFF"),
                        ..arg("off", "pure-token")
                    },
                    Arg {
                        token: Some("SKIP"),
                        ..arg("skip", "pure-token")
                    },
                ],
                ..arg("on_off_skip", "oneof")
            }],
        },
    ),
    (
        "client|no-evict",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        token: Some("ON"),
                        ..arg("on", "pure-token")
                    },
                    Arg {
                        token: Some("OFF"),
                        ..arg("off", "pure-token")
                    },
                ],
                ..arg("enabled", "oneof")
            }],
        },
    ),
    (
        "client|setinfo",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        token: Some("LIB-NAME"),
                        ..arg("libname", "string")
                    },
                    Arg {
                        token: Some("LIB-VER"),
                        ..arg("libver", "string")
                    },
                ],
                ..arg("attr", "oneof")
            }],
        },
    ),
    (
        "client|no-touch",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        token: Some("ON"),
                        ..arg("on", "pure-token")
                    },
                    Arg {
                        token: Some("OFF"),
                        ..arg("off", "pure-token")
                    },
                ],
                ..arg("enabled", "oneof")
            }],
        },
    ),
    (
        "ping",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                flags: &["optional"],
                ..arg("message", "string")
            }],
        },
    ),
    (
        "echo",
        MoreDocs {
            history: &[],
            arguments: &[arg("message", "string")],
        },
    ),
    (
        "auth",
        MoreDocs {
            history: &[("6.0.0", "Added ACL style (username and password).")],
            arguments: &[
                Arg {
                    since: Some("6.0.0"),
                    flags: &["optional"],
                    ..arg("username", "string")
                },
                arg("password", "string"),
            ],
        },
    ),
    (
        "quit",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "select",
        MoreDocs {
            history: &[],
            arguments: &[arg("index", "integer")],
        },
    ),
    (
        "client",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "hello",
        MoreDocs {
            history: &[(
                "6.2.0",
                "`protover` made optional; when called without arguments the command reports the current connection's context.",
            )],
            arguments: &[Arg {
                flags: &["optional"],
                arguments: &[
                    arg("protover", "integer"),
                    Arg {
                        token: Some("AUTH"),
                        flags: &["optional"],
                        arguments: &[arg("username", "string"), arg("password", "string")],
                        ..arg("username_password", "block")
                    },
                    Arg {
                        token: Some("SETNAME"),
                        flags: &["optional"],
                        ..arg("clientname", "string")
                    },
                ],
                ..arg("arguments", "block")
            }],
        },
    ),
    (
        "reset",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "object|encoding",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "object|help",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "del",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "exists",
        MoreDocs {
            history: &[("3.0.3", "Accepts multiple `key` arguments.")],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "unlink",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "type",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "touch",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "rename",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("newkey", "key")
                },
            ],
        },
    ),
    (
        "renamenx",
        MoreDocs {
            history: &[(
                "3.2.0",
                "The command no longer returns an error when source and destination names are the same.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("newkey", "key")
                },
            ],
        },
    ),
    (
        "copy",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("source", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("destination", "key")
                },
                Arg {
                    token: Some("DB"),
                    flags: &["optional"],
                    ..arg("destination-db", "integer")
                },
                Arg {
                    token: Some("REPLACE"),
                    flags: &["optional"],
                    ..arg("replace", "pure-token")
                },
            ],
        },
    ),
    (
        "keys",
        MoreDocs {
            history: &[],
            arguments: &[arg("pattern", "pattern")],
        },
    ),
    (
        "randomkey",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "scan",
        MoreDocs {
            history: &[("6.0.0", "Added the `TYPE` subcommand.")],
            arguments: &[
                arg("cursor", "integer"),
                Arg {
                    token: Some("MATCH"),
                    flags: &["optional"],
                    ..arg("pattern", "pattern")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
                Arg {
                    token: Some("TYPE"),
                    since: Some("6.0.0"),
                    flags: &["optional"],
                    ..arg("type", "string")
                },
            ],
        },
    ),
    (
        "expire",
        MoreDocs {
            history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("seconds", "integer"),
                Arg {
                    since: Some("7.0.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NX"),
                            ..arg("nx", "pure-token")
                        },
                        Arg {
                            token: Some("XX"),
                            ..arg("xx", "pure-token")
                        },
                        Arg {
                            token: Some("GT"),
                            ..arg("gt", "pure-token")
                        },
                        Arg {
                            token: Some("LT"),
                            ..arg("lt", "pure-token")
                        },
                    ],
                    ..arg("condition", "oneof")
                },
            ],
        },
    ),
    (
        "pexpire",
        MoreDocs {
            history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("milliseconds", "integer"),
                Arg {
                    since: Some("7.0.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NX"),
                            ..arg("nx", "pure-token")
                        },
                        Arg {
                            token: Some("XX"),
                            ..arg("xx", "pure-token")
                        },
                        Arg {
                            token: Some("GT"),
                            ..arg("gt", "pure-token")
                        },
                        Arg {
                            token: Some("LT"),
                            ..arg("lt", "pure-token")
                        },
                    ],
                    ..arg("condition", "oneof")
                },
            ],
        },
    ),
    (
        "expireat",
        MoreDocs {
            history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("unix-time-seconds", "unix-time"),
                Arg {
                    since: Some("7.0.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NX"),
                            ..arg("nx", "pure-token")
                        },
                        Arg {
                            token: Some("XX"),
                            ..arg("xx", "pure-token")
                        },
                        Arg {
                            token: Some("GT"),
                            ..arg("gt", "pure-token")
                        },
                        Arg {
                            token: Some("LT"),
                            ..arg("lt", "pure-token")
                        },
                    ],
                    ..arg("condition", "oneof")
                },
            ],
        },
    ),
    (
        "pexpireat",
        MoreDocs {
            history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("unix-time-milliseconds", "unix-time"),
                Arg {
                    since: Some("7.0.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NX"),
                            ..arg("nx", "pure-token")
                        },
                        Arg {
                            token: Some("XX"),
                            ..arg("xx", "pure-token")
                        },
                        Arg {
                            token: Some("GT"),
                            ..arg("gt", "pure-token")
                        },
                        Arg {
                            token: Some("LT"),
                            ..arg("lt", "pure-token")
                        },
                    ],
                    ..arg("condition", "oneof")
                },
            ],
        },
    ),
    (
        "ttl",
        MoreDocs {
            history: &[("2.8.0", "Added the -2 reply.")],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "pttl",
        MoreDocs {
            history: &[("2.8.0", "Added the -2 reply.")],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "expiretime",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "pexpiretime",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "persist",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "object",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "hset",
        MoreDocs {
            history: &[("4.0.0", "Accepts multiple `field` and `value` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    arguments: &[arg("field", "string"), arg("value", "string")],
                    ..arg("field_value", "block")
                },
            ],
        },
    ),
    (
        "hsetnx",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("field", "string"),
                arg("value", "string"),
            ],
        },
    ),
    (
        "hmset",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    arguments: &[arg("field", "string"), arg("value", "string")],
                    ..arg("field_value", "block")
                },
            ],
        },
    ),
    (
        "hget",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("field", "string"),
            ],
        },
    ),
    (
        "hmget",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("field", "string")
                },
            ],
        },
    ),
    (
        "hgetall",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "hdel",
        MoreDocs {
            history: &[("2.4.0", "Accepts multiple `field` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("field", "string")
                },
            ],
        },
    ),
    (
        "hlen",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "hexists",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("field", "string"),
            ],
        },
    ),
    (
        "hkeys",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "hvals",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "hstrlen",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("field", "string"),
            ],
        },
    ),
    (
        "hincrby",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("field", "string"),
                arg("increment", "integer"),
            ],
        },
    ),
    (
        "hincrbyfloat",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("field", "string"),
                arg("increment", "double"),
            ],
        },
    ),
    (
        "hrandfield",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["optional"],
                    arguments: &[
                        arg("count", "integer"),
                        Arg {
                            token: Some("WITHVALUES"),
                            flags: &["optional"],
                            ..arg("withvalues", "pure-token")
                        },
                    ],
                    ..arg("options", "block")
                },
            ],
        },
    ),
    (
        "hscan",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("cursor", "integer"),
                Arg {
                    token: Some("MATCH"),
                    flags: &["optional"],
                    ..arg("pattern", "pattern")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "lpush",
        MoreDocs {
            history: &[("2.4.0", "Accepts multiple `element` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("element", "string")
                },
            ],
        },
    ),
    (
        "rpush",
        MoreDocs {
            history: &[("2.4.0", "Accepts multiple `element` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("element", "string")
                },
            ],
        },
    ),
    (
        "lpushx",
        MoreDocs {
            history: &[("4.0.0", "Accepts multiple `element` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("element", "string")
                },
            ],
        },
    ),
    (
        "rpushx",
        MoreDocs {
            history: &[("4.0.0", "Accepts multiple `element` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("element", "string")
                },
            ],
        },
    ),
    (
        "lpop",
        MoreDocs {
            history: &[("6.2.0", "Added the `count` argument.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "rpop",
        MoreDocs {
            history: &[("6.2.0", "Added the `count` argument.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "llen",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "lrange",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "integer"),
                arg("stop", "integer"),
            ],
        },
    ),
    (
        "lindex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("index", "integer"),
            ],
        },
    ),
    (
        "lset",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("index", "integer"),
                arg("element", "string"),
            ],
        },
    ),
    (
        "linsert",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("BEFORE"),
                            ..arg("before", "pure-token")
                        },
                        Arg {
                            token: Some("AFTER"),
                            ..arg("after", "pure-token")
                        },
                    ],
                    ..arg("where", "oneof")
                },
                arg("pivot", "string"),
                arg("element", "string"),
            ],
        },
    ),
    (
        "lrem",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("count", "integer"),
                arg("element", "string"),
            ],
        },
    ),
    (
        "ltrim",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "integer"),
                arg("stop", "integer"),
            ],
        },
    ),
    (
        "lpos",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("element", "string"),
                Arg {
                    token: Some("RANK"),
                    flags: &["optional"],
                    ..arg("rank", "integer")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("num-matches", "integer")
                },
                Arg {
                    token: Some("MAXLEN"),
                    flags: &["optional"],
                    ..arg("len", "integer")
                },
            ],
        },
    ),
    (
        "lmove",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("source", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("destination", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("LEFT"),
                            ..arg("left", "pure-token")
                        },
                        Arg {
                            token: Some("RIGHT"),
                            ..arg("right", "pure-token")
                        },
                    ],
                    ..arg("wherefrom", "oneof")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("LEFT"),
                            ..arg("left", "pure-token")
                        },
                        Arg {
                            token: Some("RIGHT"),
                            ..arg("right", "pure-token")
                        },
                    ],
                    ..arg("whereto", "oneof")
                },
            ],
        },
    ),
    (
        "rpoplpush",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("source", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("destination", "key")
                },
            ],
        },
    ),
    (
        "lmpop",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("LEFT"),
                            ..arg("left", "pure-token")
                        },
                        Arg {
                            token: Some("RIGHT"),
                            ..arg("right", "pure-token")
                        },
                    ],
                    ..arg("where", "oneof")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "blpop",
        MoreDocs {
            history: &[(
                "6.0.0",
                "`timeout` is interpreted as a double instead of an integer.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                arg("timeout", "double"),
            ],
        },
    ),
    (
        "brpop",
        MoreDocs {
            history: &[(
                "6.0.0",
                "`timeout` is interpreted as a double instead of an integer.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                arg("timeout", "double"),
            ],
        },
    ),
    (
        "blmove",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("source", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("destination", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("LEFT"),
                            ..arg("left", "pure-token")
                        },
                        Arg {
                            token: Some("RIGHT"),
                            ..arg("right", "pure-token")
                        },
                    ],
                    ..arg("wherefrom", "oneof")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("LEFT"),
                            ..arg("left", "pure-token")
                        },
                        Arg {
                            token: Some("RIGHT"),
                            ..arg("right", "pure-token")
                        },
                    ],
                    ..arg("whereto", "oneof")
                },
                arg("timeout", "double"),
            ],
        },
    ),
    (
        "brpoplpush",
        MoreDocs {
            history: &[(
                "6.0.0",
                "`timeout` is interpreted as a double instead of an integer.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("source", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("destination", "key")
                },
                arg("timeout", "double"),
            ],
        },
    ),
    (
        "blmpop",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("timeout", "double"),
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("LEFT"),
                            ..arg("left", "pure-token")
                        },
                        Arg {
                            token: Some("RIGHT"),
                            ..arg("right", "pure-token")
                        },
                    ],
                    ..arg("where", "oneof")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "command|list",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                token: Some("FILTERBY"),
                flags: &["optional"],
                arguments: &[
                    Arg {
                        token: Some("MODULE"),
                        ..arg("module-name", "string")
                    },
                    Arg {
                        token: Some("ACLCAT"),
                        ..arg("category", "string")
                    },
                    Arg {
                        token: Some("PATTERN"),
                        ..arg("pattern", "pattern")
                    },
                ],
                ..arg("filterby", "oneof")
            }],
        },
    ),
    (
        "command|docs",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                flags: &["optional", "multiple"],
                ..arg("command-name", "string")
            }],
        },
    ),
    (
        "command|count",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "command|info",
        MoreDocs {
            history: &[(
                "7.0.0",
                "Allowed to be called with no argument to get info on all commands.",
            )],
            arguments: &[Arg {
                flags: &["optional", "multiple"],
                ..arg("command-name", "string")
            }],
        },
    ),
    (
        "config|get",
        MoreDocs {
            history: &[(
                "7.0.0",
                "Added the ability to pass multiple pattern parameters in one call",
            )],
            arguments: &[Arg {
                flags: &["multiple"],
                arguments: &[arg("parameter", "string")],
                ..arg("parameter", "block")
            }],
        },
    ),
    (
        "config|resetstat",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "config|set",
        MoreDocs {
            history: &[(
                "7.0.0",
                "Added the ability to set multiple parameters in one call.",
            )],
            arguments: &[Arg {
                flags: &["multiple"],
                arguments: &[arg("parameter", "string"), arg("value", "string")],
                ..arg("parameter_value", "block")
            }],
        },
    ),
    (
        "dbsize",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "flushall",
        MoreDocs {
            history: &[
                ("4.0.0", "Added the `ASYNC` flushing mode modifier."),
                ("6.2.0", "Added the `SYNC` flushing mode modifier."),
            ],
            arguments: &[Arg {
                flags: &["optional"],
                arguments: &[
                    Arg {
                        token: Some("ASYNC"),
                        since: Some("4.0.0"),
                        ..arg("async", "pure-token")
                    },
                    Arg {
                        token: Some("SYNC"),
                        since: Some("6.2.0"),
                        ..arg("sync", "pure-token")
                    },
                ],
                ..arg("async", "oneof")
            }],
        },
    ),
    (
        "flushdb",
        MoreDocs {
            history: &[
                ("4.0.0", "Added the `ASYNC` flushing mode modifier."),
                ("6.2.0", "Added the `SYNC` flushing mode modifier."),
            ],
            arguments: &[Arg {
                flags: &["optional"],
                arguments: &[
                    Arg {
                        token: Some("ASYNC"),
                        since: Some("4.0.0"),
                        ..arg("async", "pure-token")
                    },
                    Arg {
                        token: Some("SYNC"),
                        since: Some("6.2.0"),
                        ..arg("sync", "pure-token")
                    },
                ],
                ..arg("async", "oneof")
            }],
        },
    ),
    (
        "info",
        MoreDocs {
            history: &[(
                "7.0.0",
                "Added support for taking multiple section arguments.",
            )],
            arguments: &[Arg {
                flags: &["optional", "multiple"],
                ..arg("section", "string")
            }],
        },
    ),
    (
        "role",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "replicaof",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        arguments: &[arg("host", "string"), arg("port", "integer")],
                        ..arg("host-port", "block")
                    },
                    Arg {
                        arguments: &[
                            Arg {
                                token: Some("NO"),
                                ..arg("no", "pure-token")
                            },
                            Arg {
                                token: Some("ONE"),
                                ..arg("one", "pure-token")
                            },
                        ],
                        ..arg("no-one", "block")
                    },
                ],
                ..arg("args", "oneof")
            }],
        },
    ),
    (
        "slaveof",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                arguments: &[
                    Arg {
                        arguments: &[arg("host", "string"), arg("port", "integer")],
                        ..arg("host-port", "block")
                    },
                    Arg {
                        arguments: &[
                            Arg {
                                token: Some("NO"),
                                ..arg("no", "pure-token")
                            },
                            Arg {
                                token: Some("ONE"),
                                ..arg("one", "pure-token")
                            },
                        ],
                        ..arg("no-one", "block")
                    },
                ],
                ..arg("args", "oneof")
            }],
        },
    ),
    (
        "command",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "config",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "time",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "sadd",
        MoreDocs {
            history: &[("2.4.0", "Accepts multiple `member` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("member", "string")
                },
            ],
        },
    ),
    (
        "srem",
        MoreDocs {
            history: &[("2.4.0", "Accepts multiple `member` arguments.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("member", "string")
                },
            ],
        },
    ),
    (
        "smembers",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "sismember",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("member", "string"),
            ],
        },
    ),
    (
        "smismember",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("member", "string")
                },
            ],
        },
    ),
    (
        "scard",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "spop",
        MoreDocs {
            history: &[("3.2.0", "Added the `count` argument.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    since: Some("3.2.0"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "srandmember",
        MoreDocs {
            history: &[("2.6.0", "Added the optional `count` argument.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    since: Some("2.6.0"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "smove",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("source", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("destination", "key")
                },
                arg("member", "string"),
            ],
        },
    ),
    (
        "sinter",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "sunion",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "sdiff",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "sinterstore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("destination", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
            ],
        },
    ),
    (
        "sunionstore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("destination", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
            ],
        },
    ),
    (
        "sdiffstore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("destination", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
            ],
        },
    ),
    (
        "sintercard",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    ..arg("limit", "integer")
                },
            ],
        },
    ),
    (
        "sscan",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("cursor", "integer"),
                Arg {
                    token: Some("MATCH"),
                    flags: &["optional"],
                    ..arg("pattern", "pattern")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "zadd",
        MoreDocs {
            history: &[
                ("2.4.0", "Accepts multiple elements."),
                ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."),
                ("6.2.0", "Added the `GT` and `LT` options."),
            ],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    since: Some("3.0.2"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NX"),
                            ..arg("nx", "pure-token")
                        },
                        Arg {
                            token: Some("XX"),
                            ..arg("xx", "pure-token")
                        },
                    ],
                    ..arg("condition", "oneof")
                },
                Arg {
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("GT"),
                            ..arg("gt", "pure-token")
                        },
                        Arg {
                            token: Some("LT"),
                            ..arg("lt", "pure-token")
                        },
                    ],
                    ..arg("comparison", "oneof")
                },
                Arg {
                    token: Some("CH"),
                    since: Some("3.0.2"),
                    flags: &["optional"],
                    ..arg("change", "pure-token")
                },
                Arg {
                    token: Some("INCR"),
                    since: Some("3.0.2"),
                    flags: &["optional"],
                    ..arg("increment", "pure-token")
                },
                Arg {
                    flags: &["multiple"],
                    arguments: &[arg("score", "double"), arg("member", "string")],
                    ..arg("score_member", "block")
                },
            ],
        },
    ),
    (
        "zincrby",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("increment", "integer"),
                arg("member", "string"),
            ],
        },
    ),
    (
        "zrem",
        MoreDocs {
            history: &[("2.4.0", "Accepts multiple elements.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("member", "string")
                },
            ],
        },
    ),
    (
        "zscore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("member", "string"),
            ],
        },
    ),
    (
        "zmscore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["multiple"],
                    ..arg("member", "string")
                },
            ],
        },
    ),
    (
        "zcard",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "zcount",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("min", "double"),
                arg("max", "double"),
            ],
        },
    ),
    (
        "zlexcount",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("min", "string"),
                arg("max", "string"),
            ],
        },
    ),
    (
        "zrange",
        MoreDocs {
            history: &[(
                "6.2.0",
                "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "string"),
                arg("stop", "string"),
                Arg {
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("BYSCORE"),
                            ..arg("byscore", "pure-token")
                        },
                        Arg {
                            token: Some("BYLEX"),
                            ..arg("bylex", "pure-token")
                        },
                    ],
                    ..arg("sortby", "oneof")
                },
                Arg {
                    token: Some("REV"),
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    ..arg("rev", "pure-token")
                },
                Arg {
                    token: Some("LIMIT"),
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    arguments: &[arg("offset", "integer"), arg("count", "integer")],
                    ..arg("offset_count", "block")
                },
                Arg {
                    token: Some("WITHSCORES"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
            ],
        },
    ),
    (
        "zrangestore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("dst", "key")
                },
                Arg {
                    key_spec_index: Some(1),
                    ..arg("src", "key")
                },
                arg("min", "string"),
                arg("max", "string"),
                Arg {
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("BYSCORE"),
                            ..arg("byscore", "pure-token")
                        },
                        Arg {
                            token: Some("BYLEX"),
                            ..arg("bylex", "pure-token")
                        },
                    ],
                    ..arg("sortby", "oneof")
                },
                Arg {
                    token: Some("REV"),
                    flags: &["optional"],
                    ..arg("rev", "pure-token")
                },
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    arguments: &[arg("offset", "integer"), arg("count", "integer")],
                    ..arg("offset_count", "block")
                },
            ],
        },
    ),
    (
        "zrevrange",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "integer"),
                arg("stop", "integer"),
                Arg {
                    token: Some("WITHSCORES"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
            ],
        },
    ),
    (
        "zrangebyscore",
        MoreDocs {
            history: &[("2.0.0", "Added the `WITHSCORES` modifier.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("min", "double"),
                arg("max", "double"),
                Arg {
                    token: Some("WITHSCORES"),
                    since: Some("2.0.0"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    arguments: &[arg("offset", "integer"), arg("count", "integer")],
                    ..arg("offset_count", "block")
                },
            ],
        },
    ),
    (
        "zrevrangebyscore",
        MoreDocs {
            history: &[("2.1.6", "`min` and `max` can be exclusive.")],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("max", "double"),
                arg("min", "double"),
                Arg {
                    token: Some("WITHSCORES"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    arguments: &[arg("offset", "integer"), arg("count", "integer")],
                    ..arg("offset_count", "block")
                },
            ],
        },
    ),
    (
        "zrangebylex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("min", "string"),
                arg("max", "string"),
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    arguments: &[arg("offset", "integer"), arg("count", "integer")],
                    ..arg("offset_count", "block")
                },
            ],
        },
    ),
    (
        "zrevrangebylex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("max", "string"),
                arg("min", "string"),
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    arguments: &[arg("offset", "integer"), arg("count", "integer")],
                    ..arg("offset_count", "block")
                },
            ],
        },
    ),
    (
        "zrank",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("member", "string"),
            ],
        },
    ),
    (
        "zrevrank",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("member", "string"),
            ],
        },
    ),
    (
        "zremrangebyrank",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "integer"),
                arg("stop", "integer"),
            ],
        },
    ),
    (
        "zremrangebyscore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("min", "double"),
                arg("max", "double"),
            ],
        },
    ),
    (
        "zremrangebylex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("min", "string"),
                arg("max", "string"),
            ],
        },
    ),
    (
        "zrandmember",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["optional"],
                    arguments: &[
                        arg("count", "integer"),
                        Arg {
                            token: Some("WITHSCORES"),
                            flags: &["optional"],
                            ..arg("withscores", "pure-token")
                        },
                    ],
                    ..arg("options", "block")
                },
            ],
        },
    ),
    (
        "zscan",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("cursor", "integer"),
                Arg {
                    token: Some("MATCH"),
                    flags: &["optional"],
                    ..arg("pattern", "pattern")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "zpopmin",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "zpopmax",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "bzpopmin",
        MoreDocs {
            history: &[(
                "6.0.0",
                "`timeout` is interpreted as a double instead of an integer.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                arg("timeout", "double"),
            ],
        },
    ),
    (
        "bzpopmax",
        MoreDocs {
            history: &[(
                "6.0.0",
                "`timeout` is interpreted as a double instead of an integer.",
            )],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                arg("timeout", "double"),
            ],
        },
    ),
    (
        "zmpop",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("MIN"),
                            ..arg("min", "pure-token")
                        },
                        Arg {
                            token: Some("MAX"),
                            ..arg("max", "pure-token")
                        },
                    ],
                    ..arg("where", "oneof")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "bzmpop",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("timeout", "double"),
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    arguments: &[
                        Arg {
                            token: Some("MIN"),
                            ..arg("min", "pure-token")
                        },
                        Arg {
                            token: Some("MAX"),
                            ..arg("max", "pure-token")
                        },
                    ],
                    ..arg("where", "oneof")
                },
                Arg {
                    token: Some("COUNT"),
                    flags: &["optional"],
                    ..arg("count", "integer")
                },
            ],
        },
    ),
    (
        "zunion",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("WEIGHTS"),
                    flags: &["optional", "multiple"],
                    ..arg("weight", "integer")
                },
                Arg {
                    token: Some("AGGREGATE"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("SUM"),
                            ..arg("sum", "pure-token")
                        },
                        Arg {
                            token: Some("MIN"),
                            ..arg("min", "pure-token")
                        },
                        Arg {
                            token: Some("MAX"),
                            ..arg("max", "pure-token")
                        },
                    ],
                    ..arg("aggregate", "oneof")
                },
                Arg {
                    token: Some("WITHSCORES"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
            ],
        },
    ),
    (
        "zinter",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("WEIGHTS"),
                    flags: &["optional", "multiple"],
                    ..arg("weight", "integer")
                },
                Arg {
                    token: Some("AGGREGATE"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("SUM"),
                            ..arg("sum", "pure-token")
                        },
                        Arg {
                            token: Some("MIN"),
                            ..arg("min", "pure-token")
                        },
                        Arg {
                            token: Some("MAX"),
                            ..arg("max", "pure-token")
                        },
                    ],
                    ..arg("aggregate", "oneof")
                },
                Arg {
                    token: Some("WITHSCORES"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
            ],
        },
    ),
    (
        "zdiff",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("WITHSCORES"),
                    flags: &["optional"],
                    ..arg("withscores", "pure-token")
                },
            ],
        },
    ),
    (
        "zunionstore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("destination", "key")
                },
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(1),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("WEIGHTS"),
                    flags: &["optional", "multiple"],
                    ..arg("weight", "integer")
                },
                Arg {
                    token: Some("AGGREGATE"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("SUM"),
                            ..arg("sum", "pure-token")
                        },
                        Arg {
                            token: Some("MIN"),
                            ..arg("min", "pure-token")
                        },
                        Arg {
                            token: Some("MAX"),
                            ..arg("max", "pure-token")
                        },
                    ],
                    ..arg("aggregate", "oneof")
                },
            ],
        },
    ),
    (
        "zinterstore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("destination", "key")
                },
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(1),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("WEIGHTS"),
                    flags: &["optional", "multiple"],
                    ..arg("weight", "integer")
                },
                Arg {
                    token: Some("AGGREGATE"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("SUM"),
                            ..arg("sum", "pure-token")
                        },
                        Arg {
                            token: Some("MIN"),
                            ..arg("min", "pure-token")
                        },
                        Arg {
                            token: Some("MAX"),
                            ..arg("max", "pure-token")
                        },
                    ],
                    ..arg("aggregate", "oneof")
                },
            ],
        },
    ),
    (
        "zdiffstore",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("destination", "key")
                },
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(1),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
            ],
        },
    ),
    (
        "zintercard",
        MoreDocs {
            history: &[],
            arguments: &[
                arg("numkeys", "integer"),
                Arg {
                    key_spec_index: Some(0),
                    flags: &["multiple"],
                    ..arg("key", "key")
                },
                Arg {
                    token: Some("LIMIT"),
                    flags: &["optional"],
                    ..arg("limit", "integer")
                },
            ],
        },
    ),
    (
        "get",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "set",
        MoreDocs {
            history: &[
                ("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
                ("6.0.0", "Added the `KEEPTTL` option."),
                ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
                (
                    "7.0.0",
                    "Allowed the `NX` and `GET` options to be used together.",
                ),
            ],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("value", "string"),
                Arg {
                    since: Some("2.6.12"),
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("NX"),
                            ..arg("nx", "pure-token")
                        },
                        Arg {
                            token: Some("XX"),
                            ..arg("xx", "pure-token")
                        },
                    ],
                    ..arg("condition", "oneof")
                },
                Arg {
                    token: Some("GET"),
                    since: Some("6.2.0"),
                    flags: &["optional"],
                    ..arg("get", "pure-token")
                },
                Arg {
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("EX"),
                            since: Some("2.6.12"),
                            ..arg("seconds", "integer")
                        },
                        Arg {
                            token: Some("PX"),
                            since: Some("2.6.12"),
                            ..arg("milliseconds", "integer")
                        },
                        Arg {
                            token: Some("EXAT"),
                            since: Some("6.2.0"),
                            ..arg("unix-time-seconds", "unix-time")
                        },
                        Arg {
                            token: Some("PXAT"),
                            since: Some("6.2.0"),
                            ..arg("unix-time-milliseconds", "unix-time")
                        },
                        Arg {
                            token: Some("KEEPTTL"),
                            since: Some("6.0.0"),
                            ..arg("keepttl", "pure-token")
                        },
                    ],
                    ..arg("expiration", "oneof")
                },
            ],
        },
    ),
    (
        "mget",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "mset",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                flags: &["multiple"],
                arguments: &[
                    Arg {
                        key_spec_index: Some(0),
                        ..arg("key", "key")
                    },
                    arg("value", "string"),
                ],
                ..arg("key_value", "block")
            }],
        },
    ),
    (
        "setnx",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("value", "string"),
            ],
        },
    ),
    (
        "getset",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("value", "string"),
            ],
        },
    ),
    (
        "getdel",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "msetnx",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                flags: &["multiple"],
                arguments: &[
                    Arg {
                        key_spec_index: Some(0),
                        ..arg("key", "key")
                    },
                    arg("value", "string"),
                ],
                ..arg("key_value", "block")
            }],
        },
    ),
    (
        "strlen",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "append",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("value", "string"),
            ],
        },
    ),
    (
        "getrange",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "integer"),
                arg("end", "integer"),
            ],
        },
    ),
    (
        "substr",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("start", "integer"),
                arg("end", "integer"),
            ],
        },
    ),
    (
        "setrange",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("offset", "integer"),
                arg("value", "string"),
            ],
        },
    ),
    (
        "lcs",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key1", "key")
                },
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key2", "key")
                },
                Arg {
                    token: Some("LEN"),
                    flags: &["optional"],
                    ..arg("len", "pure-token")
                },
                Arg {
                    token: Some("IDX"),
                    flags: &["optional"],
                    ..arg("idx", "pure-token")
                },
                Arg {
                    token: Some("MINMATCHLEN"),
                    flags: &["optional"],
                    ..arg("len", "integer")
                },
                Arg {
                    token: Some("WITHMATCHLEN"),
                    flags: &["optional"],
                    ..arg("withmatchlen", "pure-token")
                },
            ],
        },
    ),
    (
        "incr",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "decr",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                ..arg("key", "key")
            }],
        },
    ),
    (
        "incrby",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("increment", "integer"),
            ],
        },
    ),
    (
        "decrby",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("decrement", "integer"),
            ],
        },
    ),
    (
        "incrbyfloat",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("increment", "double"),
            ],
        },
    ),
    (
        "setex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("seconds", "integer"),
                arg("value", "string"),
            ],
        },
    ),
    (
        "psetex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                arg("milliseconds", "integer"),
                arg("value", "string"),
            ],
        },
    ),
    (
        "getex",
        MoreDocs {
            history: &[],
            arguments: &[
                Arg {
                    key_spec_index: Some(0),
                    ..arg("key", "key")
                },
                Arg {
                    flags: &["optional"],
                    arguments: &[
                        Arg {
                            token: Some("EX"),
                            ..arg("seconds", "integer")
                        },
                        Arg {
                            token: Some("PX"),
                            ..arg("milliseconds", "integer")
                        },
                        Arg {
                            token: Some("EXAT"),
                            ..arg("unix-time-seconds", "unix-time")
                        },
                        Arg {
                            token: Some("PXAT"),
                            ..arg("unix-time-milliseconds", "unix-time")
                        },
                        Arg {
                            token: Some("PERSIST"),
                            ..arg("persist", "pure-token")
                        },
                    ],
                    ..arg("expiration", "oneof")
                },
            ],
        },
    ),
    (
        "multi",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "exec",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "discard",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
    (
        "watch",
        MoreDocs {
            history: &[],
            arguments: &[Arg {
                key_spec_index: Some(0),
                flags: &["multiple"],
                ..arg("key", "key")
            }],
        },
    ),
    (
        "unwatch",
        MoreDocs {
            history: &[],
            arguments: &[],
        },
    ),
];

/// What `COMMAND DOCS` says of a deprecated command: its doc flags, the
/// version that deprecated it, and what replaces it.
#[derive(Debug)]
pub struct Deprecation {
    /// Redis's `doc_flags` (`deprecated`, `syscmd`).
    pub doc_flags: &'static [&'static str],
    /// The Redis version that deprecated it.
    pub since: &'static str,
    /// What to use instead, as Redis words it.
    pub replaced_by: &'static str,
}

/// The deprecation notice of the command named `name`, if it has one.
pub fn deprecation(name: &str) -> Option<&'static Deprecation> {
    DEPRECATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, notice)| notice)
}

/// Every deprecated command's notice, by name.
static DEPRECATIONS: &[(&str, Deprecation)] = &[
    (
        "hmset",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "4.0.0",
            replaced_by: "`HSET` with multiple field-value pairs",
        },
    ),
    (
        "rpoplpush",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`LMOVE` with the `RIGHT` and `LEFT` arguments",
        },
    ),
    (
        "brpoplpush",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`BLMOVE` with the `RIGHT` and `LEFT` arguments",
        },
    ),
    (
        "slaveof",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "5.0.0",
            replaced_by: "`REPLICAOF`",
        },
    ),
    (
        "zrevrange",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`ZRANGE` with the `REV` argument",
        },
    ),
    (
        "zrangebyscore",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`ZRANGE` with the `BYSCORE` argument",
        },
    ),
    (
        "zrevrangebyscore",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`ZRANGE` with the `REV` and `BYSCORE` arguments",
        },
    ),
    (
        "zrangebylex",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`ZRANGE` with the `BYLEX` argument",
        },
    ),
    (
        "zrevrangebylex",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`ZRANGE` with the `REV` and `BYLEX` arguments",
        },
    ),
    (
        "getset",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "6.2.0",
            replaced_by: "`SET` with the `!GET` argument",
        },
    ),
    (
        "substr",
        Deprecation {
            doc_flags: &["deprecated"],
            since: "2.0.0",
            replaced_by: "`GETRANGE`",
        },
    ),
];

#[cfg(test)]
mod tests {
    use super::more_docs;
    use crate::resp::table::commands;

    #[test]
    fn every_command_of_the_table_has_its_docs() {
        for &command in commands() {
            for entry in std::iter::once(command).chain(command.subcommands) {
                assert!(
                    more_docs(entry.name).is_some(),
                    "{} has no entry: run scripts/command-docs.py",
                    entry.name
                );
            }
        }
    }

    #[test]
    fn only_oneof_and_block_arguments_have_arguments_of_their_own() {
        fn check(args: &[super::Arg]) {
            for arg in args {
                let nested = matches!(arg.kind, "oneof" | "block");
                assert_eq!(nested, !arg.arguments.is_empty(), "{}", arg.name);
                check(arg.arguments);
            }
        }
        for (_, docs) in super::MORE_DOCS {
            check(docs.arguments);
        }
    }
}
