//! Failover between real processes: a storage node, a writer (`compute-node
//! serve`) and a reader (`compute-node serve --read-only`), each a process
//! of its own, talking over loopback.
//!
//! * The writer is killed with SIGKILL in the middle of a write load (SETs,
//!   overwrites, DELs and two-key MSETs from several clients); the reader,
//!   promoted with `REPLICAOF NO ONE`, serves every write the old writer
//!   acknowledged, and a write it did not acknowledge either whole or not at
//!   all. A writer started again on the storage node takes a newer epoch:
//!   from then on the promoted node's writes fail, never a silent success,
//!   and it follows the newest writer as a reader.
//! * A writer that is frozen (SIGSTOP) while a reader is promoted finds
//!   itself fenced when it runs again: the write it was sent while frozen
//!   gets the fenced error, every later one the read-only error, the
//!   promoted node's value stands, and the old writer follows the new one.
//! * The storage node is killed with SIGKILL while two readers follow, and
//!   started again on its data: the writer's later overwrites and deletes
//!   reach both readers, and neither serves a value from before them.
//! * A reader that stops reading (SIGSTOP) is cut off by the storage node,
//!   whose memory stays bounded while the writer goes on writing far more
//!   than that bound; once it runs again it catches up.

mod process;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use process::{Files, Process, StorageSettings};
use redis::Value;

const PARTITIONS: usize = 16;
/// Clients writing through the writer at once.
const WRITERS: usize = 6;
/// Keys each writing client cycles through.
const KEYS_PER_WRITER: usize = 64;
/// Acknowledged writes (over all clients) before the writer is killed.
const ACKS_BEFORE_KILL: usize = 3000;
/// Bytes of a value in the write load.
const VALUE_BYTES: usize = 700;
/// Longest wait for an event the test waits for (acknowledgements, a
/// reader catching up, a log line).
const EVENT_TIMEOUT: Duration = Duration::from_secs(60);
const SIGSTOP: i32 = libc::SIGSTOP;
const SIGCONT: i32 = libc::SIGCONT;

/// A storage node, a writer and a reader, each a process.
struct Cluster {
    files: Files,
    storage: Process,
    storage_port: u16,
    /// Storage-node log lines that the test waits for.
    storage_lines: mpsc::Receiver<String>,
    writer: Option<Process>,
    writer_addr: SocketAddr,
    reader: Process,
    reader_addr: SocketAddr,
}

impl Cluster {
    /// Starts the three; `pick` chooses the storage-node log lines to keep.
    fn start(test_name: &str, settings: StorageSettings, pick: fn(&str) -> Option<String>) -> Self {
        let files = Files::new();
        let (storage, storage_port, storage_lines) =
            process::start_storage(test_name, &files, settings, pick);
        let (writer, writer_addr) = start_writer(&files, storage_port, "writer");
        let (reader, reader_addr) = process::start_compute(
            "reader",
            storage_port,
            &files.compute_certs,
            &["--read-only"],
            "info",
        );
        Self {
            files,
            storage,
            storage_port,
            storage_lines,
            writer: Some(writer),
            writer_addr,
            reader,
            reader_addr,
        }
    }
}

fn start_writer(files: &Files, storage_port: u16, what: &'static str) -> (Process, SocketAddr) {
    process::start_compute(what, storage_port, &files.compute_certs, &[], "info")
}

fn connect(addr: SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}/"))
        .expect("client")
        .get_connection()
        .expect("connect to a compute node")
}

/// The reply to `args`, an error reply as `Err` with its text.
fn call(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut command = redis::cmd(std::str::from_utf8(args[0]).expect("a command name"));
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query(con).map_err(|e| e.to_string())
}

fn bulk(value: &str) -> Value {
    Value::BulkString(value.as_bytes().to_vec())
}

/// What GET of a key answers: `None` for nil.
type State = Option<String>;

fn get(con: &mut redis::Connection, key: &str) -> State {
    match call(con, &[b"GET", key.as_bytes()]) {
        Ok(Value::Nil) => None,
        Ok(Value::BulkString(value)) => Some(String::from_utf8(value).expect("a UTF-8 value")),
        other => panic!("GET {key} answered {other:?}"),
    }
}

