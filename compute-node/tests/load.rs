//! 1000 concurrent Redis-protocol clients against a real `compute-node
//! serve` in front of a real storage node, each node a process of its own:
//! every reply is right, none is an error, and the resident memory of both
//! processes stays under [`RSS_BOUND_BYTES`].
//!
//! Most clients pipeline [`DEPTH`] SETs of 4 KiB values, read the replies,
//! then pipeline GETs of the same keys, for [`ROUNDS`] rounds. Every tenth
//! client writes far faster than it reads: it sends all its SETs and then
//! many GETs of the same keys, reading only when the socket takes no more,
//! through a socket with small buffers so that the server has to hold back
//! the replies it cannot send; it reads the rest of its replies at the end.

#[allow(dead_code, reason = "the load test does not signal its nodes")]
mod process;
#[allow(dead_code, reason = "the load test uses the values alone")]
mod support;

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use process::{Files, StorageSettings, sample_rss, status_bytes};
use support::value_for;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Barrier;

const TEST_NAME: &str = "a_thousand_clients_get_what_they_set_in_bounded_memory";
const PARTITIONS: usize = 16;
/// Each of the storage node's write buffers, in bytes.
const STORAGE_BUFFER_BYTES: usize = 256 << 10;
const CLIENTS: usize = 1000;
/// One client in this many writes far faster than it reads.
const FAST_CLIENT_EVERY: usize = 10;
const VALUE_BYTES: usize = 4096;
/// Commands a pipelining client sends before it reads their replies.
const DEPTH: usize = 16;
/// Rounds of DEPTH SETs, then DEPTH GETs, of a pipelining client.
const ROUNDS: usize = 4;
/// Keys a fast client sets, and how many times it then reads each.
const FAST_KEYS: usize = 64;
const FAST_READS_PER_KEY: usize = 8;
/// Send and receive buffer of a fast client's socket, in bytes: far less
/// than the replies it leaves unread.
const FAST_SOCKET_BUFFER_BYTES: u32 = 32 << 10;
/// Bytes a client reads at a time.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Resident memory that neither the compute node nor the storage node may
/// reach.
const RSS_BOUND_BYTES: u64 = 512 << 20;
/// Longest the whole load may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// The compute node's deadline for each request to the storage node, in
/// milliseconds. Far above the default (5 s): on a shared 2-core machine
/// three busy processes may take longer than that to drain the 64 MiB of
/// SETs that arrive at once, and this test checks that every reply comes
/// and is right under load, not how fast (scripts/bench-load.sh measures
/// that, with the defaults).
const REQUEST_TIMEOUT_MS: u64 = 60_000;
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(20);

/// Replies checked so far, by every client.
static REPLIES_CHECKED: AtomicU64 = AtomicU64::new(0);
/// Clients that have read all their replies.
static CLIENTS_FINISHED: AtomicUsize = AtomicUsize::new(0);

fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn key_of(client: usize, k: usize) -> String {
    format!("load-c{client:04}-k{k:03}")
}

fn value_of(client: usize, k: usize) -> Vec<u8> {
    value_for(key_of(client, k).as_bytes(), client as u64, VALUE_BYTES)
}

fn set(out: &mut Vec<u8>, expected: &mut VecDeque<Expect>, client: usize, k: usize) {
    command(
        out,
        &[b"SET", key_of(client, k).as_bytes(), &value_of(client, k)],
    );
    expected.push_back(Expect::Ok);
}

fn get(out: &mut Vec<u8>, expected: &mut VecDeque<Expect>, client: usize, k: usize) {
    command(out, &[b"GET", key_of(client, k).as_bytes()]);
    expected.push_back(Expect::Value { client, k });
}

/// The reply a command should get.
#[derive(Debug)]
enum Expect {
    /// `+OK`.
    Ok,
    /// The value SET for key `k` of `client`.
    Value { client: usize, k: usize },
}

/// One reply: its first byte, its payload (the line or the bulk string,
/// `None` for a nil bulk), and its length in the buffer.
type Parsed<'a> = (u8, Option<&'a [u8]>, usize);

