//! The evaluator's figures: per phase and in total, as a table and as JSON.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// One phase's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    /// write, sequential_read, restart, hot_random_read.
    pub name: String,
    /// Wall time.
    pub seconds: f64,
    /// Operations carried out (for the restart: keys in the rebuilt index).
    pub ops: u64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Value bytes moved per second, in MiB.
    pub mib_per_sec: f64,
    /// Latency percentiles of single operations, in microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Share of reads answered from the compute node's windows, when the
    /// store reports it.
    pub hit_ratio: Option<f64>,
    /// Values read back and found right (for writes: puts acknowledged).
    pub verified: u64,
    /// Failed operations plus missing or wrong values.
    pub errors: u64,
}

/// What a phase measured.
pub struct Measured<'a> {
    /// Wall time.
    pub elapsed: Duration,
    /// Operations carried out.
    pub ops: u64,
    /// Value bytes moved.
    pub value_bytes: u64,
    /// Latencies of single operations, in nanoseconds.
    pub latency: Option<&'a Histogram<u64>>,
    /// Window hit ratio, when known.
    pub hit_ratio: Option<f64>,
    /// Values found right.
    pub verified: u64,
    /// Failures plus missing or wrong values.
    pub errors: u64,
}

impl PhaseReport {
    /// A phase's figures from its measurements.
    pub fn new(name: &str, m: Measured<'_>) -> Self {
        let seconds = m.elapsed.as_secs_f64();
        let rate = |n: f64| if seconds > 0.0 { n / seconds } else { 0.0 };
        let quantile = |q: f64| {
            m.latency
                .map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1000.0)
        };
        Self {
            name: name.to_string(),
            seconds,
            ops: m.ops,
            ops_per_sec: rate(m.ops as f64),
            mib_per_sec: rate(m.value_bytes as f64 / (1 << 20) as f64),
            p50_us: quantile(0.5),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
            hit_ratio: m.hit_ratio,
            verified: m.verified,
            errors: m.errors,
        }
    }
}

/// A reader's replication fields, from its `INFO replication`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReaderLag {
    /// `splitkv_applied_seq`: the highest sequence number it applied.
    pub applied_seq: u64,
    /// `splitkv_lag_entries`: key-log entries it has not applied yet
    /// (none if the reader could not tell).
    pub lag_entries: Option<u64>,
    /// `splitkv_lag_ms`: an upper bound of the age of the oldest write it
    /// has not applied (none if the reader could not tell).
    pub lag_ms: Option<u64>,
}

impl ReaderLag {
    /// `applied seq A, lag E entries / M ms`, for the table.
    fn describe(&self) -> String {
        let or_unknown = |v: Option<u64>| v.map_or("unknown".to_string(), |v| v.to_string());
        format!(
            "applied seq {}, lag {} entries / {} ms",
            self.applied_seq,
            or_unknown(self.lag_entries),
            or_unknown(self.lag_ms)
        )
    }
}

/// How one reader caught up with the writer before a read phase.
#[derive(Debug, Clone, Serialize)]
pub struct ReaderCatchUp {
    /// The reader's Redis-protocol address.
    pub address: String,
    /// From the start of the wait until this reader was seen caught up.
    pub seconds: f64,
    /// `INFO replication` requests sent to it.
    pub polls: u64,
    /// Its fields at the first poll (how far behind the writer it was).
    pub first: ReaderLag,
    /// Its fields when it was seen caught up.
    pub last: ReaderLag,
}

/// The wait, before a read phase, until every reader had applied what the
/// writer had.
#[derive(Debug, Clone, Serialize)]
pub struct CatchUpReport {
    /// The read phase that waited.
    pub before: String,
    /// The writer's `splitkv_applied_seq` when the wait began.
    pub writer_applied_seq: u64,
    /// Until the last reader was seen caught up.
    pub seconds: f64,
    /// Each reader, in the order given.
    pub readers: Vec<ReaderCatchUp>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// What was measured.
    pub store: String,
    /// Threads.
    pub threads: usize,
    /// Keys per thread.
    pub per_thread: u64,
    /// Value size.
    pub value_size: usize,
    /// The phases in order.
    pub phases: Vec<PhaseReport>,
    /// Sum of the phases' wall time.
    pub total_seconds: f64,
    /// Keys in the compute node's index after the run, when known.
    pub index_keys: Option<u64>,
    /// Memory of the compute node's index per key, when known.
    pub index_bytes_per_key: Option<f64>,
    /// With readers: the waits for them to catch up, one per read phase.
    pub catch_ups: Vec<CatchUpReport>,
}

