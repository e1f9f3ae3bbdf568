//! Differential tests of the string and counter commands: SET with NX, XX
//! and GET, SETNX, GETSET, GETDEL, MSETNX, STRLEN, APPEND, GETRANGE,
//! SUBSTR, SETRANGE, LCS, INCR, DECR, INCRBY, DECRBY and INCRBYFLOAT go to
//! a real `redis-server` and to a compute node, with normal, empty,
//! binary, large, negative and boundary arguments and wrong arities, in
//! RESP2 and RESP3, one at a time, pipelined and inside MULTI/EXEC; every
//! reply is compared byte for byte.

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

use diff::{Pair, Step, exact, hello};
use support::value_for;

/// SET's options and the commands that set, get and delete.
fn set_steps() -> Vec<Step> {
    let binary = b"a\r\nb\x00c\xff".to_vec();
    vec![
        exact(cmd!("DEL", "s", "s2", "s3", "m1", "m2", "m3")),
        exact(cmd!("SET", "s", "v", "NX")),
        exact(cmd!("SET", "s", "w", "NX")),
        exact(cmd!("GET", "s")),
        exact(cmd!("SET", "s", "x", "XX")),
        exact(cmd!("SET", "s2", "x", "XX")),
        exact(cmd!("EXISTS", "s2")),
        exact(cmd!("SET", "s", "y", "GET")),
        exact(cmd!("SET", "s2", "y", "GET")),
        exact(cmd!("SET", "s2", "z", "nx", "get")),
        exact(cmd!("SET", "s3", "z", "GET", "NX")),
        exact(cmd!("SET", "s3", "q", "XX", "GET")),
        exact(cmd!("SET", "nokey", "q", "XX", "GET")),
        exact(cmd!("SET", "s", "r", "GET", "GET", "xx", "XX")),
        exact(cmd!("SET", "s", "r", "NX", "NX")),
        exact(cmd!("SET", "s", "r", "NX", "XX")),
        exact(cmd!("SET", "s", "r", "XX", "NX")),
        exact(cmd!("SET", "s", "r", "NX", "XX", "GET")),
        exact(cmd!("SET", "s", "r", "FOO")),
        exact(cmd!("SET", "s", "r", "GET", "FOO")),
        exact(cmd!("SET", "s", "r", "EX")),
        exact(cmd!("SET", "s", "r", "PX")),
        exact(cmd!("SET", "s", "r", "KEEPTTL", "EX", "10")),
        exact(cmd!("SET", "s", "r", "EX", "10", "PX", "10")),
        exact(cmd!("SET", "s", "r", "PERSIST")),
        exact(cmd!("SET", "s", "r", "NXX")),
        exact(cmd!("SET", "s", "r", "")),
        exact(cmd!("SET", binary, binary, "GET")),
        exact(cmd!("SET", binary, "", "GET")),
        exact(cmd!("GET", binary)),
        exact(cmd!("SETNX", "m1", "1")),
        exact(cmd!("SETNX", "m1", "2")),
        exact(cmd!("GET", "m1")),
        exact(cmd!("SETNX", "m1")),
        exact(cmd!("SETNX", "m1", "2", "3")),
        exact(cmd!("GETSET", "m1", "3")),
        exact(cmd!("GETSET", "m2", "4")),
        exact(cmd!("GETSET", "m2", "")),
        exact(cmd!("GETSET", "m2", "5", "6")),
        exact(cmd!("GETSET", "m2")),
        exact(cmd!("GETDEL", "m2")),
        exact(cmd!("GETDEL", "m2")),
        exact(cmd!("EXISTS", "m2")),
        exact(cmd!("GETDEL")),
        exact(cmd!("GETDEL", "m1", "m2")),
        exact(cmd!("MSETNX", "m2", "a", "m3", "b")),
        exact(cmd!("MGET", "m2", "m3")),
        exact(cmd!("MSETNX", "m3", "c", "m4", "d")),
        exact(cmd!("EXISTS", "m4")),
        exact(cmd!("MSETNX", "m5", "e", "m5", "f")),
        exact(cmd!("GET", "m5")),
        exact(cmd!("MSETNX", "m6")),
        exact(cmd!("MSETNX", "m6", "a", "m7")),
        exact(cmd!("MSETNX")),
        exact(cmd!("MSETNX", "m8", "x", "m3", "y", "m9", "z")),
        exact(cmd!("MGET", "m8", "m3", "m9")),
        exact(cmd!("SET", "s")),
        exact(cmd!("SET")),
        exact(cmd!("set", "s", "lower", "xx", "get")),
        exact(cmd!("SeTnX", "s", "mixed")),
        exact(cmd!("gEtSeT", "s", "mixed")),
        exact(cmd!("SET", "s", "v", "GET", "NX", "GET")),
        exact(cmd!("SET", "s", "v", "NX", "GET", "XX")),
        exact(cmd!("SET", "s", "v", "GET", "EX", "0")),
        exact(cmd!("SET", "s", "v", "GET", "EX")),
        exact(cmd!("SET", "s", "v", "EXAT")),
        exact(cmd!("SET", "s", "v", "PXAT")),
        exact(cmd!("GETDEL", "s")),
        exact(cmd!("SET", "s", "v", "XX", "GET")),
        exact(cmd!("EXISTS", "s")),
        exact(cmd!("DEL", "m2", "m3", "m4", "m5", "m8", "m9")),
    ]
}

