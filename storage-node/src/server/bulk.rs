//! Bulk streams: one request each (a range read, a key-log export or a
//! reader following a key log), whose response may be many megabytes, on
//! a stream of its own so that it never holds up the control stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use splitkv_common::frame::FrameDecoder;
use splitkv_common::message::{self, RequestBody, Response, ResponseBody, WireError};

use super::buffer_pool::BufferPool;
use super::context::{ServerContext, encode_response};
use super::stream::{CloseReason, close_for, next_frame};
use crate::ExportCursor;

/// Key-log bytes per export chunk.
const EXPORT_CHUNK_BYTES: usize = 1 << 20;
/// An export buffer's capacity: a chunk and the frame that crosses its end.
const EXPORT_BUFFER_BYTES: usize = EXPORT_CHUNK_BYTES + 4096;
/// Idle export buffers kept for the next chunks (of any stream).
const EXPORT_BUFFERS_KEPT: usize = 16;

/// The pool the key-log exports take their chunks' buffers from.
pub(super) fn export_buffer_pool() -> BufferPool {
    BufferPool::new(EXPORT_BUFFER_BYTES, EXPORT_BUFFERS_KEPT)
}

/// Serves one bulk stream; closes the connection if the peer breaks the
/// protocol on it.
pub(super) async fn serve(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    if let Err(reason) = serve_stream(context, conn, &mut send, &mut recv).await {
        close_for(conn, &reason);
    }
}

async fn serve_stream(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<(), CloseReason> {
    let mut decoder = FrameDecoder::new(context.max_frame_bytes);
    let Some(frame) = next_frame(recv, &mut decoder).await? else {
        return Ok(());
    };
    let request = message::decode_request(&frame)?;
    let id = request.id;
    match request.body {
        RequestBody::ReadRange {
            partition,
            offset,
            max_len,
        } => {
            let read = context
                .disk_read(move |engine| {
                    engine.read_range(partition as usize, offset, max_len as usize)
                })
                .await
                .ok_or(CloseReason::RangeReadFailed)?;
            let mut chunks = match read {
                Ok(range) => {
                    let (buf, bytes, committed_end) = range.into_parts();
                    let blob = Bytes::from_owner(buf).slice(bytes);
                    let response = Response {
                        id,
                        body: Ok(ResponseBody::Range { committed_end }),
                    };
                    vec![
                        message::encode_head(&mut BytesMut::new(), &response, blob.len()),
                        blob,
                    ]
                }
                Err(e) => vec![encode_response(
                    &mut BytesMut::new(),
                    id,
                    Err(e.into_wire()),
                )],
            };
            let _ = send.write_all_chunks(&mut chunks).await;
        }
        RequestBody::ExportKeyLog {
            partition,
            from_seq,
        } => stream_keylog(context, conn, send, None, id, partition as usize, from_seq).await?,
        RequestBody::FollowKeyLog {
            partition,
            from_seq,
        } => {
            let reports = Reports {
                recv,
                decoder: &mut decoder,
                taken_cost: 0,
            };
            let partition = partition as usize;
            stream_keylog(context, conn, send, Some(reports), id, partition, from_seq).await?
        }
        _ => {
            let reason =
                "only range reads and key-log exports travel on their own streams".to_string();
            let frame = encode_response(
                &mut BytesMut::new(),
                id,
                Err(WireError::BadRequest { reason }),
            );
            let _ = send.write_all(&frame).await;
        }
    }
    let _ = send.finish();
    Ok(())
}

/// A followed stream's reports of what the reader has taken
/// ([`RequestBody::FollowTaken`]), read from the reader's half.
struct Reports<'a> {
    recv: &'a mut quinn::RecvStream,
    decoder: &'a mut FrameDecoder,
    /// Cost ([`message::follow_chunk_cost`]) of the chunks the reader has
    /// reported taking.
    taken_cost: u64,
}

impl Reports<'_> {
    /// Waits for the next report (of at most `sent_cost`); `Ok(false)`
    /// once the reader's half has ended. Cancel-safe.
    async fn next(&mut self, sent_cost: u64) -> Result<bool, CloseReason> {
        let Some(frame) = next_frame(self.recv, self.decoder).await? else {
            return Ok(false);
        };
        match message::decode_request(&frame)?.body {
            RequestBody::FollowTaken { cost_bytes } if cost_bytes <= sent_cost => {
                self.taken_cost = self.taken_cost.max(cost_bytes);
                Ok(true)
            }
            RequestBody::FollowTaken { cost_bytes } => Err(CloseReason::TakenBeyondSent {
                taken: cost_bytes,
                sent: sent_cost,
            }),
            _ => Err(CloseReason::NotAReport),
        }
    }
}

