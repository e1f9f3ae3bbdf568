//! Differential tests of the hash commands: HSET, HSETNX, HMSET, HGET,
//! HMGET, HGETALL, HDEL, HLEN, HEXISTS, HKEYS, HVALS, HSTRLEN, HINCRBY,
//! HINCRBYFLOAT, HRANDFIELD and HSCAN go to a real `redis-server` and to a
//! compute node with normal, empty, binary and wrong arguments, on keys of
//! the wrong type, in RESP2 and RESP3, one at a time, pipelined and inside
//! MULTI/EXEC; every reply is compared byte for byte (random picks by
//! shape), and the keyspace commands (TYPE, EXISTS, DEL, RENAME, COPY,
//! EXPIRE, TTL, PERSIST, SCAN TYPE, OBJECT ENCODING) are checked on
//! hashes.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(dead_code, reason = "shared test support")]
mod support;

use diff::{Step, by_shape, exact, unordered};

/// Commands that Redis queues inside MULTI (valid arities) and that
/// answer the same on both servers.
fn valid_steps() -> Vec<Step> {
    let binary = b"f\r\n\x00\xff".to_vec();
    vec![
        exact(cmd!("DEL", "h", "h2", "s", "hc", "hd")),
        exact(cmd!("HSET", "h", "b", "1", "a", "2")),
        exact(cmd!("HSET", "h", "b", "3", "c", "4")),
        exact(cmd!("HGETALL", "h")),
        exact(cmd!("HKEYS", "h")),
        exact(cmd!("HVALS", "h")),
        exact(cmd!("HLEN", "h")),
        exact(cmd!("HGET", "h", "b")),
        exact(cmd!("HGET", "h", "zz")),
        exact(cmd!("HGET", "nokey", "b")),
        exact(cmd!("HMGET", "h", "a", "zz", "c")),
        exact(cmd!("HMGET", "nokey", "a", "b")),
        exact(cmd!("HEXISTS", "h", "a")),
        exact(cmd!("HEXISTS", "h", "zz")),
        exact(cmd!("HEXISTS", "nokey", "a")),
        exact(cmd!("HSTRLEN", "h", "a")),
        exact(cmd!("HSTRLEN", "h", "zz")),
        exact(cmd!("HSETNX", "h", "a", "9")),
        exact(cmd!("HSETNX", "h", "d", "9")),
        exact(cmd!("HMSET", "h", "e", "5", "f", "6")),
        exact(cmd!("HSET", "h", binary, binary)),
        exact(cmd!("HGET", "h", binary)),
        exact(cmd!("HSET", "h", "", "")),
        exact(cmd!("HGETALL", "h")),
        exact(cmd!("HDEL", "h", "a", "zz", "a")),
        exact(cmd!("HDEL", "h", "nothere")),
        exact(cmd!("HDEL", "nokey", "a")),
        exact(cmd!("HGETALL", "h")),
        exact(cmd!("HGETALL", "nokey")),
        exact(cmd!("HKEYS", "nokey")),
        exact(cmd!("HLEN", "nokey")),
        exact(cmd!("HINCRBY", "hc", "n", "5")),
        exact(cmd!("HINCRBY", "hc", "n", "-7")),
        exact(cmd!("HINCRBY", "hc", "n", "x")),
        exact(cmd!("HINCRBY", "hc", "n", "9223372036854775807")),
        exact(cmd!("HSET", "hc", "s", "abc")),
        exact(cmd!("HINCRBY", "hc", "s", "1")),
        exact(cmd!("HINCRBYFLOAT", "hc", "f", "1.5")),
        exact(cmd!("HINCRBYFLOAT", "hc", "f", "0.1")),
        exact(cmd!("HINCRBYFLOAT", "hc", "f", "abc")),
        exact(cmd!("HINCRBYFLOAT", "hc", "s", "1")),
        exact(cmd!("HINCRBYFLOAT", "hc", "n", "1e2")),
        exact(cmd!("HINCRBYFLOAT", "hc", "f", "inf")),
        exact(cmd!("HGETALL", "hc")),
        exact(cmd!("HDEL", "hc", "n", "s", "f")),
        exact(cmd!("EXISTS", "hc")),
        exact(cmd!("TYPE", "h")),
        exact(cmd!("TYPE", "hc")),
        exact(cmd!("SET", "s", "str")),
        exact(cmd!("HSET", "s", "a", "1")),
        exact(cmd!("HGET", "s", "a")),
        exact(cmd!("HGETALL", "s")),
        exact(cmd!("HLEN", "s")),
        exact(cmd!("HDEL", "s", "a")),
        exact(cmd!("HINCRBY", "s", "a", "1")),
        exact(cmd!("HSCAN", "s", "0")),
        exact(cmd!("HRANDFIELD", "s")),
        exact(cmd!("GET", "h")),
        exact(cmd!("MGET", "h", "s")),
        exact(cmd!("APPEND", "h", "x")),
        exact(cmd!("INCR", "h")),
        exact(cmd!("STRLEN", "h")),
        exact(cmd!("GETRANGE", "h", "0", "1")),
        exact(cmd!("SET", "h", "over", "GET")),
        exact(cmd!("HSCAN", "h", "0")),
        exact(cmd!("HSCAN", "h", "0", "MATCH", "[bc]*")),
        exact(cmd!("HSCAN", "h", "0", "COUNT", "100")),
        exact(cmd!("HSCAN", "h", "0", "COUNT", "0")),
        exact(cmd!("HSCAN", "h", "x")),
        exact(cmd!("HSCAN", "h", "0", "FOO", "1")),
        exact(cmd!("HSCAN", "nokey", "0")),
        exact(cmd!("HRANDFIELD", "nokey")),
        exact(cmd!("HRANDFIELD", "nokey", "3")),
        exact(cmd!("HRANDFIELD", "h", "100")),
        exact(cmd!("HRANDFIELD", "h", "100", "WITHVALUES")),
        exact(cmd!("HRANDFIELD", "h", "0")),
        exact(cmd!("HRANDFIELD", "h", "x")),
        exact(cmd!("HRANDFIELD", "h", "1", "FOO")),
        exact(cmd!("HRANDFIELD", "h", "-9223372036854775808")),
        exact(cmd!(
            "HRANDFIELD",
            "h",
            "-9223372036854775807",
            "WITHVALUES"
        )),
        by_shape(cmd!("HRANDFIELD", "h"), "a random field"),
        by_shape(cmd!("HRANDFIELD", "h", "2"), "random fields"),
        by_shape(cmd!("HRANDFIELD", "h", "-5", "WITHVALUES"), "random fields"),
        exact(cmd!("OBJECT", "ENCODING", "h")),
        exact(cmd!("EXPIRE", "h", "100")),
        exact(cmd!("TTL", "h")),
        exact(cmd!("HSET", "h", "new", "1")),
        exact(cmd!("TTL", "h")),
        exact(cmd!("PERSIST", "h")),
        exact(cmd!("TTL", "h")),
        exact(cmd!("RENAME", "h", "h2")),
        exact(cmd!("HGETALL", "h2")),
        exact(cmd!("COPY", "h2", "h")),
        exact(cmd!("HGETALL", "h")),
        exact(cmd!("EXISTS", "h", "h2")),
        exact(cmd!("SET", "h2", "plain")),
        exact(cmd!("TYPE", "h2")),
        exact(cmd!("HSET", "h2", "a", "1")),
        exact(cmd!("DEL", "h2")),
        exact(cmd!("HSET", "h2", "a", "1")),
        exact(cmd!("TYPE", "h2")),
        exact(cmd!("HDEL", "h2", "a")),
        exact(cmd!("TYPE", "h2")),
    ]
}