/// What one writing client left: each key's last acknowledged state, and
/// the write it had sent when the writer died (each key it names, with the
/// state it would have set).
#[derive(Default)]
struct WriterReport {
    acked: BTreeMap<String, State>,
    unacknowledged: Vec<(String, State)>,
}

fn load_value(client: usize, i: usize) -> String {
    let mut value = format!("{client}:{i}:");
    let fill = (b'a' + (i % 26) as u8) as char;
    value.extend(std::iter::repeat_n(fill, VALUE_BYTES - value.len()));
    value
}

/// Writes through `addr` until a write fails: SETs, every tenth a DEL and
/// every fifth an MSET of two keys, over [`KEYS_PER_WRITER`] keys; counts
/// acknowledgements in `acks` and says on `reached` when they pass
/// [`ACKS_BEFORE_KILL`].
fn write_until_it_fails(
    addr: SocketAddr,
    client: usize,
    acks: &AtomicUsize,
    reached: &mpsc::Sender<()>,
) -> WriterReport {
    let mut con = connect(addr);
    let mut report = WriterReport::default();
    for i in 0.. {
        let key = |n: usize| format!("c{client}:k{}", n % KEYS_PER_WRITER);
        let value = load_value(client, i);
        let (command, writes): (Vec<Vec<u8>>, Vec<(String, State)>) = match i % 10 {
            3 => (
                vec![b"DEL".to_vec(), key(i).into_bytes()],
                vec![(key(i), None)],
            ),
            5 | 8 => (
                vec![
                    b"MSET".to_vec(),
                    key(i).into_bytes(),
                    value.clone().into_bytes(),
                    key(i + 7).into_bytes(),
                    value.clone().into_bytes(),
                ],
                vec![(key(i), Some(value.clone())), (key(i + 7), Some(value))],
            ),
            _ => (
                vec![
                    b"SET".to_vec(),
                    key(i).into_bytes(),
                    value.clone().into_bytes(),
                ],
                vec![(key(i), Some(value))],
            ),
        };
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        match call(&mut con, &args) {
            Ok(Value::Okay | Value::Int(_)) => {
                report.acked.extend(writes);
                if acks.fetch_add(1, Ordering::Relaxed) + 1 == ACKS_BEFORE_KILL {
                    let _ = reached.send(());
                }
            }
            Ok(other) => panic!("client {client}: {:?} answered {other:?}", command[0]),
            Err(_) => {
                report.unacknowledged = writes;
                break;
            }
        }
    }
    report
}

/// Checks through `con` that each client's acknowledged writes stand, and
/// that its unacknowledged one is there whole or not at all.
fn check_writes(con: &mut redis::Connection, reports: &[WriterReport], step: &str) {
    for (client, report) in reports.iter().enumerate() {
        let unacknowledged: BTreeMap<&String, &State> =
            report.unacknowledged.iter().map(|(k, s)| (k, s)).collect();
        for n in 0..KEYS_PER_WRITER {
            let key = format!("c{client}:k{n}");
            let acked = report.acked.get(&key).cloned().flatten();
            let got = get(con, &key);
            if got == acked {
                continue;
            }
            let pending = unacknowledged.get(&key).copied();
            assert!(
                pending == Some(&got),
                "{step}: {key} reads {:?}, not its acknowledged {:?} (nor the unacknowledged {:?})",
                got.as_deref().map(short),
                acked.as_deref().map(short),
                pending.map(|p| p.as_deref().map(short)),
            );
        }
        // An unacknowledged MSET whose two keys held different states
        // before must have landed on both or on neither.
        let changed: Vec<&String> = unacknowledged
            .keys()
            .copied()
            .filter(|key| {
                report.acked.get(*key).cloned().flatten().as_ref() != unacknowledged[key].as_ref()
            })
            .collect();
        if changed.len() == 2 {
            let first = get(con, changed[0]) == *unacknowledged[changed[0]];
            let second = get(con, changed[1]) == *unacknowledged[changed[1]];
            assert_eq!(
                first, second,
                "{step}: client {client}'s unacknowledged MSET landed on one key of two"
            );
        }
    }
}

