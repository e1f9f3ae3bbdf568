//! A connection's control stream: the handshake, then requests answered in
//! completion order, by request id, with writes applied in arrival order.
//!
//! One task reads requests and writes responses: it handles every frame
//! that has arrived, then writes every response that is ready in one call,
//! so a burst of requests costs one write. Each request is decoded once and
//! handed over once: a write to the engine, which applies it at once or
//! queues it behind the partition's earlier writes and answers when it
//! completes; a point read (or the reads of one `GetMany`, together) or a
//! sync to a blocking thread. Nothing a request
//! waits for holds up the requests after it. At most
//! [`MAX_IN_FLIGHT_REQUESTS`] answers may be owed at once; with that many
//! owed, the task stops reading requests until answers come back.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use splitkv_common::frame::{FrameDecoder, RawFrame};
use splitkv_common::message::{
    self, BatchEntry, Hello, MAX_GET_MANY_BYTES, MAX_READS_PER_REQUEST, PROTOCOL_VERSION, RecordAt,
    RecordRead, RequestBody, Response, ResponseBody, Role, WireError, WriteAck,
};
use tokio::sync::mpsc;

use super::convert::stats_report;
use super::{ServerContext, bulk, encode_response};
use crate::{OwnedOp, OwnedWrite, StorageError, Submitted, WriteCompletion};

/// Most requests of one connection whose answers are owed by another thread
/// (queued writes, point reads, syncs). It is also the capacity of the
/// connection's channel of finished answers, which therefore never refuses
/// one.
pub const MAX_IN_FLIGHT_REQUESTS: usize = 1024;

/// Send priority of control streams; bulk streams keep quinn's default 0.
const CONTROL_PRIORITY: i32 = 1;

/// How long a new connection may take to send its `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handshake granted a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    /// `Some((partition, epoch))` for a writer.
    pub(crate) writer: Option<(usize, u64)>,
}

/// Closes `conn` because the peer broke the protocol, logging the reason.
/// Called while the offending stream is still open: dropping a stream first
/// would queue frames that congestion control can hold in front of the
/// close, so the peer would never learn the reason.
pub(super) fn close_for_violation(conn: &quinn::Connection, reason: &str) {
    tracing::warn!(peer = %conn.remote_address(), "closing the connection: {reason}");
    conn.close(
        message::close_code::PROTOCOL_VIOLATION.into(),
        reason.as_bytes(),
    );
}

/// Serves a connection: its control stream, and its bulk streams as they
/// come, until the peer goes away or breaks the protocol.
pub(super) async fn serve(context: &Arc<ServerContext>, conn: &quinn::Connection) {
    let Ok((mut send, mut recv)) = conn.accept_bi().await else {
        return;
    };
    if let Err(reason) = serve_streams(context, conn, &mut send, &mut recv).await {
        close_for_violation(conn, &reason);
    }
}

