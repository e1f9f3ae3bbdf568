//! A storage node restarted at once after `kill -9` always comes up, and
//! loses nothing acknowledged: through the Redis protocol of a real
//! `compute-node serve`, [`WRITERS`] clients SET 4 KiB values in a loop
//! while the storage node (a process of its own) is killed with SIGKILL
//! [`ROUNDS`] times, each time once the writers have had more SETs
//! acknowledged since the last restart, and restarted on the same data
//! directory and port the moment the killed process is reaped, while its
//! io_uring workers may still hold its files and its lock. Every restart
//! must serve; at the end every key reads back with its latest
//! acknowledged value or a later one that was sent (a SET whose answer was
//! lost to the kill may have been applied), never an older one.
//!
//! The nodes are processes started by `tests/process` (the storage node
//! is this test binary re-run in a child mode).

#[allow(dead_code, reason = "this test neither signals nor samples its nodes")]
mod process;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use process::{Files, StorageSettings};

const TEST_NAME: &str = "a_storage_node_restarted_at_once_after_kill_9_always_comes_up";
const PARTITIONS: usize = 4;
/// Kill-and-restart rounds.
const ROUNDS: usize = 40;
/// Clients writing all along.
const WRITERS: usize = 8;
/// Keys each writer overwrites in turn.
const KEYS_PER_WRITER: u64 = 64;
/// Bytes of each value.
const VALUE_BYTES: usize = 4096;
/// SETs acknowledged after a restart before the next kill (the first of
/// them is acknowledged once the compute node has reconnected): at least
/// this many, and up to twice as many, varying from round to round so
/// that the kills find the write buffers and their flushes in every state.
const ACKS_PER_ROUND: u64 = 400;
/// Longest wait for the writers' acknowledgements in one round.
const ROUND_TIMEOUT: Duration = Duration::from_secs(60);

/// The value a writer sets in its `n`th SET: its number and `n`, padded.
fn value(writer: usize, n: u64) -> Vec<u8> {
    let mut value = format!("{writer}:{n}:").into_bytes();
    value.resize(VALUE_BYTES, b'v');
    value
}

fn key(writer: usize, n: u64) -> String {
    format!("w{writer}-k{}", n % KEYS_PER_WRITER)
}

/// What one writer did: the number of its latest acknowledged SET per key,
/// and the number of its last SET sent.
struct WriterLog {
    acknowledged: Vec<Option<u64>>,
    sent: u64,
}

/// Sets its keys over and over until `stop`, reconnecting when the
/// connection breaks; counts acknowledgements in `acks`, all writers', and
/// in `own_acks`, its own.
fn write(
    writer: usize,
    addr: SocketAddr,
    stop: &AtomicBool,
    acks: &AtomicU64,
    own_acks: &AtomicU64,
) -> WriterLog {
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
    let mut log = WriterLog {
        acknowledged: vec![None; KEYS_PER_WRITER as usize],
        sent: 0,
    };
    let mut connection = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let con = match &mut connection {
            Some(con) => con,
            None => match client.get_connection() {
                Ok(con) => connection.insert(con),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            },
        };
        n += 1;
        log.sent = n;
        let answer: redis::RedisResult<redis::Value> = redis::cmd("SET")
            .arg(key(writer, n))
            .arg(value(writer, n))
            .query(con);
        match answer {
            Ok(redis::Value::Okay) => {
                log.acknowledged[(n % KEYS_PER_WRITER) as usize] = Some(n);
                acks.fetch_add(1, Ordering::Relaxed);
                own_acks.fetch_add(1, Ordering::Relaxed);
            }
            Ok(other) => panic!("SET answered {other:?}"),
            // The storage node is down: the compute node answers with an
            // error until it has reconnected.
            Err(e) if e.kind() == redis::ErrorKind::Io => connection = None,
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    log
}

#[test]
fn a_storage_node_restarted_at_once_after_kill_9_always_comes_up() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let files = Files::new();
    let (mut storage, port, _) =
        process::start_storage(TEST_NAME, &files, StorageSettings::new(PARTITIONS), |_| {
            None
        });
    let (_compute, addr) =
        process::start_compute("compute node", port, &files.compute_certs, &[], "info");

    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let own_acks: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (stop, acks, own_acks) =
                (Arc::clone(&stop), Arc::clone(&acks), Arc::clone(&own_acks));
            std::thread::spawn(move || write(writer, addr, &stop, &acks, &own_acks[writer]))
        })
        .collect();

    let settings = StorageSettings {
        port,
        ..StorageSettings::new(PARTITIONS)
    };
    for round in 0..ROUNDS {
        let round_acks = ACKS_PER_ROUND + (round as u64 * 7919) % ACKS_PER_ROUND;
        let wanted = acks.load(Ordering::Relaxed) + round_acks;
        let deadline = Instant::now() + ROUND_TIMEOUT;
        while acks.load(Ordering::Relaxed) < wanted {
            assert!(
                Instant::now() < deadline,
                "round {round}: the writers had no {round_acks} SETs acknowledged \
                 within {ROUND_TIMEOUT:?} of the restart"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        storage.kill9();
        // At once: start_storage panics, with the node's own error, if the
        // restarted node does not serve.
        let (restarted, restarted_port, _) =
            process::start_storage(TEST_NAME, &files, settings, |_| None);
        assert_eq!(restarted_port, port, "round {round}: the same port");
        storage = restarted;
    }

    // After the last restart, every writer sets each of its keys once
    // more (its SETs all succeed once the compute node has reconnected).
    let deadline = Instant::now() + ROUND_TIMEOUT;
    let from: Vec<u64> = own_acks.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    while own_acks
        .iter()
        .zip(&from)
        .any(|(now, from)| now.load(Ordering::Relaxed) < from + 2 * KEYS_PER_WRITER)
    {
        assert!(
            Instant::now() < deadline,
            "the writers went on after the last restart"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let logs: Vec<WriterLog> = writers
        .into_iter()
        .map(|writer| writer.join().expect("writer"))
        .collect();
    let mut con = redis::Client::open(format!("redis://{addr}/"))
        .expect("client")
        .get_connection()
        .expect("connect");
    let mut checked = 0;
    for (writer, log) in logs.iter().enumerate() {
        for (slot, acknowledged) in log.acknowledged.iter().enumerate() {
            let Some(acknowledged) = *acknowledged else {
                continue;
            };
            let key = key(writer, slot as u64);
            let found: Option<Vec<u8>> = redis::cmd("GET")
                .arg(&key)
                .query(&mut con)
                .unwrap_or_else(|e| panic!("GET {key}: {e}"));
            let found = found.unwrap_or_else(|| panic!("{key}: an acknowledged SET is lost"));
            let text = String::from_utf8_lossy(&found[..found.len().min(32)]).to_string();
            let n: u64 = text
                .split(':')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{key}: a value no writer set: {text:?}"));
            assert_eq!(
                found,
                value(writer, n),
                "{key}: the value of SET {n}, whole"
            );
            assert!(
                n >= acknowledged && n <= log.sent && n % KEYS_PER_WRITER == slot as u64,
                "{key}: SET {n} read back, but SET {acknowledged} was acknowledged \
                 (and {} the last sent)",
                log.sent
            );
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        WRITERS * KEYS_PER_WRITER as usize,
        "every key was acknowledged at least once"
    );
}