/// The start of a long value, for messages.
fn short(value: &str) -> &str {
    &value[..value.len().min(24)]
}

/// Waits until `con` reads `want` at `key`.
fn wait_for(con: &mut redis::Connection, key: &str, want: &State, what: &str) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    while get(con, key) != *want {
        assert!(
            Instant::now() < deadline,
            "{what}: {key} never read {want:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn expect_fenced(reply: Result<Value, String>, what: &str) {
    match reply {
        Err(error)
            if error.to_ascii_lowercase().contains("readonly") && error.contains("fenced") => {}
        other => panic!("{what}: answered {other:?}, not the fenced error"),
    }
}

const KILL_TEST: &str =
    "a_writer_killed_under_load_loses_no_acknowledged_write_once_a_reader_is_promoted";

#[test]
fn a_writer_killed_under_load_loses_no_acknowledged_write_once_a_reader_is_promoted() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let mut cluster = Cluster::start(KILL_TEST, StorageSettings::new(PARTITIONS), |_| None);
    let acks = Arc::new(AtomicUsize::new(0));
    let (reached, kill_now) = mpsc::channel();
    let clients: Vec<_> = (0..WRITERS)
        .map(|client| {
            let (acks, reached) = (Arc::clone(&acks), reached.clone());
            let addr = cluster.writer_addr;
            std::thread::spawn(move || write_until_it_fails(addr, client, &acks, &reached))
        })
        .collect();
    kill_now
        .recv_timeout(EVENT_TIMEOUT)
        .expect("the write load is acknowledged");
    cluster.writer.take().expect("the writer").kill9();
    let reports: Vec<WriterReport> = clients
        .into_iter()
        .map(|c| c.join().expect("a writing client"))
        .collect();
    let acknowledged = acks.load(Ordering::Relaxed);
    assert!(acknowledged >= ACKS_BEFORE_KILL);
    for (client, report) in reports.iter().enumerate() {
        assert!(
            !report.unacknowledged.is_empty(),
            "client {client} stopped with no write left unacknowledged"
        );
    }

    let mut promoted = connect(cluster.reader_addr);
    let started = Instant::now();
    assert_eq!(
        call(&mut promoted, &[b"REPLICAOF", b"NO", b"ONE"]),
        Ok(Value::Okay)
    );
    eprintln!(
        "promoted in {:.1} ms after {acknowledged} acknowledged writes",
        started.elapsed().as_secs_f64() * 1e3
    );
    match call(&mut promoted, &[b"ROLE"]) {
        Ok(Value::Array(role)) => assert_eq!(role.first(), Some(&bulk("master"))),
        other => panic!("ROLE answered {other:?}"),
    }
    check_writes(&mut promoted, &reports, "after the promotion");
    assert_eq!(
        call(&mut promoted, &[b"SET", b"after-promotion", b"new"]),
        Ok(Value::Okay)
    );

    // The old writer started again is a new writer: it fences the promoted
    // one, which from then on refuses writes rather than losing them.
    let (_restarted, restarted_addr) =
        start_writer(&cluster.files, cluster.storage_port, "restarted writer");
    expect_fenced(
        call(&mut promoted, &[b"SET", b"after-restart", b"lost?"]),
        "a SET on the promoted node once a newer writer started",
    );
    let mut restarted = connect(restarted_addr);
    check_writes(&mut restarted, &reports, "after the old writer's restart");
    assert_eq!(get(&mut restarted, "after-promotion"), Some("new".into()));
    assert_eq!(get(&mut restarted, "after-restart"), None);
    // The fenced node follows the newest writer.
    assert_eq!(
        call(&mut restarted, &[b"SET", b"after-restart", b"kept"]),
        Ok(Value::Okay)
    );
    wait_for(
        &mut promoted,
        "after-restart",
        &Some("kept".into()),
        "the fenced node follows the restarted writer",
    );
    drop(cluster);
}

