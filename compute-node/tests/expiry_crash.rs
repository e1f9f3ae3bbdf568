//! Times to live survive `kill -9` of both nodes: through the Redis
//! protocol of a real `compute-node serve`, in front of a real storage node
//! (each a process of its own), keys are set with long times to live (EX
//! 1000, PXAT, EXPIREAT), with short ones ([`SHORT_TTL_MS`]) and with none,
//! some of them changed once set (PERSIST, a plain SET, EXPIRE, GETEX,
//! KEEPTTL, INCR, RENAME). Both processes are killed with SIGKILL, the test
//! waits on the clock until every short time to live has passed while they
//! are down, and restarts both on the same data directory. Then a long-lived
//! key has the same PEXPIRETIME and EXPIRETIME it had (exactly), a key
//! without a time to live has TTL -1, and a short-lived key is gone: GET
//! nil, EXISTS 0, TTL -2, in neither KEYS * nor a SCAN walk nor RANDOMKEY,
//! and DBSIZE counts only the survivors. A second round adds keys, kills
//! and restarts both again, and checks the first round's keys once more.
//!
//! The nodes are processes started by `tests/process` (the storage node
//! is this test binary re-run in a child mode).

#[allow(dead_code, reason = "this test neither signals nor samples its nodes")]
mod process;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use process::{Files, Process, StorageSettings};
use redis::Value;

const TEST_NAME: &str = "times_to_live_survive_kill_9_of_both_nodes";
const PARTITIONS: usize = 4;
/// Keys of each plain kind (long, absolute, none, short) in a round.
const KEYS_PER_KIND: usize = 10;
/// The short time to live, in milliseconds.
const SHORT_TTL_MS: u64 = 300;
/// The short time to live of a key that one more command changes while it
/// lives (PERSIST, SET, EXPIRE, KEEPTTL, INCR, RENAME): long enough that
/// the command reaches it alive on a loaded machine.
const CHANGED_TTL_MS: u64 = 3000;
/// Past the last short time to live on the test's clock, how long more the
/// nodes stay down: the servers read a clock of millisecond granularity.
const EXPIRY_MARGIN: Duration = Duration::from_millis(50);

/// Both nodes, each a process of its own.
struct Nodes {
    storage: Process,
    compute: Process,
    addr: SocketAddr,
}

impl Nodes {
    /// Starts the storage node on `files`, then the compute node in front
    /// of it; returns once the compute node serves.
    fn start(files: &Files) -> Self {
        let (storage, port, _) =
            process::start_storage(TEST_NAME, files, StorageSettings::new(PARTITIONS), |_| None);
        let (compute, addr) =
            process::start_compute("compute node", port, &files.compute_certs, &[], "info");
        Self {
            storage,
            compute,
            addr,
        }
    }

    /// `kill -9` of the storage node, then of the compute node.
    fn kill9(self) {
        let Nodes {
            mut storage,
            mut compute,
            ..
        } = self;
        storage.kill9();
        compute.kill9();
    }
}

/// A Redis-protocol client whose failures name the command, the reply and
/// the step of the test.
struct Client {
    con: redis::Connection,
    step: String,
}

impl Client {
    fn open(addr: SocketAddr, step: &str) -> Self {
        let con = redis::Client::open(format!("redis://{addr}/"))
            .expect("client")
            .get_connection()
            .expect("connect to the compute node");
        Self {
            con,
            step: step.to_string(),
        }
    }

    /// The reply to `args`, an error reply as `Err` with its text.
    fn call(&mut self, args: &[&str]) -> Result<Value, String> {
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query(&mut self.con).map_err(|e| e.to_string())
    }

    /// Asserts that `args` answers `want`.
    fn expect(&mut self, args: &[&str], want: &Value) {
        let got = self.call(args);
        assert!(
            got.as_ref() == Ok(want),
            "{}: `{}` answered {got:?}, not {want:?}",
            self.step,
            args.join(" ")
        );
    }

    /// The integer `args` answers.
    fn int(&mut self, args: &[&str]) -> i64 {
        match self.call(args) {
            Ok(Value::Int(n)) => n,
            other => panic!(
                "{}: `{}` answered {other:?}, not an integer",
                self.step,
                args.join(" ")
            ),
        }
    }

