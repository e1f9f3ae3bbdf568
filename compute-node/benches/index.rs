//! Index benchmark: bytes per key (the index's own accounting and the
//! process's RSS growth) and insert and lookup throughput on 1 and 2
//! threads, for the compute node's index and, in the same run, for
//! `hashbrown::HashMap<Vec<u8>, Location>`; then the rebuild of the index
//! through a real storage node on loopback (1 Mi and 4 Mi 8-byte keys, one
//! key-log frame per put), next to the raw export of the same key logs
//! (bytes received and dropped) and to decoding and inserting the exported
//! bytes without the network (into the index and into hashbrown).
//!
//! Each memory case runs in a child process of its own, so that the RSS
//! delta of one case is not hidden by memory an earlier case freed; so does
//! each rebuild and each decode-and-insert run, on a fresh heap as a
//! starting compute node's.
//!
//! The memory figures include 1 Mi 8-byte keys with a TTL (an expiry slot
//! in each entry), without one, and given one after insertion (each key
//! then moved once, its old bytes left dead until compaction), in memory
//! alone.
//!
//! `cargo bench -p compute-node --bench index` (add `-- --quick` for the
//! small sizes only, `-- --rebuild-only` for the rebuild alone, `-- --ttl`
//! for the TTL memory figures alone).

mod support;

use std::hash::BuildHasher;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_node::index::{Index, Location};
use compute_node::{Engine, EngineConfig};
use parking_lot::RwLock;
use splitkv_common::client::{ClientConfig, StorageClient};
use splitkv_common::record::{self, EntryKind, Frame};
use splitkv_common::tls::NodeIdentity;
use support::{BenchNode, REBUILD_PARTITIONS};

type Reference = hashbrown::HashMap<Vec<u8>, Location>;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// The `i`-th key of `len` bytes (distinct for every `i` below 2^(8 len)).
fn fill_key(key: &mut [u8], i: u64) {
    let n = key.len().min(8);
    key[..n].copy_from_slice(&i.to_le_bytes()[..n]);
}

fn location(i: u64) -> Location {
    Location {
        seq: i + 1,
        offset: i * 41,
        len: 41,
        partition: (i % 16) as u16,
        expire_at_ms: 0,
    }
}

/// An expiry for key `i`: some time in 2023, different for each key.
fn expire_at_ms(i: u64) -> u64 {
    1_700_000_000_000 + i * 7
}

/// Child process: builds one structure and prints its accounted bytes
/// and the RSS growth it caused.
fn memory_case(structure: &str, key_len: usize, keys: u64) {
    let before = rss_bytes();
    let mut key = vec![0xabu8; key_len];
    match structure {
        "index-ttl" => {
            let index = Index::new();
            for i in 0..keys {
                fill_key(&mut key, i);
                let location = Location {
                    expire_at_ms: expire_at_ms(i),
                    ..location(i)
                };
                index.apply(&key, location);
            }
            assert_eq!(index.expiring_keys(), keys);
            let accounted = index.stats().memory_bytes;
            println!("{accounted} {}", rss_bytes().saturating_sub(before));
        }
        "index-ttl-later" => {
            let index = Index::new();
            for i in 0..keys {
                fill_key(&mut key, i);
                index.apply(&key, location(i));
            }
            for i in 0..keys {
                fill_key(&mut key, i);
                let location = Location {
                    seq: keys + i + 1,
                    expire_at_ms: expire_at_ms(i),
                    ..location(i)
                };
                index.apply(&key, location);
            }
            assert_eq!(index.expiring_keys(), keys);
            let accounted = index.stats().memory_bytes;
            println!("{accounted} {}", rss_bytes().saturating_sub(before));
        }
        "index" | "index-presized" => {
            let index = Index::new();
            if structure == "index-presized" {
                index.reserve(keys);
            }
            for i in 0..keys {
                fill_key(&mut key, i);
                index.apply(&key, location(i));
            }
            let accounted = index.stats().memory_bytes;
            println!("{accounted} {}", rss_bytes().saturating_sub(before));
        }
        "hashbrown" => {
            let mut map = Reference::default();
            for i in 0..keys {
                fill_key(&mut key, i);
                map.insert(key.clone(), location(i));
            }
            let accounted = map.allocation_size() as u64 + keys * key_len as u64;
            println!("{accounted} {}", rss_bytes().saturating_sub(before));
        }
        other => eprintln!("unknown structure {other}"),
    }
}

