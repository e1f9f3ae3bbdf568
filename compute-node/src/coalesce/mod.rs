//! The engine's coalesced requests. Puts ([`Engine::put_each_async`]):
//! each caller's run of puts joins its partition's lane ([`lanes`], the
//! policy); a run that finds the lane idle is sent by its caller, and what
//! collects behind it by a task of the lane's, one `write_many` at a time,
//! every put recorded in the index and the value cache before its caller
//! hears of it. Record reads ([`reads`]) share a connection's lane the same
//! way, one `GetMany` at a time.

pub mod lanes;
pub(crate) mod reads;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::{BatchOp, ClientError};
use splitkv_common::limits::Limits;
use splitkv_common::message;
use tokio::sync::oneshot;

use crate::engine::{Engine, Inner};
use crate::error::{EngineError, Result};
use crate::ops::Cacheable;
use lanes::Joined;
pub(crate) use lanes::Lanes;

/// Bytes of meta a put takes in a `write_many` frame besides its key: the
/// key's length and the operation.
const PUT_META_BYTES: usize = 24;

/// Bytes a put takes in a `write_many` frame.
fn put_frame_bytes(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + PUT_META_BYTES
}

/// The lanes of `partitions` partitions, their batches bound so that every
/// batch fits one frame under `limits` (a single put always does).
pub(crate) fn lanes_for(partitions: usize, limits: &Limits) -> Lanes<QueuedRun> {
    let max_frame_bytes = message::max_frame_bytes(limits.max_key_bytes, limits.max_value_bytes);
    // Room for the request's own header and the batch's lengths.
    Lanes::new(
        partitions,
        max_frame_bytes - message::FRAME_OVERHEAD_BYTES / 2,
    )
}

/// One caller's run of puts waiting in a lane, and where their outcomes go.
pub(crate) struct QueuedRun {
    pairs: Vec<(Bytes, Bytes)>,
    done: oneshot::Sender<Vec<Result<()>>>,
}

/// A leader's hold on its lane, dropped once its batch is answered or when
/// the leader goes away first (its future dropped): either way the runs
/// that collected behind it are then sent on a task of their own (by
/// `hand_on`), so no lane stays in flight for good.
struct Lead<'a> {
    inner: &'a Arc<Inner>,
    lane: usize,
    hand_on: fn(&Arc<Inner>, usize),
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        (self.hand_on)(self.inner, self.lane);
    }
}

impl Engine {
    /// Puts each `(key, value)` pair (without expiry) through `partition`
    /// with an outcome per pair, in order: a pair over the limits fails
    /// alone, without being sent. The runs of the callers of one partition
    /// that arrive while its previous batch is in flight travel to the
    /// storage node together, in as few requests as the frame limit allows
    /// (one, but for large values); one caller's puts
    /// take effect in its order, and each is in the index, and readable,
    /// before its outcome is returned. A failed batch fails every put in
    /// it; as for any write, one that failed after it was sent may or may
    /// not have happened.
    pub async fn put_each_async(
        &self,
        partition: usize,
        pairs: Vec<(Bytes, Bytes)>,
    ) -> Vec<Result<()>> {
        Inner::put_each(&self.inner, partition, pairs).await
    }
}

