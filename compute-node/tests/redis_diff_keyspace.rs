//! Differential tests of SCAN, KEYS and RANDOMKEY: the same commands go to
//! a real `redis-server` and to a compute node holding the same keys, in
//! RESP2 and RESP3. Errors and replies that do not depend on the order of
//! keys are compared byte for byte (one at a time and pipelined); the rest
//! as the comment at each comparison says.

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

use std::collections::BTreeSet;

use diff::{Connection, Pair, Reply, Step, by_shape, exact};

/// The keys both servers hold: plain ones, and ones that meet the glob
/// matcher's corner cases (brackets, dashes, escapes, binary bytes,
/// letter case).
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..300).map(|i| format!("key:{i}").into_bytes()).collect();
    let special: &[&[u8]] = &[
        b"a",
        b"a-",
        b"a]",
        b"a^",
        b"a[",
        b"ab",
        b"ab]",
        b"a\\",
        b"?",
        b"*",
        b"h*llo",
        b"hello",
        b"hallo",
        b"hxllo",
        b"HELLO",
        b"Hello",
        b"0",
        b"\xff",
        b"\x80",
        b"\x85",
        b"a\r\nb\x00c\xff",
        b"user:1:name",
        b"user:22:name",
        b"user:333:mail",
    ];
    keys.extend(special.iter().map(|k| k.to_vec()));
    keys
}

/// Patterns for KEYS and SCAN MATCH, the corner cases of Redis's
/// `stringmatchlen` among them.
fn patterns() -> Vec<&'static [u8]> {
    vec![
        b"*",
        b"**",
        b"key:1*",
        b"key:?",
        b"key:??",
        b"key:[12]?",
        b"key:[^12]?",
        b"key:[1-3]0",
        b"key:[3-1]0",
        b"key:2[0-9]9",
        b"h?llo",
        b"h*llo",
        b"h\\*llo",
        b"h[ae]llo",
        b"h[^e]llo",
        b"H*",
        b"hello",
        b"nosuch",
        b"",
        b"?",
        b"\\?",
        b"\\*",
        b"*?",
        b"?*",
        b"a[b-]",
        b"a[-b]",
        b"a[]",
        b"a[]b]",
        b"a[^]",
        b"a[",
        b"a[b",
        b"a[\\]]",
        b"a[\\-]",
        b"a\\",
        b"a[\\",
        b"[a-\xff]",
        b"[\x80-\x90]",
        b"[^\x80-\x90]",
        b"a\r\nb*",
        b"user:*:name",
        b"user:*:*",
        b"*:*:*a*",
    ]
}

/// One command's reply.
fn call(conn: &mut Connection, args: &[&[u8]]) -> Reply {
    conn.send(&diff::encode(args));
    conn.reply().1
}

/// A complete SCAN walk with `options`: every key returned, as a set, and
/// the number of calls. Each reply must be `[cursor, [keys...]]` with the
/// cursor a decimal bulk string.
fn walk(conn: &mut Connection, options: &[&[u8]]) -> (BTreeSet<Vec<u8>>, usize) {
    let mut cursor = b"0".to_vec();
    let mut seen = BTreeSet::new();
    let mut calls = 0;
    loop {
        let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor];
        args.extend_from_slice(options);
        calls += 1;
        let reply = call(conn, &args);
        let Reply::Array(Some(parts)) = reply else {
            panic!("SCAN answered {reply:?}");
        };
        let [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] = &parts[..] else {
            panic!("SCAN answered {parts:?}");
        };
        for key in keys {
            let Reply::Bulk(Some(key)) = key else {
                panic!("SCAN gave the key {key:?}");
            };
            seen.insert(key.clone());
        }
        std::str::from_utf8(next)
            .ok()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("cursor {next:?} is not a decimal u64"));
        if next == b"0" {
            return (seen, calls);
        }
        assert!(calls < 1_000_000, "SCAN {options:?} does not end");
        cursor = next.clone();
    }
}