/// STRLEN, APPEND, GETRANGE, SUBSTR, SETRANGE.
fn range_steps() -> Vec<Step> {
    let big = value_for(b"r-big", 1, 300_000);
    let binary = b"a\r\nb\x00c\xff".to_vec();
    vec![
        exact(cmd!("DEL", "r", "r2", "r3", "r-big")),
        exact(cmd!("STRLEN", "r")),
        exact(cmd!("APPEND", "r", "Hello")),
        exact(cmd!("APPEND", "r", " World")),
        exact(cmd!("APPEND", "r", "")),
        exact(cmd!("APPEND", "r2", "")),
        exact(cmd!("EXISTS", "r2")),
        exact(cmd!("STRLEN", "r")),
        exact(cmd!("STRLEN", "r2")),
        exact(cmd!("GET", "r")),
        exact(cmd!("APPEND", "r", binary)),
        exact(cmd!("GET", "r")),
        exact(cmd!("SET", "r-big", big)),
        exact(cmd!("APPEND", "r-big", big)),
        exact(cmd!("STRLEN", "r-big")),
        exact(cmd!("GETRANGE", "r-big", "299990", "300010")),
        exact(cmd!("GETRANGE", "r", "0", "3")),
        exact(cmd!("GETRANGE", "r", "-3", "-1")),
        exact(cmd!("GETRANGE", "r", "0", "-1")),
        exact(cmd!("GETRANGE", "r", "10", "100")),
        exact(cmd!("GETRANGE", "r", "-1", "-2")),
        exact(cmd!("GETRANGE", "r", "5", "2")),
        exact(cmd!("GETRANGE", "r", "-100", "0")),
        exact(cmd!("GETRANGE", "r", "-100", "-100")),
        exact(cmd!("GETRANGE", "r", "100", "200")),
        exact(cmd!("GETRANGE", "r", "0", "0")),
        exact(cmd!(
            "GETRANGE",
            "r",
            "-9223372036854775808",
            "9223372036854775807"
        )),
        exact(cmd!("GETRANGE", "r", "9223372036854775808", "1")),
        exact(cmd!("GETRANGE", "r", "1", "x")),
        exact(cmd!("GETRANGE", "r", " 1", "2")),
        exact(cmd!("GETRANGE", "r", "+1", "2")),
        exact(cmd!("GETRANGE", "r", "01", "2")),
        exact(cmd!("GETRANGE", "nosuch", "0", "-1")),
        exact(cmd!("GETRANGE", "nosuch", "x", "-1")),
        exact(cmd!("GETRANGE", "r", "0")),
        exact(cmd!("SUBSTR", "r", "1", "3")),
        exact(cmd!("SUBSTR", "r", "1")),
        exact(cmd!("SETRANGE", "r", "6", "Redis")),
        exact(cmd!("GET", "r")),
        exact(cmd!("SETRANGE", "r3", "5", "x")),
        exact(cmd!("GET", "r3")),
        exact(cmd!("SETRANGE", "r3", "0", "")),
        exact(cmd!("SETRANGE", "r4", "10", "")),
        exact(cmd!("EXISTS", "r4")),
        exact(cmd!("SETRANGE", "r3", "100", "")),
        exact(cmd!("STRLEN", "r3")),
        exact(cmd!("SETRANGE", "r3", "2", binary)),
        exact(cmd!("GET", "r3")),
        exact(cmd!("SETRANGE", "r3", "-1", "x")),
        exact(cmd!("SETRANGE", "r3", "x", "x")),
        exact(cmd!("SETRANGE", "r3", "9223372036854775807", "x")),
        exact(cmd!("SETRANGE", "r3", "9223372036854775808", "x")),
        // Past both servers' limits (Redis's 512 MiB, the node's 16 MiB).
        exact(cmd!("SETRANGE", "r3", "536870912", "x")),
        exact(cmd!("SETRANGE", "r5", "536870911", "xy")),
        exact(cmd!("EXISTS", "r5")),
        exact(cmd!("SETRANGE", "r3", "0")),
        exact(cmd!("STRLEN")),
        exact(cmd!("STRLEN", "a", "b")),
        exact(cmd!("APPEND", "r")),
        exact(cmd!("APPEND", "r", "a", "b")),
        exact(cmd!("GETRANGE", "r", "0", "1", "2")),
        exact(cmd!("SETRANGE", "r", "0", "a", "b")),
        exact(cmd!("SUBSTR", "r", "-5", "-1")),
        exact(cmd!("SUBSTR", "r", "x", "1")),
        exact(cmd!("getrange", "r", "-1", "-1")),
        exact(cmd!("SET", "r6", "")),
        exact(cmd!("STRLEN", "r6")),
        exact(cmd!("GETRANGE", "r6", "0", "-1")),
        exact(cmd!("GETRANGE", "r6", "-1", "0")),
        exact(cmd!("SETRANGE", "r6", "0", "")),
        exact(cmd!("SETRANGE", "r6", "3", "abc")),
        exact(cmd!("GET", "r6")),
        exact(cmd!("SETRANGE", "r6", "1", "XY")),
        exact(cmd!("GET", "r6")),
        exact(cmd!("SETRANGE", "r6", "6", "!")),
        exact(cmd!("GET", "r6")),
        exact(cmd!("SETRANGE", "r6", "0", "-")),
        exact(cmd!("SETRANGE", "r6", "01", "x")),
        exact(cmd!("SETRANGE", "r6", "1.5", "x")),
        exact(cmd!("SETRANGE", "r6", "-0", "x")),
        exact(cmd!("SETRANGE", "r6", "-9223372036854775808", "")),
        exact(cmd!("SET", "r7", "10")),
        exact(cmd!("APPEND", "r7", "5")),
        exact(cmd!("INCR", "r7")),
        exact(cmd!("SETRANGE", "r7", "0", "9")),
        exact(cmd!("INCR", "r7")),
        exact(cmd!("APPEND", "r7", " ")),
        exact(cmd!("INCR", "r7")),
        exact(cmd!("SETRANGE", "r8", "2", "1")),
        exact(cmd!("INCR", "r8")),
        exact(cmd!("INCRBYFLOAT", "r8", "1")),
        exact(cmd!("DEL", "r", "r2", "r3", "r-big", "r6", "r7", "r8")),
    ]
}

