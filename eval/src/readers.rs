//! A SplitKV writer and its readers over the Redis protocol: writes go to
//! the writer, reads are spread over the readers (`eval run --resp WRITER
//! --readers R1,R2,...`).
//!
//! A reader applies a write a little after the writer acknowledged it, so
//! before each read phase the evaluator waits, by polling `INFO
//! replication`, until every reader has applied what the writer had.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;

use crate::report::{CatchUpReport, ReaderCatchUp, ReaderLag};
use crate::store::{RespStore, Store};

/// Time between two `INFO replication` polls of a reader.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// A writer and its readers; thread `t` reads through reader `t % n`.
pub struct ReadersStore {
    writer: RespStore,
    readers: Vec<RespStore>,
    /// Longest wait for the readers to catch up before a read phase.
    catch_up_timeout: Duration,
}

impl ReadersStore {
    /// Opens `threads` connections to the writer and, spread over the
    /// readers, `threads` connections to them.
    pub fn connect(
        writer: &str,
        readers: &[String],
        threads: usize,
        catch_up_timeout: Duration,
    ) -> Result<Self> {
        if readers.is_empty() {
            bail!("no reader given");
        }
        let n = readers.len();
        let readers = readers
            .iter()
            .enumerate()
            // Reader i serves threads i, i + n, i + 2n, ...
            .map(|(i, address)| RespStore::connect(address, threads.saturating_sub(i).div_ceil(n)))
            .collect::<Result<_>>()?;
        Ok(Self {
            writer: RespStore::connect(writer, threads)?,
            readers,
            catch_up_timeout,
        })
    }

    /// Thread `thread`'s reader and its connection there.
    fn reader(&self, thread: usize) -> (&RespStore, usize) {
        let n = self.readers.len();
        (&self.readers[thread % n], thread / n)
    }
}

/// True once a reader has applied `writer_seq` and nothing the storage node
/// holds is left for it to apply. The sequence number alone is not enough:
/// it is the highest applied in any partition, and another partition may
/// still be behind.
fn caught_up(lag: &ReaderLag, writer_seq: u64) -> bool {
    lag.applied_seq >= writer_seq && lag.lag_entries == Some(0)
}

/// Where a reader stands while the evaluator waits for it.
struct ReaderWait<'a> {
    reader: &'a RespStore,
    polls: u64,
    first: Option<ReaderLag>,
    done: Option<ReaderCatchUp>,
}

impl Store for ReadersStore {
    fn put(&self, thread: usize, key: &[u8], value: &[u8], ttl_ms: u64) -> Result<()> {
        self.writer.put(thread, key, value, ttl_ms)
    }

    fn get(&self, thread: usize, key: &[u8]) -> Result<Option<Bytes>> {
        let (reader, connection) = self.reader(thread);
        reader.get(connection, key)
    }

    /// Reconnects to the writer and to every reader; the fewest keys any of
    /// them holds.
    fn restart(&mut self) -> Result<u64> {
        let mut keys = self.writer.restart()?;
        for reader in &mut self.readers {
            keys = keys.min(reader.restart()?);
        }
        Ok(keys)
    }

    /// The readers' hits and misses, summed (they answer the reads).
    fn hits(&self) -> Option<(u64, u64)> {
        self.readers.iter().try_fold((0, 0), |(h, m), reader| {
            let (hits, misses) = reader.hits()?;
            Some((h + hits, m + misses))
        })
    }

    fn describe(&self) -> String {
        let readers: Vec<&str> = self.readers.iter().map(RespStore::address).collect();
        format!(
            "Redis-protocol writer at {}, reads through {} reader(s) at {}",
            self.writer.address(),
            readers.len(),
            readers.join(", ")
        )
    }

    fn catch_up(&self, before: &str) -> Result<Option<CatchUpReport>> {
        let writer = self.writer.replication(self.catch_up_timeout)?;
        if !writer.writer {
            bail!(
                "{} is not the writer (its INFO replication says role:slave)",
                self.writer.address()
            );
        }
        let target = writer.lag.applied_seq;
        let started = Instant::now();
        let mut waiting: Vec<ReaderWait<'_>> = self
            .readers
            .iter()
            .map(|reader| ReaderWait {
                reader,
                polls: 0,
                first: None,
                done: None,
            })
            .collect();
        loop {
            for w in waiting.iter_mut().filter(|w| w.done.is_none()) {
                let remaining = self.catch_up_timeout.saturating_sub(started.elapsed());
                let now = w.reader.replication(remaining).with_context(|| {
                    format!("before {before}: waiting for the readers to catch up")
                })?;
                if now.writer {
                    bail!(
                        "{} is a writer, not a reader (its INFO replication says role:master)",
                        w.reader.address()
                    );
                }
                w.polls += 1;
                let first = w.first.get_or_insert_with(|| now.lag.clone());
                if caught_up(&now.lag, target) {
                    w.done = Some(ReaderCatchUp {
                        address: w.reader.address().to_string(),
                        seconds: started.elapsed().as_secs_f64(),
                        polls: w.polls,
                        first: first.clone(),
                        last: now.lag,
                    });
                }
            }
            if waiting.iter().all(|w| w.done.is_some()) {
                break;
            }
            if started.elapsed() >= self.catch_up_timeout {
                let behind: Vec<String> = waiting
                    .iter()
                    .filter(|w| w.done.is_none())
                    .map(|w| w.reader.address().to_string())
                    .collect();
                bail!(
                    "before {before}: reader(s) {} did not catch up with the writer's \
                     splitkv_applied_seq {target} (and a lag of 0 entries) within {:?}",
                    behind.join(", "),
                    self.catch_up_timeout
                );
            }
            std::thread::sleep(POLL_EVERY);
        }
        Ok(Some(CatchUpReport {
            before: before.to_string(),
            writer_applied_seq: target,
            seconds: started.elapsed().as_secs_f64(),
            readers: waiting.into_iter().filter_map(|w| w.done).collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(applied_seq: u64, lag_entries: Option<u64>) -> ReaderLag {
        ReaderLag {
            applied_seq,
            lag_entries,
            lag_ms: Some(0),
        }
    }

    #[test]
    fn a_reader_is_caught_up_at_the_writers_seq_with_nothing_left_to_apply() {
        assert!(caught_up(&lag(100, Some(0)), 100));
        assert!(caught_up(&lag(101, Some(0)), 100));
        assert!(!caught_up(&lag(99, Some(0)), 100), "behind the writer");
        assert!(
            !caught_up(&lag(100, Some(3)), 100),
            "another partition is still behind"
        );
        assert!(!caught_up(&lag(100, None), 100), "lag unknown");
    }
}
