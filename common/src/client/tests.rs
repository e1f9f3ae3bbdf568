//! The client against a QUIC server of the test's own that answers some
//! requests, never answers others, and drops the connection on demand.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::mpsc;

use super::*;
use crate::certs::{self, DEFAULT_STORAGE_NAMES};
use crate::frame::FrameDecoder;
use crate::message::{RequestBody, Response, ResponseBody, WriteAck};
use crate::transport::TransportSettings;

/// A write of this key is never answered.
const STALL: &[u8] = b"stall";
/// A write of this key makes the server close the connection.
const DROP: &[u8] = b"drop";
/// How long a test waits for something that should happen at once.
const LIMIT: Duration = Duration::from_secs(10);

/// The server's side: where it listens and how many connections it has
/// accepted.
struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
    compute: Arc<NodeIdentity>,
}

impl Server {
    /// Starts a server with one partition, on the current runtime.
    fn start() -> Self {
        Self::start_in(&tokio::runtime::Handle::current())
    }

    /// Starts a server with one partition whose tasks and socket live in
    /// `runtime`.
    fn start_in(runtime: &tokio::runtime::Handle) -> Self {
        Self::start_with(runtime, TransportSettings::default(), Reading::Always)
    }

    /// Starts a server with one partition and these transport settings,
    /// reading its control streams as `reading` says.
    fn start_with(
        runtime: &tokio::runtime::Handle,
        settings: TransportSettings,
        reading: Reading,
    ) -> Self {
        let _entered = runtime.enter();
        let dir = tempfile::tempdir().expect("tempdir");
        let layout =
            certs::generate_cluster(&dir.path().join("certs"), &DEFAULT_STORAGE_NAMES, false)
                .expect("certificates");
        let storage = NodeIdentity::load(&layout.storage_dir).expect("storage identity");
        let compute = Arc::new(NodeIdentity::load(&layout.compute_dir).expect("compute identity"));
        let config = storage
            .server_config(Arc::new(settings.transport_config()))
            .expect("server config");
        let endpoint = settings
            .server_endpoint("127.0.0.1:0".parse().expect("address"), config, &storage)
            .expect("endpoint");
        let addr = endpoint.local_addr().expect("address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        runtime.spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(incoming, reading));
            }
        });
        Self {
            addr,
            accepted,
            _dir: dir,
            compute,
        }
    }

    fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new(
            format!("localhost:{}", self.addr.port()),
            Arc::clone(&self.compute),
        );
        config.request_timeout_ms = 300;
        config
    }
}

/// Whether the server reads its control streams.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    Always,
    /// Answers the Hello, then reads nothing more (the client's sends
    /// block once the stream's flow-control window is full).
    OnlyTheHello,
}

/// Answers a connection's control stream: Hello, Ping and WriteMany (except
/// a batch whose first key is [`STALL`] or [`DROP`]).
async fn serve(incoming: quinn::Incoming, reading: Reading) {
    let Ok(conn) = incoming.await else { return };
    let Ok((mut send, mut recv)) = conn.accept_bi().await else {
        return;
    };
    let mut decoder = FrameDecoder::new(1 << 20);
    let mut scratch = BytesMut::new();
    let mut seq = 0;
    while let Ok(Some(chunk)) = recv.read_chunk(1 << 16, true).await {
        decoder.push(&chunk.bytes).expect("push");
        while let Some(frame) = decoder.next_frame().expect("frame") {
            let request = message::decode_request(&frame).expect("request");
            let body = match request.body {
                RequestBody::Hello(_) => ResponseBody::Welcome {
                    partitions: 1,
                    epoch: 1,
                    max_key_bytes: 1024,
                    max_value_bytes: 1 << 20,
                    io_engine: "test".into(),
                },
                RequestBody::Ping => ResponseBody::Pong,
                RequestBody::WriteMany { keys, .. } if keys.first() == Some(&STALL) => continue,
                RequestBody::WriteMany { keys, .. } if keys.first() == Some(&DROP) => {
                    conn.close(0u32.into(), b"asked to drop");
                    return;
                }
                RequestBody::WriteMany { keys, .. } => ResponseBody::WrittenMany(
                    keys.iter()
                        .map(|_| {
                            seq += 1;
                            WriteAck { seq, offset: 0 }
                        })
                        .collect(),
                ),
                _ => continue,
            };
            let response = Response {
                id: request.id,
                body: Ok(body),
            };
            let frame = message::encode(&mut scratch, &response, &[]);
            if send.write_all(&frame).await.is_err() {
                return;
            }
            if reading == Reading::OnlyTheHello {
                conn.closed().await;
                return;
            }
        }
    }
}

/// Requests waiting on the connection of partition 0.
fn waiting(client: &StorageClient) -> usize {
    let live = client.state.links()[0].live().expect("link up");
    live.waiting_requests()
}

/// Sends a put of `key` = `value` on partition 0, as a batch of one.
fn put(
    client: &StorageClient,
    key: &[u8],
    value: &[u8],
) -> Result<Call<Vec<WriteAck>>, ClientError> {
    client.write_many(0, &[KeyWrite::put(key, value)])
}

/// The acknowledgement of a batch of one.
fn only(acks: Vec<WriteAck>) -> WriteAck {
    let [ack] = acks[..] else {
        panic!("one acknowledgement for a batch of one: {acks:?}");
    };
    ack
}