fn run_memory_case(structure: &str, key_len: usize, keys: u64) -> Option<(f64, f64)> {
    let exe = std::env::current_exe().ok()?;
    let output = Command::new(exe)
        .args([
            "--memory-case",
            structure,
            &key_len.to_string(),
            &keys.to_string(),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut numbers = text
        .split_whitespace()
        .filter_map(|n| n.parse::<f64>().ok());
    let accounted = numbers.next()?;
    let rss = numbers.next()?;
    Some((accounted / keys as f64, rss / keys as f64))
}

/// Runs `work(thread, range)` on `threads` threads over `0..keys` split
/// evenly; returns operations per second.
fn timed(threads: usize, keys: u64, work: impl Fn(u64, u64) + Sync) -> f64 {
    let start = Barrier::new(threads + 1);
    let per_thread = keys / threads as u64;
    let elapsed = std::thread::scope(|scope| {
        for t in 0..threads as u64 {
            let (work, start) = (&work, &start);
            scope.spawn(move || {
                start.wait();
                work(t * per_thread, (t + 1) * per_thread);
            });
        }
        start.wait();
        Instant::now()
    });
    // The scope returns once every thread has finished.
    let seconds = elapsed.elapsed().as_secs_f64();
    (per_thread * threads as u64) as f64 / seconds
}

fn throughput_index<S: BuildHasher + Sync>(
    index: &Index<S>,
    threads: usize,
    keys: u64,
) -> (f64, f64) {
    let insert = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        for i in from..to {
            fill_key(&mut key, i);
            index.apply(&key, location(i));
        }
    });
    let lookup = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        let mut found = 0u64;
        for i in from..to {
            fill_key(&mut key, i.wrapping_mul(0x9E37_79B9) % keys);
            found += u64::from(index.get(&key).is_some());
        }
        assert_eq!(found, to - from);
    });
    (insert, lookup)
}

/// Key-log chunk of a rebuild: about 1 MiB of one-entry frames with 8-byte keys.
const CHUNK_CHANGES: u64 = 26_214;

/// Inserts through [`Index::apply_many`] a chunk at a time, as a rebuild
/// does; returns operations per second.
fn batched_insert<S: BuildHasher + Sync>(index: &Index<S>, threads: usize, keys: u64) -> f64 {
    timed(threads, keys, |from, to| {
        let mut chunk: Vec<([u8; 8], Location)> = Vec::with_capacity(CHUNK_CHANGES as usize);
        let mut i = from;
        while i < to {
            chunk.clear();
            let end = (i + CHUNK_CHANGES).min(to);
            for j in i..end {
                let mut key = [0u8; 8];
                fill_key(&mut key, j);
                chunk.push((key, location(j)));
            }
            let changes: Vec<(&[u8], Location)> = chunk.iter().map(|(k, l)| (&k[..], *l)).collect();
            index.apply_many(&changes);
            i = end;
        }
    })
}

fn throughput_reference(threads: usize, keys: u64) -> (f64, f64) {
    let map = RwLock::new(Reference::default());
    let insert = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        for i in from..to {
            fill_key(&mut key, i);
            map.write().insert(key.to_vec(), location(i));
        }
    });
    let lookup = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        let mut found = 0u64;
        for i in from..to {
            fill_key(&mut key, i.wrapping_mul(0x9E37_79B9) % keys);
            found += u64::from(map.read().get(&key[..]).is_some());
        }
        assert_eq!(found, to - from);
    });
    (insert, lookup)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--memory-case") {
        let key_len = args[3].parse().expect("key length");
        let keys = args[4].parse().expect("key count");
        memory_case(&args[2], key_len, keys);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--rebuild-case") {
        let keys = args[4].parse().expect("key count");
        rebuild_child(&args[2], &args[3], &args[5], keys);
        return;
    }
    if args.iter().any(|a| a == "--ttl") {
        ttl_memory();
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let mebi = 1u64 << 20;
    if !args.iter().any(|a| a == "--rebuild-only") {
        memory_and_throughput(quick);
    }
    println!();
    let sizes: &[u64] = if quick { &[mebi] } else { &[mebi, 4 * mebi] };
    for &keys in sizes {
        rebuild_case(keys);
    }
}

/// Index memory for 1 Mi 8-byte keys without a TTL, with one, and given
/// one after insertion.
fn ttl_memory() {
    let keys = 1u64 << 20;
    println!(
        "memory with TTLs, {keys} 8-byte keys (bytes per key: accounted / RSS delta; \
         bound 32 without a TTL, 40 with one)"
    );
    for (name, structure) in [
        ("no TTL", "index"),
        ("a TTL from insertion", "index-ttl"),
        ("a TTL set after insertion (moved)", "index-ttl-later"),
    ] {
        let shown = run_memory_case(structure, 8, keys).map_or_else(
            || "failed".to_string(),
            |(a, rss)| format!("{a:.1} / {rss:.1}"),
        );
        println!("  {name:<36} {shown:>14}");
    }
}