    /// The keys a reply of bulk strings names, as a set (each once).
    fn keys(&mut self, args: &[&str], reply: Value) -> BTreeSet<String> {
        let Value::Array(items) = reply else {
            panic!("{}: `{}` answered {reply:?}", self.step, args.join(" "));
        };
        let count = items.len();
        let keys: BTreeSet<String> = items
            .into_iter()
            .map(|item| match item {
                Value::BulkString(key) => String::from_utf8(key).expect("a UTF-8 key"),
                other => panic!("{}: `{}` gave {other:?}", self.step, args.join(" ")),
            })
            .collect();
        assert_eq!(
            keys.len(),
            count,
            "{}: `{}` named a key twice",
            self.step,
            args.join(" ")
        );
        keys
    }

    /// Every key a full SCAN walk returns.
    fn scan_all(&mut self) -> BTreeSet<String> {
        let mut cursor = "0".to_string();
        let mut seen = BTreeSet::new();
        for _ in 0..100_000 {
            let reply = self.call(&["SCAN", &cursor]);
            let Ok(Value::Array(mut parts)) = reply else {
                panic!("{}: `SCAN {cursor}` answered {reply:?}", self.step);
            };
            assert_eq!(parts.len(), 2, "{}: SCAN's reply {parts:?}", self.step);
            let keys = parts.pop().expect("keys");
            seen.extend(self.keys(&["SCAN", &cursor], keys));
            cursor = match parts.pop() {
                Some(Value::BulkString(next)) => String::from_utf8(next).expect("a cursor"),
                other => panic!("{}: SCAN's cursor {other:?}", self.step),
            };
            if cursor == "0" {
                return seen;
            }
        }
        panic!("{}: SCAN does not end", self.step);
    }
}

/// What a key must be after the restart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// There, with this value and this PEXPIRETIME (-1: none).
    Lives { value: String, pexpiretime: i64 },
    /// Gone.
    Gone,
}

