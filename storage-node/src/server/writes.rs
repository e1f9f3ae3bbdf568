//! The one write path of the control stream: every write request is a
//! batch of operations (a `Put` or a `Delete` is a batch of one, answered
//! in its own form) handed to the engine for the connection's partition
//! and epoch, which applies it at once or queues it behind the partition's
//! earlier writes and answers when it completes.

use std::sync::Arc;

use bytes::Bytes;
use splitkv_common::frame::RawFrame;
use splitkv_common::message::{self, BatchEntry, RequestBody, ResponseBody, WireError, WriteAck};
use tokio::sync::mpsc;

use super::answer::Answer;
use super::context::ServerContext;
use super::stream::CloseReason;
use crate::{OwnedOp, OwnedWrite, Submitted, WriteCompletion};

/// How a write is acknowledged: as a single write, or one acknowledgement
/// per operation.
#[derive(Debug, Clone, Copy)]
enum AckForm {
    /// A `Put` or a `Delete`: [`ResponseBody::Written`].
    One,
    /// A `WriteMany`: [`ResponseBody::WrittenMany`].
    Many,
}

impl AckForm {
    fn response(
        self,
        result: crate::error::Result<Vec<WriteAck>>,
    ) -> Result<ResponseBody, WireError> {
        let acks = result.map_err(crate::StorageError::into_wire)?;
        Ok(match self {
            AckForm::One => ResponseBody::Written(acks.first().copied().unwrap_or_default()),
            AckForm::Many => ResponseBody::WrittenMany(acks),
        })
    }
}

/// Applies the write request `body` (of `frame`) of request `id` for a
/// connection granted `writer` (`(partition, epoch)`; `None` refuses it).
/// Returns its response if it finished at once (or was refused), `None` if
/// the partition's writer thread will answer through `done` when it
/// completes. When the partition's queue is full, this connection waits
/// (on a blocking thread) for room in it, reading no further requests
/// meanwhile.
pub(crate) async fn write(
    context: &Arc<ServerContext>,
    writer: Option<(usize, u64)>,
    id: u64,
    body: RequestBody<'_>,
    frame: &RawFrame,
    done: &mpsc::Sender<Answer>,
) -> Result<Option<Result<ResponseBody, WireError>>, CloseReason> {
    let Some(writer) = writer else {
        return Ok(Some(Err(WireError::NotAWriter)));
    };
    let batch = batch_of(&body, frame);
    drop(body);
    match batch {
        Ok((form, write)) => submit(context, writer, id, form, write, done).await,
        Err(refusal) => Ok(Some(Err(refusal))),
    }
}

/// The batch a write request asks for, holding its keys and values as
/// slices of the frame (no copy): a `Put` or a `Delete` is read as a
/// `WriteMany` of one.
fn batch_of(body: &RequestBody<'_>, frame: &RawFrame) -> Result<(AckForm, OwnedWrite), WireError> {
    // The one operation of a `Put` or a `Delete`.
    let single: [BatchEntry; 1];
    let (form, keys, ops): (AckForm, &[&[u8]], &[BatchEntry]) = match body {
        RequestBody::Put { key, expire_at_ms } => {
            single = [BatchEntry::Put {
                value_len: u32::try_from(frame.blob.len()).unwrap_or(u32::MAX),
                expire_at_ms: *expire_at_ms,
            }];
            (AckForm::One, std::slice::from_ref(key), &single)
        }
        RequestBody::Delete { key } => {
            single = [BatchEntry::Delete];
            (AckForm::One, std::slice::from_ref(key), &single)
        }
        RequestBody::WriteMany { keys, ops } => (AckForm::Many, keys, ops),
        _ => {
            return Err(WireError::BadRequest {
                reason: "not a write".into(),
            });
        }
    };
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
    Ok((form, OwnedWrite::many(ops)))
}

/// Hands `write` to the engine for `(partition, epoch)`. Returns its
/// response if it finished at once, `None` if the partition's writer
/// thread will answer through `done`.
async fn submit(
    context: &Arc<ServerContext>,
    (partition, epoch): (usize, u64),
    id: u64,
    form: AckForm,
    write: OwnedWrite,
    done: &mpsc::Sender<Answer>,
) -> Result<Option<Result<ResponseBody, WireError>>, CloseReason> {
    let completion: WriteCompletion = {
        let done = done.clone();
        Box::new(move |result| {
            let _ = done.try_send(Answer::plain(id, form.response(result)));
        })
    };
    let queued = match context
        .engine
        .submit_write(partition, Some(epoch), write, completion)
    {
        Submitted::Done(result) => return Ok(Some(form.response(result))),
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
