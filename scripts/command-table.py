#!/usr/bin/env python3
"""Prints command-table entries (compute-node/src/resp/table/*.rs) for the
named commands, read from a running redis-server's COMMAND INFO (arity,
flags, legacy key positions, ACL categories, tips, key specifications) and
COMMAND DOCS (summary, since, group, complexity: the table's `Docs`).

Usage: scripts/command-table.py PORT NAME... > entries.rs
       e.g. scripts/command-table.py 7391 hset hget object object|encoding

Each NAME (any letter case; `parent|sub` for a subcommand) gives one
`CommandInfo { .. },` in the order named, its `Kind` the CamelCase of the
name (`hset` Hset, `object|encoding` ObjectEncoding, `client|no-evict`
ClientNoEvict). A container's entry names its subcommands' static,
`PARENT_SUBCOMMANDS` (`OBJECT_SUBCOMMANDS`): name the subcommands SplitKV
has as `parent|sub` and put their entries in that static. Paste the entries
into the static of their group's file (the docs' `group`), add the `Kind`
variants, then run `cargo fmt` and scripts/command-docs.py (the argument
docs). Start a throwaway server for it, e.g.
    redis-server --port 7391 --save '' --appendonly no --daemonize yes
    ...
    redis-cli -p 7391 shutdown nosave
"""

import importlib.util
import pathlib
import socket
import sys

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("command_docs", HERE / "command-docs.py")
command_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(command_docs)
request, read, rust_str, opt = (command_docs.request, command_docs.read,
                                command_docs.rust_str, command_docs.opt)


def kind_name(name):
    """CamelCase of a command's name: `object|encoding` ObjectEncoding."""
    parts = name.replace("|", "-").replace("_", "-").split("-")
    return "".join(p[:1].upper() + p[1:] for p in parts)


def str_list(items):
    return "&[%s]" % ", ".join(rust_str(i) for i in items)


def begin_search(search):
    fields = dict(search)
    spec = dict(fields["spec"] or [])
    if fields["type"] == "index":
        return "BeginSearch::Index(%d)" % spec["index"]
    if fields["type"] == "keyword":
        return "BeginSearch::Keyword { keyword: %s, startfrom: %d }" % (
            rust_str(spec["keyword"]), spec["startfrom"])
    if fields["type"] == "unknown":
        return "BeginSearch::Unknown"
    raise SystemExit("begin_search type not carried: " + fields["type"])


def find_keys(find):
    fields = dict(find)
    spec = dict(fields["spec"] or [])
    if fields["type"] == "range":
        return "FindKeys::Range { lastkey: %d, keystep: %d, limit: %d }" % (
            spec["lastkey"], spec["keystep"], spec["limit"])
    if fields["type"] == "keynum":
        return "FindKeys::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            spec["keynumidx"], spec["firstkey"], spec["keystep"])
    if fields["type"] == "unknown":
        return "FindKeys::Unknown"
    raise SystemExit("find_keys type not carried: " + fields["type"])


def key_spec(spec):
    fields = dict(spec)
    unknown = set(fields) - {"notes", "flags", "begin_search", "find_keys"}
    if unknown:
        raise SystemExit("key spec fields not carried: %s" % unknown)
    return ("KeySpec { notes: %s, flags: %s, begin_search: %s, find_keys: %s }"
            % (opt(fields.get("notes")), str_list(fields["flags"]),
               begin_search(fields["begin_search"]), find_keys(fields["find_keys"])))


def entry(info, docs):
    (name, arity, flags, first, last, step, categories, tips, specs,
     subcommands) = info
    fields = dict(docs)
    parent = name.split("|")[0]
    subs = "%s_SUBCOMMANDS" % parent.upper() if subcommands else "&[]"
    return """    CommandInfo {
        kind: Kind::%s,
        name: %s,
        arity: %d,
        flags: %s,
        keys: (%d, %d, %d),
        categories: %s,
        tips: %s,
        key_specs: &[%s],
        subcommands: %s,
        docs: Docs {
            summary: %s,
            since: %s,
            group: %s,
            complexity: %s,
        },
    },
""" % (kind_name(name), rust_str(name), arity, str_list(flags), first, last, step,
       str_list(categories), str_list(tips), ", ".join(key_spec(s) for s in specs),
       subs, rust_str(fields["summary"]), rust_str(fields["since"]),
       rust_str(fields["group"]), opt(fields.get("complexity")))


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    port = int(sys.argv[1])
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    request(sock, "HELLO", "3")
    read(f)
    out = ""
    for name in sys.argv[2:]:
        name = name.lower()
        request(sock, "COMMAND", "INFO", name)
        info = read(f)
        request(sock, "COMMAND", "DOCS", name)
        docs = read(f)
        if not info or info[0] is None or len(docs) != 1:
            raise SystemExit("redis-server has no " + name)
        out += entry(info[0], docs[0][1])
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
