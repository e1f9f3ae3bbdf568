//! Differential tests of the sorted-set commands: ZADD with its options,
//! ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZCOUNT, ZLEXCOUNT, the ZRANGE
//! family and ZRANGESTORE, ZRANK, ZREVRANK, ZREMRANGEBY*, ZPOPMIN,
//! ZPOPMAX, ZMPOP, ZUNION, ZINTER, ZDIFF and their STORE forms,
//! ZINTERCARD, ZRANDMEMBER and ZSCAN go to a real `redis-server` and to a
//! compute node with normal, edge and wrong arguments and keys of the
//! wrong type, in RESP2 and RESP3 (doubles included), one at a time,
//! pipelined and inside MULTI/EXEC; replies compared byte for byte
//! (random picks by shape).

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(dead_code, reason = "shared test support")]
mod support;

use diff::{Step, by_shape, exact};

fn valid_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DEL", "z", "z2", "d", "str", "s", "lex")),
        exact(cmd!("ZADD", "z", "1", "a", "2", "b", "3", "c")),
        exact(cmd!("ZADD", "z", "1.1", "d", "-inf", "m", "+inf", "p")),
        exact(cmd!("ZADD", "z", "NX", "5", "a", "5", "e")),
        exact(cmd!("ZADD", "z", "XX", "5", "a", "5", "f")),
        exact(cmd!("ZADD", "z", "XX", "CH", "6", "a", "3", "c")),
        exact(cmd!("ZADD", "z", "GT", "CH", "1", "a", "9", "b")),
        exact(cmd!("ZADD", "z", "LT", "CH", "1", "a", "9", "b")),
        exact(cmd!("ZADD", "z", "INCR", "2.5", "a")),
        exact(cmd!("ZADD", "z", "NX", "INCR", "2.5", "a")),
        exact(cmd!("ZADD", "z", "GT", "INCR", "-1", "a")),
        exact(cmd!("ZADD", "nokey", "XX", "1", "a")),
        exact(cmd!("ZADD", "nokey", "XX", "INCR", "1", "a")),
        exact(cmd!("EXISTS", "nokey")),
        exact(cmd!("ZADD", "z", "NX", "XX", "1", "a")),
        exact(cmd!("ZADD", "z", "GT", "LT", "1", "a")),
        exact(cmd!("ZADD", "z", "NX", "GT", "1", "a")),
        exact(cmd!("ZADD", "z", "INCR", "1", "a", "2", "b")),
        exact(cmd!("ZADD", "z", "x", "a")),
        exact(cmd!("ZADD", "z", "nan", "a")),
        exact(cmd!("ZADD", "z", "1", "a", "2")),
        exact(cmd!("ZADD", "z", "FOO", "1", "a")),
        exact(cmd!("ZADD", "z", "INCR", "-inf", "p")),
        exact(cmd!("ZRANGE", "z", "0", "-1", "WITHSCORES")),
        exact(cmd!("ZINCRBY", "z", "0.1", "b")),
        exact(cmd!("ZINCRBY", "z", "x", "b")),
        exact(cmd!("ZINCRBY", "z", "1", "new")),
        exact(cmd!("ZSCORE", "z", "d")),
        exact(cmd!("ZSCORE", "z", "nothere")),
        exact(cmd!("ZSCORE", "nokey", "a")),
        exact(cmd!("ZMSCORE", "z", "a", "nothere", "m")),
        exact(cmd!("ZMSCORE", "nokey", "a")),
        exact(cmd!("ZCARD", "z")),
        exact(cmd!("ZCARD", "nokey")),
        exact(cmd!("ZCOUNT", "z", "1", "3")),
        exact(cmd!("ZCOUNT", "z", "(1", "(3")),
        exact(cmd!("ZCOUNT", "z", "-inf", "+inf")),
        exact(cmd!("ZCOUNT", "z", "x", "3")),
        exact(cmd!("ZRANK", "z", "c")),
        exact(cmd!("ZREVRANK", "z", "c")),
        exact(cmd!("ZRANK", "z", "nothere")),
        exact(cmd!("ZRANK", "nokey", "c")),
        exact(cmd!("ZRANGE", "z", "0", "2")),
        exact(cmd!("ZRANGE", "z", "-2", "-1", "WITHSCORES")),
        exact(cmd!("ZRANGE", "z", "0", "-1", "REV", "WITHSCORES")),
        exact(cmd!("ZRANGE", "z", "(1", "3", "BYSCORE")),
        exact(cmd!(
            "ZRANGE",
            "z",
            "3",
            "(1",
            "BYSCORE",
            "REV",
            "WITHSCORES"
        )),
        exact(cmd!(
            "ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"
        )),
        exact(cmd!(
            "ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"
        )),
        exact(cmd!(
            "ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-1"
        )),
        exact(cmd!("ZRANGE", "z", "0", "1", "LIMIT", "1", "2")),
        exact(cmd!("ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES")),
        exact(cmd!("ZRANGE", "z", "x", "1")),
        exact(cmd!("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX")),
        exact(cmd!("ZRANGE", "z", "0", "1", "FOO")),
        exact(cmd!("ZRANGE", "z", "0", "1", "LIMIT", "x", "1", "BYSCORE")),
        exact(cmd!("ZRANGE", "nokey", "0", "-1")),
        exact(cmd!("ZREVRANGE", "z", "0", "2", "WITHSCORES")),
        exact(cmd!("ZREVRANGE", "z", "0", "2", "REV")),
        exact(cmd!("ZRANGEBYSCORE", "z", "1", "3", "WITHSCORES")),
        exact(cmd!(
            "ZRANGEBYSCORE",
            "z",
            "-inf",
            "+inf",
            "LIMIT",
            "0",
            "3"
        )),
        exact(cmd!("ZRANGEBYSCORE", "z", "1", "3", "BYSCORE")),
        exact(cmd!("ZRANGEBYSCORE", "z", "a", "3")),
        exact(cmd!("ZREVRANGEBYSCORE", "z", "3", "1", "WITHSCORES")),
        exact(cmd!(
            "ZREVRANGEBYSCORE",
            "z",
            "+inf",
            "-inf",
            "LIMIT",
            "1",
            "1"
        )),
        exact(cmd!(
            "ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e"
        )),
        exact(cmd!("ZRANGEBYLEX", "lex", "-", "+")),
        exact(cmd!("ZRANGEBYLEX", "lex", "[b", "(d")),
        exact(cmd!("ZRANGEBYLEX", "lex", "(a", "+", "LIMIT", "1", "2")),
        exact(cmd!("ZRANGEBYLEX", "lex", "b", "d")),
        exact(cmd!("ZREVRANGEBYLEX", "lex", "+", "[c")),
        exact(cmd!("ZRANGE", "lex", "[d", "[b", "BYLEX", "REV")),
        exact(cmd!("ZLEXCOUNT", "lex", "[b", "+")),
        exact(cmd!("ZLEXCOUNT", "lex", "b", "+")),
        exact(cmd!("ZRANGESTORE", "d", "z", "0", "2")),
        exact(cmd!("ZRANGE", "d", "0", "-1", "WITHSCORES")),
        exact(cmd!(
            "ZRANGESTORE",
            "d",
            "z",
            "(1",
            "+inf",
            "BYSCORE",
            "LIMIT",
            "0",
            "2"
        )),
        exact(cmd!("ZRANGE", "d", "0", "-1", "WITHSCORES")),
        exact(cmd!("ZRANGESTORE", "d", "z", "5", "1")),
        exact(cmd!("EXISTS", "d")),
        exact(cmd!("ZRANGESTORE", "d", "z", "0", "1", "WITHSCORES")),
        exact(cmd!("ZREMRANGEBYRANK", "lex", "0", "0")),
        exact(cmd!("ZREMRANGEBYLEX", "lex", "[d", "+")),
        exact(cmd!("ZREMRANGEBYSCORE", "lex", "(0", "1")),
        exact(cmd!("ZRANGE", "lex", "0", "-1")),
        exact(cmd!("ZREMRANGEBYSCORE", "lex", "x", "1")),
        exact(cmd!("ZREMRANGEBYRANK", "nokey", "0", "1")),
        exact(cmd!("ZREM", "lex", "b", "c", "nothere")),
        exact(cmd!("EXISTS", "lex")),
        exact(cmd!("ZREM", "nokey", "a")),
        exact(cmd!("ZADD", "z2", "10", "b", "20", "x")),
        exact(cmd!("SADD", "s", "b", "y")),
        exact(cmd!("ZUNION", "2", "z", "z2", "WITHSCORES")),
        exact(cmd!(
            "ZUNION",
            "3",
            "z",
            "z2",
            "s",
            "WEIGHTS",
            "1",
            "2",
            "3",
            "WITHSCORES"
        )),
        exact(cmd!(
            "ZUNION",
            "2",
            "z",
            "z2",
            "AGGREGATE",
            "MAX",
            "WITHSCORES"
        )),
        exact(cmd!("ZINTER", "2", "z", "z2", "WITHSCORES")),
        exact(cmd!(
            "ZINTER",
            "3",
            "z",
            "z2",
            "s",
            "AGGREGATE",
            "MIN",
            "WITHSCORES"
        )),
        exact(cmd!("ZDIFF", "2", "z", "z2", "WITHSCORES")),
        exact(cmd!("ZDIFF", "2", "z", "z2", "WEIGHTS", "1", "2")),
        exact(cmd!("ZINTERCARD", "2", "z", "z2")),
        exact(cmd!("ZINTERCARD", "2", "z", "z2", "LIMIT", "1")),
        exact(cmd!("ZINTERCARD", "0", "z")),
        exact(cmd!("ZUNION", "0", "z")),
        exact(cmd!("ZUNION", "3", "z", "z2")),
        exact(cmd!("ZUNION", "x", "z")),
        exact(cmd!("ZUNION", "2", "z", "z2", "WEIGHTS", "1", "x")),
        exact(cmd!("ZUNION", "2", "z", "z2", "AGGREGATE", "AVG")),
        exact(cmd!("ZUNIONSTORE", "d", "2", "z", "z2", "WITHSCORES")),
        exact(cmd!("ZUNIONSTORE", "d", "2", "z", "z2")),
        exact(cmd!("ZRANGE", "d", "0", "-1", "WITHSCORES")),
        exact(cmd!("ZINTERSTORE", "d", "2", "z", "nokey")),
        exact(cmd!("EXISTS", "d")),
        exact(cmd!("ZDIFFSTORE", "d", "2", "z", "z2")),
        exact(cmd!("ZCARD", "d")),
        exact(cmd!("ZPOPMIN", "d")),
        exact(cmd!("ZPOPMAX", "d", "2")),
        exact(cmd!("ZPOPMIN", "d", "0")),
        exact(cmd!("ZPOPMIN", "d", "-1")),
        exact(cmd!("ZPOPMIN", "d", "1", "2")),
        exact(cmd!("ZPOPMIN", "nokey")),
        exact(cmd!("ZPOPMIN", "nokey", "2")),
        exact(cmd!("ZMPOP", "2", "nokey", "d", "MIN")),
        exact(cmd!("ZMPOP", "2", "nokey", "d", "MAX", "COUNT", "10")),
        exact(cmd!("ZMPOP", "1", "nokey", "MIN")),
        exact(cmd!("ZMPOP", "0", "d", "MIN")),
        exact(cmd!("ZMPOP", "1", "d", "MID")),
        exact(cmd!("ZMPOP", "1", "d", "MIN", "COUNT", "0")),
        exact(cmd!("SET", "str", "v")),
        exact(cmd!("ZADD", "str", "1", "a")),
        exact(cmd!("ZRANGE", "str", "0", "-1")),
        exact(cmd!("ZSCORE", "str", "a")),
        exact(cmd!("ZMSCORE", "str", "a")),
        exact(cmd!("ZUNION", "2", "z", "str")),
        exact(cmd!("ZPOPMIN", "str")),
        exact(cmd!("ZMPOP", "2", "nokey", "str", "MIN")),
        exact(cmd!("ZRANDMEMBER", "nokey")),
        exact(cmd!("ZRANDMEMBER", "nokey", "5")),
        exact(cmd!("ZRANDMEMBER", "z2", "5", "WITHSCORES")),
        exact(cmd!("ZRANDMEMBER", "z2", "0")),
        exact(cmd!("ZRANDMEMBER", "z2", "x")),
        exact(cmd!("ZRANDMEMBER", "z2", "1", "FOO")),
        by_shape(cmd!("ZRANDMEMBER", "z"), "random"),
        by_shape(cmd!("ZRANDMEMBER", "z", "-3", "WITHSCORES"), "random"),
        by_shape(cmd!("ZRANDMEMBER", "z", "2"), "random"),
        exact(cmd!("ZSCAN", "z2", "0")),
        exact(cmd!("ZSCAN", "z2", "0", "MATCH", "x")),
        exact(cmd!("ZSCAN", "nokey", "0")),
        exact(cmd!("OBJECT", "ENCODING", "z2")),
        exact(cmd!("TYPE", "z2")),
        exact(cmd!("EXPIRE", "z2", "100")),
        exact(cmd!("ZADD", "z2", "1", "q")),
        exact(cmd!("TTL", "z2")),
    ]
}

fn arity_steps() -> Vec<Step> {
    vec![
        exact(cmd!("ZADD", "z", "1")),
        exact(cmd!("ZSCORE", "z")),
        exact(cmd!("ZRANGE", "z", "0")),
        exact(cmd!("ZUNION", "1")),
        exact(cmd!("ZINCRBY", "z", "1")),
        exact(cmd!("ZRANK", "z")),
    ]
}

fn every_step() -> Vec<Step> {
    let mut steps = valid_steps();
    steps.extend(arity_steps());
    steps
}

#[test]
fn sorted_set_commands_answer_as_redis_does_in_resp2_and_resp3() {
    diff::in_both_protocols(&every_step());
}

#[test]
fn sorted_set_commands_inside_exec_answer_as_redis_does() {
    diff::in_both_protocols(&diff::in_transactions(valid_steps()));
}
