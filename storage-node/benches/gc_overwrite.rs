//! Disk use and write throughput under overwrites, with garbage collection
//! and without, in one run.
//!
//! 16 threads overwrite a live set of `SPLITKV_BENCH_LIVE_BYTES` (default
//! 1 GiB: 262 144 keys of 4 KiB) `SPLITKV_BENCH_ROUNDS` times (default 10),
//! thread `t` into partition `t`, once with the GC thread at its defaults
//! and once with it off. A sampler reads the disk use of the data
//! directory (allocated blocks of every file) every 100 ms. Printed per
//! pass: write throughput, the largest disk use against the live bytes, the
//! final one (with GC on, after passes run until one frees nothing, and how
//! long they took), the time to reopen the directory (the key directory
//! rebuilt from the checkpoints the clean close left), and the entries and
//! time of exporting every partition's key log as a compute node's index
//! rebuild does (from the checkpoint), next to exporting every key-log
//! entry still on disk; and the same of a directory written once with the
//! same keys, for comparison.
//!
//! `cargo bench -p storage-node --bench gc_overwrite` (`SPLITKV_BENCH_DIR`
//! for another file system).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use splitkv_common::record::{self, Frame};
use storage_node::{ExportCursor, GcConfig, StorageConfig, StorageEngine};

