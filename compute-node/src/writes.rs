//! The write route. Puts of [`Writes::put_each`]: each caller's run of
//! puts joins its partition's lane ([`crate::coalesce::lanes`], the
//! policy); a run that finds the lane idle is sent by its caller, and what
//! collects behind it by a task of the lane's, one `write_many` at a time,
//! every put recorded in the view before its caller hears of it.
//!
//! A write is acknowledged to the caller only after the storage node has
//! acknowledged it; the acknowledgement's sequence number and offset update
//! the index, which never moves a key to a lower sequence number.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::{BatchOp, Call, ClientError};
use splitkv_common::limits::Limits;
use splitkv_common::message::{self, WriteAck};
use tokio::sync::oneshot;

use crate::coalesce::{Joined, Lanes, Lead};
use crate::error::{EngineError, Result};
use crate::storage::Storage;
use crate::view::{Cacheable, View};

/// Bytes of meta a put takes in a `write_many` frame besides its key: the
/// key's length and the operation.
const PUT_META_BYTES: usize = 24;

/// Bytes a put takes in a `write_many` frame.
fn put_frame_bytes(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + PUT_META_BYTES
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

/// One caller's run of puts waiting in a lane, and where their outcomes go.
pub(crate) struct QueuedRun {
    pairs: Vec<(Bytes, Bytes)>,
    done: oneshot::Sender<Vec<Result<()>>>,
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

    /// Puts each `(key, value)` pair (without expiry) through `partition`
    /// with an outcome per pair, in order (see
    /// `Engine::put_each_async`).
    pub(crate) async fn put_each(
        this: &Arc<Self>,
        partition: usize,
        pairs: Vec<(Bytes, Bytes)>,
    ) -> Vec<Result<()>> {
        if !this.storage.is_writer() {
            return pairs.iter().map(|_| Err(EngineError::ReadOnly)).collect();
        }
        let lane = partition % this.view.partitions();
        let max_batch_bytes = this.lanes.max_batch_bytes();
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
                this.lanes
                    .join(lane, QueuedRun { pairs: run, done }, run_bytes)
            {
                lead = Some(batch);
            }
        };
        for (key, value) in pairs {
            if let Err(e) = this.storage.prepare_write(partition, &key, Some(&value)) {
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
                route: this,
                lane,
                hand_on: Writes::spawn_lane,
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
    fn spawn_lane(this: &Arc<Self>, lane: usize) {
        if let Some(next) = this.lanes.next_batch(lane) {
            let writes = Arc::clone(this);
            this.handle.spawn(async move {
                let _lead = Lead {
                    route: &writes,
                    lane,
                    hand_on: Writes::spawn_lane,
                };
                writes.send_put_batch(lane, next).await;
            });
        }
    }

    /// Sends the runs of `batch` as one `write_many` through `partition`,
    /// records every acknowledged put, and answers each run.
    async fn send_put_batch(&self, partition: usize, batch: Vec<QueuedRun>) {
        let client = &self.storage.client;
        let ops: Vec<BatchOp<'_>> = batch
            .iter()
            .flat_map(|run| run.pairs.iter())
            .map(|(key, value)| BatchOp::put(key, value))
            .collect();
        let acks = match self
            .storage
            .submit_write(partition, || client.write_many(partition, &ops))
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
        self.view
            .counters
            .put_batches
            .fetch_add(1, Ordering::Relaxed);
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
                                .view
                                .cache
                                .admits(value.len())
                                .then_some(Cacheable::Borrowed(value));
                            self.view
                                .record_put(partition, key, value.len(), 0, cached, ack);
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

    /// Like [`Storage::prepare_write`], for every op of a batch.
    fn prepare_batch(&self, partition: usize, ops: &[BatchOp<'_>]) -> Result<usize> {
        for op in ops {
            match *op {
                BatchOp::Put { key, value, .. } => {
                    self.storage.prepare_write(partition, key, Some(value))?
                }
                BatchOp::Delete { key } | BatchOp::Expire { key, .. } => {
                    self.storage.prepare_write(partition, key, None)?
                }
            };
        }
        Ok(partition % self.view.partitions())
    }

    /// Applies `ops` through `partition` as one unit and records their
    /// acknowledgements (see `Engine::write_many_async`). Returns how many
    /// of its expiries removed a version from the index.
    pub(crate) async fn write_batch(&self, partition: usize, ops: &[BatchOp<'_>]) -> Result<u64> {
        let partition = self.prepare_batch(partition, ops)?;
        let client = &self.storage.client;
        let acks = self
            .storage
            .submit_write(partition, || client.write_many(partition, ops))
            .await?
            .wait()
            .await?;
        self.view
            .batches
            .apply(|| self.view.record_write_many(partition, ops, acks))
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

    /// Deletes `key` through `partition`; returns once acknowledged, with
    /// whether the key existed.
    pub(crate) async fn delete(&self, partition: usize, key: &[u8]) -> Result<bool> {
        let partition = self.storage.prepare_write(partition, key, None)?;
        let existed = self.view.visible(key).is_some();
        let client = &self.storage.client;
        let ack = self
            .storage
            .submit_write(partition, || client.delete(partition, key))
            .await?
            .wait()
            .await?;
        self.view.record_delete(partition, key, ack);
        Ok(existed)
    }

    /// Sends a put into `partition` without waiting for its
    /// acknowledgement (see `Engine::start_put`).
    pub(crate) async fn start_put<K: AsRef<[u8]>>(
        &self,
        partition: usize,
        key: K,
        value: &[u8],
        expire_at_ms: u64,
    ) -> Result<PendingPut<K>> {
        let partition = self
            .storage
            .prepare_write(partition, key.as_ref(), Some(value))?;
        let client = &self.storage.client;
        let call = self
            .storage
            .submit_write(partition, || {
                client.put(partition, key.as_ref(), value, expire_at_ms)
            })
            .await?;
        let cached = self
            .view
            .cache
            .admits(value.len())
            .then(|| Bytes::copy_from_slice(value));
        Ok(PendingPut {
            partition,
            key,
            value_len: value.len(),
            expire_at_ms,
            cached,
            call,
        })
    }

    /// Waits for a put's acknowledgement and records it in the index.
    pub(crate) async fn finish_put<K: AsRef<[u8]>>(&self, pending: PendingPut<K>) -> Result<()> {
        let ack = pending.call.wait().await?;
        self.view.record_put(
            pending.partition,
            pending.key.as_ref(),
            pending.value_len,
            pending.expire_at_ms,
            pending.cached.map(Cacheable::Owned),
            ack,
        );
        Ok(())
    }
}

/// A put that has been sent and not yet acknowledged (see
/// `Engine::start_put`).
#[must_use = "a put takes effect in the index only once finished"]
pub struct PendingPut<K> {
    partition: usize,
    key: K,
    value_len: usize,
    expire_at_ms: u64,
    /// A copy of the value for the value cache, if it takes values of its
    /// size.
    cached: Option<Bytes>,
    call: Call<WriteAck>,
}
