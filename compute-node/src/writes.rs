//! The write route: every write — a plain SET, a SET with options, MSET,
//! DEL, EXEC, an expiry's delete, the engine's `put`, `put_many` and
//! `delete` — is a run of [`KeyWrite`]s that joins its partition's lane
//! ([`crate::coalesce::lanes`], the policy) and reaches the storage node in
//! one `write_many` request with the runs that collected beside it; its
//! acknowledgements are recorded in the view by one function
//! ([`View::record`]) before its caller hears of them.
//!
//! A run that finds its lane idle is sent by its caller, at once (an idle
//! node adds no latency); what collects behind it while it is in flight is
//! sent by a task of the lane's when its acknowledgement comes back, up to
//! a bound of bytes a batch. A run is never split: its writes take effect
//! as one unit (all or none after a crash). A lane sends its runs in the
//! order they joined, each batch after the previous one's acknowledgement,
//! so one caller's writes through one partition take effect in its order.
//!
//! Bound: a caller waits for the answers to its runs before it writes
//! again, so a lane holds at most one turn's worth of runs per caller.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::{ClientError, KeyWrite};
use splitkv_common::limits::Limits;
use splitkv_common::message;
use tokio::sync::oneshot;

use crate::coalesce::{self, Joined, Lanes, Lead};
use crate::error::{EngineError, Result};
use crate::storage::Storage;
use crate::view::View;

/// Bytes of meta a write takes in a `write_many` frame besides its key and
/// value: the key's length and the operation.
const WRITE_META_BYTES: usize = 24;

/// Bytes `write` takes in a `write_many` frame.
fn frame_bytes(write: &KeyWrite<Bytes>) -> usize {
    write.key().len() + write.value().map_or(0, <[u8]>::len) + WRITE_META_BYTES
}

/// The lanes of `partitions` partitions, their batches bound so that every
/// batch fits one frame under `limits` (a single put always does).
fn lanes_for(partitions: usize, limits: &Limits) -> Lanes<QueuedRun> {
    let max_frame_bytes = message::max_frame_bytes(limits.max_key_bytes, limits.max_value_bytes);
    // Room for the request's own header and the batch's lengths.
    Lanes::new(
        partitions,
        max_frame_bytes - message::FRAME_OVERHEAD_BYTES / 2,
    )
}

/// One caller's run of writes waiting in a lane, and where its outcome
/// goes: how many of its expiries removed a version from the index.
pub(crate) struct QueuedRun {
    writes: Vec<KeyWrite<Bytes>>,
    done: oneshot::Sender<Result<u64>>,
}

/// The write route: the view the acknowledgements go into, the storage
/// client the writes go through, and the lanes that coalesce them.
pub(crate) struct Writes {
    view: Arc<View>,
    storage: Arc<Storage>,
    lanes: Lanes<QueuedRun>,
    handle: tokio::runtime::Handle,
}

impl Writes {
    pub(crate) fn new(
        view: Arc<View>,
        storage: Arc<Storage>,
        handle: tokio::runtime::Handle,
    ) -> Self {
        let lanes = lanes_for(view.partitions(), storage.limits());
        Self {
            view,
            storage,
            lanes,
            handle,
        }
    }