/// Commands with a wrong number of arguments: Redis refuses them before
/// MULTI could queue them.
fn arity_steps() -> Vec<Step> {
    vec![
        exact(cmd!("HSET", "h", "a")),
        exact(cmd!("HSET", "h", "a", "1", "b")),
        exact(cmd!("HMSET", "h", "a", "1", "b")),
        exact(cmd!("HGET", "h")),
        exact(cmd!("HSETNX", "h", "a")),
        exact(cmd!("HDEL", "h")),
        exact(cmd!("HMGET", "h")),
        exact(cmd!("HINCRBY", "h", "a")),
        exact(cmd!("HSCAN", "h")),
        exact(cmd!("HRANDFIELD")),
    ]
}

/// A hash past the compact encoding's limits: order is Redis's hash
/// table's own there, so whole-hash replies are compared by shape.
fn large_steps() -> Vec<Step> {
    let mut steps = vec![exact(cmd!("DEL", "big"))];
    for i in 0..520 {
        let field = format!("field:{i}");
        steps.push(exact(cmd!("HSET", "big", field, i.to_string())));
    }
    steps.extend([
        exact(cmd!("HLEN", "big")),
        exact(cmd!("OBJECT", "ENCODING", "big")),
        exact(cmd!("HGET", "big", "field:77")),
        unordered(cmd!("HGETALL", "big"), "hash-table order"),
        exact(cmd!("HSET", "long", "f", "x".repeat(65))),
        exact(cmd!("OBJECT", "ENCODING", "long")),
        exact(cmd!("DEL", "big", "long")),
        exact(cmd!("CONFIG", "SET", "hash-max-listpack-entries", "2")),
        exact(cmd!("CONFIG", "GET", "hash-max-listpack-entries")),
        exact(cmd!("HSET", "cfg", "a", "1", "b", "2")),
        exact(cmd!("OBJECT", "ENCODING", "cfg")),
        exact(cmd!("HSET", "cfg", "c", "3")),
        exact(cmd!("OBJECT", "ENCODING", "cfg")),
        exact(cmd!("CONFIG", "SET", "hash-max-listpack-entries", "x")),
        exact(cmd!("CONFIG", "SET", "hash-max-listpack-entries", "512")),
        exact(cmd!("DEL", "cfg")),
    ]);
    steps
}

fn every_step() -> Vec<Step> {
    let mut steps = valid_steps();
    steps.extend(arity_steps());
    steps.extend(large_steps());
    steps
}

#[test]
fn hash_commands_answer_as_redis_does_in_resp2_and_resp3() {
    diff::in_both_protocols(&every_step());
}

#[test]
fn hash_commands_inside_exec_answer_as_redis_does() {
    diff::in_both_protocols(&diff::in_transactions(valid_steps()));
}