const FREEZE_TEST: &str = "a_frozen_writer_is_fenced_when_it_runs_again_after_a_promotion";

#[test]
fn a_frozen_writer_is_fenced_when_it_runs_again_after_a_promotion() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let cluster = Cluster::start(FREEZE_TEST, StorageSettings::new(PARTITIONS), |_| None);
    let writer = cluster.writer.as_ref().expect("the writer");
    let mut old = connect(cluster.writer_addr);
    let mut reader = connect(cluster.reader_addr);
    assert_eq!(call(&mut old, &[b"SET", b"k", b"old"]), Ok(Value::Okay));
    wait_for(&mut reader, "k", &Some("old".into()), "the reader follows");

    writer.signal(SIGSTOP);
    // A write sent to the frozen writer waits in its socket.
    let mut frozen = TcpStream::connect(cluster.writer_addr).expect("connect");
    frozen
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\nzombie\r\n")
        .expect("send a SET");
    assert_eq!(
        call(&mut reader, &[b"REPLICAOF", b"NO", b"ONE"]),
        Ok(Value::Okay)
    );
    assert_eq!(call(&mut reader, &[b"SET", b"k", b"new"]), Ok(Value::Okay));
    writer.signal(SIGCONT);

    let mut reply = Vec::new();
    let mut byte = [0; 1];
    while !reply.ends_with(b"\r\n") {
        let n = frozen.read(&mut byte).expect("the frozen writer's reply");
        assert_eq!(n, 1, "the frozen writer closed the connection unanswered");
        reply.push(byte[0]);
    }
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("-READONLY") && reply.contains("fenced"),
        "the SET sent while the writer was frozen answered {reply:?}"
    );
    // Fenced, the old writer follows the new one as a reader does.
    match call(&mut old, &[b"SET", b"k", b"later"]) {
        Err(error) if error.to_ascii_lowercase().contains("readonly") => {}
        other => panic!("a later SET on the old writer answered {other:?}"),
    }
    assert_eq!(get(&mut reader, "k"), Some("new".into()));
    wait_for(
        &mut old,
        "k",
        &Some("new".into()),
        "the fenced writer follows",
    );
    assert_eq!(
        call(&mut reader, &[b"SET", b"k", b"newer"]),
        Ok(Value::Okay)
    );
    wait_for(
        &mut old,
        "k",
        &Some("newer".into()),
        "the fenced writer follows",
    );
    match call(&mut old, &[b"ROLE"]) {
        Ok(Value::Array(role)) => assert_eq!(role.first(), Some(&bulk("slave"))),
        other => panic!("ROLE on the fenced writer answered {other:?}"),
    }
    // Its lag counts what it wrote itself as applied.
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let info = match call(&mut old, &[b"INFO", b"replication"]) {
            Ok(Value::BulkString(info)) => String::from_utf8(info).expect("UTF-8"),
            Ok(Value::VerbatimString { text, .. }) => text,
            other => panic!("INFO replication answered {other:?}"),
        };
        if info.contains("splitkv_lag_entries:0\r\n") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fenced writer never caught up: {info}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

const STORAGE_KILL_TEST: &str =
    "readers_follow_again_after_kill_9_of_the_storage_node_and_serve_no_stale_value";
/// Keys written before and after the storage node's restart.
const RESTART_KEYS: usize = 200;

fn restart_key(n: usize) -> String {
    format!("restart:{n}")
}

/// What key `n` holds once the writes after the restart are done:
/// overwritten if even, deleted if odd.
fn after_restart(n: usize) -> State {
    n.is_multiple_of(2).then(|| format!("after:{n}"))
}