async fn serve_streams(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<(), String> {
    // Small requests and their answers go before any bulk transfer.
    let _ = send.set_priority(CONTROL_PRIORITY);
    let mut decoder = FrameDecoder::new(context.max_frame_bytes);
    let first = tokio::time::timeout(HELLO_TIMEOUT, next_frame(recv, &mut decoder))
        .await
        .map_err(|_| "no Hello within 10 s".to_string())??;
    let Some(first) = first else { return Ok(()) };
    let request = message::decode_request(&first).map_err(|e| e.to_string())?;
    let RequestBody::Hello(hello) = request.body else {
        return Err("the control stream must begin with Hello".into());
    };
    let mut scratch = BytesMut::with_capacity(64 << 10);
    let grant = match handshake(context, &hello).await {
        Ok((grant, welcome)) => {
            let frame = encode_response(&mut scratch, request.id, Ok(welcome));
            send.write_all(&frame).await.map_err(|e| e.to_string())?;
            grant
        }
        Err(refusal) => {
            tracing::info!("refused a Hello: {refusal}");
            let frame = encode_response(&mut scratch, request.id, Err(refusal));
            let _ = send.write_all(&frame).await;
            let _ = send.finish();
            let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
            return Ok(());
        }
    };
    let bulk_acceptor = {
        let context = Arc::clone(context);
        let conn = conn.clone();
        tokio::spawn(async move {
            while let Ok((send, recv)) = conn.accept_bi().await {
                let context = Arc::clone(&context);
                let conn = conn.clone();
                tokio::spawn(async move { bulk::serve(&context, &conn, send, recv).await });
            }
        })
    };
    let result = control_loop(context, grant, send, recv, decoder, scratch).await;
    bulk_acceptor.abort();
    result
}

/// Reads until one whole frame has arrived; `None` if the stream ended
/// cleanly first.
pub(super) async fn next_frame(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
) -> Result<Option<RawFrame>, String> {
    loop {
        if let Some(frame) = decoder.next_frame().map_err(|e| e.to_string())? {
            return Ok(Some(frame));
        }
        match recv.read_chunk(1 << 20, true).await {
            Ok(Some(chunk)) => decoder.push(&chunk.bytes).map_err(|e| e.to_string())?,
            Ok(None) => {
                decoder.finish().map_err(|e| e.to_string())?;
                return Ok(None);
            }
            Err(_) => return Ok(None),
        }
    }
}

async fn handshake(
    context: &Arc<ServerContext>,
    hello: &Hello,
) -> Result<(Grant, ResponseBody), WireError> {
    if hello.protocol != PROTOCOL_VERSION {
        return Err(WireError::ProtocolVersion {
            node: PROTOCOL_VERSION,
            client: hello.protocol,
        });
    }
    let engine = &context.engine;
    let count = engine.partition_count();
    let (writer, epoch) = match hello.role {
        Role::Reader => (None, 0),
        Role::Writer { partition, epoch } => {
            let partition = partition as usize;
            if partition >= count {
                return Err(WireError::NoSuchPartition {
                    partition: partition as u32,
                    count: count as u32,
                });
            }
            let epoch = match epoch {
                None => {
                    let engine = Arc::clone(engine);
                    let begun = tokio::task::spawn_blocking(move || engine.begin_writer_epoch())
                        .await
                        .map_err(|e| WireError::Io {
                            message: e.to_string(),
                        })?;
                    let epoch = begun.map_err(StorageError::into_wire)?;
                    tracing::info!(epoch, "a new writer took over");
                    epoch
                }
                Some(epoch) => {
                    let current = engine.writer_epoch();
                    if epoch != current {
                        return Err(WireError::Fenced {
                            yours: epoch,
                            current,
                        });
                    }
                    epoch
                }
            };
            (Some((partition, epoch)), epoch)
        }
    };
    let limits = engine.limits();
    let welcome = ResponseBody::Welcome {
        partitions: count as u32,
        epoch,
        max_key_bytes: limits.max_key_bytes as u32,
        max_value_bytes: limits.max_value_bytes as u32,
        io_engine: engine.io_engine().to_string(),
    };
    Ok((Grant { writer }, welcome))
}

async fn control_loop(
    context: &Arc<ServerContext>,
    grant: Grant,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
    mut decoder: FrameDecoder,
    mut scratch: BytesMut,
) -> Result<(), String> {
    let (done_tx, mut done_rx) = mpsc::channel::<Answer>(MAX_IN_FLIGHT_REQUESTS);
    // Answers owed by other threads; never more than the channel holds.
    let mut owed = 0usize;
    let mut out: Vec<Bytes> = Vec::with_capacity(64);
    loop {
        while owed < MAX_IN_FLIGHT_REQUESTS {
            let Some(frame) = decoder.next_frame().map_err(|e| e.to_string())? else {
                break;
            };
            if handle(context, grant, frame, &mut scratch, &mut out, &done_tx).await?
                == Answered::Later
            {
                owed += 1;
            }
        }
        if !out.is_empty() {
            if send.write_all_chunks(&mut out).await.is_err() {
                return Ok(());
            }
            out.clear();
        }
        tokio::select! {
            biased;
            Some(answer) = done_rx.recv(), if owed > 0 => {
                owed -= 1;
                answer.append_to(&mut out);
                while owed > 0 {
                    let Ok(more) = done_rx.try_recv() else { break };
                    owed -= 1;
                    more.append_to(&mut out);
                }
            }
            chunk = recv.read_chunk(1 << 20, true), if owed < MAX_IN_FLIGHT_REQUESTS => {
                match chunk {
                    Ok(Some(chunk)) => decoder.push(&chunk.bytes).map_err(|e| e.to_string())?,
                    Ok(None) => {
                        decoder.finish().map_err(|e| e.to_string())?;
                        let _ = send.finish();
                        return Ok(());
                    }
                    Err(_) => return Ok(()),
                }
            }
        }
    }
}

/// A response finished on another thread: its head (prefix and meta) and
/// the parts of its blob, each sent as a chunk of its own so that no
/// record is copied.
struct Answer {
    head: Bytes,
    blob: Vec<Bytes>,
}

impl Answer {
    /// A response without a blob.
    fn plain(id: u64, body: Result<ResponseBody, WireError>) -> Self {
        Self {
            head: encode_response(&mut BytesMut::new(), id, body),
            blob: Vec::new(),
        }
    }

    fn append_to(self, out: &mut Vec<Bytes>) {
        out.push(self.head);
        out.extend(self.blob.into_iter().filter(|part| !part.is_empty()));
    }
}

/// Where the answer to a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answered {
    /// Into `out`, ready to send.
    Now,
    /// It will come through the connection's channel of finished answers.
    Later,
}