/// Parses one RESP2 reply (simple string, error, integer or bulk string)
/// at the start of `buf`: `None` if it is not all there yet.
fn parse_reply(buf: &[u8]) -> Result<Option<Parsed<'_>>, String> {
    let Some(line_end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let (kind, line) = (buf[0], &buf[1..line_end]);
    match kind {
        b'+' | b'-' | b':' => Ok(Some((kind, Some(line), line_end + 2))),
        b'$' => {
            let len: i64 = std::str::from_utf8(line)
                .ok()
                .and_then(|l| l.parse().ok())
                .ok_or_else(|| format!("bad bulk length {line:?}"))?;
            if len < 0 {
                return Ok(Some((kind, None, line_end + 2)));
            }
            let start = line_end + 2;
            let end = start + len as usize;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err("bulk string without its CRLF".into());
            }
            Ok(Some((kind, Some(&buf[start..end]), end + 2)))
        }
        other => Err(format!("unexpected reply type {:?}", other as char)),
    }
}

/// The replies a client has read, checked in order against what its
/// commands should get.
#[derive(Default)]
struct Replies {
    buf: Vec<u8>,
    start: usize,
    expected: VecDeque<Expect>,
    checked: u64,
}

impl Replies {
    /// Reads what has arrived (waiting for at least one byte) and checks
    /// every complete reply.
    async fn read_some(&mut self, stream: &mut TcpStream) -> Result<(), String> {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + READ_CHUNK_BYTES, 0);
        let read = stream.read(&mut self.buf[len..]).await;
        let n = read.map_err(|e| format!("reading replies: {e}"))?;
        self.buf.truncate(len + n);
        if n == 0 {
            return Err(format!(
                "the server closed the connection with {} replies to come",
                self.expected.len()
            ));
        }
        while let Some((kind, payload, used)) = parse_reply(&self.buf[self.start..])? {
            let expect = self.expected.pop_front().ok_or("a reply to no command")?;
            match (kind, &expect) {
                (b'+', Expect::Ok) if payload == Some(b"OK") => {}
                (b'$', Expect::Value { client, k })
                    if payload == Some(value_of(*client, *k).as_slice()) => {}
                _ => {
                    return Err(format!(
                        "{expect:?} got {:?} {:?}",
                        kind as char,
                        payload.map(|p| String::from_utf8_lossy(&p[..p.len().min(80)]))
                    ));
                }
            }
            self.checked += 1;
            REPLIES_CHECKED.fetch_add(1, Ordering::Relaxed);
            self.start += used;
        }
        Ok(())
    }

    /// Reads and checks until every expected reply is in.
    async fn read_all(&mut self, stream: &mut TcpStream) -> Result<(), String> {
        while !self.expected.is_empty() {
            self.read_some(stream).await?;
        }
        Ok(())
    }
}

/// What a client did.
#[derive(Debug, Default)]
struct ClientReport {
    replies: u64,
    /// Times a fast client's socket took no more and it had to read.
    pushbacks: u64,
}

/// Rounds of DEPTH SETs and then DEPTH GETs, each pipelined and then read.
async fn pipelining_client(mut stream: TcpStream, client: usize) -> Result<ClientReport, String> {
    let mut replies = Replies::default();
    let mut out = Vec::new();
    for round in 0..ROUNDS {
        let keys = round * DEPTH..(round + 1) * DEPTH;
        for op in [set, get] {
            out.clear();
            for k in keys.clone() {
                op(&mut out, &mut replies.expected, client, k);
            }
            stream
                .write_all(&out)
                .await
                .map_err(|e| format!("writing commands: {e}"))?;
            replies.read_all(&mut stream).await?;
        }
    }
    Ok(ClientReport {
        replies: replies.checked,
        pushbacks: 0,
    })
}

/// All SETs, then FAST_READS_PER_KEY GETs of each key, written as fast as
/// the socket takes them; reads only when it takes no more, and at the end.
async fn fast_client(mut stream: TcpStream, client: usize) -> Result<ClientReport, String> {
    let mut replies = Replies::default();
    let mut out = Vec::new();
    for k in 0..FAST_KEYS {
        set(&mut out, &mut replies.expected, client, k);
    }
    for _ in 0..FAST_READS_PER_KEY {
        for k in 0..FAST_KEYS {
            get(&mut out, &mut replies.expected, client, k);
        }
    }
    let mut pushbacks = 0;
    let mut written = 0;
    while written < out.len() {
        match stream.try_write(&out[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                pushbacks += 1;
                replies.read_some(&mut stream).await?;
            }
            Err(e) => return Err(format!("writing commands: {e}")),
        }
    }
    replies.read_all(&mut stream).await?;
    Ok(ClientReport {
        replies: replies.checked,
        pushbacks,
    })
}

