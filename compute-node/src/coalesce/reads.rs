//! Coalesced record reads: the reads that the RESP clients' turns send to
//! one storage connection while an earlier `GetMany` of that connection is
//! in flight wait for it and then travel together, one request and one
//! answer for the lot ([`super::lanes`] is the policy, as for puts). A
//! connection with no read in flight sends at once, so an idle node adds
//! no latency; under load, the misses of many clients share a round trip.
//!
//! Each read goes on the same connection as it would alone, so a
//! connection that is down fails only the reads meant for it. Reads have
//! no order between them; a read is sent after the write it must see was
//! acknowledged, whichever batch carries it.
//!
//! Bound: a caller waits for the answer to its reads before it reads again,
//! so a lane holds at most one request (at most
//! [`MAX_READS_PER_REQUEST`] records) per caller.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::{Call, ClientError};
use splitkv_common::message::{MAX_GET_MANY_BYTES, MAX_READS_PER_REQUEST, RecordAt, WireError};
use tokio::sync::oneshot;

use super::Lead;
use super::lanes::{Joined, Lanes, MAX_BATCH_BYTES};
use crate::engine::Inner;
use crate::error::{EngineError, Result};
use crate::ops::{WhenDown, submit};

/// The outcome of each record of one read request, in the order asked.
pub(crate) type RecordOutcomes = Vec<std::result::Result<Bytes, WireError>>;

/// One caller's reads waiting in a lane, and where their outcomes go.
pub(crate) struct QueuedReads {
    reads: Vec<RecordAt>,
    done: oneshot::Sender<Result<RecordOutcomes>>,
}

/// Most bytes of records in a batch of several callers' reads.
const READ_BATCH_BYTES: usize = if MAX_BATCH_BYTES < MAX_GET_MANY_BYTES {
    MAX_BATCH_BYTES
} else {
    MAX_GET_MANY_BYTES
};

/// The read lanes of `connections` connections: a batch carries at most
/// [`READ_BATCH_BYTES`] of records, unless a single caller's request is
/// larger.
pub(crate) fn read_lanes_for(connections: usize) -> Lanes<QueuedReads> {
    Lanes::new(connections, READ_BATCH_BYTES)
}

/// What a record of `len` bytes counts for against a batch bound of
/// `max_batch_bytes`: its length, but at least the bound's share of one
/// read, so that no batch of several callers' reads carries more than
/// [`MAX_READS_PER_REQUEST`] reads.
fn read_weight(len: u32, max_batch_bytes: usize) -> usize {
    (len as usize).max(max_batch_bytes.div_ceil(MAX_READS_PER_REQUEST))
}

/// A batch sent, and its answer on its way.
type SentBatch = (Vec<QueuedReads>, Result<Call<RecordOutcomes>>);

impl Inner {
    /// Reads the records of each `(connection, reads)` request, each
    /// through its connection's lane, and returns each request's outcomes
    /// in the order of `requests`. Every request is valid alone as a
    /// `GetMany` (at most [`MAX_READS_PER_REQUEST`] reads and, for more than
    /// one, at most [`MAX_GET_MANY_BYTES`]). The requests that find their
    /// lane idle are sent at once, together, and answered after one round
    /// trip; the others wait for their lane's batch in flight and go with
    /// the next one.
    pub(crate) async fn read_records(
        this: &Arc<Self>,
        requests: Vec<(usize, Vec<RecordAt>)>,
    ) -> Vec<Result<RecordOutcomes>> {
        let max_batch_bytes = this.read_lanes.max_batch_bytes();
        let mut answers = Vec::with_capacity(requests.len());
        let mut leads = Vec::new();
        for (connection, reads) in requests {
            let lane = connection % this.partitions();
            let weight = reads
                .iter()
                .map(|read| read_weight(read.len, max_batch_bytes))
                .sum();
            let (done, answer) = oneshot::channel();
            answers.push(answer);
            if let Joined::Lead { batch } =
                this.read_lanes
                    .join(lane, QueuedReads { reads, done }, weight)
            {
                // Held from the moment the lane is taken: if this future is
                // dropped at any later await, the guard hands the lane on.
                let lead = Lead {
                    inner: this,
                    lane,
                    hand_on: Inner::spawn_read_lane,
                };
                leads.push((lead, batch));
            }
        }
        // Every lead batch is sent before any is waited for, so that they
        // share the round trip.
        let mut sent = Vec::with_capacity(leads.len());
        for (lead, batch) in leads {
            let batch = this.send_read_batch(lead.lane, batch).await;
            sent.push((lead, batch));
        }
        for (lead, batch) in sent {
            Self::answer_read_batch(batch).await;
            drop(lead);
        }
        let mut outcomes = Vec::with_capacity(answers.len());
        for answer in answers {
            outcomes.push(
                answer
                    .await
                    .unwrap_or(Err(EngineError::Storage(ClientError::ShutDown))),
            );
        }
        outcomes
    }