/// Hands one request over: answers that are ready go to `out`; work done
/// elsewhere answers through `done` when finished.
async fn handle(
    context: &Arc<ServerContext>,
    grant: Grant,
    frame: RawFrame,
    scratch: &mut BytesMut,
    out: &mut Vec<Bytes>,
    done: &mpsc::Sender<Answer>,
) -> Result<Answered, String> {
    let request = message::decode_request(&frame).map_err(|e| e.to_string())?;
    let id = request.id;
    match request.body {
        RequestBody::Put { .. } | RequestBody::WriteMany { .. } | RequestBody::Delete { .. } => {
            let Some(writer) = grant.writer else {
                out.push(encode_response(scratch, id, Err(WireError::NotAWriter)));
                return Ok(Answered::Now);
            };
            let handed = owned_write(&request.body, &frame);
            drop(request);
            let answer = match handed {
                Ok((kind, write)) => submit_write(context, writer, id, kind, write, done).await?,
                Err(refusal) => Some(Err(refusal)),
            };
            match answer {
                Some(body) => {
                    out.push(encode_response(scratch, id, body));
                    Ok(Answered::Now)
                }
                None => Ok(Answered::Later),
            }
        }
        RequestBody::Get {
            partition,
            offset,
            len,
        } => {
            let (partition, len) = (partition as usize, len as usize);
            // Bytes in memory are answered at once; a read that has to
            // wait for the disk goes to a blocking thread.
            if let Some(read) = context
                .engine
                .read_in_memory(partition, offset, len)
                .transpose()
            {
                record_answer(id, read).append_to(out);
                return Ok(Answered::Now);
            }
            spawn_read(context, id, done, move |engine| {
                record_answer(id, engine.read(partition, offset, len))
            });
            Ok(Answered::Later)
        }
        RequestBody::GetMany { reads } => {
            if let Err(reason) = check_get_many(&reads) {
                out.push(encode_response(
                    scratch,
                    id,
                    Err(WireError::BadRequest { reason }),
                ));
                return Ok(Answered::Now);
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
                records_answer(id, in_memory.into_iter().flatten().collect()).append_to(out);
                return Ok(Answered::Now);
            }
            spawn_record_reads(context, id, done, reads, in_memory);
            Ok(Answered::Later)
        }
        RequestBody::Clear => {
            let Some((_, epoch)) = grant.writer else {
                out.push(encode_response(scratch, id, Err(WireError::NotAWriter)));
                return Ok(Answered::Now);
            };
            let engine = Arc::clone(&context.engine);
            let done = done.clone();
            tokio::task::spawn_blocking(move || {
                let body = engine
                    .clear_all(Some(epoch))
                    .map(ResponseBody::Written)
                    .map_err(StorageError::into_wire);
                let _ = done.try_send(Answer::plain(id, body));
            });
            Ok(Answered::Later)
        }
        RequestBody::Sync => {
            let engine = Arc::clone(&context.engine);
            let done = done.clone();
            tokio::task::spawn_blocking(move || {
                let body = engine
                    .sync()
                    .map(|()| ResponseBody::Synced)
                    .map_err(StorageError::into_wire);
                let _ = done.try_send(Answer::plain(id, body));
            });
            Ok(Answered::Later)
        }
        RequestBody::Stats => {
            let report = stats_report(
                context.engine.stats(),
                context.connections.load(Ordering::Relaxed),
                context.stalled_streams_closed.load(Ordering::Relaxed),
            );
            out.push(encode_response(
                scratch,
                id,
                Ok(ResponseBody::Stats(report)),
            ));
            Ok(Answered::Now)
        }
        RequestBody::Locate { key } => {
            let located = context.engine.locate(key);
            out.push(encode_response(
                scratch,
                id,
                Ok(ResponseBody::Located(located)),
            ));
            Ok(Answered::Now)
        }
        RequestBody::Ping => {
            out.push(encode_response(scratch, id, Ok(ResponseBody::Pong)));
            Ok(Answered::Now)
        }
        RequestBody::Hello(_) => {
            out.push(encode_response(scratch, id, Err(WireError::HelloRequired)));
            Ok(Answered::Now)
        }
        RequestBody::ReadRange { .. }
        | RequestBody::ExportKeyLog { .. }
        | RequestBody::FollowKeyLog { .. }
        | RequestBody::FollowTaken { .. } => {
            let reason = "bulk requests travel on a stream of their own".to_string();
            out.push(encode_response(
                scratch,
                id,
                Err(WireError::BadRequest { reason }),
            ));
            Ok(Answered::Now)
        }
    }
}

