#!/usr/bin/env python3
"""Writes compute-node/src/resp/command_docs.rs: the history and argument
lists that COMMAND DOCS gives for each command SplitKV has (and for
FLUSHALL and FLUSHDB), read from a running redis-server.

Usage: scripts/command-docs.py PORT > compute-node/src/resp/command_docs.rs
       (then cargo fmt). The names come from every file of the command
       table, compute-node/src/resp/table/*.rs (in file name order).
Start a throwaway server for it, e.g.
    redis-server --port 7391 --save '' --appendonly no --daemonize yes
    ...
    redis-cli -p 7391 shutdown nosave
"""

import pathlib
import re
import socket
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "compute-node" / "src" / "resp" / "table"
EXTRA = ["flushall", "flushdb"]

# Commands newer than the redis-server at hand (Redis 7.2's CLIENT SETINFO
# and CLIENT NO-TOUCH): their arguments as Redis 7.2's
# src/commands/*.json give them, used when the server has no docs.
BY_HAND = {
    "client|setinfo": [("arguments", [
        [("name", "attr"), ("type", "oneof"), ("arguments", [
            [("name", "libname"), ("type", "string"), ("token", "LIB-NAME")],
            [("name", "libver"), ("type", "string"), ("token", "LIB-VER")],
        ])],
    ])],
    "client|no-touch": [("arguments", [
        [("name", "enabled"), ("type", "oneof"), ("arguments", [
            [("name", "on"), ("type", "pure-token"), ("token", "ON")],
            [("name", "off"), ("type", "pure-token"), ("token", "OFF")],
        ])],
    ])],
}


def request(sock, *args):
    out = b"*%d\r\n" % len(args)
    for arg in args:
        arg = arg.encode()
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    sock.sendall(out)


def read(f):
    """One RESP3 reply: maps as lists of pairs, sets and arrays as lists."""
    line = f.readline()[:-2]
    kind, rest = chr(line[0]), line[1:]
    if kind in "+":
        return rest.decode()
    if kind == "-":
        raise SystemExit("redis-server answered: " + rest.decode())
    if kind == ":":
        return int(rest)
    if kind == "$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode()
    if kind == "=":
        return f.read(int(rest) + 2)[4:-2].decode()
    if kind in "*~":
        return [read(f) for _ in range(int(rest))]
    if kind == "%":
        return [(read(f), read(f)) for _ in range(int(rest))]
    if kind == "_":
        return None
    raise SystemExit("unexpected reply type " + kind)


def rust_str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def opt(text):
    return "None" if text is None else "Some(%s)" % rust_str(text)


ARG_FIELDS = {"name", "type", "key_spec_index", "token", "summary", "since",
              "deprecated_since", "flags", "arguments"}
DOC_FIELDS = {"summary", "since", "group", "complexity", "history",
              "arguments", "subcommands", "doc_flags", "deprecated_since",
              "replaced_by"}


def arg_list(args):
    items = []
    for pairs in args:
        fields = dict(pairs)
        unknown = set(fields) - ARG_FIELDS
        if unknown:
            raise SystemExit("argument fields not carried: %s" % unknown)
        base = "arg(%s, %s)" % (rust_str(fields["name"]), rust_str(fields["type"]))
        more = []
        if fields.get("key_spec_index") is not None:
            more.append("key_spec_index: Some(%d)" % fields["key_spec_index"])
        for name in ["token", "summary", "since", "deprecated_since"]:
            if fields.get(name) is not None:
                more.append("%s: %s" % (name, opt(fields[name])))
        if fields.get("flags"):
            more.append("flags: &[%s]" % ", ".join(rust_str(f) for f in fields["flags"]))
        if fields.get("arguments"):
            more.append("arguments: %s" % arg_list(fields["arguments"]))
        items.append("Arg { %s, ..%s }" % (", ".join(more), base) if more else base)
    return "&[%s]" % ", ".join(items)


def entry(name, docs):
    fields = dict(docs)
    unknown = set(fields) - DOC_FIELDS
    if unknown:
        raise SystemExit("%s: doc fields not carried: %s" % (name, unknown))
    history = ", ".join("(%s, %s)" % (rust_str(v), rust_str(t))
                        for v, t in fields.get("history", []))
    return "(%s, MoreDocs { history: &[%s], arguments: %s }),\n" % (
        rust_str(name), history, arg_list(fields.get("arguments", [])))


def deprecation(name, docs):
    fields = dict(docs)
    if not fields.get("doc_flags"):
        return ""
    return "(%s, Deprecation { doc_flags: &[%s], since: %s, replaced_by: %s }),\n" % (
        rust_str(name), ", ".join(rust_str(f) for f in fields["doc_flags"]),
        rust_str(fields["deprecated_since"]), rust_str(fields["replaced_by"]))


def main():
    port = int(sys.argv[1])
    names = []
    for path in sorted(TABLE.glob("*.rs")):
        names += re.findall(r'^\s*name: "([a-z|-]+)",$', path.read_text(), re.M)
    names += [n for n in EXTRA if n not in names]
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    request(sock, "HELLO", "3")
    read(f)
    request(sock, "INFO", "server")
    version = re.search(r"redis_version:(\S+)", read(f)).group(1)
    entries = ""
    deprecations = ""
    for name in names:
        request(sock, "COMMAND", "DOCS", name)
        found = read(f)
        if not found and name in BY_HAND:
            entries += entry(name, BY_HAND[name])
            continue
        if len(found) != 1:
            raise SystemExit("redis-server has no docs for " + name)
        entries += entry(name, found[0][1])
        deprecations += deprecation(name, found[0][1])
    print(HEADER % version + entries + "];" + DEPRECATIONS + deprecations + "];"
          + FOOTER)


HEADER = """//! What `COMMAND DOCS` says of each command beyond its summary, version,
//! group and complexity (those are in the command table): its history and
//! its argument list, nested as Redis nests them. Made by
//! `scripts/command-docs.py` from Redis %s's own `COMMAND DOCS` (CLIENT
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
"""

DEPRECATIONS = """

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
"""

FOOTER = """

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
}"""


if __name__ == "__main__":
    main()