/// LCS with every option.
fn lcs_steps() -> Vec<Step> {
    let long_a = value_for(b"lcs-a", 1, 1500);
    let long_b = value_for(b"lcs-b", 1, 1500);
    vec![
        exact(cmd!("MSET", "l1", "ohmytext", "l2", "mynewtext")),
        exact(cmd!("LCS", "l1", "l2")),
        exact(cmd!("LCS", "l1", "l2", "LEN")),
        exact(cmd!("LCS", "l1", "l2", "IDX")),
        exact(cmd!("LCS", "l1", "l2", "idx", "WITHMATCHLEN")),
        exact(cmd!("LCS", "l1", "l2", "IDX", "MINMATCHLEN", "4")),
        exact(cmd!(
            "LCS",
            "l1",
            "l2",
            "IDX",
            "MINMATCHLEN",
            "2",
            "WITHMATCHLEN"
        )),
        exact(cmd!("LCS", "l1", "l2", "IDX", "MINMATCHLEN", "-5")),
        exact(cmd!("LCS", "l1", "l2", "MINMATCHLEN", "x")),
        exact(cmd!("LCS", "l1", "l2", "MINMATCHLEN")),
        exact(cmd!("LCS", "l1", "l2", "LEN", "IDX")),
        exact(cmd!("LCS", "l1", "l2", "FOO")),
        exact(cmd!("LCS", "l1", "nosuch")),
        exact(cmd!("LCS", "nosuch", "nosuch", "IDX")),
        exact(cmd!("LCS", "l1", "l1", "IDX", "WITHMATCHLEN")),
        exact(cmd!("MSET", "l3", "aaaabbbbaaaa", "l4", "abababab")),
        exact(cmd!("LCS", "l3", "l4", "IDX", "WITHMATCHLEN")),
        exact(cmd!("MSET", "l5", b"a\r\n\x00\xff", "l6", b"\x00a\xff")),
        exact(cmd!("LCS", "l5", "l6")),
        exact(cmd!("LCS", "l5", "l6", "IDX")),
        exact(cmd!("MSET", "l7", long_a, "l8", long_b)),
        exact(cmd!("LCS", "l7", "l8", "LEN")),
        exact(cmd!("LCS", "l7", "l8", "IDX", "MINMATCHLEN", "3")),
        exact(cmd!("LCS", "l1", "l2", "LEN", "WITHMATCHLEN")),
        exact(cmd!("LCS", "l1", "l2", "LEN", "MINMATCHLEN", "100")),
        exact(cmd!("LCS", "l1", "l2", "WITHMATCHLEN")),
        exact(cmd!(
            "LCS",
            "l1",
            "l2",
            "IDX",
            "MINMATCHLEN",
            "9223372036854775807"
        )),
        exact(cmd!(
            "LCS",
            "l1",
            "l2",
            "IDX",
            "MINMATCHLEN",
            "9223372036854775808"
        )),
        exact(cmd!(
            "LCS",
            "l1",
            "l2",
            "IDX",
            "MINMATCHLEN",
            "1",
            "MINMATCHLEN",
            "3"
        )),
        exact(cmd!(
            "LCS",
            "l1",
            "l2",
            "IDX",
            "IDX",
            "withmatchlen",
            "WITHMATCHLEN"
        )),
        exact(cmd!(
            "LCS",
            "l1",
            "l2",
            "IDX",
            "MINMATCHLEN",
            "0",
            "WITHMATCHLEN"
        )),
        exact(cmd!("LCS", "l1", "l2", "MINMATCHLEN", "2")),
        exact(cmd!("LCS", "l1", "l2", "IDX", "LEN")),
        exact(cmd!("LCS", "l2", "l1", "IDX", "WITHMATCHLEN")),
        exact(cmd!("LCS", "l1", "nosuch", "IDX", "WITHMATCHLEN")),
        exact(cmd!("LCS", "nosuch", "l1", "LEN")),
        exact(cmd!("MSET", "l9", "abc", "l10", "xyz")),
        exact(cmd!("LCS", "l9", "l10")),
        exact(cmd!("LCS", "l9", "l10", "IDX")),
        exact(cmd!("MSET", "l11", "abcabc", "l12", "cbacba")),
        exact(cmd!("LCS", "l11", "l12", "IDX", "WITHMATCHLEN")),
        exact(cmd!("LCS", "l12", "l11", "IDX", "WITHMATCHLEN")),
        exact(cmd!("LCS", "l1")),
        exact(cmd!("LCS")),
        exact(cmd!(
            "DEL", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9", "l10", "l11", "l12"
        )),
    ]
}