/// The Unix time now, in milliseconds, on the test's clock.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// Sets round `round`'s keys through `client`; returns what each key must
/// be after a restart, its long times to live still to be read (`i64::MIN`
/// for a PEXPIRETIME the server chose), and the moment by which every
/// short time to live has passed.
fn set_keys(client: &mut Client, round: usize) -> (BTreeMap<String, Expect>, Instant) {
    let ok = Value::Okay;
    let one = Value::Int(1);
    let short = SHORT_TTL_MS.to_string();
    let changed = CHANGED_TTL_MS.to_string();
    let mut expect = BTreeMap::new();
    let lives = |expect: &mut BTreeMap<String, Expect>, key: &str, value: &str, pexpiretime| {
        let lives = Expect::Lives {
            value: value.to_string(),
            pexpiretime,
        };
        expect.insert(key.to_string(), lives);
    };
    // The server picks the moment of a relative time to live: read below.
    const READ: i64 = i64::MIN;
    let absolute = now_ms() + 2_000_000 + round as i64 * 1000;
    for i in 0..KEYS_PER_KIND {
        let value = format!("v{round}-{i}");
        let key = format!("r{round}:long:{i}");
        client.expect(&["SET", &key, &value, "EX", "1000"], &ok);
        lives(&mut expect, &key, &value, READ);
        let key = format!("r{round}:pxat:{i}");
        let at = absolute + i as i64;
        client.expect(&["SET", &key, &value, "PXAT", &at.to_string()], &ok);
        lives(&mut expect, &key, &value, at);
        let key = format!("r{round}:plain:{i}");
        client.expect(&["SET", &key, &value], &ok);
        lives(&mut expect, &key, &value, -1);
        let key = format!("r{round}:short:{i}");
        client.expect(&["SET", &key, &value, "PX", &short], &ok);
        expect.insert(key, Expect::Gone);
    }
    let key = |name: &str| format!("r{round}:{name}");
    let (k, v) = (key("expireat"), "x");
    let at_seconds = absolute / 1000 + 7;
    client.expect(&["SET", &k, v], &ok);
    client.expect(&["EXPIREAT", &k, &at_seconds.to_string()], &one);
    lives(&mut expect, &k, v, at_seconds * 1000);
    // Short, then no time to live.
    let k = key("short-persisted");
    client.expect(&["SET", &k, v, "PX", &changed], &ok);
    client.expect(&["PERSIST", &k], &one);
    lives(&mut expect, &k, v, -1);
    let k = key("short-overwritten");
    client.expect(&["SET", &k, "old", "PX", &changed], &ok);
    client.expect(&["SET", &k, v], &ok);
    lives(&mut expect, &k, v, -1);
    let k = key("short-getex-persist");
    client.expect(&["SET", &k, v, "PX", &changed], &ok);
    client.expect(&["GETEX", &k, "PERSIST"], &Value::BulkString(v.into()));
    lives(&mut expect, &k, v, -1);
    // Long, then none, or a different long one.
    let k = key("long-persisted");
    client.expect(&["SET", &k, v, "EX", "1000"], &ok);
    client.expect(&["PERSIST", &k], &one);
    lives(&mut expect, &k, v, -1);
    let k = key("long-overwritten");
    client.expect(&["SET", &k, "old", "EX", "1000"], &ok);
    client.expect(&["GETSET", &k, v], &Value::BulkString(b"old".to_vec()));
    lives(&mut expect, &k, v, -1);
    let k = key("short-extended");
    client.expect(&["SET", &k, v, "PX", &changed], &ok);
    client.expect(&["EXPIRE", &k, "1000"], &one);
    lives(&mut expect, &k, v, READ);
    let k = key("long-moved");
    client.expect(&["SET", &k, v, "EX", "1000"], &ok);
    client.expect(&["PEXPIREAT", &k, &(absolute + 99).to_string()], &one);
    lives(&mut expect, &k, v, absolute + 99);
    let k = key("long-kept");
    client.expect(
        &["SET", &k, "old", "PXAT", &(absolute + 98).to_string()],
        &ok,
    );
    client.expect(&["SET", &k, v, "KEEPTTL"], &ok);
    lives(&mut expect, &k, v, absolute + 98);
    let k = key("long-incremented");
    client.expect(
        &["SET", &k, "41", "PXAT", &(absolute + 97).to_string()],
        &ok,
    );
    client.expect(&["INCR", &k], &Value::Int(42));
    lives(&mut expect, &k, "42", absolute + 97);
    let (from, to) = (key("long-renamed"), key("long-renamed-to"));
    client.expect(
        &["SET", &from, v, "PXAT", &(absolute + 96).to_string()],
        &ok,
    );
    client.expect(&["RENAME", &from, &to], &ok);
    expect.insert(from, Expect::Gone);
    lives(&mut expect, &to, v, absolute + 96);
    // Long or none, then short.
    let k = key("long-shortened");
    client.expect(&["SET", &k, v, "EX", "1000"], &ok);
    client.expect(&["PEXPIRE", &k, &short], &one);
    expect.insert(k, Expect::Gone);
    let k = key("plain-getex-short");
    client.expect(&["SET", &k, v], &ok);
    client.expect(&["GETEX", &k, "PX", &short], &Value::BulkString(v.into()));
    expect.insert(k, Expect::Gone);
    let k = key("setex-short");
    client.expect(&["PSETEX", &k, &short, v], &ok);
    expect.insert(k, Expect::Gone);
    let k = key("short-kept");
    client.expect(&["SET", &k, "old", "PX", &changed], &ok);
    client.expect(&["SET", &k, v, "KEEPTTL"], &ok);
    expect.insert(k, Expect::Gone);
    let k = key("short-incremented");
    client.expect(&["SET", &k, "1", "PX", &changed], &ok);
    client.expect(&["INCR", &k], &Value::Int(2));
    expect.insert(k, Expect::Gone);
    let (from, to) = (key("short-renamed"), key("short-renamed-to"));
    client.expect(&["SET", &from, v, "PX", &changed], &ok);
    client.expect(&["RENAME", &from, &to], &ok);
    expect.insert(from, Expect::Gone);
    expect.insert(to, Expect::Gone);
    // A time already past: gone before the crash.
    let k = key("past");
    client.expect(&["SET", &k, v], &ok);
    client.expect(&["PEXPIREAT", &k, "1"], &one);
    client.expect(&["EXISTS", &k], &Value::Int(0));
    expect.insert(k, Expect::Gone);
    // Every short time to live was given before this moment.
    let gone_by = Instant::now() + Duration::from_millis(CHANGED_TTL_MS) + EXPIRY_MARGIN;
    // The moments the server chose for relative long times to live.
    for (key, expect) in expect.iter_mut() {
        if let Expect::Lives { pexpiretime, .. } = expect
            && *pexpiretime == READ
        {
            *pexpiretime = client.int(&["PEXPIRETIME", key]);
            assert!(
                *pexpiretime > now_ms(),
                "{}: PEXPIRETIME {key} is {pexpiretime}",
                client.step
            );
        }
    }
    (expect, gone_by)
}