fn memory_and_throughput(quick: bool) {
    let mebi = 1u64 << 20;
    let mut cases = vec![
        (8usize, mebi),
        (16, mebi),
        (40, mebi),
        (100, mebi),
        (1024, mebi / 4),
    ];
    if !quick {
        cases.push((1024, mebi));
        cases.push((8, 16 * mebi));
    }
    println!(
        "memory (bytes per key: accounted / RSS delta; bound for the index: 32 for 8-byte keys, key length + 24)"
    );
    println!(
        "{:>9} {:>9} {:>22} {:>22} {:>22}",
        "key bytes", "keys", "index", "index reserved", "hashbrown<Vec<u8>,_>"
    );
    for (key_len, keys) in cases {
        let show = |r: Option<(f64, f64)>| {
            r.map_or_else(
                || "failed".to_string(),
                |(a, rss)| format!("{a:.1} / {rss:.1}"),
            )
        };
        let index = show(run_memory_case("index", key_len, keys));
        let presized = show(run_memory_case("index-presized", key_len, keys));
        let reference = show(run_memory_case("hashbrown", key_len, keys));
        println!("{key_len:>9} {keys:>9} {index:>22} {presized:>22} {reference:>22}");
    }
    println!();
    ttl_memory();

    let keys = if quick { mebi / 4 } else { mebi };
    println!();
    println!("throughput, {keys} 8-byte keys (Mops/s; hashbrown behind one RwLock)");
    println!(
        "{:>7} {:>14} {:>14} {:>16} {:>16} {:>16} {:>16}",
        "threads",
        "index insert",
        "index lookup",
        "presized insert",
        "presized batched",
        "hashbrown insert",
        "hashbrown lookup"
    );
    for threads in [1usize, 2] {
        let (insert, lookup) = throughput_index(&Index::new(), threads, keys);
        let presized = Index::new();
        presized.reserve(keys);
        let (presized_insert, _) = throughput_index(&presized, threads, keys);
        let batched = Index::new();
        batched.reserve(keys);
        let batched_insert = batched_insert(&batched, threads, keys);
        let (ref_insert, ref_lookup) = throughput_reference(threads, keys);
        println!(
            "{threads:>7} {:>14.2} {:>14.2} {:>16.2} {:>16.2} {:>16.2} {:>16.2}",
            insert / 1e6,
            lookup / 1e6,
            presized_insert / 1e6,
            batched_insert / 1e6,
            ref_insert / 1e6,
            ref_lookup / 1e6
        );
    }
}

/// Runs of each rebuild measurement (the best and the worst are shown).
const REBUILD_RUNS: usize = 5;

/// CPU seconds this process (storage node included) has used, user and
/// system, at the kernel's clock-tick resolution (assumed 100 Hz).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses.
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
    // utime and stime: fields 14 and 15 of the line, 11 and 12 here.
    (ticks(11) + ticks(12)) / 100.0
}

/// A runtime like the compute node's engine's (two workers).
fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .expect("runtime")
}

/// Exports every partition's key log in parallel on a reader's connections,
/// handing each chunk to `keep`; returns the bytes exported.
async fn export_all(
    client: &Arc<StorageClient>,
    keep: impl Fn(Bytes) + Clone + Send + Sync + 'static,
) -> u64 {
    let exports: Vec<_> = (0..client.partitions())
        .map(|partition| {
            let client = Arc::clone(client);
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut bytes = 0u64;
                client
                    .export_keylog(partition, 0, |chunk| {
                        bytes += chunk.len() as u64;
                        keep(chunk);
                        Ok(())
                    })
                    .await
                    .expect("export");
                bytes
            })
        })
        .collect();
    let mut bytes = 0;
    for export in exports {
        bytes += export.await.expect("export task");
    }
    bytes
}