/// The integer counters.
fn counter_steps() -> Vec<Step> {
    let mut steps = vec![exact(cmd!("DEL", "c", "c2"))];
    steps.extend([
        exact(cmd!("INCR", "c")),
        exact(cmd!("INCR", "c")),
        exact(cmd!("DECR", "c")),
        exact(cmd!("DECR", "c2")),
        exact(cmd!("INCRBY", "c", "100")),
        exact(cmd!("INCRBY", "c", "-1000")),
        exact(cmd!("DECRBY", "c", "-5")),
        exact(cmd!("DECRBY", "c", "5")),
        exact(cmd!("GET", "c")),
        exact(cmd!("SET", "c", "9223372036854775806")),
        exact(cmd!("INCR", "c")),
        exact(cmd!("INCR", "c")),
        exact(cmd!("GET", "c")),
        exact(cmd!("INCRBY", "c", "-9223372036854775807")),
        exact(cmd!("SET", "c", "-9223372036854775807")),
        exact(cmd!("DECR", "c")),
        exact(cmd!("DECR", "c")),
        exact(cmd!("INCRBY", "c", "9223372036854775807")),
        exact(cmd!("DECRBY", "c", "-9223372036854775808")),
        exact(cmd!("DECRBY", "c", "9223372036854775807")),
        exact(cmd!("INCRBY", "c", "9223372036854775808")),
        exact(cmd!("INCRBY", "c", "-9223372036854775809")),
        exact(cmd!("SET", "c", "0")),
        exact(cmd!("INCRBY", "c", "-9223372036854775808")),
        exact(cmd!("DECRBY", "c", "9223372036854775807")),
        exact(cmd!("SET", "c", "0")),
    ]);
    for bad in [
        "",
        " 1",
        "1 ",
        "0x10",
        "+1",
        "-0",
        "00",
        "01",
        "1.0",
        "1e3",
        "inf",
        "nan",
        "abc",
        "\x001",
        "-",
        "9223372036854775808",
        "-9223372036854775809",
    ] {
        steps.push(exact(cmd!("SET", "c2", bad)));
        steps.push(exact(cmd!("INCR", "c2")));
        steps.push(exact(cmd!("DECRBY", "c2", "1")));
        steps.push(exact(cmd!("INCRBY", "c", bad)));
        steps.push(exact(cmd!("DECRBY", "c", bad)));
        steps.push(exact(cmd!("GET", "c2")));
    }
    for good in [
        "0",
        "-1",
        "1",
        "9223372036854775807",
        "-9223372036854775808",
    ] {
        steps.push(exact(cmd!("SET", "c2", good)));
        steps.push(exact(cmd!("INCRBY", "c2", "0")));
        steps.push(exact(cmd!("INCRBY", "c", good)));
        steps.push(exact(cmd!("SET", "c", "0")));
    }
    steps.extend([
        exact(cmd!("INCR")),
        exact(cmd!("INCR", "a", "b")),
        exact(cmd!("DECR")),
        exact(cmd!("INCRBY", "a")),
        exact(cmd!("INCRBY", "a", "1", "2")),
        exact(cmd!("DECRBY", "a")),
        exact(cmd!("DEL", "c", "c2")),
    ]);
    steps
}