/// Puts `key` on partition 0, expecting it to be sent and then to fail.
async fn failed_put(client: &StorageClient, key: &[u8]) -> ClientError {
    put(client, key, b"v")
        .expect("send")
        .wait()
        .await
        .expect_err("the put fails")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_deadline_fails_alone_and_the_link_stays_up() {
    let server = Server::start();
    let client = StorageClient::connect(server.client_config())
        .await
        .expect("connect");
    let stalled = put(&client, STALL, b"v").expect("send");
    let answered = put(&client, b"fine", b"v").expect("send");
    assert_eq!(only(answered.wait().await.expect("answered")).seq, 1);
    let err = stalled.wait().await.expect_err("no answer");
    assert!(
        matches!(err, ClientError::DeadlineExceeded { after_ms: 300 }),
        "{err}"
    );
    assert_eq!(waiting(&client), 0, "the expired request left the map");
    // The same connection carries on.
    client.ping(0).expect("send").wait().await.expect("ping");
    let ack = put(&client, b"later", b"v")
        .expect("send")
        .wait()
        .await
        .expect("put after the deadline");
    assert_eq!(only(ack).seq, 2);
    assert!(client.is_up(0));
    assert_eq!(client.generation(0), 0, "never reconnected");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1, "one connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_connection_refuses_requests_until_one_leaves() {
    let server = Server::start();
    let mut config = server.client_config();
    config.max_in_flight_requests = 2;
    let client = StorageClient::connect(config).await.expect("connect");
    let first = put(&client, STALL, b"v").expect("send");
    let second = put(&client, STALL, b"v").expect("send");
    let err = client.ping(0).err().expect("full");
    assert!(
        matches!(
            err,
            ClientError::Busy {
                partition: 0,
                full: "max_in_flight_requests"
            }
        ),
        "{err}"
    );
    assert_eq!(
        waiting(&client),
        2,
        "the refused request was not registered"
    );
    // Room is made when the stalled requests pass their deadline.
    client
        .wait_for_room(0, LIMIT)
        .await
        .expect("room within the deadline");
    client.ping(0).expect("send").wait().await.expect("ping");
    assert!(first.wait().await.is_err());
    assert!(second.wait().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_told_as_link_events() {
    let server = Server::start();
    let (events, mut told) = mpsc::channel(4);
    let mut config = server.client_config();
    config.link_events = Some(events);
    let client = StorageClient::connect(config).await.expect("connect");
    let err = failed_put(&client, DROP).await;
    assert!(matches!(err, ClientError::ConnectionLost { .. }), "{err}");
    assert_eq!(
        tokio::time::timeout(LIMIT, told.recv())
            .await
            .expect("in time"),
        Some(LinkEvent::Down { partition: 0 })
    );
    assert_eq!(
        tokio::time::timeout(LIMIT, told.recv())
            .await
            .expect("in time"),
        Some(LinkEvent::Reconnected {
            partition: 0,
            generation: 1
        })
    );
    client.wait_up(0, LIMIT).await.expect("up");
    client.ping(0).expect("send").wait().await.expect("ping");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_vanishes_is_given_up_at_the_idle_timeout() {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = Server::start_in(server_runtime.handle());
    let (events, mut told) = mpsc::channel(4);
    let mut config = server.client_config();
    config.transport.keep_alive_ms = 100;
    config.transport.idle_timeout_ms = 1_000;
    config.link_events = Some(events);
    let client = StorageClient::connect(config).await.expect("connect");
    client.ping(0).expect("send").wait().await.expect("ping");
    // The server's tasks and socket go away without a word to the client
    // (the request is one it would not have answered anyway).
    server_runtime.shutdown_background();
    let started = std::time::Instant::now();
    let err = failed_put(&client, STALL).await;
    assert!(
        matches!(err, ClientError::DeadlineExceeded { after_ms: 300 }),
        "{err}"
    );
    assert!(client.is_up(0), "a missed deadline does not close the link");
    assert_eq!(
        tokio::time::timeout(LIMIT, told.recv())
            .await
            .expect("in time"),
        Some(LinkEvent::Down { partition: 0 })
    );
    let noticed = started.elapsed();
    assert!(
        noticed >= Duration::from_millis(500) && noticed < Duration::from_secs(5),
        "the idle timeout closed the link after {noticed:?}"
    );
    assert!(!client.is_up(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_reading_fills_the_outbox_to_its_bound_and_no_further() {
    let settings = TransportSettings {
        stream_window_bytes: 64 << 10,
        connection_window_bytes: 128 << 10,
        ..TransportSettings::default()
    };
    let server = Server::start_with(
        &tokio::runtime::Handle::current(),
        settings,
        Reading::OnlyTheHello,
    );
    let mut config = server.client_config();
    config.outbox_bytes = 256 << 10;
    config.request_timeout_ms = 60_000;
    let client = StorageClient::connect(config).await.expect("connect");
    let value = vec![7u8; 16 << 10];
    let mut sent = Vec::new();
    let err = loop {
        match put(&client, STALL, &value) {
            Ok(call) => sent.push(call),
            Err(e) => break e,
        }
        assert!(sent.len() < 1000, "the outbox never filled");
        tokio::task::yield_now().await;
    };
    assert!(
        matches!(
            err,
            ClientError::Busy {
                partition: 0,
                full: "outbox_bytes"
            }
        ),
        "{err}"
    );
    let live = client.state.links()[0].live().expect("up");
    let queued = live.queued_bytes();
    assert!(
        queued <= 256 << 10,
        "{queued} bytes queued, over the 256 KiB bound"
    );
    // Nothing drains while the peer does not read: a caller that waits for
    // room is told so when its wait ends.
    let err = client
        .wait_for_room(0, Duration::from_millis(200))
        .await
        .expect_err("no room");
    assert!(
        matches!(
            err,
            ClientError::Busy {
                full: "outbox_bytes",
                ..
            }
        ),
        "{err}"
    );
    assert!(client.is_up(0));
}
