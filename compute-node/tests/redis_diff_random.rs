//! Random command streams over a few keys (binary, long, negative-looking
//! values, empty values, transactions, wrong arities; strings mixed with
//! hashes, lists, sets and sorted sets on the same keys) go to a real
//! `redis-server` and to a compute node, one at a time or pipelined; every
//! reply must be the same bytes.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
mod support;

use diff::{Pair, Step, exact};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"a".to_vec()),
        Just(b"b".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"k\x00\r\n\xff".to_vec()),
        Just(vec![b'L'; 1000]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        Just(b"v".to_vec()),
        Just(b"-12".to_vec()),
        Just(b"\r\n\x00".to_vec()),
        Just(support::value_for(b"big", 3, 20_000)),
    ]
}

fn args(parts: Vec<Vec<u8>>) -> Step {
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    exact(&refs)
}

fn name(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// A small element: a set stays an intset, a hash a listpack, so Redis's
/// reply order is defined and compared byte for byte.
fn element() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"1".to_vec()),
        Just(b"2".to_vec()),
        Just(b"-3".to_vec()),
        Just(b"10".to_vec()),
    ]
}

/// A command on a hash, list, set or sorted set (whose replies have a
/// defined order), on the same keys as the string commands.
fn collection_command() -> impl Strategy<Value = Step> {
    prop_oneof![
        (key(), element(), element()).prop_map(|(k, f, v)| args(vec![name("HSET"), k, f, v])),
        (key(), element()).prop_map(|(k, f)| args(vec![name("HGET"), k, f])),
        (key(), element()).prop_map(|(k, f)| args(vec![name("HDEL"), k, f])),
        key().prop_map(|k| args(vec![name("HGETALL"), k])),
        (key(), element(), element()).prop_map(|(k, f, n)| args(vec![name("HINCRBY"), k, f, n])),
        (key(), element(), element()).prop_map(|(k, a, b)| args(vec![name("RPUSH"), k, a, b])),
        (key(), element()).prop_map(|(k, a)| args(vec![name("LPUSH"), k, a])),
        key().prop_map(|k| args(vec![name("LPOP"), k])),
        key().prop_map(|k| args(vec![name("LRANGE"), k, name("0"), name("-1")])),
        (key(), key()).prop_map(|(a, b)| args(vec![
            name("LMOVE"),
            a,
            b,
            name("LEFT"),
            name("RIGHT")
        ])),
        (key(), element(), element()).prop_map(|(k, a, b)| args(vec![name("SADD"), k, a, b])),
        (key(), element()).prop_map(|(k, a)| args(vec![name("SREM"), k, a])),
        key().prop_map(|k| args(vec![name("SMEMBERS"), k])),
        (key(), key()).prop_map(|(a, b)| args(vec![name("SUNION"), a, b])),
        (key(), key(), key()).prop_map(|(d, a, b)| args(vec![name("SINTERSTORE"), d, a, b])),
        (key(), element(), element()).prop_map(|(k, s, m)| args(vec![name("ZADD"), k, s, m])),
        (key(), element(), element()).prop_map(|(k, s, m)| args(vec![name("ZINCRBY"), k, s, m])),
        key().prop_map(|k| args(vec![
            name("ZRANGE"),
            k,
            name("0"),
            name("-1"),
            name("WITHSCORES")
        ])),
        key().prop_map(|k| args(vec![name("ZPOPMIN"), k])),
        (key(), element()).prop_map(|(k, m)| args(vec![name("ZSCORE"), k, m])),
        // Far enough ahead that no key expires while the servers are
        // compared, or already past (the key goes at once on both).
        (key(), prop_oneof![Just("1000"), Just("-3")]).prop_map(|(k, s)| args(vec![
            name("EXPIRE"),
            k,
            name(s)
        ])),
        key().prop_map(|k| args(vec![name("OBJECT"), name("ENCODING"), k])),
    ]
}