/// INCRBYFLOAT: parsing, printing, overflow.
fn float_steps() -> Vec<Step> {
    let mut steps = vec![
        exact(cmd!("DEL", "f", "f2")),
        exact(cmd!("INCRBYFLOAT", "f", "10.5")),
        exact(cmd!("INCRBYFLOAT", "f", "0.1")),
        exact(cmd!("INCRBYFLOAT", "f", "-5")),
        exact(cmd!("INCRBYFLOAT", "f", "5.0e3")),
        exact(cmd!("INCRBYFLOAT", "f", "-5005.6")),
        exact(cmd!("GET", "f")),
        exact(cmd!("INCRBYFLOAT", "f", "1e-17")),
        exact(cmd!("INCRBYFLOAT", "f", "1e-30")),
        exact(cmd!("INCRBYFLOAT", "f", "3.0000000000000000001")),
        exact(cmd!("SET", "f", "1e308")),
        exact(cmd!("INCRBYFLOAT", "f", "1e308")),
        exact(cmd!("INCRBYFLOAT", "f", "1e4000")),
        exact(cmd!("INCRBYFLOAT", "f", "1e4932")),
        exact(cmd!("INCRBYFLOAT", "f", "-1e4932")),
        exact(cmd!("SET", "f", "0")),
        exact(cmd!("INCRBYFLOAT", "f", "-0")),
        exact(cmd!("INCRBYFLOAT", "f", "-0.000000000000000001")),
        exact(cmd!("INCRBYFLOAT", "f", "0.1")),
        exact(cmd!("INCRBYFLOAT", "f", "0.2")),
        exact(cmd!("INCRBYFLOAT", "f", "1.5e-5")),
        exact(cmd!("INCRBYFLOAT", "f", "123456789012345678901234567890")),
        exact(cmd!("SET", "f", "3")),
        exact(cmd!("INCRBYFLOAT", "f", "0.1")),
        exact(cmd!("SET", "f", "9223372036854775807")),
        exact(cmd!("INCRBYFLOAT", "f", "1")),
        exact(cmd!("INCR", "f")),
        exact(cmd!("SET", "f", "5.0e3")),
        exact(cmd!("INCRBYFLOAT", "f", "0")),
        exact(cmd!("SET", "f", "1e20")),
        exact(cmd!("INCRBYFLOAT", "f", "1")),
        exact(cmd!("SET", "f", "-1.5")),
        exact(cmd!("INCRBYFLOAT", "f", "1.5")),
        exact(cmd!("INCRBYFLOAT", "f", "-1e-3")),
        exact(cmd!("INCRBYFLOAT", "f", "1E3")),
        exact(cmd!("INCRBYFLOAT", "f", "1e+3")),
        exact(cmd!("INCRBYFLOAT", "f", "0.5e-2")),
        exact(cmd!("INCRBYFLOAT", "f", "00010.50")),
        exact(cmd!("INCRBYFLOAT", "f", "+.5")),
        exact(cmd!("INCRBYFLOAT", "f", "1e-4940")),
        exact(cmd!("SET", "f", "1.7976931348623157e308")),
        exact(cmd!("INCRBYFLOAT", "f", "1.7976931348623157e308")),
        exact(cmd!("SET", "f", "1.18973149535723176502e+4932")),
        exact(cmd!("INCRBYFLOAT", "f", "1.18973149535723176502e+4932")),
        exact(cmd!("SET", "f", "10")),
        exact(cmd!("incrbyfloat", "f", "2.5")),
        exact(cmd!("INCR", "f")),
        exact(cmd!("INCRBY", "f", "1")),
        exact(cmd!("GET", "f")),
    ];
    // Texts at and just under Redis's longest readable float (5 KiB).
    for len in [5119, 5120] {
        let mut long = b"0.".to_vec();
        long.resize(len - 1, b'0');
        long.push(b'1');
        steps.push(exact(cmd!("SET", "f", "1")));
        steps.push(exact(cmd!("INCRBYFLOAT", "f", long)));
        steps.push(exact(cmd!("SET", "f2", long)));
        steps.push(exact(cmd!("INCRBYFLOAT", "f2", "1")));
    }
    steps.push(exact(cmd!("SET", "f", "1")));
    for value in [
        "", " 1", "1 ", "0x10", "0X1p4", "+1", "-0", "inf", "-inf", "infinity", "nan", "-nan",
        "1e", "1e+", ".5", "5.", ".", "abc", "1\x00", "1e308", "1e-4950", "1e-5000", "1e5000",
        "0x", "1,5", "١",
    ] {
        steps.push(exact(cmd!("SET", "f2", value)));
        steps.push(exact(cmd!("INCRBYFLOAT", "f2", "1")));
        steps.push(exact(cmd!("INCRBYFLOAT", "f", value)));
        steps.push(exact(cmd!("SET", "f", "1")));
    }
    steps.extend([
        exact(cmd!("INCRBYFLOAT", "f")),
        exact(cmd!("INCRBYFLOAT", "f", "1", "2")),
        exact(cmd!("INCRBYFLOAT")),
        exact(cmd!("DEL", "f", "f2")),
    ]);
    steps
}