/// KEYS' reply as a set (each key once).
fn keys_of(conn: &mut Connection, pattern: &[u8]) -> BTreeSet<Vec<u8>> {
    let reply = call(conn, &[b"KEYS", pattern]);
    let Reply::Array(Some(items)) = reply else {
        panic!("KEYS answered {reply:?}");
    };
    let count = items.len();
    let keys: BTreeSet<Vec<u8>> = items
        .into_iter()
        .map(|item| match item {
            Reply::Bulk(Some(key)) => key,
            other => panic!("KEYS gave {other:?}"),
        })
        .collect();
    assert_eq!(keys.len(), count, "KEYS gave a key twice");
    keys
}

fn shown(keys: &BTreeSet<Vec<u8>>) -> Vec<String> {
    keys.iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// Wrong arguments, checked in Redis's order: arity, cursor, then each
/// option in turn. Their errors do not depend on the keys.
fn error_steps() -> Vec<Step> {
    vec![
        exact(cmd!("SCAN")),
        exact(cmd!("scan")),
        exact(cmd!("SCAN", "abc")),
        exact(cmd!("SCAN", " 5")),
        exact(cmd!("SCAN", "5 ")),
        exact(cmd!("SCAN", "0x10")),
        exact(cmd!("SCAN", "1.5")),
        exact(cmd!("SCAN", "+")),
        exact(cmd!("SCAN", "-")),
        exact(cmd!("SCAN", "18446744073709551616")),
        exact(cmd!("SCAN", "-18446744073709551616")),
        exact(cmd!("SCAN", "99999999999999999999999")),
        exact(cmd!("SCAN", "0", "COUNT", "0")),
        exact(cmd!("SCAN", "0", "COUNT", "-1")),
        exact(cmd!("SCAN", "0", "COUNT", "-9223372036854775808")),
        exact(cmd!("SCAN", "0", "COUNT", "x")),
        exact(cmd!("SCAN", "0", "COUNT", "1.5")),
        exact(cmd!("SCAN", "0", "COUNT", "+5")),
        exact(cmd!("SCAN", "0", "COUNT", "")),
        exact(cmd!("SCAN", "0", "COUNT", "05")),
        exact(cmd!("SCAN", "0", "COUNT", "9223372036854775808")),
        exact(cmd!("SCAN", "0", "COUNT")),
        exact(cmd!("SCAN", "0", "MATCH")),
        exact(cmd!("SCAN", "0", "TYPE")),
        exact(cmd!("SCAN", "0", "BOGUS")),
        exact(cmd!("SCAN", "0", "BOGUS", "x")),
        exact(cmd!("SCAN", "0", "MATCH", "*", "COUNT")),
        exact(cmd!("SCAN", "0", "NOVALUES")),
        exact(cmd!("SCAN", "x", "COUNT", "0")),
        exact(cmd!("SCAN", "0", "COUNT", "0", "BOGUS")),
        exact(cmd!("SCAN", "0", "BOGUS", "COUNT", "x")),
        exact(cmd!("SCAN", "0", "COUNT", "x", "BOGUS")),
        exact(cmd!("SCAN", "0", "COUNT", "1", "COUNT", "0")),
        exact(cmd!("KEYS")),
        exact(cmd!("KEYS", "a", "b")),
        exact(cmd!("RANDOMKEY", "x")),
    ]
}

/// On an empty keyspace every walk ends at once, so the replies are the
/// same bytes whatever the order of keys.
fn empty_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DBSIZE")),
        exact(cmd!("SCAN", "0")),
        exact(cmd!("SCAN", "")),
        exact(cmd!("SCAN", "-0")),
        exact(cmd!("SCAN", "+7")),
        exact(cmd!("SCAN", "007")),
        exact(cmd!("SCAN", "-1")),
        exact(cmd!("SCAN", "18446744073709551615")),
        exact(cmd!("SCAN", "-18446744073709551615")),
        exact(cmd!("SCAN", "12345", "COUNT", "100")),
        exact(cmd!(
            "SCAN",
            "0",
            "MATCH",
            "*",
            "COUNT",
            "9223372036854775807",
            "TYPE",
            "string"
        )),
        exact(cmd!(
            "scan", "0", "match", "a*", "count", "1", "type", "list"
        )),
        exact(cmd!("SCAN", "0", "TYPE", "nosuchtype")),
        exact(cmd!("KEYS", "*")),
        exact(cmd!("KEYS", "")),
        exact(cmd!("KEYS", "a[")),
        exact(cmd!("RANDOMKEY")),
        exact(cmd!("MULTI")),
        exact(cmd!("SCAN", "abc")),
        exact(cmd!("SCAN", "0", "COUNT", "0")),
        exact(cmd!("SCAN", "0")),
        exact(cmd!("KEYS", "*")),
        exact(cmd!("RANDOMKEY")),
        exact(cmd!("SCAN")),
        exact(cmd!("EXEC")),
        exact(cmd!("MULTI")),
        exact(cmd!("SCAN", "x")),
        exact(cmd!("KEYS", "*")),
        exact(cmd!("RANDOMKEY")),
        exact(cmd!("EXEC")),
    ]
}