    /// Sends `lane`'s next batch of reads on a task of its own, if any
    /// collected; that task hands the lane on in turn when it is done.
    fn spawn_read_lane(this: &Arc<Self>, lane: usize) {
        if let Some(next) = this.read_lanes.next_batch(lane) {
            let inner = Arc::clone(this);
            this.handle.spawn(async move {
                let _lead = Lead {
                    inner: &inner,
                    lane,
                    hand_on: Inner::spawn_read_lane,
                };
                let sent = inner.send_read_batch(lane, next).await;
                Self::answer_read_batch(sent).await;
            });
        }
    }

    /// Sends the reads of `batch` as one `GetMany` through `connection`.
    async fn send_read_batch(&self, connection: usize, batch: Vec<QueuedReads>) -> SentBatch {
        let reads: Vec<RecordAt> = batch
            .iter()
            .flat_map(|queued| queued.reads.iter().copied())
            .collect();
        self.counters
            .point_reads
            .fetch_add(reads.len() as u64, Ordering::Relaxed);
        self.counters.read_batches.fetch_add(1, Ordering::Relaxed);
        let call = submit(self, connection, WhenDown::Fail, || {
            self.client.get_many(connection, &reads)
        })
        .await;
        (batch, call)
    }

    /// Waits for a batch's answer and hands each caller its records'
    /// outcomes; a batch that failed as a whole fails every read in it.
    async fn answer_read_batch((batch, call): SentBatch) {
        let outcomes = match call {
            Ok(call) => call.wait().await.map_err(EngineError::from),
            Err(e) => Err(e),
        };
        let asked: usize = batch.iter().map(|queued| queued.reads.len()).sum();
        let outcomes = outcomes.and_then(|outcomes| {
            if outcomes.len() == asked {
                Ok(outcomes)
            } else {
                Err(EngineError::Storage(ClientError::Protocol(format!(
                    "{} outcomes for {asked} reads",
                    outcomes.len()
                ))))
            }
        });
        match outcomes {
            Ok(outcomes) => {
                let mut outcomes = outcomes.into_iter();
                for queued in batch {
                    let own = outcomes.by_ref().take(queued.reads.len()).collect();
                    // A caller that went away no longer wants the answer.
                    let _ = queued.done.send(Ok(own));
                }
            }
            Err(e) => {
                for queued in batch {
                    let _ = queued.done.send(Err(e.for_each_op()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_batch_of_small_reads_holds_more_reads_than_a_request_may() {
        let lanes = Lanes::new(1, READ_BATCH_BYTES);
        let bound = lanes.max_batch_bytes();
        // Records of one byte: the count, not the bytes, is what binds.
        assert!(matches!(lanes.join(0, 0, 1), Joined::Lead { .. }));
        for n in 0..2 * MAX_READS_PER_REQUEST {
            assert_eq!(lanes.join(0, n, read_weight(1, bound)), Joined::Queued);
        }
        let first = lanes.next_batch(0).expect("a batch");
        assert_eq!(first.len(), MAX_READS_PER_REQUEST);
        let second = lanes.next_batch(0).expect("a batch");
        assert_eq!(second.len(), MAX_READS_PER_REQUEST);
        assert_eq!(lanes.next_batch(0), None);
        // Records of 4 KiB: the bytes bind, below the count.
        assert!(matches!(lanes.join(0, 0, 1), Joined::Lead { .. }));
        for n in 0..MAX_READS_PER_REQUEST {
            assert_eq!(lanes.join(0, n, read_weight(4096, bound)), Joined::Queued);
        }
        let batch = lanes.next_batch(0).expect("a batch");
        assert_eq!(batch.len(), bound / 4096);
        assert!(batch.len() * 4096 <= MAX_GET_MANY_BYTES);
    }
}
