//! Differential tests: the same command streams go to a real
//! `redis-server` and to a compute node, and the replies must be the same
//! bytes (or, where they must differ, the same shape, for the reason each
//! step gives), one command at a time and pipelined.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
mod support;

use diff::{Pair, Step, by_shape, exact};
use support::value_for;

/// The string commands with normal, empty, binary, large and wrong
/// arguments.
fn string_steps() -> Vec<Step> {
    let big = value_for(b"big", 1, 300_000);
    let binary = b"a\r\nb\x00c\xff".to_vec();
    vec![
        exact(cmd!("GET", "missing")),
        exact(cmd!("SET", "k", "v")),
        exact(cmd!("GET", "k")),
        exact(cmd!("SET", "k", "")),
        exact(cmd!("GET", "k")),
        exact(cmd!("SET", binary, binary)),
        exact(cmd!("GET", binary)),
        exact(cmd!("SET", "big", big)),
        exact(cmd!("GET", "big")),
        exact(cmd!("SET", "-1", "-1")),
        exact(cmd!("GET", "-1")),
        exact(cmd!("MSET", "a", "1", "b", "2")),
        exact(cmd!("MGET", "a", "b", "missing", "k")),
        exact(cmd!("MGET", "missing")),
        exact(cmd!("EXISTS", "a", "b", "missing", "a")),
        exact(cmd!("DEL", "a", "missing", "a")),
        exact(cmd!("EXISTS", "a")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("get")),
        exact(cmd!("GET", "a", "b")),
        exact(cmd!("SET", "k")),
        exact(cmd!("MSET", "a")),
        exact(cmd!("MSET", "a", "1", "b")),
        exact(cmd!("MGET")),
        exact(cmd!("DEL")),
        exact(cmd!("EXISTS")),
        exact(cmd!("DBSIZE", "x")),
    ]
}

/// Connection commands that need no state.
fn connection_steps() -> Vec<Step> {
    vec![
        exact(cmd!("PING")),
        exact(cmd!("PING", "hello")),
        exact(cmd!("PING", "")),
        exact(cmd!("PING", "a", "b")),
        exact(cmd!("ECHO", "a\r\nb")),
        exact(cmd!("ECHO", "")),
        exact(cmd!("ECHO")),
        exact(cmd!("ECHO", "a", "b")),
        exact(cmd!("SELECT", "0")),
        exact(cmd!("SELECT", "1")),
        exact(cmd!("SELECT", "-1")),
        exact(cmd!("SELECT", "x")),
        exact(cmd!("SELECT")),
        exact(cmd!("NOSUCHCOMMAND")),
        exact(cmd!("nosuchcommand", "a", "b", "c", "d")),
        exact(cmd!("foo", "a b", "")),
        by_shape(
            cmd!("INFO"),
            "INFO describes each server's own state and figures",
        ),
        by_shape(cmd!("INFO", "server", "clients"), "INFO's figures"),
        exact(cmd!("INFO", "nosuchsection")),
        exact(cmd!("INFO", "keyspace")),
        exact(cmd!("INFO", "KEYSPACE")),
    ]
}

#[test]
fn string_commands_answer_as_redis_does() {
    let mut pair = Pair::start();
    pair.both_ways(&string_steps());
}

#[test]
fn connection_commands_answer_as_redis_does() {
    let mut pair = Pair::start();
    pair.both_ways(&connection_steps());
}

/// HELLO in every form, then the same commands in RESP3.
fn hello_steps() -> Vec<Step> {
    let hello_why = "HELLO's version and id are each server's own";
    vec![
        by_shape(cmd!("HELLO"), hello_why),
        exact(cmd!("HELLO", "4")),
        exact(cmd!("HELLO", "1")),
        exact(cmd!("HELLO", "-3")),
        exact(cmd!("HELLO", "x")),
        exact(cmd!("HELLO", "3", "FOO")),
        exact(cmd!("HELLO", "3", "AUTH", "default")),
        exact(cmd!("HELLO", "3", "AUTH", "nobody", "pw")),
        exact(cmd!("HELLO", "3", "SETNAME", "bad name")),
        by_shape(cmd!("HELLO", "2", "SETNAME", "first"), hello_why),
        exact(cmd!("CLIENT", "GETNAME")),
        by_shape(
            cmd!("HELLO", "3", "AUTH", "default", "any", "SETNAME", "second"),
            hello_why,
        ),
        exact(cmd!("CLIENT", "GETNAME")),
        by_shape(cmd!("HELLO", "3"), hello_why),
    ]
}