/// Runs `read` on a blocking thread under a disk-read permit (at once if
/// one is free, else once one is) and sends its answer through `done`; a
/// read that panicked is answered as failed.
fn spawn_read(
    context: &Arc<ServerContext>,
    id: u64,
    done: &mpsc::Sender<Answer>,
    read: impl FnOnce(&crate::StorageEngine) -> Answer + Send + 'static,
) {
    let done = done.clone();
    match Arc::clone(&context.disk_reads).try_acquire_owned() {
        Ok(permit) => {
            let engine = Arc::clone(&context.engine);
            tokio::task::spawn_blocking(move || {
                let answer =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&engine)))
                        .unwrap_or_else(|_| Answer::plain(id, Err(read_failed())));
                drop(permit);
                let _ = done.try_send(answer);
            });
        }
        Err(_) => {
            let context = Arc::clone(context);
            tokio::spawn(async move {
                let answer = context
                    .disk_read(read)
                    .await
                    .unwrap_or_else(|| Answer::plain(id, Err(read_failed())));
                let _ = done.try_send(answer);
            });
        }
    }
}

/// Refuses a [`RequestBody::GetMany`] past its bounds.
fn check_get_many(reads: &[RecordAt]) -> Result<(), String> {
    if reads.len() > MAX_READS_PER_REQUEST {
        return Err(format!(
            "{} reads in one request; at most {MAX_READS_PER_REQUEST}",
            reads.len()
        ));
    }
    let total: u64 = reads.iter().map(|read| u64::from(read.len)).sum();
    if reads.len() > 1 && total > MAX_GET_MANY_BYTES as u64 {
        return Err(format!(
            "{total} bytes of records in one request; at most {MAX_GET_MANY_BYTES}"
        ));
    }
    Ok(())
}