/// What COMMAND INFO says of the new commands.
fn command_info_steps() -> Vec<Step> {
    let names = [
        "setnx",
        "getset",
        "getdel",
        "msetnx",
        "strlen",
        "append",
        "getrange",
        "substr",
        "setrange",
        "lcs",
        "incr",
        "decr",
        "incrby",
        "decrby",
        "incrbyfloat",
    ];
    let mut steps: Vec<Step> = names
        .iter()
        .map(|name| exact(&[b"COMMAND", b"INFO", name.as_bytes()]))
        .collect();
    steps.push(exact(cmd!("COMMAND", "INFO", "INCR", "lcs", "MSetNX")));
    steps
}

fn every_step() -> Vec<Step> {
    let mut steps = command_info_steps();
    steps.extend(set_steps());
    steps.extend(range_steps());
    steps.extend(lcs_steps());
    steps.extend(counter_steps());
    steps.extend(float_steps());
    steps
}

#[test]
fn string_commands_answer_as_redis_does_in_resp2() {
    let mut pair = Pair::start();
    pair.both_ways(&every_step());
}

#[test]
fn string_commands_answer_as_redis_does_in_resp3() {
    let mut pair = Pair::start();
    pair.one_by_one(&[hello("3")]);
    pair.both_ways(&every_step());
}

/// Redis's arity of each command these tests send (negative: at least
/// that many arguments, the name counted).
const ARITIES: &[(&str, i64)] = &[
    ("get", 2),
    ("set", -3),
    ("mget", -2),
    ("mset", -3),
    ("del", -2),
    ("exists", -2),
    ("setnx", 3),
    ("getset", 3),
    ("getdel", 2),
    ("msetnx", -3),
    ("strlen", 2),
    ("append", 3),
    ("getrange", 4),
    ("substr", 4),
    ("setrange", 4),
    ("lcs", -3),
    ("incr", 2),
    ("decr", 2),
    ("incrby", 3),
    ("decrby", 3),
    ("incrbyfloat", 3),
    ("command", -2),
];

/// True if Redis queues `step` inside MULTI: its command has an arity
/// Redis accepts (a wrong one would abort the whole EXEC).
fn queues(step: &Step) -> bool {
    let name = String::from_utf8_lossy(&step.args[0]).to_ascii_lowercase();
    let (_, arity) = ARITIES
        .iter()
        .find(|(known, _)| *known == name)
        .unwrap_or_else(|| panic!("no arity listed for {name}"));
    let argc = step.args.len() as i64;
    if *arity < 0 {
        argc >= -arity
    } else {
        argc == *arity
    }
}

/// Every step of `steps` that has a valid arity and is compared byte for
/// byte queued in one MULTI (queuing answers compared too), then EXEC's
/// array compared whole; the other steps are sent outside MULTI.
fn in_transactions(steps: &[Step]) -> Vec<Step> {
    let (queued, refused): (Vec<&Step>, Vec<&Step>) = steps
        .iter()
        .partition(|s| matches!(s.compare, diff::Compare::Exact) && queues(s));
    assert!(!refused.is_empty() && queued.len() > 100);
    let mut out: Vec<Step> = refused.into_iter().cloned().collect();
    for chunk in queued.chunks(16) {
        out.push(exact(cmd!("MULTI")));
        out.extend(chunk.iter().map(|&step| step.clone()));
        out.push(exact(cmd!("EXEC")));
    }
    // And one transaction aborted by a wrong arity, as Redis aborts it.
    out.extend([
        exact(cmd!("MULTI")),
        exact(cmd!("INCR", "aborted")),
        exact(cmd!("INCRBY", "aborted")),
        exact(cmd!("EXEC")),
        exact(cmd!("EXISTS", "aborted")),
    ]);
    out
}

