//! The one read path of the control stream: a `GetMany` of records, the
//! one read request (a read of one record is a `GetMany` of one).
//!
//! Records whose bytes are in memory (a write buffer or the page cache)
//! are taken at once on the connection's task; if all of them are, the
//! request is answered there. Otherwise the others are read one after
//! another on one blocking thread under one disk-read permit. The records
//! still wait for the disk side by side: the in-memory try that found each
//! one missing has already started its transfer into the page cache (see
//! `read_cached_nowait_at`). One thread per record cost more CPU in wakes
//! than it saved, measured both with the records in the page cache and
//! with them on the disk only; other requests' reads still run beside
//! these.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use splitkv_common::message::{
    self, MAX_GET_MANY_BYTES, MAX_READS_PER_REQUEST, RecordAt, RecordRead, Response, ResponseBody,
    WireError,
};
use tokio::sync::mpsc;

use super::answer::{Answer, Answered};
use super::context::ServerContext;
use crate::{RecordBytes, StorageEngine, StorageError};

/// A record read: its verified bytes, or why it failed.
type RecordOutcome = Result<RecordBytes, WireError>;

/// Reads the records at `reads` for request `id`, answered with
/// [`ResponseBody::Records`], one outcome per record: into `out` if every
/// record is in memory (or the request is refused), else through `done`
/// once the records that wait for the disk are read.
pub(crate) fn read_records(
    context: &Arc<ServerContext>,
    id: u64,
    reads: Vec<RecordAt>,
    out: &mut Vec<Bytes>,
    done: &mpsc::Sender<Answer>,
) -> Answered {
    if let Err(refusal) = check_reads(&reads) {
        Answer::plain(id, Err(refusal)).append_to(out);
        return Answered::Now;
    }
    let engine = &context.engine;
    let in_memory: Vec<Option<RecordOutcome>> = reads
        .iter()
        .map(|at| {
            engine
                .read_in_memory(at.partition as usize, at.offset, at.len as usize)
                .transpose()
                .map(|read| read.map_err(StorageError::into_wire))
        })
        .collect();
    if in_memory.iter().all(Option::is_some) {
        answer(id, in_memory.into_iter().flatten().collect()).append_to(out);
        return Answered::Now;
    }
    spawn_disk_reads(context, id, done, reads, in_memory);
    Answered::Later
}

/// Refuses a read request past its bounds: more than
/// [`MAX_READS_PER_REQUEST`] records, or more than [`MAX_GET_MANY_BYTES`]
/// of them in a request of several (a single read may be as long as a
/// record can be).
fn check_reads(reads: &[RecordAt]) -> Result<(), WireError> {
    let refuse = |reason| Err(WireError::BadRequest { reason });
    if reads.len() > MAX_READS_PER_REQUEST {
        return refuse(format!(
            "{} reads in one request; at most {MAX_READS_PER_REQUEST}",
            reads.len()
        ));
    }
    let total: u64 = reads.iter().map(|read| u64::from(read.len)).sum();
    if reads.len() > 1 && total > MAX_GET_MANY_BYTES as u64 {
        return refuse(format!(
            "{total} bytes of records in one request; at most {MAX_GET_MANY_BYTES}"
        ));
    }
    Ok(())
}

/// Reads the records of `reads` not in `in_memory` (by place in `reads`)
/// on one blocking thread under one disk-read permit (at once if one is
/// free, else once one is, waiting without holding a thread), and sends
/// the answer through `done`. If the reads panic, every record of the
/// request is answered failed.
fn spawn_disk_reads(
    context: &Arc<ServerContext>,
    id: u64,
    done: &mpsc::Sender<Answer>,
    reads: Vec<RecordAt>,
    in_memory: Vec<Option<RecordOutcome>>,
) {
    let records = reads.len();
    let failed = move || answer(id, (0..records).map(|_| Err(read_failed())).collect());
    let read = move |engine: &StorageEngine| {
        let outcomes = reads
            .iter()
            .zip(in_memory)
            .map(|(at, kept)| {
                kept.unwrap_or_else(|| {
                    engine
                        .read(at.partition as usize, at.offset, at.len as usize)
                        .map_err(StorageError::into_wire)
                })
            })
            .collect();
        answer(id, outcomes)
    };
    let done = done.clone();
    match Arc::clone(&context.disk_reads).try_acquire_owned() {
        Ok(permit) => {
            let engine = Arc::clone(&context.engine);
            tokio::task::spawn_blocking(move || {
                let answer =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&engine)))
                        .unwrap_or_else(|_| failed());
                drop(permit);
                let _ = done.try_send(answer);
            });
        }
        Err(_) => {
            let context = Arc::clone(context);
            tokio::spawn(async move {
                let answer = context.disk_read(read).await.unwrap_or_else(failed);
                let _ = done.try_send(answer);
            });
        }
    }
}

/// The answer to request `id` with `outcomes`, one per record in the order
/// asked: the verified records as parts of the blob, and a failure for
/// each that failed.
fn answer(id: u64, outcomes: Vec<RecordOutcome>) -> Answer {
    let mut reads = Vec::with_capacity(outcomes.len());
    let mut blob = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok(record) => {
                let bytes = record_blob(record);
                reads.push(RecordRead::Read {
                    len: bytes.len() as u32,
                });
                blob.push(bytes);
            }
            Err(wire) => reads.push(RecordRead::Failed(wire)),
        }
    }
    with_blob(id, ResponseBody::Records(reads), blob)
}

/// A record's verified bytes, shared without a copy.
fn record_blob(record: RecordBytes) -> Bytes {
    let (buf, range) = record.into_parts();
    Bytes::from_owner(buf).slice(range)
}

/// The answer `body` to request `id` whose blob is `blob`, in order.
fn with_blob(id: u64, body: ResponseBody, blob: Vec<Bytes>) -> Answer {
    let response = Response { id, body: Ok(body) };
    let blob_len = blob.iter().map(Bytes::len).sum();
    let head = message::encode_head(&mut BytesMut::new(), &response, blob_len);
    Answer { head, blob }
}

fn read_failed() -> WireError {
    WireError::Io {
        message: "the read failed on the storage node".into(),
    }
}