/// A record read for a [`RequestBody::GetMany`]: its verified bytes, or
/// why it failed.
type RecordOutcome = Result<crate::RecordBytes, WireError>;

/// Answers a [`RequestBody::GetMany`] some of whose records would wait for
/// the disk: those in memory (`in_memory`, by place in `reads`) are kept,
/// and the others are read one after another on one blocking thread under
/// one disk-read permit. The records still wait for the disk side by side:
/// the in-memory try that found each one missing has already started its
/// transfer into the page cache (see `read_cached_nowait_at`). One thread
/// per record cost more CPU in wakes than it saved, measured both with the
/// records in the page cache and with them on the disk only; other
/// requests' reads still run beside these. The answer goes through `done`
/// once every record is read; if the read panics, every record of the
/// request is answered failed.
fn spawn_record_reads(
    context: &Arc<ServerContext>,
    id: u64,
    done: &mpsc::Sender<Answer>,
    reads: Vec<RecordAt>,
    in_memory: Vec<Option<RecordOutcome>>,
) {
    let context = Arc::clone(context);
    let done = done.clone();
    tokio::spawn(async move {
        let records = reads.len();
        let outcomes = context
            .disk_read(move |engine| {
                reads
                    .iter()
                    .zip(in_memory)
                    .map(|(at, kept)| {
                        kept.unwrap_or_else(|| {
                            engine
                                .read(at.partition as usize, at.offset, at.len as usize)
                                .map_err(StorageError::into_wire)
                        })
                    })
                    .collect()
            })
            .await
            // The read panicked: every record of the request is answered failed.
            .unwrap_or_else(|| (0..records).map(|_| Err(read_failed())).collect());
        let _ = done.try_send(records_answer(id, outcomes));
    });
}

/// The answer to a [`RequestBody::GetMany`] with `outcomes`, one per record
/// in the order asked: the verified ones as parts of the blob, a failure
/// for each that failed.
fn records_answer(id: u64, outcomes: Vec<RecordOutcome>) -> Answer {
    let mut reads = Vec::with_capacity(outcomes.len());
    let mut blob = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok(record) => {
                let (buf, range) = record.into_parts();
                let bytes = Bytes::from_owner(buf).slice(range);
                reads.push(RecordRead::Read {
                    len: bytes.len() as u32,
                });
                blob.push(bytes);
            }
            Err(wire) => reads.push(RecordRead::Failed(wire)),
        }
    }
    let response = Response {
        id,
        body: Ok(ResponseBody::Records(reads)),
    };
    let blob_len = blob.iter().map(Bytes::len).sum();
    let head = message::encode_head(&mut BytesMut::new(), &response, blob_len);
    Answer { head, blob }
}

/// The answer to a point read: the verified record as the blob, or the
/// refusal.
fn record_answer(id: u64, read: crate::error::Result<crate::RecordBytes>) -> Answer {
    match read {
        Ok(record) => {
            let (buf, range) = record.into_parts();
            let blob = Bytes::from_owner(buf).slice(range);
            let response = Response {
                id,
                body: Ok(ResponseBody::Record),
            };
            let head = message::encode_head(&mut BytesMut::new(), &response, blob.len());
            Answer {
                head,
                blob: vec![blob],
            }
        }
        Err(e) => Answer::plain(id, Err(e.into_wire())),
    }
}

fn read_failed() -> WireError {
    WireError::Io {
        message: "the read failed on the storage node".into(),
    }
}

/// How a write is answered: one acknowledgement, or one per op.
#[derive(Debug, Clone, Copy)]
enum WriteKind {
    Single,
    Batch,
}

impl WriteKind {
    fn response(
        self,
        result: crate::error::Result<Vec<WriteAck>>,
    ) -> Result<ResponseBody, WireError> {
        let acks = result.map_err(StorageError::into_wire)?;
        Ok(match self {
            WriteKind::Single => ResponseBody::Written(acks.first().copied().unwrap_or_default()),
            WriteKind::Batch => ResponseBody::WrittenMany(acks),
        })
    }
}