#[test]
fn string_commands_inside_exec_answer_as_redis_does() {
    let mut pair = Pair::start();
    let steps = in_transactions(&every_step());
    pair.both_ways(&steps);
    pair.one_by_one(&[hello("3")]);
    pair.both_ways(&steps);
}

#[test]
fn a_transaction_sees_its_own_read_modify_writes() {
    let mut pair = Pair::start();
    let steps = [
        exact(cmd!("SET", "t", "5")),
        exact(cmd!("MULTI")),
        exact(cmd!("INCR", "t")),
        exact(cmd!("INCRBY", "t", "10")),
        exact(cmd!("APPEND", "t", "0")),
        exact(cmd!("INCRBYFLOAT", "t", "0.5")),
        exact(cmd!("SETRANGE", "t", "0", "9")),
        exact(cmd!("GETSET", "t", "x")),
        exact(cmd!("SET", "t", "y", "GET")),
        exact(cmd!("SETNX", "t", "z")),
        exact(cmd!("GETDEL", "t")),
        exact(cmd!("SETNX", "t", "z")),
        exact(cmd!("MSETNX", "t", "1", "u", "2")),
        exact(cmd!("MSETNX", "u", "1", "v", "2")),
        exact(cmd!("LCS", "u", "v")),
        exact(cmd!("STRLEN", "t")),
        exact(cmd!("GETRANGE", "t", "0", "-1")),
        exact(cmd!("EXEC")),
        exact(cmd!("MGET", "t", "u", "v")),
        exact(cmd!("DEL", "t", "u", "v")),
    ];
    pair.both_ways(&steps);
}

/// Clients that increment at once, each on its own TCP connection.
const CLIENTS: usize = 16;
/// Increments each client sends.
const INCREMENTS: usize = 10_000;
/// Increments a client pipelines in one write.
const INCREMENT_BATCH: usize = 100;

fn redis_connection(addr: std::net::SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}/"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

/// `CLIENTS` clients each send `INCREMENTS` INCRs of one key to `addr`;
/// returns every reply, client by client.
fn increment_together(addr: std::net::SocketAddr, key: &str) -> Vec<Vec<i64>> {
    let start = std::sync::Barrier::new(CLIENTS);
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let start = &start;
                scope.spawn(move || {
                    let mut con = redis_connection(addr);
                    start.wait();
                    let mut replies = Vec::with_capacity(INCREMENTS);
                    for _ in 0..INCREMENTS / INCREMENT_BATCH {
                        let mut pipe = redis::pipe();
                        for _ in 0..INCREMENT_BATCH {
                            pipe.cmd("INCR").arg(key);
                        }
                        let batch: Vec<i64> = pipe.query(&mut con).expect("INCR pipeline");
                        replies.extend(batch);
                    }
                    replies
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|client| client.join().expect("client thread"))
            .collect()
    })
}

/// Checks what `increment_together` got from one server: every count from
/// 1 to the total answered exactly once, each client's rising, and the key
/// left at the total.
fn check_increments(server: &str, addr: std::net::SocketAddr, key: &str, replies: &[Vec<i64>]) {
    let total = (CLIENTS * INCREMENTS) as i64;
    for (client, got) in replies.iter().enumerate() {
        assert_eq!(got.len(), INCREMENTS, "{server}: client {client}'s replies");
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{server}: client {client}'s counts do not rise"
        );
    }
    let mut all: Vec<i64> = replies.iter().flatten().copied().collect();
    all.sort_unstable();
    let expected: Vec<i64> = (1..=total).collect();
    assert!(
        all == expected,
        "{server}: the {} replies are not each count from 1 to {total} once",
        all.len()
    );
    let mut con = redis_connection(addr);
    let left: i64 = redis::cmd("GET").arg(key).query(&mut con).expect("GET");
    assert_eq!(left, total, "{server}: the key after every increment");
}

#[test]
fn sixteen_clients_incrementing_one_key_lose_no_increment() {
    let redis = diff::RedisServer::start(None);
    let splitkv = diff::ComputeNode::start(None);
    for (server, addr) in [("Redis", redis.addr), ("SplitKV", splitkv.addr)] {
        let replies = increment_together(addr, "counter");
        check_increments(server, addr, "counter", &replies);
    }
}

/// Keys the SETNX and MSETNX race is run over.
const RACED_KEYS: usize = 200;

