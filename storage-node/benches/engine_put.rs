//! Write throughput of the storage engine next to the disk's limit.
//!
//! 16 threads put 4 KiB values (8-byte keys), thread `t` into partition `t`,
//! until `SPLITKV_BENCH_BYTES` (default 2 GiB, at least 10× the buffers'
//! total capacity) are acknowledged; the clock stops when `close` returns,
//! that is after the last buffer is flushed and synced. In the same run, fio
//! writes 1 MiB O_DIRECT blocks with io_uring at queue depth 16 to the same
//! file system, and the ratio of the two is printed.
//!
//! `cargo bench -p storage-node --bench engine_put` (set `SPLITKV_BENCH_DIR`
//! to measure another file system; `SPLITKV_IO_ENGINE=psync` for pwrite;
//! `SPLITKV_BENCH_NO_FIO=1` to skip fio, e.g. under a profiler;
//! `SPLITKV_RECENT_WRITE_BYTES` for another bound on the copies of recent
//! flushes, 0 for none).

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;
use storage_node::{IoEngineKind, StorageConfig, StorageEngine};

const THREADS: usize = 16;
const VALUE_BYTES: usize = 4096;

/// The environment variable `name` parsed as a `T`, or `None` if it is not
/// set; a value that does not parse stops the benchmark with its name.
fn env_setting<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok()?;
    match value.parse() {
        Ok(parsed) => Some(parsed),
        Err(_) => panic!("{name}={value} is not a valid setting"),
    }
}

fn main() {
    let total_bytes: u64 = env_setting("SPLITKV_BENCH_BYTES").unwrap_or(2 << 30);
    let io_engine: IoEngineKind = env_setting("SPLITKV_IO_ENGINE").unwrap_or_default();
    let base = std::env::var("SPLITKV_BENCH_DIR")
        .unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").to_string());
    let dir = tempfile::tempdir_in(&base).expect("bench directory");

    let mut config = StorageConfig::new(dir.path().join("data"));
    config.io_engine = io_engine;
    if let Some(bytes) = env_setting("SPLITKV_RECENT_WRITE_BYTES") {
        config.recent_write_bytes = bytes;
    }
    let engine = Arc::new(StorageEngine::open(config).expect("open engine"));
    let buffers_bytes = 2 * engine.manifest().buffer_bytes as u64 * engine.partition_count() as u64;
    let per_thread = total_bytes / VALUE_BYTES as u64 / THREADS as u64;
    println!(
        "engine: {THREADS} threads x {per_thread} puts of {VALUE_BYTES} B = {} MiB ({}x the {} MiB of buffers), io engine {}",
        (per_thread * THREADS as u64 * VALUE_BYTES as u64) >> 20,
        per_thread * THREADS as u64 * VALUE_BYTES as u64 / buffers_bytes,
        buffers_bytes >> 20,
        engine.io_engine(),
    );

    let start = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || {
                let mut latency = Histogram::<u64>::new(3).expect("histogram");
                let mut value = vec![t as u8; VALUE_BYTES];
                for i in 0..per_thread {
                    let key = ((t as u64) << 40 | i).to_be_bytes();
                    value[..8].copy_from_slice(&key);
                    let put_start = Instant::now();
                    engine
                        .put(t % engine.partition_count(), &key, &value)
                        .expect("put");
                    let _ = latency.record(put_start.elapsed().as_nanos() as u64);
                }
                latency
            })
        })
        .collect();
    let mut latency = Histogram::<u64>::new(3).expect("histogram");
    for w in workers {
        latency
            .add(w.join().expect("worker"))
            .expect("merge histograms");
    }
    let acked = start.elapsed();
    engine.close().expect("close");
    let elapsed = start.elapsed();
    let bytes = per_thread * THREADS as u64 * VALUE_BYTES as u64;
    let engine_mibs = bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64();
    println!(
        "engine: {:.0} MiB/s through the last flush ({:.2} s; all acknowledged after {:.2} s), {:.0} puts/s, put latency p50 {:.1} us p99 {:.1} us p999 {:.1} us",
        engine_mibs,
        elapsed.as_secs_f64(),
        acked.as_secs_f64(),
        (per_thread * THREADS as u64) as f64 / elapsed.as_secs_f64(),
        latency.value_at_quantile(0.5) as f64 / 1000.0,
        latency.value_at_quantile(0.99) as f64 / 1000.0,
        latency.value_at_quantile(0.999) as f64 / 1000.0,
    );
    drop(engine);

    if std::env::var_os("SPLITKV_BENCH_NO_FIO").is_some() {
        return;
    }
    match fio_mibs(dir.path()) {
        Some(fio) => println!(
            "fio --rw=write --bs=1M --direct=1 --ioengine=io_uring --iodepth=16: {fio:.0} MiB/s; engine / fio = {:.0}%",
            100.0 * engine_mibs / fio
        ),
        None => println!(
            "fio is not installed: run ../shared/bench/limits.sh beside this benchmark for the disk's figure"
        ),
    }
}

/// Sequential 1 MiB O_DIRECT writes with io_uring at queue depth 16, 10 s,
/// on the file system of `dir`; MiB/s.
fn fio_mibs(dir: &std::path::Path) -> Option<f64> {
    let file = dir.join("fio.tmp");
    let output = Command::new("fio")
        .args([
            "--name=seqw",
            "--size=2G",
            "--bs=1M",
            "--rw=write",
            "--direct=1",
            "--ioengine=io_uring",
        ])
        .args([
            "--iodepth=16",
            "--time_based",
            "--runtime=10",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", file.display()))
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&file);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let kib = report["jobs"][0]["write"]["bw"].as_f64()?;
    Some(kib / 1024.0)
}
