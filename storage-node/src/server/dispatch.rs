//! A connection's control stream after its handshake: requests answered
//! in completion order, by request id, with writes applied in arrival
//! order.
//!
//! One task reads requests and writes responses: it handles every frame
//! that has arrived, then writes every response that is ready in one call,
//! so a burst of requests costs one write. Each request is decoded once and
//! handed over once: a write to the write path ([`writes`]), a read of
//! records to the read path ([`reads`]), a sync or a clear to a blocking
//! thread. Nothing a request waits for holds up the requests after it. At
//! most [`MAX_IN_FLIGHT_REQUESTS`] answers may be owed at once; with that
//! many owed, the task stops reading requests until answers come back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use splitkv_common::frame::{FrameDecoder, RawFrame};
use splitkv_common::message::{self, RequestBody, ResponseBody, WireError};
use tokio::sync::mpsc;

use super::answer::{Answer, Answered};
use super::context::{ServerContext, encode_response};
use super::convert::stats_report;
use super::handshake::Grant;
use super::reads;
use super::stream::CloseReason;
use super::writes;
use crate::StorageError;

/// Most requests of one connection whose answers are owed by another thread
/// (queued writes, point reads, syncs). It is also the capacity of the
/// connection's channel of finished answers, which therefore never refuses
/// one.
pub const MAX_IN_FLIGHT_REQUESTS: usize = 1024;

/// Answers the requests of a control stream whose handshake granted
/// `grant`, until the stream ends or the peer breaks the protocol.
pub(crate) async fn serve_requests(
    context: &Arc<ServerContext>,
    grant: Grant,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
    mut decoder: FrameDecoder,
    mut scratch: BytesMut,
) -> Result<(), CloseReason> {
    let (done_tx, mut done_rx) = mpsc::channel::<Answer>(MAX_IN_FLIGHT_REQUESTS);
    // Answers owed by other threads; never more than the channel holds.
    let mut owed = 0usize;
    let mut out: Vec<Bytes> = Vec::with_capacity(64);
    loop {
        while owed < MAX_IN_FLIGHT_REQUESTS {
            let Some(frame) = decoder.next_frame()? else {
                break;
            };
            if dispatch(context, grant, frame, &mut scratch, &mut out, &done_tx).await?
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
                    Ok(Some(chunk)) => decoder.push(&chunk.bytes)?,
                    Ok(None) => {
                        decoder.finish()?;
                        let _ = send.finish();
                        return Ok(());
                    }
                    Err(_) => return Ok(()),
                }
            }
        }
    }
}

/// Hands one request over: answers that are ready go to `out`; work done
/// elsewhere answers through `done` when finished. Writes take the write
/// path ([`writes`]), record reads the read path ([`reads`]).
async fn dispatch(
    context: &Arc<ServerContext>,
    grant: Grant,
    frame: RawFrame,
    scratch: &mut BytesMut,
    out: &mut Vec<Bytes>,
    done: &mpsc::Sender<Answer>,
) -> Result<Answered, CloseReason> {
    let request = message::decode_request(&frame)?;
    let id = request.id;
    match request.body {
        RequestBody::WriteMany { keys, ops } => {
            let written = writes::write(context, grant.writer, id, keys, ops, &frame, done).await?;
            Ok(match written {
                Some(body) => {
                    out.push(encode_response(scratch, id, body));
                    Answered::Now
                }
                None => Answered::Later,
            })
        }
        RequestBody::GetMany { reads } => Ok(reads::read_records(context, id, reads, out, done)),
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
    use crate::server::stream::next_frame;
    use crate::server::{Server, ServerConfig};
    use crate::{
        IoEngineKind, OwnedWrite, StorageConfig, StorageEngine, Submitted, WriteCompletion,
    };
    use splitkv_common::message::{
        BatchEntry, Hello, PROTOCOL_VERSION, RecordAt, RecordRead, Response, Role,
    };

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

        // The put queues behind the stalled one; the read goes by it.
        let put = RequestBody::WriteMany {
            keys: vec![b"w"],
            ops: vec![BatchEntry::Put {
                value_len: 1,
                expire_at_ms: 0,
            }],
        };
        let mut both = request(2, put, b"x").to_vec();
        let read = RequestBody::GetMany {
            reads: vec![RecordAt {
                partition: 0,
                offset: located - record_len as u64,
                len: record_len as u32,
            }],
        };
        both.extend_from_slice(&request(3, read, &[]));
        send.write_all(&both).await.expect("put and read");
        let (first, blob) = read_response(&mut recv, &mut decoder).await;
        assert_eq!(first.id, 3, "the read is answered first: {first:?}");
        assert_eq!(
            first.body,
            Ok(ResponseBody::Records(vec![RecordRead::Read {
                len: record_len as u32
            }]))
        );
        let decoded = record::decode_value_record(&blob).expect("the record verifies");
        assert_eq!((decoded.key, decoded.value), (&b"r"[..], &b"v"[..]));

        release_tx.send(()).expect("release the queue");
        let (second, _) = read_response(&mut recv, &mut decoder).await;
        assert_eq!(second.id, 2);
        let Ok(ResponseBody::WrittenMany(acks)) = second.body else {
            panic!("the put is acknowledged: {second:?}");
        };
        let [ack] = acks[..] else {
            panic!("one acknowledgement for the one put: {acks:?}");
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
