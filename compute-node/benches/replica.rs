//! Reader benchmark: how soon an acknowledged write is visible on a reader
//! (a read-only compute node following the writer), and how long a
//! reader's promotion to the writer takes, next to a full index rebuild of
//! the same data in the same run.
//!
//! One process holds a storage node (16 partitions, on loopback QUIC),
//! a writer engine and a reader engine; all share this machine's cores.
//!
//! * Freshness: 16 threads put 4 KiB values through the writer (the
//!   evaluator's write load) while a probe thread puts a fresh key through
//!   the writer and, from its acknowledgement, waits for the reader to hold
//!   it; acknowledge-to-visible latencies (p50, p99, max) are shown beside
//!   the probes' own put latencies.
//! * Idle cost: the process's CPU use over 3 s with no write, with the one
//!   reader and with 7 more.
//! * Promotion: with `--keys` keys (default 1 Mi) on the node and one
//!   thread still writing through the old writer, `Engine::promote` on the
//!   reader; beside it, the rebuild time of a fresh engine over the same
//!   key logs.
//!
//! `cargo bench -p compute-node --bench replica` (`-- --seconds N`,
//! `-- --keys N`).

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use compute_node::Engine;
use hdrhistogram::Histogram;
use support::BenchNode;

const WRITER_THREADS: usize = 16;
const LOAD_VALUE_BYTES: usize = 4096;

struct Options {
    seconds: u64,
    keys: u64,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    Options {
        seconds: value("--seconds", 10),
        keys: value("--keys", 1 << 20),
    }
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1e3
}

fn show(name: &str, h: &Histogram<u64>) {
    println!(
        "{name:<34} p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>8.3} ms  ({} samples)",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max()),
        h.len()
    );
}

/// 16 threads of 4 KiB puts through `writer` until `stop`; returns the
/// puts acknowledged.
fn load(writer: &Engine, stop: &AtomicBool, threads: usize) -> u64 {
    let puts = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for thread in 0..threads as u64 {
            let puts = &puts;
            scope.spawn(move || {
                let value = vec![0xa5u8; LOAD_VALUE_BYTES];
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let key = format!("load:{thread}:{}", i % 10_000);
                    if writer.put(key.as_bytes(), &value).is_err() {
                        return;
                    }
                    puts.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
    });
    puts.into_inner()
}

fn freshness(writer: &Engine, reader: &Engine, seconds: u64) {
    let stop = AtomicBool::new(false);
    let mut visible = Histogram::<u64>::new(3).expect("histogram");
    let mut acked = Histogram::<u64>::new(3).expect("histogram");
    let mut lost = 0u64;
    let started = Instant::now();
    let puts = std::thread::scope(|scope| {
        let loading = scope.spawn(|| load(writer, &stop, WRITER_THREADS));
        let mut probe = 0u64;
        while started.elapsed() < Duration::from_secs(seconds) {
            let key = format!("probe:{probe}");
            probe += 1;
            let sent = Instant::now();
            writer.put(key.as_bytes(), b"probe").expect("probe put");
            let ack = Instant::now();
            let seen = reader.wait_until(Duration::from_secs(5), |r| r.contains(key.as_bytes()));
            let shown = Instant::now();
            if !seen {
                lost += 1;
                continue;
            }
            let _ = acked.record((ack - sent).as_micros() as u64);
            let _ = visible.record((shown - ack).as_micros() as u64);
        }
        stop.store(true, Ordering::Release);
        loading.join().expect("load threads")
    });
    let secs = started.elapsed().as_secs_f64();
    println!(
        "freshness under {WRITER_THREADS} threads of {LOAD_VALUE_BYTES}-byte puts: \
         {:.0} puts/s for {secs:.1} s",
        puts as f64 / secs
    );
    show("probe put, send to acknowledge", &acked);
    show("probe, acknowledge to visible", &visible);
    if lost > 0 {
        println!("probes not visible within 5 s: {lost}");
    }
}

fn promotion(node: &BenchNode, writer: Engine, reader: Engine, keys: u64) {
    let caught_up = reader.wait_until(Duration::from_secs(60), |r| {
        r.has_applied(&writer.applied_seqs())
    });
    assert!(caught_up, "the reader did not catch up");
    println!("keys on the node: {} (reader's index)", reader.len());
    let stop = AtomicBool::new(false);
    let promoted = std::thread::scope(|scope| {
        let loading = scope.spawn(|| load(&writer, &stop, 1));
        // Let the old writer be mid-stream when the promotion starts.
        while writer.stats().puts < 1000 {
            std::thread::yield_now();
        }
        let promoted = reader.promote().expect("promote");
        stop.store(true, Ordering::Release);
        loading.join().expect("load thread");
        promoted
    });
    println!(
        "promotion with {keys} preloaded keys: {:.1} ms (fenced and reconnected after {:.1} ms; \
         epoch {}, {} entries caught up)",
        promoted.elapsed.as_secs_f64() * 1e3,
        promoted.fenced_after.as_secs_f64() * 1e3,
        promoted.epoch,
        promoted.caught_up_entries
    );
    assert!(
        writer.put(b"after", b"fenced").is_err(),
        "the old writer was not fenced"
    );
    drop(writer);
    let started = Instant::now();
    let fresh = Engine::connect(node.engine_config(false)).expect("connect a fresh reader");
    println!(
        "reference: a fresh engine's connect and rebuild of the same key logs: {:.1} ms \
         ({} ms rebuild, {} keys)",
        started.elapsed().as_secs_f64() * 1e3,
        fresh.stats().rebuild_ms,
        fresh.len()
    );
}

/// CPU seconds this process has used (user and system), at the kernel's
/// clock-tick resolution (assumed 100 Hz).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the 14th and 15th fields, 12 and 13 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU the process uses over `idle` with `readers` idle readers (and the
/// writer and the storage node) connected.
fn idle_cpu(node: &BenchNode, readers: usize, idle: Duration) {
    let connected: Vec<Engine> = (0..readers)
        .map(|_| Engine::connect(node.engine_config(false)).expect("connect a reader"))
        .collect();
    for reader in &connected {
        assert!(reader.wait_until(Duration::from_secs(60), |r| r.following()));
    }
    let before = cpu_seconds();
    std::thread::sleep(idle);
    let used = cpu_seconds() - before;
    println!(
        "idle with {} more readers: {:.3} CPU s over {:.1} s ({:.2}% of one core)",
        readers,
        used,
        idle.as_secs_f64(),
        used / idle.as_secs_f64() * 100.0
    );
}

fn main() {
    let options = options();
    let node = BenchNode::with_keys(options.keys);
    let writer = Engine::connect(node.engine_config(true)).expect("connect the writer");
    let reader = Engine::connect(node.engine_config(false)).expect("connect a reader");
    assert!(reader.wait_until(Duration::from_secs(30), |r| r.following()));
    idle_cpu(&node, 0, Duration::from_secs(3));
    idle_cpu(&node, 7, Duration::from_secs(3));
    freshness(&writer, &reader, options.seconds);
    promotion(&node, writer, reader, options.keys);
}