#[test]
fn of_clients_racing_setnx_and_msetnx_on_a_key_exactly_one_wins() {
    let splitkv = diff::ComputeNode::start(None);
    let addr = splitkv.addr;
    let start = std::sync::Barrier::new(CLIENTS);
    // Per client: which SETNX keys it won, and which MSETNX pairs.
    let won: Vec<(Vec<usize>, Vec<usize>)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let start = &start;
                scope.spawn(move || {
                    let mut con = redis_connection(addr);
                    start.wait();
                    let mut setnx_won = Vec::new();
                    let mut msetnx_won = Vec::new();
                    for i in 0..RACED_KEYS {
                        let set: i64 = redis::cmd("SETNX")
                            .arg(format!("race:{i}"))
                            .arg(client)
                            .query(&mut con)
                            .expect("SETNX");
                        if set == 1 {
                            setnx_won.push(i);
                        }
                        // Each pair overlaps the next: pair i holds keys i
                        // and i + 1, so at most every other pair can be set.
                        let set: i64 = redis::cmd("MSETNX")
                            .arg(format!("pair:{i}"))
                            .arg(client)
                            .arg(format!("pair:{}", i + 1))
                            .arg(client)
                            .query(&mut con)
                            .expect("MSETNX");
                        if set == 1 {
                            msetnx_won.push(i);
                        }
                    }
                    (setnx_won, msetnx_won)
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|client| client.join().expect("client thread"))
            .collect()
    });
    let mut con = redis_connection(addr);
    let mut setnx_winner = vec![None; RACED_KEYS];
    for (client, (setnx_won, _)) in won.iter().enumerate() {
        for &i in setnx_won {
            assert!(
                setnx_winner[i].replace(client).is_none(),
                "race:{i} was set by two clients"
            );
        }
    }
    for (i, winner) in setnx_winner.iter().enumerate() {
        let winner = winner.unwrap_or_else(|| panic!("no client set race:{i}"));
        let value: usize = redis::cmd("GET")
            .arg(format!("race:{i}"))
            .query(&mut con)
            .expect("GET");
        assert_eq!(value, winner, "race:{i} holds its winner's value");
    }
    let mut pair_winner: Vec<Option<usize>> = vec![None; RACED_KEYS];
    for (client, (_, msetnx_won)) in won.iter().enumerate() {
        for &i in msetnx_won {
            assert!(
                pair_winner[i].replace(client).is_none(),
                "pair {i} was set by two clients"
            );
        }
    }
    for i in 0..RACED_KEYS {
        if let Some(winner) = pair_winner[i] {
            assert!(
                i == 0 || pair_winner[i - 1].is_none(),
                "pairs {} and {i} share a key and were both set",
                i - 1
            );
            for key in [i, i + 1] {
                let value: usize = redis::cmd("GET")
                    .arg(format!("pair:{key}"))
                    .query(&mut con)
                    .expect("GET");
                assert_eq!(value, winner, "pair:{key} holds pair {i}'s winner");
            }
        }
    }
    // Pair 0 is tried first by every client, with nothing set yet.
    assert!(pair_winner[0].is_some(), "no client set pair 0");
}

/// APPENDs and INCRBYFLOATs each client sends in the race below.
const MIXED_ROUNDS: usize = 500;

#[test]
fn clients_racing_append_incrbyfloat_and_decrby_lose_no_update() {
    let splitkv = diff::ComputeNode::start(None);
    let addr = splitkv.addr;
    let start = std::sync::Barrier::new(CLIENTS);
    std::thread::scope(|scope| {
        for client in 0..CLIENTS {
            let start = &start;
            scope.spawn(move || {
                let mut con = redis_connection(addr);
                // One letter a client, so that the appended text can be
                // counted client by client.
                let letter = [b'a' + client as u8];
                start.wait();
                for _ in 0..MIXED_ROUNDS {
                    let mut pipe = redis::pipe();
                    pipe.cmd("APPEND").arg("appended").arg(&letter[..]);
                    pipe.cmd("INCRBYFLOAT").arg("float").arg("0.5");
                    pipe.cmd("DECRBY").arg("down").arg(3);
                    let (_, _, _): (i64, String, i64) = pipe.query(&mut con).expect("pipeline");
                }
            });
        }
    });
    let mut con = redis_connection(addr);
    let appended: Vec<u8> = redis::cmd("GET")
        .arg("appended")
        .query(&mut con)
        .expect("GET");
    assert_eq!(appended.len(), CLIENTS * MIXED_ROUNDS);
    for client in 0..CLIENTS {
        let letter = b'a' + client as u8;
        let count = appended.iter().filter(|&&b| b == letter).count();
        assert_eq!(count, MIXED_ROUNDS, "client {client}'s appends");
    }
    let float: String = redis::cmd("GET").arg("float").query(&mut con).expect("GET");
    assert_eq!(float, (CLIENTS * MIXED_ROUNDS / 2).to_string());
    let down: i64 = redis::cmd("GET").arg("down").query(&mut con).expect("GET");
    assert_eq!(down, -3 * (CLIENTS * MIXED_ROUNDS) as i64);
}
