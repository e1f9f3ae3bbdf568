//! `eval run`: the four phases, each verifying every value it reads.
//!
//! 1. write: thread `t` puts its keys in order, each waiting for its
//!    acknowledgement;
//! 2. sequential read: thread `t` reads writer `(t + T/2) % T`'s keys in
//!    write order;
//! 3. restart: the store is dropped and connected again (for the engine: a
//!    new engine rebuilds its index from the storage node);
//! 4. hot random read: thread `t` reads the same writer's keys in random
//!    order inside a 10 MiB region that moves from the newest data to the
//!    oldest.
//!
//! When reads go through readers that follow the writer, each read phase
//! first waits until the readers have caught up (`Store::catch_up`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};

use crate::report::{Measured, PhaseReport, RunReport};
use crate::store::Store;
use crate::workload::{self, check_value, fill_value, hot_order, key, partner};

/// Sizes of a run.
#[derive(Debug, Clone, Copy)]
pub struct RunShape {
    /// Threads (and writers).
    pub threads: usize,
    /// Keys each writer puts.
    pub per_thread: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Bytes of log one hot region spans.
    pub region_bytes: u64,
    /// Percent of each writer's keys put with a time to live.
    pub ttl_percent: u8,
    /// The time to live of those keys, in milliseconds.
    pub ttl_ms: u64,
}

impl RunShape {
    /// The time to live key `i` is put with (0: none): the first
    /// `ttl_percent` of every hundred keys get one.
    fn ttl_ms_of(&self, i: u64) -> u64 {
        if i % 100 < u64::from(self.ttl_percent) {
            self.ttl_ms
        } else {
            0
        }
    }
}

/// What one thread counted.
struct ThreadTally {
    latency: Histogram<u64>,
    ok: u64,
    errors: u64,
}

impl ThreadTally {
    fn new() -> Self {
        Self {
            latency: Histogram::new(3).expect("valid histogram precision"),
            ok: 0,
            errors: 0,
        }
    }
}

fn progress(label: &str, total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>16} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    bar
}

/// Runs `work(thread, tally, bar)` on every thread and merges the tallies.
fn run_threads(
    shape: &RunShape,
    label: &str,
    work: impl Fn(usize, &mut ThreadTally, &ProgressBar) + Sync,
) -> (Duration, Histogram<u64>, u64, u64) {
    let bar = progress(label, shape.per_thread * shape.threads as u64);
    let started = Instant::now();
    let tallies: Vec<ThreadTally> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..shape.threads)
            .map(|t| {
                let work = &work;
                let bar = &bar;
                scope.spawn(move || {
                    let mut tally = ThreadTally::new();
                    work(t, &mut tally, bar);
                    tally
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join().unwrap_or_else(|_| {
                    // What a panicked thread did is lost with it: count its
                    // whole share as failed, so the run cannot pass on less.
                    eprintln!("{label}: thread {t} panicked");
                    let mut tally = ThreadTally::new();
                    tally.errors = shape.per_thread;
                    tally
                })
            })
            .collect()
    });
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let mut latency = Histogram::new(3).expect("valid histogram precision");
    let (mut ok, mut errors) = (0, 0);
    for tally in tallies {
        let _ = latency.add(&tally.latency);
        ok += tally.ok;
        errors += tally.errors;
    }
    (elapsed, latency, ok, errors)
}

fn hit_ratio(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let (h0, m0) = before?;
    let (h1, m1) = after?;
    let (hits, misses) = (h1.saturating_sub(h0), m1.saturating_sub(m0));
    (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64)
}

fn write_phase(store: &dyn Store, shape: &RunShape) -> PhaseReport {
    let first_error = AtomicU64::new(0);
    let (elapsed, latency, ok, errors) = run_threads(shape, "write", |t, tally, bar| {
        let mut value = vec![0u8; shape.value_size];
        for i in 0..shape.per_thread {
            let k = key(t, i);
            fill_value(&k, 0, &mut value);
            let started = Instant::now();
            match store.put(t, &k, &value, shape.ttl_ms_of(i)) {
                Ok(()) => tally.ok += 1,
                Err(e) => {
                    if first_error.fetch_add(1, Ordering::Relaxed) == 0 {
                        eprintln!("write error: {e:#}");
                    }
                    tally.errors += 1;
                }
            }
            let _ = tally.latency.record(started.elapsed().as_nanos() as u64);
            bar.inc(1);
        }
    });
    PhaseReport::new(
        "write",
        Measured {
            elapsed,
            ops: ok + errors,
            value_bytes: ok * shape.value_size as u64,
            latency: Some(&latency),
            hit_ratio: None,
            verified: ok,
            errors,
        },
    )
}