/// Loads [`keys`] into both servers with MSET.
fn load(pair: &mut Pair) {
    let keys = keys();
    let mut args: Vec<&[u8]> = vec![b"MSET"];
    for key in &keys {
        args.push(key);
        args.push(key);
    }
    pair.one_by_one(&[exact(&args), exact(cmd!("DBSIZE"))]);
}

/// Full walks with every kind of option give the same keys as Redis's.
fn compare_walks(pair: &mut Pair) {
    let all: BTreeSet<Vec<u8>> = keys().into_iter().collect();
    let mut option_sets: Vec<Vec<&[u8]>> = vec![
        vec![],
        vec![b"COUNT", b"1"],
        vec![b"COUNT", b"7"],
        vec![b"count", b"1000"],
        vec![b"COUNT", b"9223372036854775807"],
        vec![b"TYPE", b"string"],
        vec![b"TYPE", b"STRING"],
        vec![b"TYPE", b"list"],
        vec![b"TYPE", b"nosuchtype"],
        vec![b"MATCH", b"nosuch", b"MATCH", b"key:1*"],
        vec![b"MATCH", b"user:*", b"COUNT", b"3", b"TYPE", b"string"],
        vec![b"TYPE", b"hash", b"TYPE", b"string", b"COUNT", b"50"],
    ];
    let patterns = patterns();
    for pattern in &patterns {
        option_sets.push(vec![b"MATCH", pattern]);
        option_sets.push(vec![b"MATCH", pattern, b"COUNT", b"5"]);
    }
    for options in &option_sets {
        // SplitKV walks its index in another order than Redis walks its
        // dict, with other cursors: compared is the set of keys of a walk.
        let (want, _) = walk(&mut pair.to_redis, options);
        let (got, calls) = walk(&mut pair.to_splitkv, options);
        assert_eq!(
            shown(&want),
            shown(&got),
            "SCAN {:?}: Redis's keys, then SplitKV's",
            options
                .iter()
                .map(|o| String::from_utf8_lossy(o))
                .collect::<Vec<_>>()
        );
        if options.is_empty() {
            assert_eq!(got, all, "a plain walk returns every key");
            assert!(
                calls > 1,
                "COUNT 10 takes more than one call for {} keys",
                all.len()
            );
        }
    }
    for pattern in &patterns {
        // KEYS' order differs too (SplitKV's is byte order): compared as sets.
        let want = keys_of(&mut pair.to_redis, pattern);
        let got = keys_of(&mut pair.to_splitkv, pattern);
        assert_eq!(
            shown(&want),
            shown(&got),
            "KEYS {:?}: Redis's, then SplitKV's",
            String::from_utf8_lossy(pattern)
        );
    }
}

/// RANDOMKEY on both: a bulk string naming a key the server holds. The
/// key is each server's own pick, so the reply's type is compared, and
/// that the key exists.
fn compare_random_keys(pair: &mut Pair) {
    for _ in 0..20 {
        for conn in [&mut pair.to_redis, &mut pair.to_splitkv] {
            let reply = call(conn, &[b"RANDOMKEY"]);
            let Reply::Bulk(Some(key)) = reply else {
                panic!("RANDOMKEY answered {reply:?}");
            };
            assert_eq!(call(conn, &[b"EXISTS", &key]), Reply::Integer(1));
        }
    }
    pair.one_by_one(&[by_shape(
        cmd!("RANDOMKEY"),
        "each server picks its own random key",
    )]);
}