impl RunReport {
    /// True if any phase had an error or a missing or wrong value, or
    /// verified fewer than every key written (`threads * per_thread`: the
    /// acknowledged puts, the keys in the rebuilt index, the values read
    /// back right).
    pub fn failed(&self) -> bool {
        let expected = self.threads as u64 * self.per_thread;
        self.phases
            .iter()
            .any(|p| p.errors > 0 || p.verified < expected)
    }

    /// The table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{}\n{} threads x {} keys, {}-byte values\n\n{:<16} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>7}\n",
            self.store,
            self.threads,
            self.per_thread,
            self.value_size,
            "phase",
            "seconds",
            "ops/s",
            "MiB/s",
            "p50 us",
            "p99 us",
            "p999 us",
            "hit %",
            "verified",
            "errors"
        );
        for p in &self.phases {
            let hit = p
                .hit_ratio
                .map_or("-".to_string(), |r| format!("{:.2}", r * 100.0));
            out.push_str(&format!(
                "{:<16} {:>8.2} {:>10.0} {:>9.1} {:>9.0} {:>9.0} {:>9.0} {:>8} {:>10} {:>7}\n",
                p.name,
                p.seconds,
                p.ops_per_sec,
                p.mib_per_sec,
                p.p50_us,
                p.p99_us,
                p.p999_us,
                hit,
                p.verified,
                p.errors
            ));
        }
        out.push_str(&format!("{:<16} {:>8.2}\n", "total", self.total_seconds));
        for c in &self.catch_ups {
            out.push_str(&format!(
                "readers caught up with the writer's applied seq {} before {} in {:.3} s\n",
                c.writer_applied_seq, c.before, c.seconds
            ));
            for r in &c.readers {
                out.push_str(&format!(
                    "  {}: {:.3} s, {} polls; at first {}, then {}\n",
                    r.address,
                    r.seconds,
                    r.polls,
                    r.first.describe(),
                    r.last.describe()
                ));
            }
        }
        if let (Some(keys), Some(per_key)) = (self.index_keys, self.index_bytes_per_key) {
            out.push_str(&format!(
                "index: {keys} keys in {:.1} MiB, {per_key:.0} bytes per key\n",
                keys as f64 * per_key / (1 << 20) as f64
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, verified: u64, errors: u64) -> PhaseReport {
        PhaseReport::new(
            name,
            Measured {
                elapsed: Duration::from_secs(1),
                ops: verified + errors,
                value_bytes: 0,
                latency: None,
                hit_ratio: None,
                verified,
                errors,
            },
        )
    }

    fn report(phases: Vec<PhaseReport>) -> RunReport {
        RunReport {
            store: "test".into(),
            threads: 4,
            per_thread: 10,
            value_size: 8,
            phases,
            total_seconds: 4.0,
            index_keys: None,
            index_bytes_per_key: None,
            catch_ups: Vec::new(),
        }
    }

    fn all(verified: [u64; 4], errors: [u64; 4]) -> RunReport {
        let names = ["write", "sequential_read", "restart", "hot_random_read"];
        report(
            (0..4)
                .map(|i| phase(names[i], verified[i], errors[i]))
                .collect(),
        )
    }

    #[test]
    fn a_run_that_verified_every_key_passes() {
        assert!(!all([40; 4], [0; 4]).failed());
    }

    #[test]
    fn an_error_fails_the_run() {
        assert!(all([40; 4], [0, 0, 0, 1]).failed());
    }

    #[test]
    fn a_read_phase_that_verified_fewer_keys_fails_without_errors() {
        assert!(all([40, 39, 40, 40], [0; 4]).failed());
        assert!(all([40, 40, 40, 0], [0; 4]).failed());
    }
}