/// Reads writer `partner(t)`'s keys in `order(writer)` on every thread.
fn read_phase(
    store: &dyn Store,
    shape: &RunShape,
    name: &str,
    order: impl Fn(usize) -> Vec<u64> + Sync,
) -> PhaseReport {
    let before = store.hits();
    let reported = AtomicU64::new(0);
    let (elapsed, latency, ok, errors) = run_threads(shape, name, |t, tally, bar| {
        let writer = partner(t, shape.threads);
        let mut scratch = Vec::with_capacity(shape.value_size);
        for i in order(writer) {
            let k = key(writer, i);
            let started = Instant::now();
            let result = store.get(t, &k);
            let _ = tally.latency.record(started.elapsed().as_nanos() as u64);
            let problem = match result {
                Ok(Some(value)) if check_value(&k, 0, &value, shape.value_size, &mut scratch) => {
                    None
                }
                Ok(Some(_)) => Some(format!("wrong value for key {} of writer {writer}", i)),
                Ok(None) => Some(format!("missing key {} of writer {writer}", i)),
                Err(e) => Some(format!("read error: {e:#}")),
            };
            match problem {
                None => tally.ok += 1,
                Some(problem) => {
                    if reported.fetch_add(1, Ordering::Relaxed) < 5 {
                        eprintln!("{name}: {problem}");
                    }
                    tally.errors += 1;
                }
            }
            bar.inc(1);
        }
    });
    PhaseReport::new(
        name,
        Measured {
            elapsed,
            ops: ok + errors,
            value_bytes: ok * shape.value_size as u64,
            latency: Some(&latency),
            hit_ratio: hit_ratio(before, store.hits()),
            verified: ok,
            errors,
        },
    )
}

fn restart_phase(store: &mut dyn Store, shape: &RunShape) -> PhaseReport {
    let expected = shape.per_thread * shape.threads as u64;
    let started = Instant::now();
    let (keys, errors) = match store.restart() {
        Ok(keys) if keys >= expected => (keys, 0),
        Ok(keys) => {
            eprintln!("restart: the rebuilt index holds {keys} keys, {expected} were written");
            (keys, 1)
        }
        Err(e) => {
            eprintln!("restart failed: {e:#}");
            (0, 1)
        }
    };
    PhaseReport::new(
        "restart",
        Measured {
            elapsed: started.elapsed(),
            ops: keys,
            value_bytes: 0,
            latency: None,
            hit_ratio: None,
            verified: keys,
            errors,
        },
    )
}

/// Runs the four phases against `store`.
pub fn run(store: &mut dyn Store, shape: RunShape) -> Result<RunReport> {
    let mut phases = Vec::new();
    let description = store.describe();
    eprintln!(
        "{description}: {} threads x {} keys of {} bytes",
        shape.threads, shape.per_thread, shape.value_size
    );
    let mut catch_ups = Vec::new();
    phases.push(write_phase(store, &shape));
    catch_ups.extend(store.catch_up("sequential_read")?);
    phases.push(read_phase(store, &shape, "sequential_read", |_| {
        (0..shape.per_thread).collect()
    }));
    phases.push(restart_phase(store, &shape));
    let record = splitkv_common::record::value_record_len(8, shape.value_size) as u64;
    let per_region = workload::keys_per_region(shape.region_bytes, record);
    catch_ups.extend(store.catch_up("hot_random_read")?);
    phases.push(read_phase(store, &shape, "hot_random_read", |writer| {
        hot_order(shape.per_thread, per_region, writer as u64 + 1)
    }));
    let total_seconds = phases.iter().map(|p| p.seconds).sum();
    let index = store.index_memory();
    Ok(RunReport {
        index_keys: index.map(|(keys, _)| keys),
        index_bytes_per_key: index.map(|(keys, bytes)| bytes as f64 / keys.max(1) as f64),
        store: description,
        threads: shape.threads,
        per_thread: shape.per_thread,
        value_size: shape.value_size,
        phases,
        total_seconds,
        catch_ups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicked_thread_counts_its_whole_share_as_errors() {
        let shape = RunShape {
            threads: 4,
            per_thread: 10,
            value_size: 8,
            region_bytes: 1 << 20,
            ttl_percent: 0,
            ttl_ms: 0,
        };
        let (_, _, ok, errors) = run_threads(&shape, "test", |t, tally, _| {
            for i in 0..shape.per_thread {
                assert!(t != 2 || i < 3, "thread 2 panics part way");
                tally.ok += 1;
            }
        });
        assert_eq!(ok, 30, "the three other threads' work is counted");
        assert_eq!(errors, 10, "the panicked thread's whole share failed");
    }
}
