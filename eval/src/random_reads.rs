//! `eval random-reads`: random GETs of a data set through any
//! Redis-protocol server (SplitKV's compute node, or Redis itself), the keys
//! drawn from a Zipf distribution or uniformly, every value verified.
//! Printed per distribution: GETs per second, latency percentiles, and,
//! for a SplitKV compute node, the hit ratio of its value cache over the
//! run (INFO's `cache_hits` and `cache_misses`).

use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution as _, Zipf};

use crate::store::{RespStore, Store};
use crate::workload;

/// How the keys of the GETs are drawn.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Distribution {
    /// Key of rank `k` with probability proportional to `1 / k^s`
    /// (`--zipf-exponent s`).
    Zipf,
    /// Every key alike.
    Uniform,
}

/// Options of `eval random-reads`.
#[derive(Args, Clone)]
pub struct RandomReadArgs {
    /// The server: HOST:PORT, or a redis:// URL.
    #[arg(long)]
    resp: String,
    /// Keys in the data set.
    #[arg(long, default_value_t = 131_072)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
    /// Client threads, one connection each.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// GETs per thread for each distribution.
    #[arg(long, default_value_t = 20_000)]
    reads_per_thread: u64,
    /// Write the data set first, each key once.
    #[arg(long)]
    load: bool,
    /// The distributions to run, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "zipf,uniform"
    )]
    distributions: Vec<Distribution>,
    /// The exponent of the Zipf distribution.
    #[arg(long, default_value_t = 0.99)]
    zipf_exponent: f64,
}

/// The `i`-th key of the data set.
fn data_key(i: u64) -> [u8; 8] {
    workload::key(0, i)
}

/// Runs the loads and reads `args` asks for; true if every value read was
/// the one written.
pub fn run(args: RandomReadArgs) -> Result<bool> {
    let threads = args.threads.max(1);
    if args.keys == 0 {
        bail!("--keys must be at least 1");
    }
    let store = RespStore::connect(&args.resp, threads)?;
    if args.load {
        let started = Instant::now();
        load(&store, threads, args.keys, args.value_size)?;
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "loaded {} keys of {} bytes in {seconds:.1} s ({:.0} SET/s)",
            args.keys,
            args.value_size,
            args.keys as f64 / seconds
        );
    }
    let mut all_right = true;
    for &distribution in &args.distributions {
        let cache_before = cache_counts(&store);
        let pass = read_pass(&store, &args, threads, distribution)?;
        let cache = match (cache_before, cache_counts(&store)) {
            (Some((h0, m0)), Some((h1, m1))) => {
                let (hits, misses) = (h1.saturating_sub(h0), m1.saturating_sub(m0));
                format!(
                    ", value-cache hit ratio {:.3} ({hits} hits, {misses} misses)",
                    hits as f64 / (hits + misses).max(1) as f64
                )
            }
            _ => String::new(),
        };
        let name = match distribution {
            Distribution::Zipf => format!("zipf {}", args.zipf_exponent),
            Distribution::Uniform => "uniform".to_string(),
        };
        println!(
            "{name}: {:.0} GET/s, p50 {} µs, p99 {} µs, p999 {} µs{cache}{}",
            pass.reads as f64 / pass.seconds,
            pass.latency.value_at_quantile(0.50),
            pass.latency.value_at_quantile(0.99),
            pass.latency.value_at_quantile(0.999),
            if pass.wrong > 0 {
                format!(", {} WRONG OR MISSING", pass.wrong)
            } else {
                String::new()
            }
        );
        all_right &= pass.wrong == 0;
    }
    Ok(all_right)
}

/// Writes keys `0..keys`, the threads taking every `threads`-th one.
fn load(store: &RespStore, threads: usize, keys: u64, value_size: usize) -> Result<()> {
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<()> {
                    let mut value = vec![0u8; value_size];
                    for i in (t as u64..keys).step_by(threads) {
                        let key = data_key(i);
                        workload::fill_value(&key, 0, &mut value);
                        store.put(t, &key, &value, 0)?;
                    }
                    Ok(())
                })
            })
            .collect();
        writers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

/// What one distribution's reads measured.
struct Pass {
    reads: u64,
    wrong: u64,
    seconds: f64,
    /// Microseconds per GET.
    latency: Histogram<u64>,
}

fn read_pass(
    store: &RespStore,
    args: &RandomReadArgs,
    threads: usize,
    distribution: Distribution,
) -> Result<Pass> {
    let zipf = Zipf::new(args.keys as f64, args.zipf_exponent).context("the Zipf exponent")?;
    let started = Instant::now();
    let per_thread: Vec<Result<(u64, Histogram<u64>)>> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(u64, Histogram<u64>)> {
                    let mut rng = StdRng::seed_from_u64(0x5eed ^ t as u64);
                    let mut latency = Histogram::new(3).context("histogram")?;
                    let mut scratch = Vec::new();
                    let mut wrong = 0u64;
                    for _ in 0..args.reads_per_thread {
                        let i = match distribution {
                            // Ranks run from 1; rank 1 is the hottest key.
                            Distribution::Zipf => zipf.sample(&mut rng) as u64 - 1,
                            Distribution::Uniform => {
                                rand::Rng::random_range(&mut rng, 0..args.keys)
                            }
                        };
                        let key = data_key(i.min(args.keys - 1));
                        let asked = Instant::now();
                        let value = store.get(t, &key)?;
                        latency.saturating_record(asked.elapsed().as_micros() as u64);
                        let right = value.is_some_and(|v| {
                            workload::check_value(&key, 0, &v, args.value_size, &mut scratch)
                        });
                        wrong += u64::from(!right);
                    }
                    Ok((wrong, latency))
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut pass = Pass {
        reads: threads as u64 * args.reads_per_thread,
        wrong: 0,
        seconds,
        latency: Histogram::new(3).context("histogram")?,
    };
    for outcome in per_thread {
        let (wrong, latency) = outcome?;
        pass.wrong += wrong;
        pass.latency.add(latency).context("merging latencies")?;
    }
    Ok(pass)
}

/// The compute node's value-cache hits and misses so far; `None` for a
/// server whose INFO does not give them (Redis).
fn cache_counts(store: &RespStore) -> Option<(u64, u64)> {
    let info = store.info("splitkv").ok()?;
    let field = |name: &str| -> Option<u64> {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some((field("cache_hits")?, field("cache_misses")?))
}