/// Connection and server commands (also run after HELLO 3).
fn client_steps() -> Vec<Step> {
    vec![
        by_shape(cmd!("CLIENT", "ID"), "client ids are each server's own"),
        exact(cmd!("CLIENT", "GETNAME")),
        exact(cmd!("CLIENT", "SETNAME", "conn-1")),
        exact(cmd!("CLIENT", "GETNAME")),
        exact(cmd!("CLIENT", "SETNAME", "has space")),
        exact(cmd!("CLIENT", "SETNAME", "new\nline")),
        exact(cmd!("CLIENT", "SETNAME", "")),
        exact(cmd!("CLIENT", "GETNAME")),
        exact(cmd!("CLIENT", "SETNAME")),
        exact(cmd!("CLIENT", "SETNAME", "a", "b")),
        exact(cmd!("CLIENT")),
        exact(cmd!("CLIENT", "NOSUCH")),
        exact(cmd!("client", "nosuch", "x")),
        by_shape(
            cmd!("CLIENT", "INFO"),
            "CLIENT INFO's fields are each connection's own",
        ),
        by_shape(
            cmd!("CLIENT", "LIST"),
            "CLIENT LIST's fields are each connection's own",
        ),
        by_shape(
            cmd!("CLIENT", "LIST", "TYPE", "normal"),
            "CLIENT LIST's fields",
        ),
        exact(cmd!("CLIENT", "LIST", "TYPE", "nosuch")),
        exact(cmd!("CLIENT", "LIST", "bogus")),
        exact(cmd!("CLIENT", "NO-EVICT", "on")),
        exact(cmd!("CLIENT", "NO-EVICT", "off")),
        exact(cmd!("CLIENT", "NO-EVICT", "maybe")),
        exact(cmd!("CLIENT", "KILL", "127.0.0.1:1")),
        exact(cmd!("CLIENT", "KILL", "ID", "999999")),
        exact(cmd!("CLIENT", "KILL", "ID", "0")),
        exact(cmd!("CLIENT", "KILL", "ADDR", "127.0.0.1:1")),
        exact(cmd!("CLIENT", "KILL", "ID")),
        exact(cmd!("CLIENT", "KILL", "BOGUS", "1")),
        exact(cmd!("CLIENT", "REPLY", "ON")),
        exact(cmd!("CLIENT", "REPLY", "maybe")),
        diff::silent(cmd!("CLIENT", "REPLY", "OFF")),
        diff::silent(cmd!("SET", "quiet", "1")),
        diff::silent(cmd!("GET", "quiet")),
        exact(cmd!("CLIENT", "REPLY", "ON")),
        diff::silent(cmd!("CLIENT", "REPLY", "SKIP")),
        diff::silent(cmd!("GET", "quiet")),
        exact(cmd!("GET", "quiet")),
        exact(cmd!("AUTH", "pw")),
        exact(cmd!("AUTH", "default", "pw")),
        exact(cmd!("AUTH", "nobody", "pw")),
        exact(cmd!("AUTH", "a", "b", "c")),
        exact(cmd!("AUTH")),
        by_shape(cmd!("TIME"), "the clocks are read at different moments"),
        exact(cmd!("TIME", "x")),
        exact(cmd!("CONFIG", "GET", "databases")),
        exact(cmd!("CONFIG", "GET", "appendonly")),
        exact(cmd!("CONFIG", "GET", "save")),
        exact(cmd!("CONFIG", "GET", "maxmemory-policy")),
        exact(cmd!("CONFIG", "GET", "DATABASES")),
        // One pattern per call: Redis lists several in its hash table's order.
        exact(cmd!("CONFIG", "GET", "data*")),
        exact(cmd!("CONFIG", "GET", "time?ut")),
        exact(cmd!("CONFIG", "GET", "nosuchsetting")),
        exact(cmd!("CONFIG", "GET")),
        exact(cmd!("CONFIG", "SET", "nosuch", "1")),
        exact(cmd!("CONFIG", "SET", "timeout")),
        exact(cmd!("CONFIG", "RESETSTAT")),
        exact(cmd!("CONFIG", "RESETSTAT", "x")),
        exact(cmd!("CONFIG")),
        exact(cmd!(
            "COMMAND", "INFO", "get", "set", "mset", "del", "exists", "ping", "nosuch"
        )),
        exact(cmd!(
            "COMMAND", "INFO", "multi", "exec", "watch", "hello", "select"
        )),
        exact(cmd!(
            "COMMAND",
            "INFO",
            "client|id",
            "config|get",
            "command|count"
        )),
        exact(cmd!("COMMAND", "COUNT", "x")),
        exact(cmd!("COMMAND", "NOSUCH")),
        exact(cmd!("RESET", "x")),
    ]
}