/// Checks every key of `expect` through a fresh connection to `addr`.
fn check(addr: SocketAddr, step: &str, expect: &BTreeMap<String, Expect>) {
    let mut client = Client::open(addr, step);
    let survivors: BTreeSet<String> = expect
        .iter()
        .filter(|(_, e)| matches!(e, Expect::Lives { .. }))
        .map(|(k, _)| k.clone())
        .collect();
    // The keyspace as a whole first, before any command names a gone key.
    let dbsize = client.int(&["DBSIZE"]);
    assert_eq!(
        dbsize,
        survivors.len() as i64,
        "{step}: DBSIZE counts {dbsize} keys; {} survive",
        survivors.len()
    );
    let reply = client.call(&["KEYS", "*"]).expect("KEYS *");
    let listed = client.keys(&["KEYS", "*"], reply);
    assert_eq!(
        listed.difference(&survivors).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "{step}: KEYS * lists keys that must be gone"
    );
    assert_eq!(listed, survivors, "{step}: KEYS * against the survivors");
    let scanned = client.scan_all();
    assert_eq!(
        scanned, survivors,
        "{step}: a SCAN walk against the survivors"
    );
    for _ in 0..20 {
        match client.call(&["RANDOMKEY"]) {
            Ok(Value::BulkString(key)) => {
                let key = String::from_utf8(key).expect("a UTF-8 key");
                assert!(
                    survivors.contains(&key),
                    "{step}: RANDOMKEY answered {key:?}, which must be gone"
                );
            }
            other => panic!("{step}: RANDOMKEY answered {other:?}"),
        }
    }
    for (key, expect) in expect {
        match expect {
            Expect::Lives { value, pexpiretime } => {
                client.expect(&["GET", key], &Value::BulkString(value.clone().into()));
                client.expect(&["EXISTS", key], &Value::Int(1));
                client.expect(&["PEXPIRETIME", key], &Value::Int(*pexpiretime));
                if *pexpiretime < 0 {
                    client.expect(&["TTL", key], &Value::Int(-1));
                    client.expect(&["EXPIRETIME", key], &Value::Int(-1));
                } else {
                    // Redis's rounding: to the nearest second, half up.
                    let seconds = (*pexpiretime + 500) / 1000;
                    client.expect(&["EXPIRETIME", key], &Value::Int(seconds));
                    let ttl = client.int(&["PTTL", key]);
                    let left = *pexpiretime - now_ms();
                    assert!(
                        ttl > 0 && ttl.abs_diff(left) < 5_000,
                        "{step}: PTTL {key} is {ttl}, with {left} ms left to PEXPIRETIME"
                    );
                }
            }
            Expect::Gone => {
                client.expect(&["GET", key], &Value::Nil);
                client.expect(&["EXISTS", key], &Value::Int(0));
                client.expect(&["TTL", key], &Value::Int(-2));
                client.expect(&["PEXPIRETIME", key], &Value::Int(-2));
                client.expect(&["STRLEN", key], &Value::Int(0));
            }
        }
    }
    client.expect(&["DBSIZE"], &Value::Int(survivors.len() as i64));
}

#[test]
fn times_to_live_survive_kill_9_of_both_nodes() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let files = Files::new();
    let mut expect = BTreeMap::new();
    for round in 1..=2 {
        let nodes = Nodes::start(&files);
        if round > 1 {
            // The first round's keys after the first restart, and again
            // after this start: nothing expired comes back.
            check(nodes.addr, "before round 2's writes", &expect);
        }
        let mut client = Client::open(nodes.addr, &format!("round {round}: setting keys"));
        let (set, gone_by) = set_keys(&mut client, round);
        drop(client);
        expect.extend(set);
        nodes.kill9();
        // The nodes stay down until every short time to live has passed.
        if let Some(left) = gone_by.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
        let nodes = Nodes::start(&files);
        check(
            nodes.addr,
            &format!("round {round}: after kill -9 of both nodes and a restart"),
            &expect,
        );
        nodes.kill9();
    }
}
