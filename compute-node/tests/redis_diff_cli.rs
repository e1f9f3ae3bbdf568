//! redis-cli works against the compute node unchanged: the same
//! invocations print the same output against a real `redis-server` and
//! against SplitKV (`-n 0`, `-3` for RESP3, `--pipe` mass insertion,
//! `--scan`).

#[allow(
    dead_code,
    reason = "the differential harness; this test uses its servers only"
)]
mod diff;
#[allow(
    dead_code,
    reason = "shared test support; this test uses the storage node only"
)]
mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use diff::{ComputeNode, RedisServer};

/// Keys the `--pipe` run inserts.
const MASS_KEYS: usize = 10_000;

/// What redis-cli prints (stdout and stderr) and its exit status.
fn redis_cli(addr: SocketAddr, args: &[&str], input: &[u8]) -> (String, String, bool) {
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &addr.port().to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("redis-cli is needed for this test (apt-get install redis-tools): {e}")
        });
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    let output = child.wait_with_output().expect("redis-cli");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.success(),
    )
}

#[test]
fn redis_cli_prints_the_same_against_splitkv_as_against_redis() {
    let redis = RedisServer::start(None);
    let splitkv = ComputeNode::start(None);
    let mut mass = Vec::new();
    for i in 0..MASS_KEYS {
        let (key, value) = (format!("mass:{i}"), format!("value {i}"));
        mass.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                key.len(),
                value.len()
            )
            .as_bytes(),
        );
    }
    let runs: &[(&[&str], &[u8])] = &[
        (&["-n", "0", "set", "cli", "v"], b""),
        (&["-n", "0", "get", "cli"], b""),
        (&["-3", "get", "cli"], b""),
        (&["-3", "get", "nope"], b""),
        (&["-3", "hello", "2"], b""),
        (&["-n", "1", "ping"], b""),
        (&["get"], b""),
        (&["nosuch", "a"], b""),
        (&["--pipe"], &mass),
        (&["get", "mass:999"], b""),
        (&["mget", "mass:0", "nope", "mass:1"], b""),
        (&["-3", "mget", "mass:0", "nope", "mass:1"], b""),
        (&["dbsize"], b""),
        (&["-n", "0", "dbsize"], b""),
        (&["get", "mass:4567"], b""),
        (&["--scan"], b""),
        (&["--scan", "--pattern", "mass:99*"], b""),
        (&["--scan", "--pattern", "mass:[1-2]?"], b""),
        (&["--scan", "--pattern", "nosuch*"], b""),
        (&["--scan", "--count", "1000", "--pattern", "*:1?"], b""),
        (&["-3", "--scan", "--pattern", "mass:12*"], b""),
        (&["-n", "0", "--scan", "--pattern", "cli"], b""),
        (&["keys", "mass:99?"], b""),
        (&["config", "get", "databases"], b""),
        (&["-3", "config", "get", "databases"], b""),
    ];
    for (args, input) in runs {
        let want = redis_cli(redis.addr, args, input);
        let got = redis_cli(splitkv.addr, args, input);
        // HELLO's reply names each server's own version and client id;
        // everything else must be the same.
        if args.contains(&"hello") {
            assert_eq!(want.2, got.2, "redis-cli {args:?}");
            assert_eq!(
                want.0.lines().count(),
                got.0.lines().count(),
                "redis-cli {args:?}"
            );
            continue;
        }
        if args.contains(&"--scan") || args.contains(&"keys") {
            // Keys come in each server's own order: compared sorted.
            let sorted = |out: &(String, String, bool)| {
                let mut lines: Vec<&str> = out.0.lines().collect();
                lines.sort_unstable();
                (lines.join("\n"), out.1.clone(), out.2)
            };
            assert_eq!(sorted(&want), sorted(&got), "redis-cli {args:?}");
            if args == &["--scan"] {
                assert_eq!(got.0.lines().count(), MASS_KEYS + 1, "every key, once");
            }
            continue;
        }
        assert_eq!(want, got, "redis-cli {args:?}: Redis, then SplitKV");
        if args == &["--pipe"] {
            assert!(
                got.0.contains(&format!("errors: 0, replies: {MASS_KEYS}")),
                "{got:?}"
            );
        }
        if args == &["dbsize"] {
            assert_eq!(got.0, format!("{}\n", MASS_KEYS + 1));
        }
        if args == &["get", "mass:4567"] {
            assert_eq!(got.0, "value 4567\n");
        }
        if args == &["get", "mass:999"] {
            assert_eq!(got.0, "value 999\n");
        }
    }
}
