//! Differential tests of the list commands: LPUSH, RPUSH, LPUSHX, RPUSHX,
//! LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS,
//! LMOVE, RPOPLPUSH and LMPOP go to a real `redis-server` and to a compute
//! node with normal, edge and wrong arguments and keys of the wrong type,
//! in RESP2 and RESP3, one at a time, pipelined and inside MULTI/EXEC;
//! every reply is compared byte for byte.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(dead_code, reason = "shared test support")]
mod support;

use diff::{Step, exact};

fn valid_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DEL", "l", "l2", "str", "e")),
        exact(cmd!("RPUSH", "l", "a", "b", "c")),
        exact(cmd!("LPUSH", "l", "z", "y")),
        exact(cmd!("LRANGE", "l", "0", "-1")),
        exact(cmd!("LRANGE", "l", "1", "2")),
        exact(cmd!("LRANGE", "l", "-2", "100")),
        exact(cmd!("LRANGE", "l", "3", "1")),
        exact(cmd!("LRANGE", "l", "x", "1")),
        exact(cmd!("LRANGE", "nokey", "0", "-1")),
        exact(cmd!("LLEN", "l")),
        exact(cmd!("LLEN", "nokey")),
        exact(cmd!("LINDEX", "l", "0")),
        exact(cmd!("LINDEX", "l", "-1")),
        exact(cmd!("LINDEX", "l", "99")),
        exact(cmd!("LINDEX", "l", "x")),
        exact(cmd!("LINDEX", "nokey", "x")),
        exact(cmd!("LSET", "l", "1", "Z")),
        exact(cmd!("LSET", "l", "99", "Z")),
        exact(cmd!("LSET", "l", "x", "Z")),
        exact(cmd!("LSET", "nokey", "0", "Z")),
        exact(cmd!("LINSERT", "l", "BEFORE", "a", "A")),
        exact(cmd!("LINSERT", "l", "after", "c", "C")),
        exact(cmd!("LINSERT", "l", "AFTER", "nothere", "C")),
        exact(cmd!("LINSERT", "l", "MIDDLE", "a", "C")),
        exact(cmd!("LINSERT", "nokey", "BEFORE", "a", "C")),
        exact(cmd!("LRANGE", "l", "0", "-1")),
        exact(cmd!("RPUSH", "l", "a", "b", "a", "a")),
        exact(cmd!("LPOS", "l", "a")),
        exact(cmd!("LPOS", "l", "a", "RANK", "2")),
        exact(cmd!("LPOS", "l", "a", "RANK", "-1")),
        exact(cmd!("LPOS", "l", "a", "COUNT", "0")),
        exact(cmd!("LPOS", "l", "a", "COUNT", "2", "RANK", "-1")),
        exact(cmd!("LPOS", "l", "a", "MAXLEN", "3")),
        exact(cmd!("LPOS", "l", "a", "COUNT", "0", "MAXLEN", "5")),
        exact(cmd!("LPOS", "l", "nothere")),
        exact(cmd!("LPOS", "l", "nothere", "COUNT", "1")),
        exact(cmd!("LPOS", "l", "a", "RANK", "0")),
        exact(cmd!("LPOS", "l", "a", "RANK", "x")),
        exact(cmd!("LPOS", "l", "a", "COUNT", "-1")),
        exact(cmd!("LPOS", "l", "a", "MAXLEN", "-1")),
        exact(cmd!("LPOS", "l", "a", "FOO")),
        exact(cmd!("LPOS", "nokey", "a")),
        exact(cmd!("LPOS", "nokey", "a", "COUNT", "1")),
        exact(cmd!("LREM", "l", "1", "a")),
        exact(cmd!("LREM", "l", "-1", "a")),
        exact(cmd!("LREM", "l", "0", "b")),
        exact(cmd!("LREM", "l", "x", "b")),
        exact(cmd!("LREM", "nokey", "0", "b")),
        exact(cmd!("LRANGE", "l", "0", "-1")),
        exact(cmd!("LTRIM", "l", "1", "-2")),
        exact(cmd!("LRANGE", "l", "0", "-1")),
        exact(cmd!("LTRIM", "l", "x", "1")),
        exact(cmd!("LTRIM", "nokey", "0", "1")),
        exact(cmd!("LPUSHX", "nokey", "a")),
        exact(cmd!("RPUSHX", "nokey", "a")),
        exact(cmd!("EXISTS", "nokey")),
        exact(cmd!("LPUSHX", "l", "h1", "h2")),
        exact(cmd!("RPUSHX", "l", "t1")),
        exact(cmd!("LRANGE", "l", "0", "-1")),
        exact(cmd!("LPOP", "l")),
        exact(cmd!("RPOP", "l")),
        exact(cmd!("LPOP", "l", "2")),
        exact(cmd!("RPOP", "l", "2")),
        exact(cmd!("LPOP", "l", "0")),
        exact(cmd!("LPOP", "l", "-1")),
        exact(cmd!("LPOP", "l", "x")),
        exact(cmd!("LPOP", "nokey")),
        exact(cmd!("LPOP", "nokey", "1")),
        exact(cmd!("RPOP", "l", "100")),
        exact(cmd!("EXISTS", "l")),
        exact(cmd!("RPUSH", "l", "1", "2", "3")),
        exact(cmd!("LMOVE", "l", "l2", "LEFT", "RIGHT")),
        exact(cmd!("LMOVE", "l", "l2", "right", "left")),
        exact(cmd!("LMOVE", "l", "l", "LEFT", "RIGHT")),
        exact(cmd!("LMOVE", "l", "l2", "UP", "RIGHT")),
        exact(cmd!("LMOVE", "nokey", "l2", "LEFT", "RIGHT")),
        exact(cmd!("RPOPLPUSH", "l", "l2")),
        exact(cmd!("RPOPLPUSH", "l", "l2")),
        exact(cmd!("LRANGE", "l2", "0", "-1")),
        exact(cmd!("EXISTS", "l")),
        exact(cmd!("SET", "str", "v")),
        exact(cmd!("LPUSH", "str", "a")),
        exact(cmd!("LRANGE", "str", "0", "-1")),
        exact(cmd!("LPOP", "str")),
        exact(cmd!("LMOVE", "l2", "str", "LEFT", "LEFT")),
        exact(cmd!("LMOVE", "str", "l2", "LEFT", "LEFT")),
        exact(cmd!("LRANGE", "l2", "0", "-1")),
        exact(cmd!("LMPOP", "2", "nokey", "l2", "LEFT")),
        exact(cmd!("LMPOP", "2", "nokey", "l2", "RIGHT", "COUNT", "5")),
        exact(cmd!("LMPOP", "1", "nokey", "LEFT")),
        exact(cmd!("LMPOP", "0", "l2", "LEFT")),
        exact(cmd!("LMPOP", "x", "l2", "LEFT")),
        exact(cmd!("LMPOP", "3", "l2", "LEFT")),
        exact(cmd!("LMPOP", "1", "l2", "UP")),
        exact(cmd!("LMPOP", "1", "l2", "LEFT", "COUNT", "0")),
        exact(cmd!("LMPOP", "1", "l2", "LEFT", "COUNT", "1", "COUNT", "1")),
        exact(cmd!("LMPOP", "2", "str", "l2", "LEFT")),
        exact(cmd!("RPUSH", "e", "x")),
        exact(cmd!("EXPIRE", "e", "100")),
        exact(cmd!("RPUSH", "e", "y")),
        exact(cmd!("TTL", "e")),
        exact(cmd!("TYPE", "e")),
        exact(cmd!("OBJECT", "ENCODING", "e")),
        exact(cmd!("GET", "e")),
        exact(cmd!("RENAME", "e", "e2")),
        exact(cmd!("LRANGE", "e2", "0", "-1")),
        exact(cmd!("TTL", "e2")),
    ]
}

fn arity_steps() -> Vec<Step> {
    vec![
        exact(cmd!("LPUSH", "l")),
        exact(cmd!("LPOP", "l", "1", "2")),
        exact(cmd!("LRANGE", "l", "0")),
        exact(cmd!("LINSERT", "l", "BEFORE", "a")),
        exact(cmd!("LMOVE", "l", "l2", "LEFT")),
        exact(cmd!("LMPOP", "1")),
        exact(cmd!("LPOS", "l")),
    ]
}

fn every_step() -> Vec<Step> {
    let mut steps = valid_steps();
    steps.extend(arity_steps());
    steps
}

#[test]
fn list_commands_answer_as_redis_does_in_resp2_and_resp3() {
    diff::in_both_protocols(&every_step());
}

#[test]
fn list_commands_inside_exec_answer_as_redis_does() {
    diff::in_both_protocols(&diff::in_transactions(valid_steps()));
}
