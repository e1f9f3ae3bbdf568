//! Writes handed over to a partition to own: those that cannot finish at
//! once (a full buffer, a record too large for a buffer, sync durability)
//! wait in the partition's queue, in arrival order, for its writer thread.
//!
//! A submitted write is applied at once, on the caller's thread, only when
//! nothing is queued or being applied before it and it needs no waiting;
//! otherwise it joins the queue. So submitted writes of a partition commit
//! in the order they were submitted, and are acknowledged in log order.
//! The writer thread takes up to [`MAX_WRITES_PER_ROUND`] queued writes at a
//! time, applies them in order, and in sync durability makes them durable
//! with one round of syncs before it completes them.

use std::collections::VecDeque;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use splitkv_common::message::WriteAck;

use super::Partition;
use super::writer::{Stall, WriteOp};
use crate::error::{Result, StorageError};

/// Most writes one partition holds waiting in its queue (besides the round
/// its writer thread is applying). A producer that finds it full gets its
/// write back as [`Submitted::QueueFull`].
pub const MAX_QUEUED_WRITES_PER_PARTITION: usize = 1024;

/// Most queued writes the writer thread applies before it syncs and
/// completes them.
const MAX_WRITES_PER_ROUND: usize = 64;

/// A write batch the engine owns: its keys and values are shared byte
/// buffers (for example slices of the frame they arrived in), never copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnedWrite {
    ops: Vec<OwnedOp>,
}

/// One operation of an [`OwnedWrite`], holding its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedOp {
    /// Put `key` = `value`, expiring at `expire_at_ms` (absolute Unix
    /// milliseconds; 0: never).
    Put {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// When the version expires.
        expire_at_ms: u64,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: Bytes,
    },
    /// The version of `key` with sequence number `version_seq` expired
    /// (a newer version stays).
    Expire {
        /// The key.
        key: Bytes,
        /// Sequence number of the expired version.
        version_seq: u64,
    },
    /// A clear entry: every record with a lower sequence number, in any
    /// partition, is gone.
    Clear,
}

impl OwnedWrite {
    /// One put, expiring at `expire_at_ms` (absolute Unix milliseconds; 0:
    /// never).
    pub fn put(key: Bytes, value: Bytes, expire_at_ms: u64) -> Self {
        Self {
            ops: vec![OwnedOp::Put {
                key,
                value,
                expire_at_ms,
            }],
        }
    }

    /// One delete.
    pub fn delete(key: Bytes) -> Self {
        Self {
            ops: vec![OwnedOp::Delete { key }],
        }
    }

    /// Operations applied as one unit (all or none after a crash), in
    /// order.
    pub fn many(ops: impl IntoIterator<Item = OwnedOp>) -> Self {
        Self {
            ops: ops.into_iter().collect(),
        }
    }

    /// One clear entry: every record with a lower sequence number, in any
    /// partition, is gone.
    pub fn clear() -> Self {
        Self {
            ops: vec![OwnedOp::Clear],
        }
    }

    /// Number of operations (and of acknowledgements it gets).
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True for a batch of no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Calls `f` with the operations, borrowed.
    fn with_ops<R>(&self, f: impl FnOnce(&[WriteOp<'_>]) -> R) -> R {
        fn borrow(op: &OwnedOp) -> WriteOp<'_> {
            match op {
                OwnedOp::Put {
                    key,
                    value,
                    expire_at_ms,
                } => WriteOp::Put {
                    key,
                    value,
                    expire_at_ms: *expire_at_ms,
                },
                OwnedOp::Delete { key } => WriteOp::Delete { key },
                OwnedOp::Expire { key, version_seq } => WriteOp::Expire {
                    key,
                    version_seq: *version_seq,
                },
                OwnedOp::Clear => WriteOp::Clear,
            }
        }
        if let [one] = self.ops.as_slice() {
            f(&[borrow(one)])
        } else {
            let ops: Vec<WriteOp<'_>> = self.ops.iter().map(borrow).collect();
            f(&ops)
        }
    }
}

/// Called once with the outcome of a queued write: one acknowledgement per
/// operation, in order, or why it failed. Runs on the partition's writer
/// thread, so it must not wait for long.
pub type WriteCompletion = Box<dyn FnOnce(Result<Vec<WriteAck>>) + Send>;

/// What became of a submitted write.
pub enum Submitted {
    /// It finished (or was refused) at once; the completion was not called.
    Done(Result<Vec<WriteAck>>),
    /// It waits in the partition's queue; the completion will be called.
    Queued,
    /// The partition's queue is full: nothing was done, and the write and
    /// its completion come back (see
    /// [`StorageEngine::queue_write`](crate::StorageEngine::queue_write)).
    QueueFull(OwnedWrite, WriteCompletion),
}

impl std::fmt::Debug for Submitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Submitted::Done(result) => f.debug_tuple("Done").field(result).finish(),
            Submitted::Queued => f.write_str("Queued"),
            Submitted::QueueFull(request, _) => f.debug_tuple("QueueFull").field(request).finish(),
        }
    }
}