#[test]
fn readers_follow_again_after_kill_9_of_the_storage_node_and_serve_no_stale_value() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let mut cluster = Cluster::start(STORAGE_KILL_TEST, StorageSettings::new(PARTITIONS), |_| {
        None
    });
    let (_second, second_addr) = process::start_compute(
        "second reader",
        cluster.storage_port,
        &cluster.files.compute_certs,
        &["--read-only"],
        "info",
    );
    let mut writer = connect(cluster.writer_addr);
    let mut readers = [connect(cluster.reader_addr), connect(second_addr)];
    for n in 0..RESTART_KEYS {
        let (key, value) = (restart_key(n), format!("before:{n}"));
        assert_eq!(
            call(&mut writer, &[b"SET", key.as_bytes(), value.as_bytes()]),
            Ok(Value::Okay)
        );
    }
    let last = RESTART_KEYS - 1;
    for reader in &mut readers {
        let want = Some(format!("before:{last}"));
        wait_for(reader, &restart_key(last), &want, "a reader follows");
    }

    cluster.storage.kill9();
    let settings = StorageSettings {
        port: cluster.storage_port,
        ..StorageSettings::new(PARTITIONS)
    };
    let (storage, _, _) =
        process::start_storage(STORAGE_KILL_TEST, &cluster.files, settings, |_| None);
    cluster.storage = storage;
    // The writer reconnects: a write refused meanwhile is sent again.
    for n in 0..RESTART_KEYS {
        let key = restart_key(n);
        let value = after_restart(n);
        let args: Vec<&[u8]> = match &value {
            Some(value) => vec![b"SET", key.as_bytes(), value.as_bytes()],
            None => vec![b"DEL", key.as_bytes()],
        };
        let deadline = Instant::now() + EVENT_TIMEOUT;
        while let Err(e) = call(&mut writer, &args) {
            assert!(Instant::now() < deadline, "{key} after the restart: {e}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for (i, reader) in readers.iter_mut().enumerate() {
        let what = format!("reader {i} after the storage node's restart");
        wait_for(reader, &restart_key(last), &after_restart(last), &what);
        for n in 0..RESTART_KEYS {
            assert_eq!(get(reader, &restart_key(n)), after_restart(n), "{what}");
        }
    }
}

const STOP_TEST: &str = "a_stopped_reader_is_cut_off_and_the_storage_node_stays_bounded";
/// The storage node's stall bound in this test, in milliseconds: long
/// enough that a node without a bound on what it sends a stopped reader
/// would queue far more than [`STOPPED_EXTRA_BOUND_BYTES`] meanwhile.
const STALL_MS: u64 = 3_000;
/// What the storage node logs when it cuts a stalled reader off.
const STALL_LINE: &str = "closing the key-log stream of a reader";
/// Keys written in each phase, and their length: the key-log bytes a phase
/// adds (125 MiB) are far more than [`STOPPED_EXTRA_BOUND_BYTES`].
const PHASE_KEYS: usize = 128 * 1024;
const PHASE_KEY_BYTES: usize = 1000;
/// Key-log bytes of one export chunk on the storage node.
const EXPORT_CHUNK_BYTES: u64 = 1 << 20;
/// How much more the storage node's resident memory may grow while the
/// reader is stopped than while it reads: per partition, the follow window
/// and the export chunk sent past it.
const STOPPED_EXTRA_BOUND_BYTES: u64 =
    PARTITIONS as u64 * (splitkv_common::message::FOLLOW_WINDOW_BYTES + EXPORT_CHUNK_BYTES);
/// SETs sent before their replies are read.
const PIPELINE: usize = 512;
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(5);

fn phase_key(phase: &str, n: usize) -> String {
    let mut key = format!("{phase}:{n}:");
    key.extend(std::iter::repeat_n('k', PHASE_KEY_BYTES - key.len()));
    key
}

/// SETs [`PHASE_KEYS`] keys of `phase` through `con` in pipelines, each to
/// a short value naming it.
fn set_phase_keys(con: &mut redis::Connection, phase: &str) {
    let keys: Vec<usize> = (0..PHASE_KEYS).collect();
    for chunk in keys.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for n in chunk {
            pipe.cmd("SET")
                .arg(phase_key(phase, *n))
                .arg(format!("{phase}:{n}"));
        }
        let replies: Vec<Value> = pipe.query(con).expect("a pipeline of SETs");
        assert!(replies.iter().all(|r| *r == Value::Okay), "{replies:?}");
    }
}

