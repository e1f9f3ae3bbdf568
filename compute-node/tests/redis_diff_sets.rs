//! Differential tests of the set commands: SADD, SREM, SMEMBERS,
//! SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE, SINTER, SUNION,
//! SDIFF and their STORE forms, SINTERCARD and SSCAN go to a real
//! `redis-server` and to a compute node with normal, empty and wrong
//! arguments and keys of the wrong type, in RESP2 and RESP3, one at a
//! time, pipelined and inside MULTI/EXEC; replies compared byte for byte
//! where Redis's order is defined (intsets are sorted), by shape where it
//! is a hash table's or random.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(dead_code, reason = "shared test support")]
mod support;

use diff::{Step, by_shape, exact, unordered};

const HASH_ORDER: &str = "a hash table's order";

fn valid_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DEL", "n", "m", "w", "s", "d", "x", "str")),
        exact(cmd!("SADD", "n", "5", "1", "3", "1")),
        exact(cmd!("SADD", "n", "-2", "10")),
        exact(cmd!("SMEMBERS", "n")),
        exact(cmd!("SCARD", "n")),
        exact(cmd!("SISMEMBER", "n", "3")),
        exact(cmd!("SISMEMBER", "n", "4")),
        exact(cmd!("SISMEMBER", "nokey", "4")),
        exact(cmd!("SMISMEMBER", "n", "1", "2", "3")),
        exact(cmd!("SMISMEMBER", "nokey", "1")),
        exact(cmd!("OBJECT", "ENCODING", "n")),
        exact(cmd!("SADD", "m", "3", "4", "5", "6")),
        exact(cmd!("SINTER", "n", "m")),
        exact(cmd!("SUNION", "n", "m")),
        exact(cmd!("SDIFF", "n", "m")),
        exact(cmd!("SDIFF", "m", "n")),
        exact(cmd!("SINTER", "n", "nokey")),
        exact(cmd!("SUNION", "nokey", "n")),
        exact(cmd!("SDIFF", "nokey", "n")),
        exact(cmd!("SINTERSTORE", "d", "n", "m")),
        exact(cmd!("SMEMBERS", "d")),
        exact(cmd!("SUNIONSTORE", "d", "n", "m")),
        exact(cmd!("SMEMBERS", "d")),
        exact(cmd!("SDIFFSTORE", "d", "n", "m")),
        exact(cmd!("SMEMBERS", "d")),
        exact(cmd!("SINTERSTORE", "d", "n", "nokey")),
        exact(cmd!("EXISTS", "d")),
        exact(cmd!("SINTERCARD", "2", "n", "m")),
        exact(cmd!("SINTERCARD", "2", "n", "m", "LIMIT", "1")),
        exact(cmd!("SINTERCARD", "2", "n", "m", "LIMIT", "0")),
        exact(cmd!("SINTERCARD", "0", "n")),
        exact(cmd!("SINTERCARD", "x", "n")),
        exact(cmd!("SINTERCARD", "3", "n", "m")),
        exact(cmd!("SINTERCARD", "1", "n", "LIMIT", "-1")),
        exact(cmd!("SINTERCARD", "1", "n", "LIMIT", "x")),
        exact(cmd!("SINTERCARD", "1", "n", "FOO")),
        exact(cmd!("SREM", "n", "1", "99", "1")),
        exact(cmd!("SREM", "nokey", "1")),
        exact(cmd!("SMEMBERS", "n")),
        exact(cmd!("SMOVE", "n", "m", "3")),
        exact(cmd!("SMOVE", "n", "m", "99")),
        exact(cmd!("SMOVE", "nokey", "m", "1")),
        exact(cmd!("SMOVE", "n", "n", "5")),
        exact(cmd!("SMOVE", "n", "newset", "5")),
        exact(cmd!("SMEMBERS", "newset")),
        exact(cmd!("SMEMBERS", "n")),
        exact(cmd!("SMEMBERS", "m")),
        exact(cmd!("SET", "str", "v")),
        exact(cmd!("SADD", "str", "a")),
        exact(cmd!("SMEMBERS", "str")),
        exact(cmd!("SINTER", "n", "str")),
        exact(cmd!("SINTER", "nokey", "str")),
        exact(cmd!("SMOVE", "n", "str", "10")),
        exact(cmd!("SMOVE", "nokey", "str", "10")),
        exact(cmd!("SINTERSTORE", "str", "n", "m")),
        exact(cmd!("TYPE", "str")),
        exact(cmd!("SPOP", "nokey")),
        exact(cmd!("SPOP", "nokey", "2")),
        exact(cmd!("SPOP", "n", "0")),
        exact(cmd!("SPOP", "n", "-1")),
        exact(cmd!("SPOP", "n", "x")),
        exact(cmd!("SPOP", "newset", "5")),
        exact(cmd!("EXISTS", "newset")),
        exact(cmd!("SRANDMEMBER", "nokey")),
        exact(cmd!("SRANDMEMBER", "nokey", "3")),
        exact(cmd!("SRANDMEMBER", "m", "100")),
        exact(cmd!("SRANDMEMBER", "m", "0")),
        exact(cmd!("SRANDMEMBER", "m", "x")),
        by_shape(cmd!("SRANDMEMBER", "m"), "random"),
        by_shape(cmd!("SRANDMEMBER", "m", "2"), "random"),
        by_shape(cmd!("SRANDMEMBER", "m", "-7"), "random"),
        by_shape(cmd!("SPOP", "m"), "random"),
        exact(cmd!("SCARD", "m")),
        exact(cmd!("SSCAN", "n", "0")),
        exact(cmd!("SSCAN", "n", "0", "MATCH", "1*")),
        exact(cmd!("SSCAN", "nokey", "0")),
        exact(cmd!("SSCAN", "n", "abc")),
        exact(cmd!("SSCAN", "str", "0")),
        exact(cmd!("SADD", "w", "b")),
        exact(cmd!("SMEMBERS", "w")),
        exact(cmd!("OBJECT", "ENCODING", "w")),
        exact(cmd!("SADD", "w", "a", "c")),
        unordered(cmd!("SMEMBERS", "w"), HASH_ORDER),
        exact(cmd!("SISMEMBER", "w", "a")),
        exact(cmd!("SCARD", "w")),
        unordered(cmd!("SUNION", "w", "n"), HASH_ORDER),
        exact(cmd!("SUNIONSTORE", "x", "w", "n")),
        exact(cmd!("SCARD", "x")),
        exact(cmd!("EXPIRE", "x", "100")),
        exact(cmd!("TTL", "x")),
        exact(cmd!("SINTERSTORE", "x", "n", "n")),
        exact(cmd!("TTL", "x")),
    ]
}

fn arity_steps() -> Vec<Step> {
    vec![
        exact(cmd!("SADD", "n")),
        exact(cmd!("SREM", "n")),
        exact(cmd!("SISMEMBER", "n")),
        exact(cmd!("SMOVE", "n", "m")),
        exact(cmd!("SPOP", "n", "1", "2")),
        exact(cmd!("SRANDMEMBER", "n", "1", "2")),
        exact(cmd!("SINTER")),
        exact(cmd!("SINTERCARD", "1")),
    ]
}

fn every_step() -> Vec<Step> {
    let mut steps = valid_steps();
    steps.extend(arity_steps());
    steps
}

#[test]
fn set_commands_answer_as_redis_does_in_resp2_and_resp3() {
    diff::in_both_protocols(&every_step());
}

#[test]
fn set_commands_inside_exec_answer_as_redis_does() {
    diff::in_both_protocols(&diff::in_transactions(valid_steps()));
}