/// Decodes every entry of a run of key-log frames, as a rebuild does.
fn for_each_entry<'a>(frames: &'a [u8], mut f: impl FnMut(&'a [u8], Location)) {
    let mut at = 0;
    while at < frames.len() {
        let (frame, used) = record::decode_frame(&frames[at..]).expect("frame");
        if let Frame::Entries(entries) = frame {
            for entry in entries.iter() {
                let entry = entry.expect("entry");
                let location = match entry.kind {
                    EntryKind::Put => Location {
                        seq: entry.seq,
                        offset: entry.value_offset,
                        len: entry.record_len() as u32,
                        partition: 0,
                        expire_at_ms: entry.expire_at_ms,
                    },
                    EntryKind::Delete => Location::tombstone(entry.seq, 0),
                    EntryKind::Expire { version_seq } => Location::tombstone(version_seq, 0),
                    // The benchmark's logs hold no clears.
                    EntryKind::Clear => continue,
                };
                f(entry.key, location);
            }
        }
        at += used;
    }
}

/// Decodes `chunks` and inserts them into a reserved index with
/// [`Index::apply_many`] a chunk at a time on two threads (each taking
/// every other chunk), as a rebuild without the network would.
fn decode_insert_index(chunks: &[Bytes], keys: u64) -> Index {
    let index = Index::new();
    index.reserve(keys);
    std::thread::scope(|scope| {
        for thread in 0..2 {
            let index = &index;
            let builder = std::thread::Builder::new().name("decode-insert".into());
            let spawned = builder.spawn_scoped(scope, move || {
                let mut changes: Vec<(&[u8], Location)> = Vec::new();
                for chunk in chunks.iter().skip(thread).step_by(2) {
                    changes.clear();
                    for_each_entry(chunk, |key, location| changes.push((key, location)));
                    index.apply_many(&changes);
                }
            });
            spawned.expect("spawn a decoding thread");
        }
    });
    assert_eq!(index.live_keys(), keys);
    index
}

/// Decodes `chunks` and inserts them into one hashbrown map on one thread
/// (reserved up front, keys copied into `Vec`s).
fn decode_insert_hashbrown(chunks: &[Bytes], keys: u64) -> Reference {
    let mut map = Reference::default();
    map.reserve(keys as usize);
    for chunk in chunks {
        for_each_entry(chunk, |key, location| {
            let newer = map.get(key).is_none_or(|old| old.seq < location.seq);
            if newer {
                map.insert(key.to_vec(), location);
            }
        });
    }
    assert_eq!(map.len() as u64, keys);
    map
}

/// Wall-clock and process CPU seconds of each run of one measurement.
#[derive(Default)]
struct Runs(Vec<(f64, f64)>);

impl Runs {
    /// Runs `work` once, timing it; returns what it returns.
    fn time<T>(&mut self, work: impl FnOnce() -> T) -> T {
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        let out = work();
        self.0
            .push((wall.elapsed().as_secs_f64(), cpu_seconds() - cpu));
        out
    }

    fn best(&self) -> f64 {
        self.0.iter().map(|r| r.0).fold(f64::MAX, f64::min)
    }

    fn median(&self) -> (f64, f64) {
        let mut runs = self.0.clone();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        runs.get(runs.len() / 2).copied().unwrap_or_default()
    }

    fn show(&self, name: &str, log_mib: f64, keys: u64) {
        let (median, median_cpu) = self.median();
        let walls: Vec<String> = self.0.iter().map(|r| format!("{:.3}", r.0)).collect();
        let cpu = if median_cpu.is_nan() {
            "-".to_string()
        } else {
            format!("{median_cpu:.2}")
        };
        println!(
            "  {name:<46} {:>6.3} {median:>6.3} {cpu:>6} {:>7.0} {:>7.2}   {}",
            self.best(),
            log_mib / median,
            keys as f64 / median / 1e6,
            walls.join(" ")
        );
    }
}

/// Runs one measurement in a child process of its own (`case`: `engine`,
/// `decode-index` or `decode-hashbrown`, see [`rebuild_child`]); returns
/// its two (wall, CPU) figures.
fn run_rebuild_child(node: &BenchNode, case: &str, keys: u64) -> Option<[(f64, f64); 2]> {
    let exe = std::env::current_exe().ok()?;
    let certs = node.dir.path().join("certs").join("compute");
    let output = Command::new(exe)
        .arg("--rebuild-case")
        .arg(node.server())
        .arg(certs)
        .arg(keys.to_string())
        .arg(case)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<f64> = text
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    match numbers[..] {
        [a, b, c, d] => Some([(a, b), (c, d)]),
        _ => None,
    }
}