/// Logs and counts the end of a followed stream whose reader took nothing
/// for `stall_ms`, and resets it.
fn cut_stalled(
    context: &ServerContext,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    partition: usize,
    stall_ms: u64,
) {
    tracing::warn!(
        peer = %conn.remote_address(),
        partition,
        "closing the key-log stream of a reader that took nothing for {stall_ms} ms"
    );
    context
        .stalled_streams_closed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let _ = send.reset(quinn::VarInt::from_u32(0));
}

/// Streams `partition`'s key log from `from_seq` on, a chunk of about
/// [`EXPORT_CHUNK_BYTES`] at a time, until it has caught up with the end.
/// With `reports` (a followed stream), then waits for each append (costing
/// nothing while none comes) and streams it too, never more than
/// [`message::FOLLOW_WINDOW_BYTES`] past what the reader has reported
/// taking, until the peer goes or takes nothing for the stall bound
/// ([`super::ServerConfig::follow_stall_ms`]). Returns a protocol violation
/// only.
async fn stream_keylog(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    mut reports: Option<Reports<'_>>,
    id: u64,
    partition: usize,
    from_seq: u64,
) -> Result<(), CloseReason> {
    let stall_ms = context.follow_stall_ms;
    let stall = Duration::from_millis(stall_ms);
    let mut grown = match reports
        .is_some()
        .then(|| context.engine.watch_keylog(partition))
    {
        Some(Err(e)) => {
            let frame = encode_response(&mut BytesMut::new(), id, Err(e.into_wire()));
            let _ = send.write_all(&frame).await;
            return Ok(());
        }
        Some(Ok(watch)) => Some(watch),
        None => None,
    };
    let mut cursor = ExportCursor::start();
    // What was sent, counted as the reader counts what it takes.
    let mut sent_cost = 0;
    let mut caught_up_told = false;
    let mut scratch = BytesMut::new();
    let mut export_buffer = context.export_buffers.take();
    loop {
        if let Some(reports) = &mut reports {
            while sent_cost - reports.taken_cost > message::FOLLOW_WINDOW_BYTES {
                match tokio::time::timeout(stall, reports.next(sent_cost)).await {
                    Ok(Ok(true)) => {}
                    Ok(Ok(false)) => return Ok(()),
                    Ok(Err(violation)) => return Err(violation),
                    Err(_) => {
                        cut_stalled(context, conn, send, partition, stall_ms);
                        return Ok(());
                    }
                }
            }
        }
        if let Some(grown) = &mut grown {
            // Seen before reading, so an append after the read wakes the
            // wait below.
            grown.borrow_and_update();
        }
        // A chunk that fills most of the buffer is sent as it is; a small
        // one (an append or two, as a follower gets) is sent as a copy of
        // just its frames and the buffer kept, so that it does not keep a
        // whole buffer alive until the reader acknowledges it.
        let buffer = std::mem::take(&mut export_buffer);
        let at = cursor.clone();
        let chunk = context
            .disk_read(move |engine| {
                let mut out = buffer;
                out.clear();
                let progress =
                    engine.export_keylog(partition, &at, from_seq, EXPORT_CHUNK_BYTES, &mut out);
                (progress, out)
            })
            .await
            .ok_or(CloseReason::ExportFailed)?;
        let (progress, buffer) = chunk;
        let progress = match progress {
            Ok(progress) => progress,
            Err(e) => {
                let frame = encode_response(&mut scratch, id, Err(e.into_wire()));
                let _ = send.write_all(&frame).await;
                return Ok(());
            }
        };
        let frames = if buffer.len() >= EXPORT_CHUNK_BYTES / 2 {
            export_buffer = context.export_buffers.take();
            context.export_buffers.share(buffer)
        } else {
            export_buffer = buffer;
            Bytes::copy_from_slice(&export_buffer)
        };
        let done = progress.caught_up;
        if !frames.is_empty() || (done && !caught_up_told) {
            caught_up_told |= done;
            let response = Response {
                id,
                body: Ok(ResponseBody::ExportChunk {
                    next: progress.position,
                    end: progress.end,
                    done,
                }),
            };
            // The frames go out as they are, after the head.
            let mut chunks = [
                message::encode_head(&mut scratch, &response, frames.len()),
                frames,
            ];
            let cost = message::follow_chunk_cost(chunks[1].len());
            let write = send.write_all_chunks(&mut chunks);
            match tokio::time::timeout(stall, write).await {
                Ok(Ok(())) => sent_cost += cost,
                Ok(Err(_)) => return Ok(()),
                Err(_) => {
                    cut_stalled(context, conn, send, partition, stall_ms);
                    return Ok(());
                }
            }
        }
        cursor = progress.next;
        if !done {
            continue;
        }
        let (Some(grown), Some(reports)) = (&mut grown, &mut reports) else {
            return Ok(());
        };
        // Reports read while waiting keep the reader's half drained.
        loop {
            tokio::select! {
                changed = grown.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    break;
                }
                report = reports.next(sent_cost) => match report {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(violation) => return Err(violation),
                },
                _ = conn.closed() => return Ok(()),
                _ = send.stopped() => return Ok(()),
            }
        }
    }
}