/// One command that is not a transaction's edge.
fn command() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => string_command(),
        2 => collection_command(),
    ]
}

/// One string or keyspace command.
fn string_command() -> impl Strategy<Value = Step> {
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| args(vec![name("SET"), k, v])),
        key().prop_map(|k| args(vec![name("GET"), k])),
        (key(), key()).prop_map(|(a, b)| args(vec![name("DEL"), a, b])),
        (key(), key()).prop_map(|(a, b)| args(vec![name("EXISTS"), a, b])),
        (key(), key(), key()).prop_map(|(a, b, c)| args(vec![name("MGET"), a, b, c])),
        (key(), value(), key(), value()).prop_map(|(a, x, b, y)| args(vec![
            name("MSET"),
            a,
            x,
            b,
            y
        ])),
        key().prop_map(|k| args(vec![name("TYPE"), k])),
        (key(), key()).prop_map(|(a, b)| args(vec![name("RENAME"), a, b])),
        (key(), key()).prop_map(|(a, b)| args(vec![name("RENAMENX"), a, b])),
        (key(), key(), any::<bool>()).prop_map(|(a, b, replace)| {
            let mut parts = vec![name("COPY"), a, b];
            if replace {
                parts.push(name("REPLACE"));
            }
            args(parts)
        }),
        key().prop_map(|k| args(vec![name("UNLINK"), k])),
        (key(), key()).prop_map(|(a, b)| args(vec![name("TOUCH"), a, b])),
        Just(args(vec![name("DBSIZE")])),
        value().prop_map(|v| args(vec![name("ECHO"), v])),
        value().prop_map(|v| args(vec![name("PING"), v])),
        Just(args(vec![name("GET")])),
        key().prop_map(|k| args(vec![name("SET"), k])),
        Just(args(vec![name("NOSUCH"), name("x")])),
        key().prop_map(|k| args(vec![name("WATCH"), k])),
        Just(args(vec![name("UNWATCH")])),
    ]
}

/// A command, or a transaction of a few commands ended by EXEC or DISCARD.
fn unit() -> impl Strategy<Value = Vec<Step>> {
    prop_oneof![
        4 => command().prop_map(|c| vec![c]),
        1 => (proptest::collection::vec(command(), 0..5), any::<bool>()).prop_map(|(body, exec)| {
            let mut steps = vec![args(vec![name("MULTI")])];
            steps.extend(body);
            steps.push(args(vec![name(if exec { "EXEC" } else { "DISCARD" })]));
            steps
        }),
    ]
}

#[test]
fn random_command_streams_answer_as_redis_does() {
    let pair = std::cell::RefCell::new(Pair::start());
    let steps_compared = std::cell::Cell::new(0usize);
    // Each case goes on from the state the previous ones left (the same on
    // both servers); a failure is reported as found, not shrunk.
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        max_shrink_iters: 0,
        ..Config::default()
    });
    let stream = (
        proptest::collection::vec(unit(), 1..12),
        any::<bool>(),
        any::<bool>(),
    );
    runner
        .run(&stream, |(units, pipelined, resp3)| {
            let mut pair = pair.borrow_mut();
            let hello = if resp3 { "3" } else { "2" };
            pair.one_by_one(&[diff::by_shape(
                cmd!("HELLO", hello),
                "HELLO's version and id are each server's own",
            )]);
            let steps: Vec<Step> = units.into_iter().flatten().collect();
            steps_compared.set(steps_compared.get() + steps.len());
            if pipelined {
                pair.pipelined(&steps);
            } else {
                pair.one_by_one(&steps);
            }
            Ok(())
        })
        .expect("every reply the same as Redis's");
    // 256 streams of 1 to 11 units each, a unit one command or more.
    assert!(
        steps_compared.get() >= 256,
        "{} steps",
        steps_compared.get()
    );
    eprintln!("{} commands compared", steps_compared.get());
}