impl Inner {
    async fn put_each(
        this: &Arc<Self>,
        partition: usize,
        pairs: Vec<(Bytes, Bytes)>,
    ) -> Vec<Result<()>> {
        if !this.is_writer() {
            return pairs.iter().map(|_| Err(EngineError::ReadOnly)).collect();
        }
        let lane = partition % this.partitions();
        let max_batch_bytes = this.put_lanes.max_batch_bytes();
        let mut outcomes: Vec<Option<Result<()>>> = Vec::with_capacity(pairs.len());
        // The valid pairs, cut into runs of at most a batch's bytes (or a
        // single pair), each joining the lane in order.
        let mut answers = Vec::new();
        let mut lead = None;
        let mut run = Vec::new();
        let mut run_bytes = 0;
        let mut join = |run: Vec<(Bytes, Bytes)>, run_bytes: usize| {
            let (done, answer) = oneshot::channel();
            answers.push((answer, run.len()));
            if let Joined::Lead { batch } =
                this.put_lanes
                    .join(lane, QueuedRun { pairs: run, done }, run_bytes)
            {
                lead = Some(batch);
            }
        };
        for (key, value) in pairs {
            if let Err(e) = this.prepare_write(partition, &key, Some(&value)) {
                outcomes.push(Some(Err(e)));
                continue;
            }
            let bytes = put_frame_bytes(&key, &value);
            if !run.is_empty() && run_bytes + bytes > max_batch_bytes {
                join(std::mem::take(&mut run), run_bytes);
                run_bytes = 0;
            }
            run.push((key, value));
            run_bytes += bytes;
            outcomes.push(None);
        }
        if !run.is_empty() {
            join(run, run_bytes);
        }
        if let Some(batch) = lead {
            // The leader sends its own batch; what collects behind it goes
            // on a task of the lane's, so the leader answers its client
            // after one round trip.
            let _lead = Lead {
                inner: this,
                lane,
                hand_on: Inner::spawn_put_lane,
            };
            this.send_put_batch(lane, batch).await;
        }
        let mut results = Vec::with_capacity(outcomes.len());
        for (answer, puts) in answers {
            match answer.await {
                Ok(answered) if answered.len() == puts => results.extend(answered),
                // The lane's task went away (the engine is shutting down).
                _ => results
                    .extend((0..puts).map(|_| Err(EngineError::Storage(ClientError::ShutDown)))),
            }
        }
        let mut results = results.into_iter();
        outcomes
            .into_iter()
            .map(|outcome| {
                outcome
                    .or_else(|| results.next())
                    .unwrap_or(Err(EngineError::Storage(ClientError::ShutDown)))
            })
            .collect()
    }

    /// Sends `lane`'s next batch on a task of its own, if any collected;
    /// that task hands the lane on in turn when it is done (or if it
    /// fails), through the same [`Lead`] guard a leader holds.
    fn spawn_put_lane(this: &Arc<Self>, lane: usize) {
        if let Some(next) = this.put_lanes.next_batch(lane) {
            let inner = Arc::clone(this);
            this.handle.spawn(async move {
                let _lead = Lead {
                    inner: &inner,
                    lane,
                    hand_on: Inner::spawn_put_lane,
                };
                inner.send_put_batch(lane, next).await;
            });
        }
    }

    /// Sends the runs of `batch` as one `write_many` through `partition`,
    /// records every acknowledged put, and answers each run.
    async fn send_put_batch(&self, partition: usize, batch: Vec<QueuedRun>) {
        let ops: Vec<BatchOp<'_>> = batch
            .iter()
            .flat_map(|run| run.pairs.iter())
            .map(|(key, value)| BatchOp::put(key, value))
            .collect();
        let acks = match crate::ops::submit_write(self, partition, || {
            self.client.write_many(partition, &ops)
        })
        .await
        {
            Ok(call) => call.wait().await.map_err(EngineError::from),
            Err(e) => Err(e),
        };
        let acks = acks.and_then(|acks| {
            if acks.len() == ops.len() {
                Ok(acks)
            } else {
                Err(EngineError::Storage(ClientError::Protocol(format!(
                    "{} acknowledgements for a batch of {} puts",
                    acks.len(),
                    ops.len()
                ))))
            }
        });
        drop(ops);
        self.counters.put_batches.fetch_add(1, Ordering::Relaxed);
        match acks {
            Ok(acks) => {
                let mut acks = acks.into_iter();
                for run in batch {
                    let results = run
                        .pairs
                        .iter()
                        .zip(&mut acks)
                        .map(|((key, value), ack)| {
                            let cached = self
                                .cache
                                .admits(value.len())
                                .then_some(Cacheable::Borrowed(value));
                            self.record_put(partition, key, value.len(), 0, cached, ack);
                            Ok(())
                        })
                        .collect();
                    // A caller that went away no longer wants the answer.
                    let _ = run.done.send(results);
                }
            }
            Err(e) => {
                for run in batch {
                    let results = run.pairs.iter().map(|_| Err(e.for_each_op())).collect();
                    let _ = run.done.send(results);
                }
            }
        }
    }
}