/// Deletes every key (with DEL, so both servers do the same).
fn delete_all(pair: &mut Pair) {
    let keys = keys();
    let mut args: Vec<&[u8]> = vec![b"DEL"];
    args.extend(keys.iter().map(Vec::as_slice));
    pair.one_by_one(&[exact(&args), exact(cmd!("DBSIZE"))]);
}

fn keyspace_commands_answer_as_redis_does(protocol: &[u8]) {
    let mut pair = Pair::start();
    pair.one_by_one(&[by_shape(
        &[b"HELLO", protocol],
        "HELLO's version and id are each server's own",
    )]);
    pair.both_ways(&error_steps());
    pair.both_ways(&empty_steps());
    load(&mut pair);
    pair.both_ways(&error_steps());
    compare_walks(&mut pair);
    compare_random_keys(&mut pair);
    delete_all(&mut pair);
    pair.both_ways(&empty_steps());
}

#[test]
fn scan_keys_and_randomkey_answer_as_redis_does_in_resp2() {
    keyspace_commands_answer_as_redis_does(b"2");
}

#[test]
fn scan_keys_and_randomkey_answer_as_redis_does_in_resp3() {
    keyspace_commands_answer_as_redis_does(b"3");
}

/// A SCAN cursor kept across writes: a walk begun, then keys added and
/// deleted between its calls, still returns every key that was there all
/// along, on both servers.
#[test]
fn a_walk_across_writes_returns_every_key_present_throughout() {
    let mut pair = Pair::start();
    load(&mut pair);
    let stable: BTreeSet<Vec<u8>> = keys().into_iter().collect();
    for conn in [&mut pair.to_redis, &mut pair.to_splitkv] {
        let mut cursor = b"0".to_vec();
        let mut seen = BTreeSet::new();
        let mut round = 0;
        loop {
            let reply = call(conn, &[b"SCAN", &cursor, b"COUNT", b"5"]);
            let Reply::Array(Some(parts)) = reply else {
                panic!("SCAN answered {reply:?}");
            };
            let [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] = &parts[..] else {
                panic!("SCAN answered {parts:?}");
            };
            for key in keys {
                if let Reply::Bulk(Some(key)) = key {
                    seen.insert(key.clone());
                }
            }
            // Between calls: 20 new keys, and last round's new keys gone.
            let mut set: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
            for i in 0..20 {
                let key = format!("churn:{round}:{i}").into_bytes();
                set.push(key.clone());
                set.push(key);
            }
            let set: Vec<&[u8]> = set.iter().map(Vec::as_slice).collect();
            assert_eq!(call(conn, &set), Reply::Simple(b"OK".to_vec()));
            if round > 0 {
                let mut del: Vec<Vec<u8>> = vec![b"DEL".to_vec()];
                del.extend((0..20).map(|i| format!("churn:{}:{i}", round - 1).into_bytes()));
                let del: Vec<&[u8]> = del.iter().map(Vec::as_slice).collect();
                assert_eq!(call(conn, &del), Reply::Integer(20));
            }
            round += 1;
            if next == b"0" {
                break;
            }
            cursor = next.clone();
        }
        let missing: Vec<_> = stable.difference(&seen).collect();
        assert!(missing.is_empty(), "a walk missed {missing:?}");
    }
}

/// A small xorshift generator, so the random patterns below are the same
/// on every run.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn string(&mut self, alphabet: &[u8], most: usize) -> Vec<u8> {
        let len = self.below(most + 1);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