/// Runs `phase` while sampling `pid`'s resident memory, as a whole and
/// what it allocated itself; returns how far each peak rose above where it
/// started.
fn rss_growth(pid: u32, phase: impl FnOnce()) -> [u64; 2] {
    let fields = ["VmRSS:", "RssAnon:"];
    let start = fields.map(|field| process::status_bytes(pid, field).expect("a live node"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let samplers = fields
        .map(|field| process::sample_rss(vec![pid], field, Arc::clone(&stop), RSS_SAMPLE_INTERVAL));
    phase();
    stop.store(true, Ordering::Relaxed);
    let mut growth = [0; 2];
    for ((growth, sampler), start) in growth.iter_mut().zip(samplers).zip(start) {
        *growth = sampler.join().expect("sampler")[0].saturating_sub(start);
    }
    growth
}

#[test]
fn a_stopped_reader_is_cut_off_and_the_storage_node_stays_bounded() {
    if process::run_storage_child_if_asked() {
        return;
    }
    // No checkpoints while serving: a checkpoint folds a copy of its
    // partition's keys, and with two partitions of 125 MiB of keys per
    // phase that memory would swamp what this test measures (the follow
    // streams' buffers).
    let settings = StorageSettings {
        follow_stall_ms: STALL_MS,
        checkpoint_every_keylog_bytes: 0,
        ..StorageSettings::new(PARTITIONS)
    };
    let cluster = Cluster::start(STOP_TEST, settings, |line| {
        line.contains(STALL_LINE).then(|| line.to_string())
    });
    let mut writer = connect(cluster.writer_addr);
    let mut reader = connect(cluster.reader_addr);
    let last = |phase: &str| {
        let n = PHASE_KEYS - 1;
        (phase_key(phase, n), Some(format!("{phase}:{n}")))
    };
    // Warm-up: every buffer and stream has carried bytes once.
    set_phase_keys(&mut writer, "warm");
    let (key, want) = last("warm");
    wait_for(&mut reader, &key, &want, "the reader follows");

    let storage = cluster.storage.pid();
    let reading = rss_growth(storage, || {
        set_phase_keys(&mut writer, "reading");
        let (key, want) = last("reading");
        wait_for(&mut reader, &key, &want, "the reader follows");
    });
    cluster.reader.signal(SIGSTOP);
    let stopped = rss_growth(storage, || {
        set_phase_keys(&mut writer, "stopped");
        let cut = cluster
            .storage_lines
            .recv_timeout(EVENT_TIMEOUT)
            .expect("the storage node cuts the stopped reader off");
        eprintln!("storage node: {cut}");
    });
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    eprintln!(
        "the storage node's peak RSS (anonymous) rose {:.1} ({:.1}) MiB while the reader read, {:.1} ({:.1}) MiB while it was stopped; each phase wrote {:.1} MiB of keys",
        mib(reading[0]),
        mib(reading[1]),
        mib(stopped[0]),
        mib(stopped[1]),
        mib((PHASE_KEYS * PHASE_KEY_BYTES) as u64),
    );
    for (what, reading, stopped) in [
        ("RSS", reading[0], stopped[0]),
        ("anonymous RSS", reading[1], stopped[1]),
    ] {
        assert!(
            stopped < reading + STOPPED_EXTRA_BOUND_BYTES,
            "the storage node's peak {what} rose {:.1} MiB while a reader was stopped, against {:.1} MiB while it read (bound: {:.1} MiB more)",
            mib(stopped),
            mib(reading),
            mib(STOPPED_EXTRA_BOUND_BYTES)
        );
    }

    cluster.reader.signal(SIGCONT);
    let mut reader = connect(cluster.reader_addr);
    let (key, want) = last("stopped");
    wait_for(&mut reader, &key, &want, "the reader catches up");
    for n in (0..PHASE_KEYS).step_by(97) {
        for phase in ["reading", "stopped"] {
            assert_eq!(
                get(&mut reader, &phase_key(phase, n)),
                Some(format!("{phase}:{n}"))
            );
        }
    }
}
