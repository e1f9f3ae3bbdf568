//! Bulk streams: one request each (a range read, a key-log export or a
//! reader following a key log), whose response may be many megabytes, on
//! a stream of its own so that it never holds up the control stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use splitkv_common::frame::FrameDecoder;
use splitkv_common::message::{self, RequestBody, Response, ResponseBody, WireError};

use super::control::{close_for_violation, next_frame};
use super::{ServerContext, encode_response};

/// Key-log bytes per export chunk.
const EXPORT_CHUNK_BYTES: usize = 1 << 20;

/// Serves one bulk stream; closes the connection if the peer breaks the
/// protocol on it.
pub(super) async fn serve(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    if let Err(reason) = serve_stream(context, conn, &mut send, &mut recv).await {
        close_for_violation(conn, &reason);
    }
}

async fn serve_stream(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<(), String> {
    let mut decoder = FrameDecoder::new(context.max_frame_bytes);
    let Some(frame) = next_frame(recv, &mut decoder).await? else {
        return Ok(());
    };
    let request = message::decode_request(&frame).map_err(|e| e.to_string())?;
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
                .ok_or("a range read failed")?;
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
        } => stream_keylog(context, conn, send, id, partition as usize, from_seq, false).await?,
        RequestBody::FollowKeyLog {
            partition,
            from_seq,
        } => stream_keylog(context, conn, send, id, partition as usize, from_seq, true).await?,
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

/// Streams `partition`'s key log from `from_seq` on, a chunk of about
/// [`EXPORT_CHUNK_BYTES`] at a time, until it has caught up with the end;
/// with `follow`, then waits for each append (costing nothing while none
/// comes) and streams it too, until the peer goes or stops taking the
/// bytes for the stall bound ([`super::ServerConfig::follow_stall_ms`]).
/// Returns a protocol violation only.
async fn stream_keylog(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    id: u64,
    partition: usize,
    from_seq: u64,
    follow: bool,
) -> Result<(), String> {
    let mut grown = match follow.then(|| context.engine.watch_keylog(partition)) {
        Some(Err(e)) => {
            let frame = encode_response(&mut BytesMut::new(), id, Err(e.into_wire()));
            let _ = send.write_all(&frame).await;
            return Ok(());
        }
        Some(Ok(watch)) => Some(watch),
        None => None,
    };
    let mut position = 0;
    let mut caught_up_told = false;
    let mut scratch = BytesMut::new();
    loop {
        if let Some(grown) = &mut grown {
            // Seen before reading, so an append after the read wakes the
            // wait below.
            grown.borrow_and_update();
        }
        let chunk = context
            .disk_read(move |engine| {
                let mut out = Vec::with_capacity(EXPORT_CHUNK_BYTES + 4096);
                engine
                    .export_keylog(partition, position, from_seq, EXPORT_CHUNK_BYTES, &mut out)
                    .map(|progress| (progress, out))
            })
            .await
            .ok_or("a key-log export failed")?;
        let (progress, frames) = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                let frame = encode_response(&mut scratch, id, Err(e.into_wire()));
                let _ = send.write_all(&frame).await;
                return Ok(());
            }
        };
        let done = progress.next >= progress.end;
        if !frames.is_empty() || (done && !caught_up_told) {
            caught_up_told |= done;
            let response = Response {
                id,
                body: Ok(ResponseBody::ExportChunk {
                    next: progress.next,
                    end: progress.end,
                    done,
                }),
            };
            // The frames go out as they are, after the head.
            let mut chunks = [
                message::encode_head(&mut scratch, &response, frames.len()),
                Bytes::from(frames),
            ];
            let write = send.write_all_chunks(&mut chunks);
            let stall_ms = context.follow_stall_ms;
            match tokio::time::timeout(Duration::from_millis(stall_ms), write).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Ok(()),
                Err(_) => {
                    tracing::warn!(
                        peer = %conn.remote_address(),
                        partition,
                        "closing the key-log stream of a reader that took nothing for {stall_ms} ms"
                    );
                    context
                        .stalled_streams_closed
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let _ = send.reset(quinn::VarInt::from_u32(0));
                    return Ok(());
                }
            }
        }
        position = progress.next.max(position);
        if !done {
            continue;
        }
        let Some(grown) = &mut grown else {
            return Ok(());
        };
        tokio::select! {
            changed = grown.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
            }
            _ = conn.closed() => return Ok(()),
            _ = send.stopped() => return Ok(()),
        }
    }
}