/// Random patterns over the bytes glob gives meaning to, against random
/// keys over the same bytes: KEYS matches the same keys as Redis's
/// `stringmatchlen` does, for every pattern.
#[test]
fn random_patterns_match_the_keys_redis_matches() {
    const KEYS: usize = 400;
    const PATTERNS: usize = 3000;
    let alphabet = b"ab-]^[\\*?\xff\x80A";
    let mut random = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut pair = Pair::start();
    let mut keys = BTreeSet::new();
    while keys.len() < KEYS {
        let key = random.string(alphabet, 5);
        if !key.is_empty() {
            keys.insert(key);
        }
    }
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for key in &keys {
        mset.push(key);
        mset.push(b"v");
    }
    pair.one_by_one(&[exact(&mset), exact(cmd!("DBSIZE"))]);
    let mut matched_some = 0;
    for _ in 0..PATTERNS {
        let pattern = random.string(alphabet, 7);
        let want = keys_of(&mut pair.to_redis, &pattern);
        let got = keys_of(&mut pair.to_splitkv, &pattern);
        assert_eq!(
            shown(&want),
            shown(&got),
            "KEYS {:?}: Redis's, then SplitKV's",
            String::from_utf8_lossy(&pattern)
        );
        matched_some += usize::from(!want.is_empty());
    }
    assert!(
        matched_some > PATTERNS / 10,
        "the patterns match keys: {matched_some}"
    );
}

/// A KEYS or MGET reply larger than the reply buffer (written out in
/// parts) is still dropped whole by CLIENT REPLY SKIP and OFF, as Redis
/// drops it.
#[test]
fn large_get_and_mget_replies_are_dropped_whole_by_client_reply_skip_and_off() {
    let mut pair = Pair::start();
    // Values long enough to be sent from the value cache itself.
    let values: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'a' + i; 4096]).collect();
    for (i, value) in values.iter().enumerate() {
        let key = format!("big:{i}");
        pair.one_by_one(&[exact(&[b"SET", key.as_bytes(), value])]);
    }
    pair.one_by_one(&[
        exact(cmd!("GET", "big:0")),
        diff::silent(cmd!("CLIENT", "REPLY", "SKIP")),
        diff::silent(cmd!("GET", "big:1")),
        exact(cmd!("PING", "after skip")),
        diff::silent(cmd!("CLIENT", "REPLY", "SKIP")),
        diff::silent(cmd!("MGET", "big:0", "big:1", "big:2")),
        exact(cmd!("GET", "big:2")),
        diff::silent(cmd!("CLIENT", "REPLY", "OFF")),
        diff::silent(cmd!("GET", "big:0")),
        diff::silent(cmd!("MGET", "big:2", "big:1")),
        exact(cmd!("CLIENT", "REPLY", "ON")),
        exact(cmd!("MGET", "big:1", "nope", "big:0")),
    ]);
}

#[test]
fn a_long_keys_reply_is_dropped_whole_by_client_reply_skip_and_off() {
    let mut pair = Pair::start();
    let keys: Vec<Vec<u8>> = (0..2500)
        .map(|i| {
            let mut key = format!("long:{i}:").into_bytes();
            key.resize(1000, b'x');
            key
        })
        .collect();
    let value = vec![b'v'; 1000];
    for chunk in keys.chunks(500) {
        let mut mset: Vec<&[u8]> = vec![b"MSET"];
        for key in chunk {
            mset.push(key);
            mset.push(&value);
        }
        pair.one_by_one(&[exact(&mset)]);
    }
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(keys.iter().map(Vec::as_slice));
    pair.one_by_one(&[
        diff::silent(cmd!("CLIENT", "REPLY", "SKIP")),
        diff::silent(cmd!("KEYS", "long:*")),
        exact(cmd!("PING", "after skip")),
        diff::silent(cmd!("CLIENT", "REPLY", "SKIP")),
        diff::silent(&mget),
        exact(cmd!("PING", "after mget")),
        diff::silent(cmd!("CLIENT", "REPLY", "OFF")),
        diff::silent(cmd!("KEYS", "long:*")),
        exact(cmd!("CLIENT", "REPLY", "ON")),
        exact(cmd!("PING", "after off")),
    ]);
    assert_eq!(keys_of(&mut pair.to_splitkv, b"long:*").len(), keys.len());
}
