//! A connection's control stream: the handshake, then requests answered in
//! any order but applied in arrival order for writes.
//!
//! One task reads requests and writes responses: it handles every frame
//! that has arrived, then writes every response that is ready in one call,
//! so a burst of requests costs one write. Writes are tried without
//! blocking first; a write that would wait (for a buffer, a large record, a
//! sync) moves to a blocking thread, and the stream waits for it, which
//! keeps writes in order. Reads from disk always run on a blocking thread
//! and answer when done.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use splitkv_common::frame::{FrameDecoder, RawFrame};
use splitkv_common::message::{
    self, Hello, PROTOCOL_VERSION, RequestBody, Response, ResponseBody, Role, WireError, WriteAck,
};
use tokio::sync::mpsc;

use super::convert::{stats_report, wire_error};
use super::{Shared, bulk, encode_response};
use crate::{StorageError, WriteOp};

/// Send priority of control streams; bulk streams keep quinn's default 0.
const CONTROL_PRIORITY: i32 = 1;

/// How long a new connection may take to send its `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handshake settled for a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Session {
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
pub(super) async fn serve(shared: &Arc<Shared>, conn: &quinn::Connection) {
    let Ok((mut send, mut recv)) = conn.accept_bi().await else {
        return;
    };
    if let Err(reason) = serve_streams(shared, conn, &mut send, &mut recv).await {
        close_for_violation(conn, &reason);
    }
}

