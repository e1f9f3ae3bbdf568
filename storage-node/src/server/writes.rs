//! The one write path of the control stream: a `WriteMany`, the one write
//! request (a single put or delete is a batch of one), handed to the
//! engine for the connection's partition and epoch, which applies it at
//! once or queues it behind the partition's earlier writes and answers
//! when it completes.

use std::sync::Arc;

use bytes::Bytes;
use splitkv_common::frame::RawFrame;
use splitkv_common::message::{self, BatchEntry, ResponseBody, WireError, WriteAck};
use tokio::sync::mpsc;

use super::answer::Answer;
use super::context::ServerContext;
use super::stream::CloseReason;
use crate::{OwnedOp, OwnedWrite, Submitted, WriteCompletion};

/// The answer to a batch: one acknowledgement per operation, in order.
fn response(result: crate::error::Result<Vec<WriteAck>>) -> Result<ResponseBody, WireError> {
    result
        .map(ResponseBody::WrittenMany)
        .map_err(crate::StorageError::into_wire)
}

/// Applies the `WriteMany` of `keys` and `ops` (of `frame`) of request
/// `id` for a connection granted `writer` (`(partition, epoch)`; `None`
/// refuses it). Returns its response if it finished at once (or was
/// refused), `None` if the partition's writer thread will answer through
/// `done` when it completes. When the partition's queue is full, this
/// connection waits (on a blocking thread) for room in it, reading no
/// further requests meanwhile.
pub(crate) async fn write(
    context: &Arc<ServerContext>,
    writer: Option<(usize, u64)>,
    id: u64,
    keys: Vec<&[u8]>,
    ops: Vec<BatchEntry>,
    frame: &RawFrame,
    done: &mpsc::Sender<Answer>,
) -> Result<Option<Result<ResponseBody, WireError>>, CloseReason> {
    let Some(writer) = writer else {
        return Ok(Some(Err(WireError::NotAWriter)));
    };
    let batch = batch_of(&keys, &ops, frame);
    drop((keys, ops));
    match batch {
        Ok(write) => submit(context, writer, id, write, done).await,
        Err(refusal) => Ok(Some(Err(refusal))),
    }
}

/// The batch of `keys` and `ops`, holding its keys and values as slices of
/// the frame (no copy).
fn batch_of(keys: &[&[u8]], ops: &[BatchEntry], frame: &RawFrame) -> Result<OwnedWrite, WireError> {
    if keys.len() != ops.len() {
        return Err(WireError::BadRequest {
            reason: "a batch needs one operation per key".into(),
        });
    }
    let values = message::split_values(&frame.blob, ops).map_err(|e| WireError::BadRequest {
        reason: e.to_string(),
    })?;
    let ops = keys
        .iter()
        .zip(ops.iter())
        .zip(values)
        .map(|((key, op), value)| {
            let key = frame.meta.slice_ref(key);
            match *op {
                // `split_values` gave every put its value.
                BatchEntry::Put { expire_at_ms, .. } => OwnedOp::Put {
                    key,
                    value: value.map_or_else(Bytes::new, |v| frame.blob.slice_ref(v)),
                    expire_at_ms,
                },
                BatchEntry::Delete => OwnedOp::Delete { key },
                BatchEntry::Expire { version_seq } => OwnedOp::Expire { key, version_seq },
            }
        });
    Ok(OwnedWrite::many(ops))
}

/// Hands `write` to the engine for `(partition, epoch)`. Returns its
/// response if it finished at once, `None` if the partition's writer
/// thread will answer through `done`.
async fn submit(
    context: &Arc<ServerContext>,
    (partition, epoch): (usize, u64),
    id: u64,
    write: OwnedWrite,
    done: &mpsc::Sender<Answer>,
) -> Result<Option<Result<ResponseBody, WireError>>, CloseReason> {
    let completion: WriteCompletion = {
        let done = done.clone();
        Box::new(move |result| {
            let _ = done.try_send(Answer::plain(id, response(result)));
        })
    };
    let queued = match context
        .engine
        .submit_write(partition, Some(epoch), write, completion)
    {
        Submitted::Done(result) => return Ok(Some(response(result))),
        Submitted::Queued => return Ok(None),
        Submitted::QueueFull(write, completion) => {
            let engine = Arc::clone(&context.engine);
            tokio::task::spawn_blocking(move || {
                engine.queue_write(partition, Some(epoch), write, completion)
            })
            .await?
        }
    };
    Ok(queued.err().map(|e| Err(e.into_wire())))
}