/// A write waiting for the writer thread.
struct QueuedWrite {
    epoch: Option<u64>,
    request: OwnedWrite,
    done: WriteCompletion,
}

/// The queue of one partition's waiting writes.
pub(super) struct WriteQueue {
    inner: Mutex<QueueState>,
    /// Signalled when a write joins the queue or the queue closes.
    work_ready: Condvar,
    /// Signalled when the writer thread takes writes out of the queue.
    space_freed: Condvar,
}

struct QueueState {
    writes: VecDeque<QueuedWrite>,
    /// Writes the writer thread has taken and not yet completed.
    applying: usize,
    closed: bool,
}

impl QueueState {
    /// True when no submitted write is waiting or being applied.
    fn is_idle(&self) -> bool {
        self.writes.is_empty() && self.applying == 0
    }
}

impl WriteQueue {
    pub(super) fn new() -> Self {
        Self {
            inner: Mutex::new(QueueState {
                writes: VecDeque::new(),
                applying: 0,
                closed: false,
            }),
            work_ready: Condvar::new(),
            space_freed: Condvar::new(),
        }
    }

    /// Refuses new writes; the writer thread completes what is queued and
    /// stops.
    pub(super) fn close(&self) {
        self.inner.lock().closed = true;
        self.work_ready.notify_all();
        self.space_freed.notify_all();
    }

    /// Waits for queued writes and moves up to [`MAX_WRITES_PER_ROUND`] of
    /// them into `round`. Returns false once the queue is closed and empty.
    fn take_round(&self, round: &mut Vec<QueuedWrite>) -> bool {
        let mut waiting = self.inner.lock();
        while waiting.writes.is_empty() {
            if waiting.closed {
                return false;
            }
            self.work_ready.wait(&mut waiting);
        }
        let n = waiting.writes.len().min(MAX_WRITES_PER_ROUND);
        round.extend(waiting.writes.drain(..n));
        waiting.applying = n;
        self.space_freed.notify_all();
        true
    }

    /// The writer thread has completed the writes of its round.
    fn finish_round(&self) {
        self.inner.lock().applying = 0;
    }
}