    pub(crate) fn view(&self) -> &Arc<View> {
        &self.view
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// Applies `writes` through `partition` as one unit; returns once the
    /// storage node has acknowledged them and they are in the view, with
    /// how many of its expiries removed a version from the index. A write
    /// over the limits fails the unit without sending anything.
    pub(crate) async fn write(
        this: &Arc<Self>,
        partition: usize,
        writes: Vec<KeyWrite<Bytes>>,
    ) -> Result<u64> {
        if !this.storage.is_writer() {
            return Err(EngineError::ReadOnly);
        }
        for write in &writes {
            this.storage.check_write(write)?;
        }
        if writes.is_empty() {
            return Ok(0);
        }
        let bytes = writes.iter().map(frame_bytes).sum();
        let mut answers = Self::join(this, partition, vec![(writes, bytes)]).await;
        answers
            .pop()
            .unwrap_or(Err(EngineError::Storage(ClientError::ShutDown)))
    }

    /// Puts each `(key, value)` pair (without expiry) through `partition`
    /// with an outcome per pair, in order (see `Engine::put_each_async`):
    /// a pair over the limits fails alone, without being sent; the others
    /// go in runs of at most a batch's bytes (or a single pair).
    pub(crate) async fn put_each(
        this: &Arc<Self>,
        partition: usize,
        pairs: Vec<(Bytes, Bytes)>,
    ) -> Vec<Result<()>> {
        if !this.storage.is_writer() {
            return pairs.iter().map(|_| Err(EngineError::ReadOnly)).collect();
        }
        let max_batch_bytes = this.lanes.max_batch_bytes();
        // Per pair: its failure, or the run it went in.
        let mut outcomes: Vec<std::result::Result<usize, EngineError>> =
            Vec::with_capacity(pairs.len());
        let mut runs: Vec<(Vec<KeyWrite<Bytes>>, usize)> = Vec::new();
        let mut run = Vec::new();
        let mut run_bytes = 0;
        for (key, value) in pairs {
            let write = KeyWrite::put(key, value);
            if let Err(e) = this.storage.check_write(&write) {
                outcomes.push(Err(e));
                continue;
            }
            let bytes = frame_bytes(&write);
            if !run.is_empty() && run_bytes + bytes > max_batch_bytes {
                runs.push((std::mem::take(&mut run), run_bytes));
                run_bytes = 0;
            }
            run.push(write);
            run_bytes += bytes;
            outcomes.push(Ok(runs.len()));
        }
        if !run.is_empty() {
            runs.push((run, run_bytes));
        }
        let answers = Self::join(this, partition, runs).await;
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(run) => match &answers[run] {
                    Ok(_) => Ok(()),
                    Err(e) => Err(e.clone()),
                },
                Err(e) => Err(e),
            })
            .collect()
    }

    /// Places each run (its writes and their frame bytes) in `partition`'s
    /// lane, in order, sends the first batch itself if the lane was idle,
    /// and returns each run's outcome.
    async fn join(
        this: &Arc<Self>,
        partition: usize,
        runs: Vec<(Vec<KeyWrite<Bytes>>, usize)>,
    ) -> Vec<Result<u64>> {
        let lane = partition % this.view.partitions();
        let mut answers = Vec::with_capacity(runs.len());
        let mut lead = None;
        for (writes, bytes) in runs {
            let (done, answer) = oneshot::channel();
            answers.push(answer);
            if let Joined::Lead { batch } = this.lanes.join(lane, QueuedRun { writes, done }, bytes)
            {
                lead = Some(batch);
            }
        }
        if let Some(batch) = lead {
            // The leader sends its own batch; what collects behind it goes
            // on a task of the lane's, so the leader answers its caller
            // after one round trip.
            let _lead = Lead {
                route: this,
                lane,
                hand_on: Writes::spawn_lane,
            };
            this.send_batch(lane, batch).await;
        }
        coalesce::answers(answers).await
    }

    /// Sends `lane`'s next batch on a task of its own, if any collected;
    /// that task hands the lane on in turn when it is done (or if it
    /// fails), through the same [`Lead`] guard a leader holds.
    fn spawn_lane(this: &Arc<Self>, lane: usize) {
        if let Some(next) = this.lanes.next_batch(lane) {
            let writes = Arc::clone(this);
            this.handle.spawn(async move {
                let _lead = Lead {
                    route: &writes,
                    lane,
                    hand_on: Writes::spawn_lane,
                };
                writes.send_batch(lane, next).await;
            });
        }
    }

    /// Sends the runs of `batch` as one `write_many` through `partition`,
    /// records the acknowledgements in the view, and answers each run.
    async fn send_batch(&self, partition: usize, batch: Vec<QueuedRun>) {
        // A batch of one run (an idle lane's) sends that run's writes as
        // they are; only runs that collected together are joined.
        let mut writes = Vec::new();
        let mut runs = Vec::with_capacity(batch.len());
        for run in batch {
            runs.push((run.writes.len(), run.done));
            if writes.is_empty() {
                writes = run.writes;
            } else {
                writes.extend(run.writes);
            }
        }
        let client = &self.storage.client;
        let acks = match self
            .storage
            .submit_write(partition, || client.write_many(partition, &writes))
            .await
        {
            Ok(call) => call.wait().await.map_err(EngineError::from),
            Err(e) => Err(e),
        };
        self.view
            .counters
            .put_batches
            .fetch_add(1, Ordering::Relaxed);
        let recorded = acks.and_then(|acks| self.view.record(partition, &writes, acks));
        match recorded {
            Ok(expired) => {
                let mut expired = expired.into_iter();
                for (len, done) in runs {
                    let removed = expired
                        .by_ref()
                        .take(len)
                        .filter(|&removed| removed)
                        .count();
                    // A caller that went away no longer wants the answer.
                    let _ = done.send(Ok(removed as u64));
                }
            }
            Err(e) => {
                for (_, done) in runs {
                    let _ = done.send(Err(e.clone()));
                }
            }
        }
    }

    /// Deletes every key (FLUSHALL), through `partition`'s connection (see
    /// `Engine::clear_all_async`).
    pub(crate) async fn clear_all(&self, partition: usize) -> Result<()> {
        let partition = partition % self.view.partitions();
        let client = &self.storage.client;
        let ack = self
            .storage
            .submit_write(partition, || client.clear(partition))
            .await?
            .wait()
            .await?;
        self.view.apply_clear(ack.seq);
        for each in 0..self.view.partitions() {
            // Nothing below the clear can come back, so a tail pull after
            // a reconnect starts past it.
            self.view.note_acked(each, ack.seq);
        }
        Ok(())
    }
}