/// Child process of a rebuild measurement, on a fresh heap as a starting
/// compute node's: `engine` connects an engine (printing the connect's
/// wall and CPU seconds, then the rebuild's wall seconds and NaN);
/// `decode-index` and `decode-hashbrown` export every key log into memory
/// and then time decoding and inserting it (printing wall and CPU seconds,
/// twice).
fn rebuild_child(server: &str, certs: &str, case: &str, keys: u64) {
    let identity = Arc::new(NodeIdentity::load(std::path::Path::new(certs)).expect("identity"));
    let mut runs = Runs::default();
    if case == "engine" {
        let mut config = EngineConfig::new(server, identity);
        config.writer = false;
        let engine = runs.time(|| Engine::connect(config).expect("connect engine"));
        assert_eq!(engine.len(), keys);
        let rebuild_seconds = Duration::from_millis(engine.stats().rebuild_ms).as_secs_f64();
        let (wall, cpu) = runs.0[0];
        println!("{wall} {cpu} {rebuild_seconds} NaN");
        return;
    }
    let runtime = client_runtime();
    let mut config = ClientConfig::new(server, identity);
    config.writer = false;
    let client = Arc::new(
        runtime
            .block_on(StorageClient::connect(config))
            .expect("connect a reader"),
    );
    let kept = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let keep = {
        let kept = Arc::clone(&kept);
        move |chunk| kept.lock().push(chunk)
    };
    runtime.block_on(export_all(&client, keep));
    let chunks = std::mem::take(&mut *kept.lock());
    drop(client);
    drop(runtime);
    match case {
        "decode-index" => drop(runs.time(|| decode_insert_index(&chunks, keys))),
        _ => drop(runs.time(|| decode_insert_hashbrown(&chunks, keys))),
    }
    let (wall, cpu) = runs.0[0];
    println!("{wall} {cpu} {wall} {cpu}");
}

fn rebuild_case(keys: u64) {
    let setup = Instant::now();
    let node = BenchNode::with_keys(keys);
    println!(
        "rebuild through a storage node on loopback: {keys} 8-byte keys, one put each, \
         {REBUILD_PARTITIONS} partitions ({:.1} s to write them)",
        setup.elapsed().as_secs_f64()
    );

    let runtime = client_runtime();
    let connect = || {
        let mut config = ClientConfig::new(node.server(), node.compute_identity());
        config.writer = false;
        Arc::new(
            runtime
                .block_on(StorageClient::connect(config))
                .expect("connect a reader"),
        )
    };
    // Each on connections of its own, as a starting compute node's rebuild.
    let mut fresh_export = Runs::default();
    let mut log_bytes = 0;
    for _ in 0..REBUILD_RUNS {
        let client = connect();
        log_bytes = fresh_export.time(|| runtime.block_on(export_all(&client, |_| {})));
    }
    // Again and again on the same connections (after one export to warm
    // them up).
    let client = connect();
    runtime.block_on(export_all(&client, |_| {}));
    let mut warm_export = Runs::default();
    for _ in 0..REBUILD_RUNS {
        warm_export.time(|| runtime.block_on(export_all(&client, |_| {})));
    }
    drop(client);
    drop(runtime);

    let mut decode_index = Runs::default();
    let mut decode_hashbrown = Runs::default();
    let mut rebuild = Runs::default();
    let mut engine_connect = Runs::default();
    for _ in 0..REBUILD_RUNS {
        let child = |case: &str| {
            run_rebuild_child(&node, case, keys)
                .unwrap_or_else(|| panic!("rebuild case {case} failed"))
        };
        decode_index.0.push(child("decode-index")[0]);
        decode_hashbrown.0.push(child("decode-hashbrown")[0]);
        let [connect, rebuilt] = child("engine");
        engine_connect.0.push(connect);
        rebuild.0.push(rebuilt);
    }

    let mib = log_bytes as f64 / f64::from(1 << 20);
    println!(
        "  key logs: {mib:.1} MiB; {REBUILD_RUNS} runs each (seconds: best, median, CPU seconds of the median \
         run: the whole process for the exports, storage node included; the compute side alone for the rest, \
         each run in a new process as a starting compute node)"
    );
    println!(
        "  {:<46} {:>6} {:>6} {:>6} {:>7} {:>7}   runs",
        "", "best", "median", "CPU", "MiB/s", "Mkeys/s"
    );
    fresh_export.show("raw export, new connections", mib, keys);
    warm_export.show("raw export, warm connections", mib, keys);
    decode_index.show("decode + insert, no network: index, 2 threads", mib, keys);
    decode_hashbrown.show("decode + insert, no network: hashbrown, 1 thr", mib, keys);
    rebuild.show("rebuild (EngineStats::rebuild_ms)", mib, keys);
    engine_connect.show("Engine::connect (connections + rebuild)", mib, keys);
    println!(
        "  rebuild / raw export on new connections (medians): {:.2}",
        rebuild.median().0 / fresh_export.median().0
    );
}