async fn connect(addr: SocketAddr, fast: bool) -> Result<TcpStream, String> {
    let socket = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    if fast {
        socket
            .set_recv_buffer_size(FAST_SOCKET_BUFFER_BYTES)
            .and_then(|()| socket.set_send_buffer_size(FAST_SOCKET_BUFFER_BYTES))
            .map_err(|e| format!("socket buffers: {e}"))?;
    }
    socket
        .connect(addr)
        .await
        .map_err(|e| format!("connecting: {e}"))
}

/// Connects every client, starts them together once all are connected,
/// and returns each one's report.
async fn run_clients(addr: SocketAddr) -> Vec<Result<ClientReport, String>> {
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                let fast = client % FAST_CLIENT_EVERY == FAST_CLIENT_EVERY - 1;
                let stream = connect(addr, fast).await;
                barrier.wait().await;
                let stream = stream?;
                let _ = stream.set_nodelay(true);
                let report = if fast {
                    fast_client(stream, client).await
                } else {
                    pipelining_client(stream, client).await
                };
                CLIENTS_FINISHED.fetch_add(1, Ordering::Relaxed);
                report
            })
        })
        .collect();
    let mut reports = Vec::with_capacity(CLIENTS);
    for task in tasks {
        reports.push(
            task.await
                .unwrap_or_else(|e| Err(format!("client task: {e}"))),
        );
    }
    reports
}

#[test]
fn a_thousand_clients_get_what_they_set_in_bounded_memory() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let files = Files::new();
    let settings = StorageSettings {
        buffer_bytes: STORAGE_BUFFER_BYTES,
        ..StorageSettings::new(PARTITIONS)
    };
    let (storage, storage_port, _) = process::start_storage(TEST_NAME, &files, settings, |_| None);
    let (compute, addr) = process::start_compute(
        "compute node",
        storage_port,
        &files.compute_certs,
        &["--request-timeout-ms", &REQUEST_TIMEOUT_MS.to_string()],
        "info,compute_node::resp=debug",
    );
    let pids = vec![compute.pid(), storage.pid()];
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(
        pids.clone(),
        "VmRSS:",
        Arc::clone(&stop),
        RSS_SAMPLE_INTERVAL,
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let finished =
        runtime.block_on(async { tokio::time::timeout(LOAD_TIMEOUT, run_clients(addr)).await });
    let elapsed = started.elapsed();
    let hwm: Vec<u64> = pids
        .iter()
        .map(|pid| status_bytes(*pid, "VmHWM:").expect("VmHWM of a live node"))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let sampled = sampler.join().expect("sampler");
    let fast_clients = CLIENTS / FAST_CLIENT_EVERY;
    let expected_replies = ((CLIENTS - fast_clients) * ROUNDS * DEPTH * 2
        + fast_clients * FAST_KEYS * (1 + FAST_READS_PER_KEY)) as u64;
    let replies = REPLIES_CHECKED.load(Ordering::Relaxed);
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    eprintln!(
        "{CLIENTS} clients: {replies} of {expected_replies} replies checked in {:.1} s ({:.0} ops/s); peak RSS compute {:.1} MiB (sampled {:.1}), storage {:.1} MiB (sampled {:.1})",
        elapsed.as_secs_f64(),
        replies as f64 / elapsed.as_secs_f64(),
        mib(hwm[0]),
        mib(sampled[0]),
        mib(hwm[1]),
        mib(sampled[1]),
    );
    let reports = finished.unwrap_or_else(|_| {
        panic!(
            "the load did not finish within {LOAD_TIMEOUT:?}: {} of {CLIENTS} clients finished, {replies} of {expected_replies} replies checked",
            CLIENTS_FINISHED.load(Ordering::Relaxed)
        )
    });
    let failures: Vec<&String> = reports.iter().filter_map(|r| r.as_ref().err()).collect();
    let pushbacks: u64 = reports.iter().flatten().map(|r| r.pushbacks).sum();
    assert!(
        failures.is_empty(),
        "{} of {CLIENTS} clients failed, for example: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        pushbacks > 0,
        "no fast client ever found its socket full: none wrote faster than the server read"
    );
    let answered: u64 = reports.iter().flatten().map(|r| r.replies).sum();
    assert_eq!(answered, expected_replies, "every command answered");
    for (name, peak) in ["compute node", "storage node"].iter().zip(&hwm) {
        assert!(
            *peak < RSS_BOUND_BYTES,
            "the {name}'s peak RSS {:.1} MiB reached the bound of {:.0} MiB",
            mib(*peak),
            mib(RSS_BOUND_BYTES)
        );
    }
    drop(compute);
    drop(storage);
}