const THREADS: usize = 16;
const VALUE_BYTES: usize = 4096;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Allocated bytes of every file under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_bytes(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

struct Pass {
    mib_per_s: f64,
    max_disk: u64,
    final_disk: u64,
    reopen: Reopen,
    segments_freed: u64,
    catch_up: Duration,
    /// Puts that waited for collection, and the milliseconds they waited.
    put_waits: (u64, u64),
}

fn run(dir: &Path, gc: GcConfig, live_bytes: u64, rounds: u64) -> Pass {
    let data = dir.join("data");
    let mut config = StorageConfig::new(&data);
    config.gc = gc;
    let engine = Arc::new(StorageEngine::open(config.clone()).expect("open engine"));
    let keys_per_thread = live_bytes / VALUE_BYTES as u64 / THREADS as u64;
    let stop = Arc::new(AtomicBool::new(false));
    let max_disk = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, max_disk, data) = (Arc::clone(&stop), Arc::clone(&max_disk), data.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                max_disk.fetch_max(disk_bytes(&data), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let start = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || {
                let mut value = vec![t as u8; VALUE_BYTES];
                for round in 0..rounds {
                    for i in 0..keys_per_thread {
                        let key = ((t as u64) << 40 | i).to_be_bytes();
                        value[..8].copy_from_slice(&key);
                        value[8..16].copy_from_slice(&round.to_le_bytes());
                        engine.put(t, &key, &value).expect("put");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("writer");
    }
    let elapsed = start.elapsed();
    let written = keys_per_thread * THREADS as u64 * VALUE_BYTES as u64 * rounds;
    // With GC on, let it catch up: passes until one frees nothing.
    let catch_up = Instant::now();
    if gc.interval_ms > 0 {
        while engine
            .collect_garbage(gc.min_dead_percent)
            .expect("collect")
            .segments_freed
            > 0
        {}
    }
    let catch_up = catch_up.elapsed();
    let stats = engine.stats();
    let segments_freed = stats.partitions.iter().map(|p| p.gc_runs).sum();
    let put_waits = (stats.gc_put_waits, stats.gc_put_waited_ms);
    engine.close().expect("close");
    drop(engine);
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let final_disk = disk_bytes(&data);
    let max_disk = max_disk.load(Ordering::Relaxed).max(final_disk);
    let reopen = time_reopen(config);
    Pass {
        mib_per_s: written as f64 / (1 << 20) as f64 / elapsed.as_secs_f64(),
        max_disk,
        final_disk,
        reopen,
        segments_freed,
        catch_up,
        put_waits,
    }
}

/// What reopening a directory cost, and exporting its key logs as a
/// compute node's index rebuild does.
struct Reopen {
    open: Duration,
    /// Entries and time of exports from the start (checkpoint, then the
    /// key log after it), every partition at once.
    export: (u64, Duration),
    /// The same of every key-log entry still on disk, checkpoints aside:
    /// what a rebuild read before checkpoints.
    whole_log: (u64, Duration),
}

/// Opens `config`'s directory (the GC thread off), exports every
/// partition's key log twice (see [`Reopen`]) and closes it again.
fn time_reopen(mut config: StorageConfig) -> Reopen {
    config.gc.interval_ms = 0;
    let start = Instant::now();
    let engine = StorageEngine::open(config).expect("reopen");
    let open = start.elapsed();
    let export = time_export(&engine, |_| ExportCursor::start());
    let starts: Vec<u64> = engine
        .stats()
        .partitions
        .iter()
        .map(|p| p.keylog_start)
        .collect();
    let whole_log = time_export(&engine, |p| ExportCursor::at_position(starts[p]));
    engine.close().expect("close");
    Reopen {
        open,
        export,
        whole_log,
    }
}

/// Exports every partition from `cursor(partition)`, a thread each;
/// returns the entries and the time it took.
fn time_export(
    engine: &StorageEngine,
    cursor: impl Fn(usize) -> ExportCursor + Sync,
) -> (u64, Duration) {
    let start = Instant::now();
    let entries = std::thread::scope(|scope| {
        let exports: Vec<_> = (0..engine.partition_count())
            .map(|partition| {
                let cursor = &cursor;
                scope.spawn(move || {
                    let mut at = cursor(partition);
                    let mut out = Vec::with_capacity(1 << 20);
                    let mut entries = 0u64;
                    loop {
                        out.clear();
                        let progress = engine
                            .export_keylog(partition, &at, 0, 1 << 20, &mut out)
                            .expect("export");
                        let mut pos = 0;
                        while pos < out.len() {
                            let (frame, used) = record::decode_frame(&out[pos..]).expect("frame");
                            if let Frame::Entries(frame) = frame {
                                entries += frame.iter().count() as u64;
                            }
                            pos += used;
                        }
                        if progress.caught_up {
                            return entries;
                        }
                        at = progress.next;
                    }
                })
            })
            .collect();
        exports
            .into_iter()
            .map(|e| e.join().expect("export thread"))
            .sum()
    });
    (entries, start.elapsed())
}

fn main() {
    let live_bytes = env_u64("SPLITKV_BENCH_LIVE_BYTES", 1 << 30);
    let rounds = env_u64("SPLITKV_BENCH_ROUNDS", 10);
    let base = std::env::var("SPLITKV_BENCH_DIR")
        .unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").to_string());
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "{THREADS} threads overwrite {:.0} MiB of live 4 KiB values {rounds} times",
        mib(live_bytes)
    );
    let fresh = {
        let dir = tempfile::tempdir_in(&base).expect("bench directory");
        run(
            dir.path(),
            GcConfig {
                interval_ms: 0,
                ..GcConfig::default()
            },
            live_bytes,
            1,
        )
    };
    println!(
        "written once: {:.0} MiB/s, disk {:.0} MiB, reopen {:.3} s, {}",
        fresh.mib_per_s,
        mib(fresh.final_disk),
        fresh.reopen.open.as_secs_f64(),
        exports(&fresh.reopen),
    );
    for (name, gc) in [
        (
            "gc off",
            GcConfig {
                interval_ms: 0,
                ..GcConfig::default()
            },
        ),
        ("gc on", GcConfig::default()),
    ] {
        let dir = tempfile::tempdir_in(&base).expect("bench directory");
        let pass = run(dir.path(), gc, live_bytes, rounds);
        println!(
            "{name}: {:.0} MiB/s, disk max {:.0} MiB ({:.2}x live), final {:.0} MiB ({:.2}x live), \
             {} segments freed, {} puts waited for collection ({} ms in all), GC caught up {:.1} s after the writes, reopen {:.3} s ({:.2}x written once), \
             {} ({:.2}x written once)",
            pass.mib_per_s,
            mib(pass.max_disk),
            pass.max_disk as f64 / live_bytes as f64,
            mib(pass.final_disk),
            pass.final_disk as f64 / live_bytes as f64,
            pass.segments_freed,
            pass.put_waits.0,
            pass.put_waits.1,
            pass.catch_up.as_secs_f64(),
            pass.reopen.open.as_secs_f64(),
            pass.reopen.open.as_secs_f64() / fresh.reopen.open.as_secs_f64(),
            exports(&pass.reopen),
            pass.reopen.export.1.as_secs_f64() / fresh.reopen.export.1.as_secs_f64(),
        );
    }
}

fn exports(reopen: &Reopen) -> String {
    format!(
        "export for a rebuild {} entries in {:.3} s (the whole key log: {} entries in {:.3} s)",
        reopen.export.0,
        reopen.export.1.as_secs_f64(),
        reopen.whole_log.0,
        reopen.whole_log.1.as_secs_f64()
    )
}