/// Transactions: queuing, errors that abort, nesting, and EXEC's replies.
fn transaction_steps() -> Vec<Step> {
    vec![
        exact(cmd!("EXEC")),
        exact(cmd!("DISCARD")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t1", "a")),
        exact(cmd!("SET", "t2", "")),
        exact(cmd!("MSET", "t3", "c", "t4", "d")),
        exact(cmd!("EXEC")),
        exact(cmd!("MGET", "t1", "t2", "t3", "t4")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t1", "b")),
        exact(cmd!("GET", "t1")),
        exact(cmd!("DEL", "t2", "nosuch")),
        exact(cmd!("EXISTS", "t2")),
        exact(cmd!("GET", "nosuch")),
        exact(cmd!("PING")),
        exact(cmd!("EXEC")),
        exact(cmd!("MULTI")),
        exact(cmd!("MULTI")),
        exact(cmd!("WATCH", "t1")),
        exact(cmd!("EXEC")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t1", "c")),
        exact(cmd!("GET")),
        exact(cmd!("SET", "t1", "d")),
        exact(cmd!("EXEC")),
        exact(cmd!("GET", "t1")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t1", "e")),
        exact(cmd!("NOSUCH", "x")),
        exact(cmd!("EXEC")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t1", "f")),
        exact(cmd!("DISCARD")),
        exact(cmd!("GET", "t1")),
        exact(cmd!("MULTI")),
        exact(cmd!("EXEC")),
        exact(cmd!("WATCH", "t1", "t5")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t5", "g")),
        exact(cmd!("EXEC")),
        exact(cmd!("WATCH", "t1")),
        exact(cmd!("SET", "t1", "changed by me")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "t1", "h")),
        exact(cmd!("EXEC")),
        exact(cmd!("GET", "t1")),
        exact(cmd!("WATCH", "t1")),
        exact(cmd!("UNWATCH")),
        exact(cmd!("SET", "t1", "i")),
        exact(cmd!("MULTI")),
        exact(cmd!("GET", "t1")),
        exact(cmd!("EXEC")),
        exact(cmd!("WATCH")),
        exact(cmd!("UNWATCH", "x")),
        exact(cmd!("MULTI", "x")),
        exact(cmd!("EXEC", "x")),
        exact(cmd!("MULTI")),
        exact(cmd!("RESET")),
        exact(cmd!("EXEC")),
    ]
}

#[test]
fn hello_switches_protocols_as_redis_does() {
    let mut pair = Pair::start();
    pair.one_by_one(&hello_steps());
    // In RESP3 now: nulls, maps, sets and verbatim strings.
    pair.both_ways(&string_steps());
    pair.both_ways(&connection_steps());
    pair.one_by_one(&[exact(cmd!("HELLO", "2", "x"))]);
    let mut again = Pair::start();
    again.pipelined(&hello_steps());
}

#[test]
fn client_and_server_commands_answer_as_redis_does() {
    let mut pair = Pair::start();
    pair.both_ways(&client_steps());
    pair.one_by_one(&[by_shape(cmd!("HELLO", "3"), "HELLO's version and id")]);
    pair.both_ways(&client_steps());
}

#[test]
fn transactions_answer_as_redis_does() {
    let mut pair = Pair::start();
    pair.both_ways(&transaction_steps());
    pair.one_by_one(&[by_shape(cmd!("HELLO", "3"), "HELLO's version and id")]);
    pair.both_ways(&transaction_steps());
}

#[test]
fn a_key_changed_by_another_client_fails_exec() {
    let mut pair = Pair::start();
    let (mut other_redis, mut other_splitkv) = pair.connect();
    let other = |step: Step, r: &mut diff::Connection, s: &mut diff::Connection| {
        let request = diff::encode(&step.args.iter().map(Vec::as_slice).collect::<Vec<_>>());
        r.send(&request);
        s.send(&request);
        diff::compare_replies(&step, r, s);
    };
    for protocol in ["2", "3"] {
        pair.one_by_one(&[
            by_shape(cmd!("HELLO", protocol), "HELLO's version and id"),
            exact(cmd!("SET", "w", "1")),
            exact(cmd!("WATCH", "w", "absent")),
            exact(cmd!("MULTI")),
            exact(cmd!("SET", "w", "2")),
        ]);
        other(
            exact(cmd!("SET", "w", "other")),
            &mut other_redis,
            &mut other_splitkv,
        );
        pair.one_by_one(&[exact(cmd!("EXEC")), exact(cmd!("GET", "w"))]);
        // A key absent at WATCH and created by another client.
        pair.one_by_one(&[exact(cmd!("WATCH", "absent")), exact(cmd!("MULTI"))]);
        other(
            exact(cmd!("SET", "absent", "now")),
            &mut other_redis,
            &mut other_splitkv,
        );
        pair.one_by_one(&[exact(cmd!("GET", "w")), exact(cmd!("EXEC"))]);
        // A deleted key.
        pair.one_by_one(&[exact(cmd!("WATCH", "absent"))]);
        other(
            exact(cmd!("DEL", "absent")),
            &mut other_redis,
            &mut other_splitkv,
        );
        pair.one_by_one(&[
            exact(cmd!("MULTI")),
            exact(cmd!("PING")),
            exact(cmd!("EXEC")),
        ]);
        // Untouched: EXEC runs.
        pair.one_by_one(&[
            exact(cmd!("WATCH", "w")),
            exact(cmd!("MULTI")),
            exact(cmd!("SET", "w", "3")),
            exact(cmd!("EXEC")),
            exact(cmd!("GET", "w")),
        ]);
        // A FLUSHALL by another client fails an EXEC watching a key that
        // existed, not one watching only a key that did not.
        pair.one_by_one(&[exact(cmd!("WATCH", "w")), exact(cmd!("MULTI"))]);
        other(
            exact(cmd!("FLUSHALL")),
            &mut other_redis,
            &mut other_splitkv,
        );
        pair.one_by_one(&[exact(cmd!("SET", "w", "4")), exact(cmd!("EXEC"))]);
        pair.one_by_one(&[exact(cmd!("WATCH", "absent")), exact(cmd!("MULTI"))]);
        other(
            exact(cmd!("FLUSHALL")),
            &mut other_redis,
            &mut other_splitkv,
        );
        pair.one_by_one(&[
            exact(cmd!("SET", "w", "5")),
            exact(cmd!("EXEC")),
            exact(cmd!("GET", "w")),
        ]);
    }
}

/// FLUSHALL and FLUSHDB, their modes and wrong arguments, also inside a
/// transaction (whose reads see the flush).
fn flush_steps() -> Vec<Step> {
    vec![
        exact(cmd!("MSET", "f1", "a", "f2", "b")),
        exact(cmd!("FLUSHALL")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("MGET", "f1", "f2")),
        exact(cmd!("SET", "f3", "c")),
        exact(cmd!("FLUSHDB", "ASYNC")),
        exact(cmd!("EXISTS", "f3")),
        exact(cmd!("SET", "f4", "d")),
        exact(cmd!("FLUSHALL", "sync")),
        exact(cmd!("FLUSHDB")),
        exact(cmd!("FLUSHALL", "bogus")),
        exact(cmd!("FLUSHALL", "ASYNC", "SYNC")),
        exact(cmd!("FLUSHDB", "x", "y")),
        exact(cmd!("SET", "f5", "e")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "f6", "f")),
        exact(cmd!("FLUSHALL")),
        exact(cmd!("SET", "f7", "g")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("EXISTS", "f5", "f6", "f7")),
        exact(cmd!("MGET", "f5", "f6", "f7")),
        exact(cmd!("EXEC")),
        exact(cmd!("MGET", "f5", "f6", "f7")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("FLUSHALL")),
    ]
}

/// Transactions mixing reads and every kind of write: reads inside see the
/// transaction's own writes.
fn mixed_transaction_steps() -> Vec<Step> {
    vec![
        exact(cmd!("MSET", "m1", "one", "m2", "two")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "m3", "three")),
        exact(cmd!("RENAME", "m1", "m4")),
        exact(cmd!("GET", "m4")),
        exact(cmd!("EXISTS", "m1", "m4")),
        exact(cmd!("COPY", "m4", "m5")),
        exact(cmd!("DEL", "m2", "m3", "m2", "nosuch")),
        exact(cmd!("MGET", "m1", "m2", "m3", "m4", "m5")),
        exact(cmd!("TYPE", "m3")),
        exact(cmd!("RENAMENX", "m5", "m4")),
        exact(cmd!("RENAME", "m2", "m6")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("MSET", "m2", "again", "m3", "again")),
        exact(cmd!("COPY", "m2", "m4", "REPLACE")),
        exact(cmd!("EXEC")),
        exact(cmd!("MGET", "m1", "m2", "m3", "m4", "m5", "m6")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("DEL", "m2", "m3", "m4", "m5")),
    ]
}

#[test]
fn flushes_and_mixed_transactions_answer_as_redis_does() {
    let mut pair = Pair::start();
    pair.both_ways(&flush_steps());
    pair.both_ways(&mixed_transaction_steps());
    pair.one_by_one(&[by_shape(cmd!("HELLO", "3"), "HELLO's version and id")]);
    pair.both_ways(&flush_steps());
    pair.both_ways(&mixed_transaction_steps());
}

#[test]
fn client_kill_closes_the_connection_it_names() {
    let mut pair = Pair::start();
    let (mut victim_redis, mut victim_splitkv) = pair.connect();
    let id = |c: &mut diff::Connection| {
        c.send(&diff::encode(cmd!("CLIENT", "ID")));
        match c.reply().1 {
            diff::Reply::Integer(id) => id.to_string(),
            other => panic!("CLIENT ID answered {other:?}"),
        }
    };
    let redis_id = id(&mut victim_redis);
    let splitkv_id = id(&mut victim_splitkv);
    pair.to_redis
        .send(&diff::encode(cmd!("CLIENT", "KILL", "ID", redis_id)));
    pair.to_splitkv
        .send(&diff::encode(cmd!("CLIENT", "KILL", "ID", splitkv_id)));
    diff::compare_replies(
        &exact(cmd!("CLIENT", "KILL", "ID", "n")),
        &mut pair.to_redis,
        &mut pair.to_splitkv,
    );
    assert!(victim_redis.closed(), "Redis closes a killed client");
    assert!(victim_splitkv.closed(), "SplitKV closes a killed client");
    pair.one_by_one(&[exact(cmd!("PING"))]);
}

#[test]
fn auth_and_hello_with_a_password_answer_as_redis_does() {
    let mut pair = Pair::start_with_password(Some("s3cret"));
    let steps = vec![
        exact(cmd!("GET", "k")),
        exact(cmd!("NOSUCH")),
        exact(cmd!("GET")),
        exact(cmd!("HELLO", "3")),
        exact(cmd!("AUTH", "wrong")),
        exact(cmd!("AUTH", "default", "wrong")),
        exact(cmd!("MULTI")),
        by_shape(
            cmd!("HELLO", "3", "AUTH", "default", "s3cret"),
            "HELLO's version and id",
        ),
        exact(cmd!("GET", "k")),
        exact(cmd!("RESET")),
        exact(cmd!("GET", "k")),
        exact(cmd!("AUTH", "s3cret")),
        exact(cmd!("SET", "k", "v")),
        exact(cmd!("GET", "k")),
        exact(cmd!("CONFIG", "GET", "requirepass")),
        exact(cmd!("RESET")),
    ];
    pair.both_ways(&steps);
}

/// Keyspace commands over string keys: normal, absent, empty, binary and
/// wrong arguments.
fn keyspace_steps() -> Vec<Step> {
    let binary = b"k\r\n\x00\xff".to_vec();
    vec![
        exact(cmd!(
            "MSET", "ks1", "a", "ks2", "b", "ks3", "", binary, "bin"
        )),
        exact(cmd!("TYPE", "ks1")),
        exact(cmd!("TYPE", "nosuch")),
        exact(cmd!("TYPE")),
        exact(cmd!("TYPE", "a", "b")),
        exact(cmd!("EXISTS", "ks1", "ks1", "nosuch", binary)),
        exact(cmd!("TOUCH", "ks1", "nosuch", "ks2")),
        exact(cmd!("TOUCH")),
        exact(cmd!("UNLINK", "ks3", "nosuch")),
        exact(cmd!("UNLINK")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("RENAME", "ks1", "ks1b")),
        exact(cmd!("MGET", "ks1", "ks1b")),
        exact(cmd!("RENAME", "nosuch", "x")),
        exact(cmd!("RENAME", "ks1b", "ks1b")),
        exact(cmd!("RENAME", "ks1b", "ks2")),
        exact(cmd!("GET", "ks2")),
        // (SplitKV's keys are 1 B to 1 KiB: an empty key is refused.)
        exact(cmd!("RENAME", binary, "ks8")),
        exact(cmd!("GET", "ks8")),
        exact(cmd!("RENAME", "x")),
        exact(cmd!("SET", "ks1", "one")),
        exact(cmd!("RENAMENX", "ks1", "ks2")),
        exact(cmd!("RENAMENX", "ks1", "ks4")),
        exact(cmd!("RENAMENX", "ks4", "ks4")),
        exact(cmd!("RENAMENX", "nosuch", "ks9")),
        exact(cmd!("MGET", "ks1", "ks2", "ks4")),
        exact(cmd!("COPY", "ks4", "ks5")),
        exact(cmd!("COPY", "ks4", "ks5")),
        exact(cmd!("COPY", "ks2", "ks5", "REPLACE")),
        exact(cmd!("GET", "ks5")),
        exact(cmd!("COPY", "nosuch", "ks6")),
        exact(cmd!("COPY", "ks4", "ks4")),
        exact(cmd!("COPY", "ks4", "ks6", "DB", "0")),
        exact(cmd!("COPY", "ks4", "ks7", "DB", "1")),
        exact(cmd!("COPY", "ks4", "ks7", "DB", "x")),
        exact(cmd!("COPY", "ks4", "ks7", "BOGUS")),
        exact(cmd!("COPY", "ks4")),
        exact(cmd!("MGET", "ks4", "ks5", "ks6", "ks7")),
        exact(cmd!("DEL", "ks2", "ks4", "ks5", "ks6", "ks8", "")),
        exact(cmd!("DBSIZE")),
    ]
}

#[test]
fn keyspace_commands_answer_as_redis_does() {
    let mut pair = Pair::start();
    pair.both_ways(&keyspace_steps());
    pair.one_by_one(&[by_shape(cmd!("HELLO", "3"), "HELLO's version and id")]);
    pair.both_ways(&keyspace_steps());
    let mut queued = vec![exact(cmd!("MULTI"))];
    queued.extend(keyspace_steps());
    queued.push(exact(cmd!("EXEC")));
    pair.both_ways(&queued);
}

#[test]
fn inline_commands_empty_requests_and_quit_answer_as_redis_does() {
    let mut pair = Pair::start();
    let raw =
        b"PING\r\n\r\n*0\r\nECHO hi\r\nSET inl v\r\nGET inl\n  GET   inl  \r\nQUIT\r\nPING\r\n";
    pair.to_redis.send(raw);
    pair.to_splitkv.send(raw);
    for what in ["PING", "ECHO", "SET", "GET", "GET (spaces)", "QUIT"] {
        diff::compare_replies(&exact(cmd!(what)), &mut pair.to_redis, &mut pair.to_splitkv);
    }
    assert!(pair.to_redis.closed(), "Redis closes after QUIT");
    assert!(pair.to_splitkv.closed(), "SplitKV closes after QUIT");
}

#[test]
fn reset_returns_a_connection_to_its_first_state_as_redis_does() {
    let mut pair = Pair::start();
    let steps = vec![
        by_shape(
            cmd!("HELLO", "3", "SETNAME", "before"),
            "HELLO's version and id",
        ),
        exact(cmd!("CLIENT", "REPLY", "ON")),
        exact(cmd!("WATCH", "r1")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "r1", "queued")),
        exact(cmd!("RESET")),
        // RESP2 again, no name, no transaction, nothing watched.
        exact(cmd!("GET", "r1")),
        exact(cmd!("CLIENT", "GETNAME")),
        exact(cmd!("EXEC")),
        exact(cmd!("SET", "r1", "after")),
        exact(cmd!("MULTI")),
        exact(cmd!("GET", "r1")),
        exact(cmd!("EXEC")),
    ];
    pair.both_ways(&steps);
}

#[test]
fn inline_quotes_answer_as_redis_does() {
    let mut pair = Pair::start();
    let raw =
        b"SET \"q a\" 'v b'\r\nGET \"q a\"\r\nECHO \"x\\ny\\x41\\\"\" 'it\\'s'\r\nECHO \"\"\r\n";
    pair.to_redis.send(raw);
    pair.to_splitkv.send(raw);
    for what in ["SET", "GET", "ECHO escapes", "ECHO empty"] {
        diff::compare_replies(&exact(cmd!(what)), &mut pair.to_redis, &mut pair.to_splitkv);
    }
    // Unbalanced quotes: an error, and the connection is closed.
    let raw = b"ECHO \"open\r\n";
    pair.to_redis.send(raw);
    pair.to_splitkv.send(raw);
    diff::compare_replies(
        &exact(cmd!("ECHO")),
        &mut pair.to_redis,
        &mut pair.to_splitkv,
    );
    assert!(pair.to_redis.closed());
    assert!(pair.to_splitkv.closed());
}

#[test]
fn command_info_of_every_command_splitkv_lists_is_redis_s() {
    let mut pair = Pair::start();
    let names = |c: &mut diff::Connection, args: &[&[u8]]| -> Vec<Vec<u8>> {
        c.send(&diff::encode(args));
        match c.reply().1 {
            diff::Reply::Array(Some(items)) => items
                .into_iter()
                .map(|item| match item {
                    diff::Reply::Bulk(Some(name)) => name,
                    other => panic!("COMMAND LIST gave {other:?}"),
                })
                .collect(),
            other => panic!("COMMAND LIST answered {other:?}"),
        }
    };
    let ours = names(&mut pair.to_splitkv, cmd!("COMMAND", "LIST"));
    let redis_has = names(&mut pair.to_redis, cmd!("COMMAND", "LIST"));
    pair.to_splitkv
        .send(&diff::encode(cmd!("COMMAND", "COUNT")));
    assert_eq!(
        pair.to_splitkv.reply().1,
        diff::Reply::Integer(ours.len() as i64),
        "COMMAND COUNT counts what COMMAND LIST lists"
    );
    let containers = ["client", "config", "command", "object"];
    let mut steps = Vec::new();
    for name in &ours {
        assert!(
            redis_has.contains(name),
            "Redis has no {:?}",
            String::from_utf8_lossy(name)
        );
        let text = String::from_utf8_lossy(name).into_owned();
        if containers.contains(&text.as_str()) {
            // Redis lists subcommands SplitKV does not have (and OBJECT's
            // in an order of its own); each of SplitKV's is compared on its
            // own below.
            continue;
        }
        steps.push(exact(&[b"COMMAND", b"INFO", name]));
    }
    let subcommands = diff::SUBCOMMANDS_THE_REFERENCE_HAS;
    for sub in subcommands {
        steps.push(exact(&[b"COMMAND", b"INFO", sub.as_bytes()]));
    }
    // COMMAND DOCS of every command is compared in redis_diff_docs.rs;
    // here for commands that take no arguments, in the same session.
    for name in [
        "dbsize", "multi", "exec", "discard", "unwatch", "reset", "time",
    ] {
        steps.push(exact(&[b"COMMAND", b"DOCS", name.as_bytes()]));
    }
    pair.one_by_one(&steps);
    pair.one_by_one(&[by_shape(cmd!("HELLO", "3"), "HELLO's version and id")]);
    pair.pipelined(&steps);
}