/// The write a request asks for, holding its keys and values as slices of
/// the frame (no copy).
fn owned_write(
    body: &RequestBody<'_>,
    frame: &RawFrame,
) -> Result<(WriteKind, OwnedWrite), WireError> {
    match body {
        RequestBody::Put { key, expire_at_ms } => Ok((
            WriteKind::Single,
            OwnedWrite::put(frame.meta.slice_ref(key), frame.blob.clone(), *expire_at_ms),
        )),
        RequestBody::Delete { key } => Ok((
            WriteKind::Single,
            OwnedWrite::delete(frame.meta.slice_ref(key)),
        )),
        RequestBody::WriteMany { keys, ops } => {
            if keys.len() != ops.len() {
                return Err(WireError::BadRequest {
                    reason: "a batch needs one operation per key".into(),
                });
            }
            let values =
                message::split_values(&frame.blob, ops).map_err(|e| WireError::BadRequest {
                    reason: e.to_string(),
                })?;
            let ops = keys.iter().zip(ops).zip(values).map(|((key, op), value)| {
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
            Ok((WriteKind::Batch, OwnedWrite::many(ops)))
        }
        _ => Err(WireError::BadRequest {
            reason: "not a write".into(),
        }),
    }
}

/// Hands a write to the engine for the connection's `(partition, epoch)`.
/// Returns its response if it finished at once, `None` if the partition's
/// writer thread will answer through `done`. When the partition's queue is
/// full, this connection waits (on a blocking thread) for room in it,
/// reading no further requests meanwhile.
async fn submit_write(
    context: &Arc<ServerContext>,
    (partition, epoch): (usize, u64),
    id: u64,
    kind: WriteKind,
    write: OwnedWrite,
    done: &mpsc::Sender<Answer>,
) -> Result<Option<Result<ResponseBody, WireError>>, String> {
    let completion: WriteCompletion = {
        let done = done.clone();
        Box::new(move |result| {
            let _ = done.try_send(Answer::plain(id, kind.response(result)));
        })
    };
    let queued = match context
        .engine
        .submit_write(partition, Some(epoch), write, completion)
    {
        Submitted::Done(result) => return Ok(Some(kind.response(result))),
        Submitted::Queued => return Ok(None),
        Submitted::QueueFull(write, completion) => {
            let engine = Arc::clone(&context.engine);
            tokio::task::spawn_blocking(move || {
                engine.queue_write(partition, Some(epoch), write, completion)
            })
            .await
            .map_err(|e| e.to_string())?
        }
    };
    Ok(queued.err().map(|e| Err(e.into_wire())))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use splitkv_common::certs;
    use splitkv_common::message::Request;
    use splitkv_common::record;
    use splitkv_common::tls::NodeIdentity;
    use splitkv_common::transport::TransportSettings;
    use tokio::sync::oneshot;

    use super::*;
    use crate::server::{Server, ServerConfig};
    use crate::{IoEngineKind, StorageConfig, StorageEngine};

    async fn read_response(
        recv: &mut quinn::RecvStream,
        decoder: &mut FrameDecoder,
    ) -> (Response, Bytes) {
        let frame = next_frame(recv, decoder)
            .await
            .expect("well-formed responses")
            .expect("a response before the stream ends");
        let response = message::decode_response(&frame).expect("response");
        (response, frame.blob)
    }

    fn request(id: u64, body: RequestBody<'_>, blob: &[u8]) -> Bytes {
        message::encode(&mut BytesMut::new(), &Request { id, body }, blob)
    }

    /// A write that has to wait in its partition's queue does not hold up
    /// a read sent after it on the same connection: the read is answered
    /// first, the write when the queue moves on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_is_answered_while_an_earlier_write_waits_in_the_queue() {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs_dir = dir.path().join("certs");
        certs::generate_cluster(&certs_dir, &certs::DEFAULT_STORAGE_NAMES, false).expect("certs");
        let mut config = StorageConfig::new(dir.path().join("data"));
        config.partitions = 1;
        config.buffer_bytes = 16 << 10;
        config.io_engine = IoEngineKind::Psync;
        let engine = Arc::new(StorageEngine::open(config).expect("open"));
        let stored = engine.put(0, b"r", b"v").expect("put");
        let located = engine.stats().partitions[0].committed_end;
        assert!(stored > 0 && located > 0);
        let record_len = record::value_record_len(1, 1);

        // Stall partition 0's queue: a large put waits for the writer
        // thread, whose completion of it blocks until released.
        let (entered_tx, entered_rx) = oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let stall: WriteCompletion = Box::new(move |result| {
            result.expect("the stalling put");
            let _ = entered_tx.send(());
            let _ = release_rx.recv();
        });
        let large = OwnedWrite::put(
            Bytes::from_static(b"big"),
            Bytes::from(vec![7; 40 << 10]),
            0,
        );
        assert!(matches!(
            engine.submit_write(0, None, large, stall),
            Submitted::Queued
        ));
        entered_rx.await.expect("the writer thread holds the queue");

        let identity = NodeIdentity::load(&certs_dir.join("storage")).expect("storage identity");
        let listen: SocketAddr = "127.0.0.1:0".parse().expect("address");
        let settings = TransportSettings::default();
        let server = Server::bind(
            Arc::clone(&engine),
            &identity,
            &ServerConfig {
                listen,
                transport: settings,
                follow_stall_ms: message::DEFAULT_FOLLOW_STALL_MS,
            },
        )
        .expect("bind");
        let addr = server.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));

        let client = NodeIdentity::load(&certs_dir.join("compute")).expect("compute identity");
        let mut endpoint = settings.client_endpoint(addr).expect("endpoint");
        endpoint.set_default_client_config(
            client
                .client_config(Arc::new(settings.transport_config()))
                .expect("client config"),
        );
        let conn = endpoint
            .connect(addr, "localhost")
            .expect("connect")
            .await
            .expect("handshake");
        let (mut send, mut recv) = conn.open_bi().await.expect("control stream");
        let mut decoder = FrameDecoder::new(1 << 20);
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            role: Role::Writer {
                partition: 0,
                epoch: None,
            },
        };
        send.write_all(&request(1, RequestBody::Hello(hello), &[]))
            .await
            .expect("hello");
        let (welcome, _) = read_response(&mut recv, &mut decoder).await;
        assert!(matches!(welcome.body, Ok(ResponseBody::Welcome { .. })));

        // The put queues behind the stalled one; the get goes by it.
        let mut both = request(
            2,
            RequestBody::Put {
                key: b"w",
                expire_at_ms: 0,
            },
            b"x",
        )
        .to_vec();
        let get = RequestBody::Get {
            partition: 0,
            offset: located - record_len as u64,
            len: record_len as u32,
        };
        both.extend_from_slice(&request(3, get, &[]));
        send.write_all(&both).await.expect("put and get");
        let (first, blob) = read_response(&mut recv, &mut decoder).await;
        assert_eq!(first.id, 3, "the read is answered first: {first:?}");
        assert_eq!(first.body, Ok(ResponseBody::Record));
        let decoded = record::decode_value_record(&blob).expect("the record verifies");
        assert_eq!((decoded.key, decoded.value), (&b"r"[..], &b"v"[..]));

        release_tx.send(()).expect("release the queue");
        let (second, _) = read_response(&mut recv, &mut decoder).await;
        assert_eq!(second.id, 2);
        let Ok(ResponseBody::Written(ack)) = second.body else {
            panic!("the put is acknowledged: {second:?}");
        };
        assert!(ack.seq > stored + 1, "committed after the stalled put");

        conn.close(0u32.into(), b"done");
        let _ = stop.send(());
        serving.await.expect("server");
        let engine = Arc::clone(&engine);
        tokio::task::spawn_blocking(move || engine.close().expect("close"))
            .await
            .expect("close task");
    }
}
