//! Differential test of COMMAND DOCS: for every command and subcommand
//! SplitKV has, the reply is the same bytes as a real `redis-server`'s
//! (summary, history, nested argument lists), in RESP2 and RESP3, one at a
//! time and pipelined.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(
    dead_code,
    reason = "shared test support; this test uses the storage node only"
)]
mod support;

use diff::{Connection, Pair, Reply, Step, by_shape, exact};

/// Containers: Redis's COMMAND DOCS lists every subcommand Redis has
/// under them, SplitKV's only its own (and OBJECT's all of them, but
/// Redis in the order of its hash table), so each subcommand is compared
/// on its own instead.
const CONTAINERS: &[&str] = &["client", "config", "command", "object"];

/// Subcommands newer than the Redis 7.0 the tests run against (Redis 7.2's
/// CLIENT SETINFO and CLIENT NO-TOUCH): that server has no docs for them.
const NEWER_THAN_THE_SERVER: &[&str] = &["client|setinfo", "client|no-touch"];

fn names(conn: &mut Connection, args: &[&[u8]]) -> Vec<String> {
    conn.send(&diff::encode(args));
    match conn.reply().1 {
        Reply::Array(Some(items)) => items
            .into_iter()
            .map(|item| match item {
                Reply::Bulk(Some(name)) => String::from_utf8(name).expect("a name"),
                other => panic!("COMMAND LIST gave {other:?}"),
            })
            .collect(),
        other => panic!("COMMAND LIST answered {other:?}"),
    }
}

/// COMMAND DOCS of each command and subcommand SplitKV lists, and a few
/// lists of several names.
fn docs_steps(pair: &mut Pair) -> Vec<Step> {
    let ours = names(&mut pair.to_splitkv, cmd!("COMMAND", "LIST"));
    let mut steps = Vec::new();
    for name in &ours {
        if CONTAINERS.contains(&name.as_str()) {
            continue;
        }
        steps.push(exact(&[b"COMMAND", b"DOCS", name.as_bytes()]));
    }
    let subcommands = diff::SUBCOMMANDS_THE_REFERENCE_HAS;
    for sub in subcommands {
        assert!(!NEWER_THAN_THE_SERVER.contains(sub));
        steps.push(exact(&[b"COMMAND", b"DOCS", sub.as_bytes()]));
    }
    steps.extend([
        exact(cmd!("COMMAND", "DOCS", "get", "set", "scan", "client|kill")),
        exact(cmd!("COMMAND", "DOCS", "GET", "nosuch", "Scan")),
        exact(cmd!("COMMAND", "DOCS", "nosuch")),
        exact(cmd!("COMMAND", "DOCS", "client|nosuch", "|", "get|x")),
    ]);
    steps
}

fn command_docs_answer_as_redis_does(protocol: &[u8]) {
    let mut pair = Pair::start();
    pair.one_by_one(&[by_shape(
        &[b"HELLO", protocol],
        "HELLO's version and id are each server's own",
    )]);
    let steps = docs_steps(&mut pair);
    assert!(steps.len() > 40, "every command is compared");
    pair.both_ways(&steps);
}

#[test]
fn command_docs_of_every_command_is_redis_s_in_resp2() {
    command_docs_answer_as_redis_does(b"2");
}

#[test]
fn command_docs_of_every_command_is_redis_s_in_resp3() {
    command_docs_answer_as_redis_does(b"3");
}
