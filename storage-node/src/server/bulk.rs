//! Bulk streams: one request each (a range read or a key-log export), whose
//! response may be many megabytes, on a stream of its own so that it never
//! holds up the control stream.

use std::sync::Arc;

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
    if let Err(reason) = serve_stream(context, &mut send, &mut recv).await {
        close_for_violation(conn, &reason);
    }
}

async fn serve_stream(
    context: &Arc<ServerContext>,
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
        } => {
            let mut position = 0;
            let mut scratch = BytesMut::new();
            loop {
                let chunk = context
                    .disk_read(move |engine| {
                        let mut out = Vec::with_capacity(EXPORT_CHUNK_BYTES + 4096);
                        engine
                            .export_keylog(
                                partition as usize,
                                position,
                                from_seq,
                                EXPORT_CHUNK_BYTES,
                                &mut out,
                            )
                            .map(|progress| (progress, out))
                    })
                    .await
                    .ok_or("a key-log export failed")?;
                match chunk {
                    Ok((progress, frames)) => {
                        let done = progress.next >= progress.end;
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
                        if send.write_all_chunks(&mut chunks).await.is_err() {
                            return Ok(());
                        }
                        if done {
                            break;
                        }
                        position = progress.next;
                    }
                    Err(e) => {
                        let frame = encode_response(&mut scratch, id, Err(e.into_wire()));
                        let _ = send.write_all(&frame).await;
                        break;
                    }
                }
            }
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