impl Partition {
    /// Hands a write over to the partition (see [`Submitted`]): applied at
    /// once when nothing waits before it and it needs no waiting, queued
    /// otherwise. Never blocks on the disk.
    pub(crate) fn submit(
        &self,
        epoch: Option<u64>,
        request: OwnedWrite,
        done: WriteCompletion,
    ) -> Submitted {
        // Validated, and applied if it can be, with one borrow of its ops;
        // `None` means it is to wait in the queue.
        let finished = request.with_ops(|ops| {
            if let Err(e) = self.validate(ops) {
                return Some(Err(e));
            }
            {
                let waiting = self.queue.inner.lock();
                if waiting.closed {
                    return Some(Err(StorageError::shutting_down()));
                }
                if !waiting.is_idle() {
                    return None;
                }
            }
            let mut acks = vec![WriteAck::default(); ops.len()];
            match self.try_apply(ops, epoch, &mut acks) {
                Ok(Some(_end)) => Some(Ok(acks)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            }
        });
        if let Some(result) = finished {
            return Submitted::Done(result);
        }
        let waiting = self.queue.inner.lock();
        if waiting.closed {
            return Submitted::Done(Err(StorageError::shutting_down()));
        }
        self.enqueue(waiting, epoch, request, done)
    }

    /// Queues a write, waiting while the queue is full; never applies it on
    /// the caller's thread. Returns once it is queued (`done` will be
    /// called), or the refusal (`done` is dropped uncalled).
    pub(crate) fn queue_write(
        &self,
        epoch: Option<u64>,
        request: OwnedWrite,
        done: WriteCompletion,
    ) -> Result<()> {
        request.with_ops(|ops| self.validate(ops))?;
        let mut waiting = self.queue.inner.lock();
        loop {
            if waiting.closed {
                return Err(StorageError::shutting_down());
            }
            if waiting.writes.len() < MAX_QUEUED_WRITES_PER_PARTITION {
                waiting.writes.push_back(QueuedWrite {
                    epoch,
                    request,
                    done,
                });
                self.queue.work_ready.notify_one();
                return Ok(());
            }
            self.queue.space_freed.wait(&mut waiting);
        }
    }

    fn enqueue(
        &self,
        mut waiting: parking_lot::MutexGuard<'_, QueueState>,
        epoch: Option<u64>,
        request: OwnedWrite,
        done: WriteCompletion,
    ) -> Submitted {
        if waiting.writes.len() >= MAX_QUEUED_WRITES_PER_PARTITION {
            return Submitted::QueueFull(request, done);
        }
        waiting.writes.push_back(QueuedWrite {
            epoch,
            request,
            done,
        });
        self.queue.work_ready.notify_one();
        Submitted::Queued
    }

    /// Body of the partition's writer thread: applies queued writes in
    /// order, waiting for buffers and writing large records as needed,
    /// syncs them in sync durability, and completes them in order. Returns
    /// once the queue is closed and empty.
    pub(super) fn run_writer(&self) {
        let mut round = Vec::with_capacity(MAX_WRITES_PER_ROUND);
        let mut applied = Vec::with_capacity(MAX_WRITES_PER_ROUND);
        while self.queue.take_round(&mut round) {
            for pending in &round {
                applied.push(pending.request.with_ops(|ops| {
                    let mut acks = vec![WriteAck::default(); ops.len()];
                    match self.apply(ops, pending.epoch, &mut acks, true) {
                        Ok(end) => Ok((acks, end)),
                        Err(Stall::Failed(e)) => Err(e),
                        Err(Stall::MustWait) => unreachable!("a write that may wait never stalls"),
                    }
                }));
            }
            // The first durability wait syncs the frames of the whole round;
            // the others find theirs durable already.
            for (pending, outcome) in round.drain(..).zip(applied.drain(..)) {
                let result =
                    outcome.and_then(|(acks, end)| self.durable_if_sync(end).map(|()| acks));
                (pending.done)(result);
            }
            self.queue.finish_round();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_lends_out_its_operations() {
        let put = OwnedWrite::put(Bytes::from_static(b"k"), Bytes::from_static(b"v"), 7);
        assert_eq!(put.len(), 1);
        put.with_ops(|ops| {
            assert_eq!(
                ops,
                &[WriteOp::Put {
                    key: b"k",
                    value: b"v",
                    expire_at_ms: 7,
                }]
            )
        });
        let many = OwnedWrite::many([
            OwnedOp::Put {
                key: Bytes::from_static(b"a"),
                value: Bytes::from_static(b"1"),
                expire_at_ms: 0,
            },
            OwnedOp::Delete {
                key: Bytes::from_static(b"gone"),
            },
            OwnedOp::Expire {
                key: Bytes::from_static(b"old"),
                version_seq: 3,
            },
        ]);
        assert_eq!(many.len(), 3);
        many.with_ops(|ops| {
            assert_eq!(
                ops,
                &[
                    WriteOp::Put {
                        key: b"a",
                        value: b"1",
                        expire_at_ms: 0,
                    },
                    WriteOp::Delete { key: b"gone" },
                    WriteOp::Expire {
                        key: b"old",
                        version_seq: 3,
                    }
                ]
            )
        });
        OwnedWrite::delete(Bytes::from_static(b"d"))
            .with_ops(|ops| assert_eq!(ops, &[WriteOp::Delete { key: b"d" }]));
        OwnedWrite::clear().with_ops(|ops| assert_eq!(ops, &[WriteOp::Clear]));
    }
}