async fn serve_streams(
    shared: &Arc<Shared>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<(), String> {
    // Small requests and their answers go before any bulk transfer.
    let _ = send.set_priority(CONTROL_PRIORITY);
    let mut decoder = FrameDecoder::new(shared.max_frame_bytes);
    let first = tokio::time::timeout(HELLO_TIMEOUT, next_frame(recv, &mut decoder))
        .await
        .map_err(|_| "no Hello within 10 s".to_string())??;
    let Some(first) = first else { return Ok(()) };
    let request = message::decode_request(&first).map_err(|e| e.to_string())?;
    let RequestBody::Hello(hello) = request.body else {
        return Err("the control stream must begin with Hello".into());
    };
    let mut scratch = BytesMut::with_capacity(64 << 10);
    let session = match handshake(shared, &hello).await {
        Ok((session, welcome)) => {
            let frame = encode_response(&mut scratch, request.id, Ok(welcome));
            send.write_all(&frame).await.map_err(|e| e.to_string())?;
            session
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
        let shared = Arc::clone(shared);
        let conn = conn.clone();
        tokio::spawn(async move {
            while let Ok((send, recv)) = conn.accept_bi().await {
                let shared = Arc::clone(&shared);
                let conn = conn.clone();
                tokio::spawn(async move { bulk::serve(&shared, &conn, send, recv).await });
            }
        })
    };
    let result = control_loop(shared, session, send, recv, decoder, scratch).await;
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
    shared: &Arc<Shared>,
    hello: &Hello,
) -> Result<(Session, ResponseBody), WireError> {
    if hello.protocol != PROTOCOL_VERSION {
        return Err(WireError::ProtocolVersion {
            node: PROTOCOL_VERSION,
            client: hello.protocol,
        });
    }
    let engine = &shared.engine;
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
                    let epoch = begun.map_err(wire_error)?;
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
    Ok((Session { writer }, welcome))
}

async fn control_loop(
    shared: &Arc<Shared>,
    session: Session,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
    mut decoder: FrameDecoder,
    mut scratch: BytesMut,
) -> Result<(), String> {
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Answer>();
    let mut out: Vec<Bytes> = Vec::with_capacity(64);
    loop {
        tokio::select! {
            biased;
            Some(answer) = done_rx.recv() => {
                answer.append_to(&mut out);
                while let Ok(more) = done_rx.try_recv() {
                    more.append_to(&mut out);
                }
            }
            chunk = recv.read_chunk(1 << 20, true) => {
                match chunk {
                    Ok(Some(chunk)) => {
                        decoder.push(&chunk.bytes).map_err(|e| e.to_string())?;
                        while let Some(frame) = decoder.next_frame().map_err(|e| e.to_string())? {
                            handle(shared, session, frame, &mut scratch, &mut out, &done_tx).await?;
                        }
                    }
                    Ok(None) => {
                        decoder.finish().map_err(|e| e.to_string())?;
                        let _ = send.finish();
                        return Ok(());
                    }
                    Err(_) => return Ok(()),
                }
            }
        }
        if !out.is_empty() {
            if send.write_all_chunks(&mut out).await.is_err() {
                return Ok(());
            }
            out.clear();
        }
    }
}

/// A response finished on a blocking thread: its head (prefix and meta)
/// and its blob, sent as two chunks so the blob is never copied.
struct Answer {
    head: Bytes,
    blob: Bytes,
}

impl Answer {
    fn append_to(self, out: &mut Vec<Bytes>) {
        out.push(self.head);
        if !self.blob.is_empty() {
            out.push(self.blob);
        }
    }
}

/// Handles one request: answers go to `out` (ready now) or, for work done
/// on a blocking thread, to `done` when finished.
async fn handle(
    shared: &Arc<Shared>,
    session: Session,
    frame: RawFrame,
    scratch: &mut BytesMut,
    out: &mut Vec<Bytes>,
    done: &mpsc::UnboundedSender<Answer>,
) -> Result<(), String> {
    let request = message::decode_request(&frame).map_err(|e| e.to_string())?;
    let id = request.id;
    match request.body {
        RequestBody::Put { .. } | RequestBody::PutMany { .. } | RequestBody::Delete { .. } => {
            let body = match perform_write(shared, session, &request.body, &frame.blob, false) {
                Ok(body) => body,
                Err(Blocked) => {
                    // Rare (a full buffer, a large record, sync durability):
                    // the blocking thread takes the frame and decodes it
                    // again, which costs far less than the wait.
                    drop(request);
                    let shared = Arc::clone(shared);
                    tokio::task::spawn_blocking(move || {
                        let request = message::decode_request(&frame).map_err(|e| e.to_string())?;
                        perform_write(&shared, session, &request.body, &frame.blob, true).map_err(
                            |Blocked| "a blocking write reported that it would block".to_string(),
                        )
                    })
                    .await
                    .map_err(|e| e.to_string())??
                }
            };
            out.push(encode_response(scratch, id, body));
        }
        RequestBody::Get {
            partition,
            offset,
            len,
        } => {
            let engine = Arc::clone(&shared.engine);
            let done = done.clone();
            tokio::task::spawn_blocking(move || {
                let answer = match engine.read(partition as usize, offset, len as usize) {
                    Ok(record) => {
                        let (buf, range) = record.into_parts();
                        let blob = Bytes::from_owner(buf).slice(range);
                        let response = Response {
                            id,
                            body: Ok(ResponseBody::Record),
                        };
                        let head =
                            message::encode_head(&mut BytesMut::new(), &response, blob.len());
                        Answer { head, blob }
                    }
                    Err(e) => Answer {
                        head: encode_response(&mut BytesMut::new(), id, Err(wire_error(e))),
                        blob: Bytes::new(),
                    },
                };
                let _ = done.send(answer);
            });
        }
        RequestBody::Sync => {
            let engine = Arc::clone(&shared.engine);
            let done = done.clone();
            tokio::task::spawn_blocking(move || {
                let body = engine
                    .sync()
                    .map(|()| ResponseBody::Synced)
                    .map_err(wire_error);
                let head = encode_response(&mut BytesMut::new(), id, body);
                let _ = done.send(Answer {
                    head,
                    blob: Bytes::new(),
                });
            });
        }
        RequestBody::Stats => {
            let report = stats_report(
                shared.engine.stats(),
                shared.connections.load(Ordering::Relaxed),
            );
            out.push(encode_response(
                scratch,
                id,
                Ok(ResponseBody::Stats(report)),
            ));
        }
        RequestBody::Ping => out.push(encode_response(scratch, id, Ok(ResponseBody::Pong))),
        RequestBody::Hello(_) => {
            out.push(encode_response(scratch, id, Err(WireError::HelloRequired)))
        }
        RequestBody::ReadRange { .. } | RequestBody::ExportKeyLog { .. } => {
            let reason = "bulk requests travel on a stream of their own".to_string();
            out.push(encode_response(
                scratch,
                id,
                Err(WireError::BadRequest { reason }),
            ));
        }
    }
    Ok(())
}

/// The write would have to wait; retry with `wait`.
struct Blocked;

/// Applies a write request. Without `wait`, returns `Blocked` (having
/// committed nothing) where the engine would wait.
fn perform_write(
    shared: &Shared,
    session: Session,
    body: &RequestBody<'_>,
    blob: &[u8],
    wait: bool,
) -> Result<Result<ResponseBody, WireError>, Blocked> {
    let Some((partition, epoch)) = session.writer else {
        return Ok(Err(WireError::NotAWriter));
    };
    let engine = &shared.engine;
    let write = |ops: &[WriteOp<'_>], acks: &mut [WriteAck]| {
        if wait {
            engine.write(partition, Some(epoch), ops, acks)
        } else {
            engine.try_write(partition, Some(epoch), ops, acks)
        }
    };
    let result = match body {
        RequestBody::Put { key } => {
            let mut ack = [WriteAck::default()];
            write(&[WriteOp::Put { key, value: blob }], &mut ack)
                .map(|()| ResponseBody::Written(ack[0]))
        }
        RequestBody::Delete { key } => {
            let mut ack = [WriteAck::default()];
            write(&[WriteOp::Delete { key }], &mut ack).map(|()| ResponseBody::Written(ack[0]))
        }
        RequestBody::PutMany { keys, value_lens } => {
            if keys.len() != value_lens.len() {
                return Ok(Err(WireError::BadRequest {
                    reason: "a batch needs one value length per key".into(),
                }));
            }
            let values = match message::split_values(blob, value_lens) {
                Ok(values) => values,
                Err(e) => {
                    return Ok(Err(WireError::BadRequest {
                        reason: e.to_string(),
                    }));
                }
            };
            let ops: Vec<WriteOp<'_>> = keys
                .iter()
                .zip(values)
                .map(|(key, value)| WriteOp::Put { key, value })
                .collect();
            let mut acks = vec![WriteAck::default(); ops.len()];
            write(&ops, &mut acks).map(|()| ResponseBody::WrittenMany(acks))
        }
        _ => {
            return Ok(Err(WireError::BadRequest {
                reason: "not a write".into(),
            }));
        }
    };
    match result {
        Err(StorageError::WouldBlock) => Err(Blocked),
        Err(e) => Ok(Err(wire_error(e))),
        Ok(body) => Ok(Ok(body)),
    }
}
