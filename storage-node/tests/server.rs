//! The storage node's QUIC server and the client, over real sockets on
//! loopback with real certificates: round trips, fencing, refusal of
//! strangers, deadlines, restarts, and bad input from the network.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use splitkv_common::certs;
use splitkv_common::client::{BatchOp, Call, ClientConfig, ClientError, StorageClient};
use splitkv_common::frame::FrameDecoder;
use splitkv_common::message::{
    self, BatchEntry, Hello, MAX_GET_MANY_BYTES, MAX_READS_PER_REQUEST, PROTOCOL_VERSION, RecordAt,
    Request, RequestBody, Response, ResponseBody, Role, WireError, WriteAck,
};
use splitkv_common::record::{self, EntryKind, Frame};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;
use storage_node::server::{Server, ServerConfig};
use storage_node::{Disk, IoEngineKind, OsDisk, StorageConfig, StorageEngine};
use support::faults::{FaultDisk, FaultPlan, Files, Op};
use tokio::sync::oneshot;

/// A storage node served from a runtime of the test's own.
struct Node {
    engine: Arc<StorageEngine>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Node {
    async fn start(data: &Path, certs: &Path, listen: SocketAddr) -> Node {
        Self::start_on(
            data,
            certs,
            listen,
            Arc::new(OsDisk::new(IoEngineKind::Uring)),
        )
        .await
    }

    /// A node whose engine reaches its files through `disk`.
    async fn start_on(data: &Path, certs: &Path, listen: SocketAddr, disk: Arc<dyn Disk>) -> Node {
        Self::start_stalling_after(data, certs, listen, disk, message::DEFAULT_FOLLOW_STALL_MS)
            .await
    }

    /// A node that closes a following reader's stream after it took
    /// nothing for `follow_stall_ms`.
    async fn start_stalling_after(
        data: &Path,
        certs: &Path,
        listen: SocketAddr,
        disk: Arc<dyn Disk>,
        follow_stall_ms: u64,
    ) -> Node {
        let mut config = StorageConfig::new(data);
        config.partitions = 4;
        config.buffer_bytes = 256 << 10;
        config.limits.max_value_bytes = 4 << 20;
        let engine = Arc::new(StorageEngine::open_with_disk(config, disk).expect("open engine"));
        let identity = NodeIdentity::load(&certs.join("storage")).expect("storage identity");
        let server = Server::bind(
            Arc::clone(&engine),
            &identity,
            &ServerConfig {
                listen,
                transport: TransportSettings::default(),
                follow_stall_ms,
            },
        )
        .expect("bind");
        let addr = server.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Node {
            engine,
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the server, which closes every connection; the engine stays
    /// open.
    async fn stop_serving(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops the server and closes the engine.
    async fn shutdown(mut self) {
        self.stop_serving().await;
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || engine.close().expect("close"))
            .await
            .expect("close task");
    }
}

struct Cluster {
    _dir: tempfile::TempDir,
    data: PathBuf,
    certs: PathBuf,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    certs::generate_cluster(&certs, &certs::DEFAULT_STORAGE_NAMES, false).expect("certs");
    Cluster {
        data: dir.path().join("data"),
        certs,
        _dir: dir,
    }
}

fn client_config(cluster: &Cluster, addr: SocketAddr) -> ClientConfig {
    let identity =
        Arc::new(NodeIdentity::load(&cluster.certs.join("compute")).expect("compute identity"));
    let mut config = ClientConfig::new(format!("localhost:{}", addr.port()), identity);
    config.request_timeout_ms = 3_000;
    config
}

/// Waits for a request that was sent, or returns why it could not be sent.
async fn call<T>(sent: Result<Call<T>, ClientError>) -> Result<T, ClientError> {
    sent?.wait().await
}

/// Puts `key` = `value` into `partition` as a write batch of one (the one
/// write request) and waits for its acknowledgement.
async fn put_one(
    client: &StorageClient,
    partition: usize,
    key: &[u8],
    value: &[u8],
) -> Result<WriteAck, ClientError> {
    let acks = call(client.write_many(partition, &[BatchOp::put(key, value)])).await?;
    Ok(only_ack(acks))
}

/// Deletes `key` in `partition` as a write batch of one and waits for its
/// acknowledgement.
async fn delete_one(
    client: &StorageClient,
    partition: usize,
    key: &[u8],
) -> Result<WriteAck, ClientError> {
    let acks = call(client.write_many(partition, &[BatchOp::delete(key)])).await?;
    Ok(only_ack(acks))
}

/// The acknowledgement of a batch of one.
fn only_ack(acks: Vec<WriteAck>) -> WriteAck {
    let [ack] = acks[..] else {
        panic!("one acknowledgement for a batch of one: {acks:?}");
    };
    ack
}

/// Reads the record of `len` bytes at `offset` of `partition` as a read of
/// one record (the one read request), through that partition's connection:
/// its verified bytes, or the storage node's refusal of the read.
async fn read_one(
    client: &StorageClient,
    partition: usize,
    offset: u64,
    len: usize,
) -> Result<Bytes, ClientError> {
    let read = RecordAt {
        partition: partition as u32,
        offset,
        len: len as u32,
    };
    let mut outcomes = call(client.get_many(partition, &[read])).await?;
    assert_eq!(outcomes.len(), 1, "one outcome for the one read");
    outcomes
        .pop()
        .expect("one outcome")
        .map_err(ClientError::Storage)
}

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().expect("address")
}

/// Every entry of `partition`'s key log in frames with an entry at or
/// above `from_seq`: (partition, key, kind, seq).
async fn exported_entries(
    client: &StorageClient,
    partition: usize,
    from_seq: u64,
) -> Vec<(usize, Vec<u8>, EntryKind, u64)> {
    let mut entries = Vec::new();
    client
        .export_keylog(partition, from_seq, |frames| {
            let mut at = 0;
            while at < frames.len() {
                let (frame, used) = record::decode_frame(&frames[at..])
                    .map_err(|error| ClientError::KeyLog { partition, error })?;
                if let Frame::Entries(list) = frame {
                    for entry in list.iter().flatten() {
                        entries.push((partition, entry.key.to_vec(), entry.kind, entry.seq));
                    }
                }
                at += used;
            }
            Ok(())
        })
        .await
        .expect("export");
    entries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_gets_batches_ranges_and_exports_round_trip() {
    let cluster = cluster();
    let node = Node::start(&cluster.data, &cluster.certs, any_port()).await;
    let client = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("connect");
    assert_eq!(client.partitions(), 4);
    assert!(client.epoch() > 0, "a writer holds an epoch");

    let ack = put_one(&client, 1, b"alpha", b"one").await.expect("put");
    let record = read_one(&client, 1, ack.offset, record::value_record_len(5, 3))
        .await
        .expect("get");
    let decoded = record::decode_value_record(&record).expect("verifies");
    assert_eq!(
        (decoded.key, decoded.value, decoded.seq),
        (&b"alpha"[..], &b"one"[..], ack.seq)
    );

    let big = vec![0x5Au8; 3 << 20];
    let batch = [
        BatchOp::Put {
            key: b"k1",
            value: b"v1",
            expire_at_ms: 0,
        },
        BatchOp::Put {
            key: b"k2",
            value: &big,
            expire_at_ms: 0,
        },
        BatchOp::Delete { key: b"k1" },
        BatchOp::Put {
            key: b"k3",
            value: b"",
            expire_at_ms: 0,
        },
    ];
    let acks = call(client.write_many(2, &batch))
        .await
        .expect("write_many");
    assert_eq!(acks.len(), 4);
    assert!(acks.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(acks[2].offset, 0, "a delete has no value-log offset");
    let deleted = delete_one(&client, 3, b"alpha").await.expect("delete");
    assert!(deleted.seq > acks[3].seq);

    let (range, committed_end) = client.read_range(2, 0, 16 << 20).await.expect("range");
    assert_eq!(range.len() as u64, committed_end);
    let in_range =
        record::decode_value_record(&range[acks[1].offset as usize..]).expect("record in range");
    assert_eq!(in_range.value, &big[..]);

    let mut entries = Vec::new();
    for partition in 0..4 {
        entries.extend(exported_entries(&client, partition, 0).await);
    }
    assert_eq!(entries.len(), 6, "{entries:?}");
    assert!(entries.contains(&(3, b"alpha".to_vec(), EntryKind::Delete, deleted.seq)));
    assert!(entries.contains(&(2, b"k1".to_vec(), EntryKind::Delete, acks[2].seq)));

    // Export from a sequence number skips what is older.
    let mut newer = 0;
    client
        .export_keylog(2, acks[3].seq, |frames| {
            newer += frames.len();
            Ok(())
        })
        .await
        .expect("export");
    assert!(newer > 0);

    // A clear puts one keyless clear entry into every partition's key log;
    // its answer carries the highest of their sequence numbers.
    let cleared = call(client.clear(1)).await.expect("clear");
    let mut clears = Vec::new();
    for partition in 0..4 {
        clears.extend(exported_entries(&client, partition, deleted.seq + 1).await);
    }
    clears.retain(|entry| entry.3 > deleted.seq);
    assert_eq!(clears.len(), 4, "{clears:?}");
    assert!(
        clears
            .iter()
            .all(|(_, key, kind, _)| *kind == EntryKind::Clear && key.is_empty())
    );
    assert_eq!(clears.iter().map(|c| c.3).max(), Some(cleared.seq));

    let stats = call(client.stats()).await.expect("stats");
    assert_eq!(stats.partitions.iter().map(|p| p.puts).sum::<u64>(), 4);
    assert!(stats.connections >= 4);
    assert_eq!(
        client.welcome().io_engine,
        node.engine.io_engine().to_string()
    );
    call(client.ping(0)).await.expect("ping");
    drop(client);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_writer_fences_the_old_one_which_can_still_read() {
    let cluster = cluster();
    let node = Node::start(&cluster.data, &cluster.certs, any_port()).await;
    let old = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("connect");
    let ack = put_one(&old, 0, b"k", b"v1").await.expect("put");
    let new = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("connect");
    assert!(new.epoch() > old.epoch());
    let err = put_one(&old, 0, b"k", b"v2").await.expect_err("fenced");
    assert!(
        matches!(err, ClientError::Storage(WireError::Fenced { yours, current }) if yours == old.epoch() && current == new.epoch()),
        "{err}"
    );
    let record = read_one(&old, 0, ack.offset, record::value_record_len(1, 2))
        .await
        .expect("a fenced writer still reads");
    assert_eq!(
        record::decode_value_record(&record).expect("record").value,
        b"v1"
    );
    put_one(&new, 0, b"k", b"v3")
        .await
        .expect("new writer writes");
    drop((old, new));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_certificate_from_another_ca_gets_nothing() {
    let cluster = cluster();
    let node = Node::start(&cluster.data, &cluster.certs, any_port()).await;
    let stranger_dir = tempfile::tempdir().expect("tempdir");
    certs::generate_cluster(stranger_dir.path(), &["localhost"], false).expect("other CA");
    let identity =
        Arc::new(NodeIdentity::load(&stranger_dir.path().join("compute")).expect("identity"));
    let config = ClientConfig::new(format!("localhost:{}", node.addr.port()), identity);
    let err = StorageClient::connect(config).await.err().expect("refused");
    assert!(matches!(err, ClientError::Refused { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("certificate"), "{message}");
    assert_eq!(
        node.engine.stats().writer_epoch,
        0,
        "the stranger began no epoch"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_fail_on_restart_and_the_client_reconnects() {
    const PARTITIONS: usize = 4;
    let cluster = cluster();
    let plan = FaultPlan::new();
    let mut node = Node::start_on(
        &cluster.data,
        &cluster.certs,
        any_port(),
        FaultDisk::new(Arc::clone(&plan)),
    )
    .await;
    let addr = node.addr;
    let client = Arc::new(
        StorageClient::connect(client_config(&cluster, addr))
            .await
            .expect("connect"),
    );
    let before = put_one(&client, 0, b"before", b"restart")
        .await
        .expect("put");

    // Value-log writes pause from now on. A put too large for a write
    // buffer waits for a write of its own, so every connection's large put
    // stays on the node, and the small put sent after it on the same
    // connection waits behind it.
    plan.pause_direct_writes_now();
    let large = vec![0x33u8; 512 << 10];
    let mut in_flight = Vec::new();
    for partition in 0..PARTITIONS {
        let large = [BatchOp::put(b"large", &large)];
        in_flight.push(client.write_many(partition, &large).expect("sent"));
        let small = [BatchOp::put(b"small", b"behind")];
        in_flight.push(client.write_many(partition, &small).expect("sent"));
    }
    let paused = Arc::clone(&plan);
    tokio::task::spawn_blocking(move || paused.wait_until_paused(PARTITIONS))
        .await
        .expect("every connection's large put reached the disk");

    // The node goes away while all of them are outstanding: each gets an
    // error at once, none waits for its deadline.
    node.stop_serving().await;
    for (i, pending) in in_flight.into_iter().enumerate() {
        let err = pending.wait().await.expect_err("the node went away");
        assert!(
            matches!(err, ClientError::ConnectionLost { .. }),
            "request {i}, sent before the node went away: {err}"
        );
    }

    // While the node is down, new requests fail rather than hang.
    let started = std::time::Instant::now();
    let err = put_one(&client, 0, b"during", b"outage")
        .await
        .expect_err("no node");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "failed within the deadline"
    );
    assert!(
        matches!(
            err,
            ClientError::Unavailable { .. }
                | ClientError::ConnectionLost { .. }
                | ClientError::DeadlineExceeded { .. }
        ),
        "{err}"
    );

    plan.release_paused_writes();
    node.shutdown().await;
    // The released puts may still hold the engine for a moment; the node
    // restarts once the engine, and with it the directory's lock, is gone.
    let unlocked = Arc::clone(&plan);
    tokio::task::spawn_blocking(move || unlocked.wait_until_unlocked())
        .await
        .expect("the engine lets go of the data directory");
    let node = Node::start(&cluster.data, &cluster.certs, addr).await;
    for partition in 0..PARTITIONS {
        client
            .wait_up(partition, Duration::from_secs(10))
            .await
            .expect("reconnects");
        assert!(client.generation(partition) >= 1);
        let after = put_one(&client, partition, b"after", b"restart")
            .await
            .expect("put after restart");
        assert!(after.seq > before.seq);
    }
    let record = read_one(&client, 0, before.offset, record::value_record_len(6, 7))
        .await
        .expect("old data");
    assert_eq!(
        record::decode_value_record(&record).expect("record").value,
        b"restart"
    );
    drop(client);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_node_that_does_not_answer_hits_the_deadline() {
    // A QUIC server with the storage node's certificate that completes the
    // handshake and then never answers.
    let cluster = cluster();
    let identity = NodeIdentity::load(&cluster.certs.join("storage")).expect("identity");
    let settings = TransportSettings::default();
    let server = identity
        .server_config(Arc::new(settings.transport_config()))
        .expect("server config");
    let endpoint = settings
        .server_endpoint(any_port(), server, &identity)
        .expect("endpoint");
    let addr = endpoint.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok((mut send, mut recv)) = conn.accept_bi().await else {
                    return;
                };
                let mut decoder = FrameDecoder::new(1 << 20);
                let mut scratch = BytesMut::new();
                while let Ok(Some(chunk)) = recv.read_chunk(1 << 16, true).await {
                    decoder.push(&chunk.bytes).expect("push");
                    while let Some(frame) = decoder.next_frame().expect("frame") {
                        let request = message::decode_request(&frame).expect("request");
                        if let RequestBody::Hello(_) = request.body {
                            let welcome = ResponseBody::Welcome {
                                partitions: 1,
                                epoch: 1,
                                max_key_bytes: 1024,
                                max_value_bytes: 1 << 20,
                                io_engine: "uring".into(),
                            };
                            let frame = message::encode(
                                &mut scratch,
                                &Response {
                                    id: request.id,
                                    body: Ok(welcome),
                                },
                                &[],
                            );
                            send.write_all(&frame).await.expect("welcome");
                        }
                    }
                }
                conn.closed().await;
            });
        }
    });
    let mut config = client_config(&cluster, addr);
    config.request_timeout_ms = 300;
    let client = StorageClient::connect(config).await.expect("connect");
    let started = std::time::Instant::now();
    let err = put_one(&client, 0, b"k", b"v")
        .await
        .expect_err("no answer");
    assert!(
        matches!(err, ClientError::DeadlineExceeded { after_ms: 300 }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// A raw connection with valid credentials, for sending bad input.
async fn raw_connection(cluster: &Cluster, addr: SocketAddr) -> quinn::Connection {
    let identity = NodeIdentity::load(&cluster.certs.join("compute")).expect("identity");
    let settings = TransportSettings::default();
    let mut endpoint = settings.client_endpoint(addr).expect("endpoint");
    endpoint.set_default_client_config(
        identity
            .client_config(Arc::new(settings.transport_config()))
            .expect("config"),
    );
    endpoint
        .connect(addr, "localhost")
        .expect("connect")
        .await
        .expect("handshake")
}

/// Opens a control stream on `conn` and sends a writer's `Hello` of
/// protocol version `protocol` for partition 0.
async fn send_hello(
    conn: &quinn::Connection,
    protocol: u32,
) -> (quinn::SendStream, quinn::RecvStream) {
    let (mut send, recv) = conn.open_bi().await.expect("stream");
    let request = Request {
        id: 1,
        body: RequestBody::Hello(Hello {
            protocol,
            role: Role::Writer {
                partition: 0,
                epoch: None,
            },
        }),
    };
    send.write_all(&message::encode(&mut BytesMut::new(), &request, &[]))
        .await
        .expect("hello");
    (send, recv)
}

async fn hello(conn: &quinn::Connection) -> (quinn::SendStream, quinn::RecvStream, FrameDecoder) {
    let (send, mut recv) = send_hello(conn, PROTOCOL_VERSION).await;
    let mut decoder = FrameDecoder::new(64 << 20);
    let frame = read_frame(&mut recv, &mut decoder).await.expect("welcome");
    let response = message::decode_response(&frame).expect("response");
    assert!(matches!(response.body, Ok(ResponseBody::Welcome { .. })));
    (send, recv, decoder)
}

async fn read_frame(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
) -> Option<splitkv_common::frame::RawFrame> {
    loop {
        if let Some(frame) = decoder.next_frame().expect("well-formed responses") {
            return Some(frame);
        }
        match recv.read_chunk(1 << 20, true).await {
            Ok(Some(chunk)) => decoder.push(&chunk.bytes).expect("push"),
            _ => return None,
        }
    }
}

/// Waits for the server to close `conn` and returns its reason.
async fn closed_reason(conn: &quinn::Connection) -> String {
    match tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("closed in time")
    {
        quinn::ConnectionError::ApplicationClosed(close) => {
            String::from_utf8_lossy(&close.reason).into_owned()
        }
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_closes_only_the_offending_connection_and_changes_nothing() {
    let cluster = cluster();
    let node = Node::start(&cluster.data, &cluster.certs, any_port()).await;
    let good = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("connect");
    put_one(&good, 0, b"keep", b"me").await.expect("put");
    let puts_before = node
        .engine
        .stats()
        .partitions
        .iter()
        .map(|p| p.puts)
        .sum::<u64>();

    // 1. An oversized frame: refused from its length prefix.
    let conn = raw_connection(&cluster, node.addr).await;
    let (mut send, _recv, _) = hello(&conn).await;
    send.write_all(&u32::MAX.to_le_bytes())
        .await
        .expect("write");
    let reason = closed_reason(&conn).await;
    assert!(reason.contains("exceeds the limit"), "{reason}");

    // 2. Garbage instead of a Hello.
    let conn = raw_connection(&cluster, node.addr).await;
    let (mut send, _recv) = conn.open_bi().await.expect("stream");
    send.write_all(&[12, 0, 0, 0, 4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4])
        .await
        .expect("write");
    let reason = closed_reason(&conn).await;
    assert!(
        reason.contains("undecodable") || reason.contains("Hello"),
        "{reason}"
    );

    // 3. An unknown message tag after the handshake.
    let conn = raw_connection(&cluster, node.addr).await;
    let (mut send, _recv, _) = hello(&conn).await;
    let mut frame = Vec::new();
    splitkv_common::frame::put_prefix(&mut frame, 2, 0);
    frame.extend_from_slice(&[7, 99]);
    send.write_all(&frame).await.expect("write");
    let reason = closed_reason(&conn).await;
    assert!(reason.contains("undecodable"), "{reason}");

    // 4. A stream that ends inside a frame.
    let conn = raw_connection(&cluster, node.addr).await;
    let (mut send, _recv, _) = hello(&conn).await;
    send.write_all(&[100, 0, 0, 0, 1, 2]).await.expect("write");
    send.finish().expect("finish");
    let reason = closed_reason(&conn).await;
    assert!(reason.contains("incomplete frame"), "{reason}");

    // 5. Thousands of streams, each holding half a frame: the stream limit
    //    holds the flood back, and other connections are served meanwhile.
    let flood = raw_connection(&cluster, node.addr).await;
    let (_flood_send, _flood_recv, _) = hello(&flood).await;
    let mut streams = Vec::new();
    for _ in 0..2000 {
        match tokio::time::timeout(Duration::from_millis(200), flood.open_bi()).await {
            Ok(Ok((mut s, r))) => {
                let _ = s.write_all(&[1, 2]).await;
                streams.push((s, r));
            }
            _ => break,
        }
    }
    assert!(
        streams.len() < 2000,
        "the stream limit must hold a flood back (opened {})",
        streams.len()
    );
    call(good.ping(2))
        .await
        .expect("other connections are served during a flood");
    drop(streams);

    // 6. Limits and fencing on a healthy stream: error responses, not a
    //    closed connection.
    let conn = raw_connection(&cluster, node.addr).await;
    let (mut send, mut recv, mut decoder) = hello(&conn).await;
    let put_of = |value_len: usize| BatchEntry::Put {
        value_len: value_len as u32,
        expire_at_ms: 0,
    };
    let too_long_key = vec![1u8; 2000];
    let request = Request {
        id: 9,
        body: RequestBody::WriteMany {
            keys: vec![&too_long_key],
            ops: vec![put_of(1)],
        },
    };
    send.write_all(&message::encode(&mut BytesMut::new(), &request, b"v"))
        .await
        .expect("write");
    let response =
        message::decode_response(&read_frame(&mut recv, &mut decoder).await.expect("answer"))
            .expect("decodes");
    assert!(
        matches!(response.body, Err(WireError::TooLarge { .. })),
        "{response:?}"
    );
    let huge_value = vec![0u8; (4 << 20) + 1];
    let request = Request {
        id: 10,
        body: RequestBody::WriteMany {
            keys: vec![b"k"],
            ops: vec![put_of(huge_value.len())],
        },
    };
    send.write_all(&message::encode(
        &mut BytesMut::new(),
        &request,
        &huge_value,
    ))
    .await
    .expect("write");
    let response =
        message::decode_response(&read_frame(&mut recv, &mut decoder).await.expect("answer"))
            .expect("decodes");
    assert!(
        matches!(response.body, Err(WireError::TooLarge { .. })),
        "{response:?}"
    );
    drop(conn);

    // The raw writer above began a newer epoch, so the client is fenced now;
    // it still reads, and the node still serves.
    let err = put_one(&good, 0, b"keep", b"changed")
        .await
        .expect_err("fenced");
    assert!(
        matches!(err, ClientError::Storage(WireError::Fenced { .. })),
        "{err}"
    );
    call(good.ping(1)).await.expect("the node keeps serving");
    let puts_after = node
        .engine
        .stats()
        .partitions
        .iter()
        .map(|p| p.puts)
        .sum::<u64>();
    assert_eq!(puts_before, puts_after, "no bad request stored anything");
    drop(good);
    node.shutdown().await;
}

/// A client of an older protocol version (the one before the single-record
/// requests were folded into the batch requests) or of a newer one is
/// refused at its `Hello` with an answer that says why, is granted nothing,
/// and its stream ends; a client of this version is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_protocol_version_is_told_so_and_granted_nothing() {
    let cluster = cluster();
    let node = Node::start(&cluster.data, &cluster.certs, any_port()).await;
    for version in [PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1] {
        let conn = raw_connection(&cluster, node.addr).await;
        let (_send, mut recv) = send_hello(&conn, version).await;
        let mut decoder = FrameDecoder::new(1 << 20);
        let frame = read_frame(&mut recv, &mut decoder)
            .await
            .expect("an answer to the Hello");
        let response = message::decode_response(&frame).expect("decodes");
        assert_eq!(response.id, 1);
        let refusal = response.body.expect_err("refused");
        assert_eq!(
            refusal,
            WireError::ProtocolVersion {
                node: PROTOCOL_VERSION,
                client: version,
            }
        );
        assert_eq!(
            ClientError::Storage(refusal).to_string(),
            format!("protocol version mismatch: node speaks {PROTOCOL_VERSION}, client {version}")
        );
        assert!(
            read_frame(&mut recv, &mut decoder).await.is_none(),
            "the refused stream ends"
        );
    }
    assert_eq!(
        node.engine.stats().writer_epoch,
        0,
        "no refused client began an epoch"
    );
    let client = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("this version connects");
    put_one(&client, 0, b"k", b"v").await.expect("and writes");
    drop(client);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_taking_its_key_log_stream_is_cut_off_and_holds_no_writer_back() {
    const STALL_MS: u64 = 200;
    const PUTS: usize = 3_000;
    let cluster = cluster();
    let disk = Arc::new(OsDisk::new(IoEngineKind::Uring));
    let node =
        Node::start_stalling_after(&cluster.data, &cluster.certs, any_port(), disk, STALL_MS).await;
    let writer = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("writer");
    put_one(&writer, 0, b"first", b"entry").await.expect("put");

    // The reader runs on a runtime of its own, which its stalled callback
    // blocks: it takes no more bytes, and its stream window (small here)
    // fills.
    let mut reader_config = client_config(&cluster, node.addr);
    reader_config.writer = false;
    reader_config.transport.stream_window_bytes = 64 << 10;
    reader_config.transport.connection_window_bytes = 256 << 10;
    let (first_chunk, first_chunk_taken) = oneshot::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("reader runtime");
        runtime.block_on(async move {
            let reader = StorageClient::connect(reader_config).await.expect("reader");
            let mut first_chunk = Some(first_chunk);
            let mut received = BytesMut::new();
            let followed = reader
                .follow_keylog(0, 1, |frames, _caught_up| {
                    received.extend_from_slice(&frames);
                    if let Some(first) = first_chunk.take() {
                        let _ = first.send(());
                        let _ = released.recv();
                    }
                    Ok(())
                })
                .await;
            (followed, received.freeze())
        })
    });
    first_chunk_taken.await.expect("the reader's first chunk");

    // The writer goes on at full speed while the reader takes nothing.
    let value = [7u8; 64];
    for i in 0..PUTS {
        let key = format!("while-stalled-{i}");
        put_one(&writer, 0, key.as_bytes(), &value)
            .await
            .expect("a put while a reader is stalled");
    }
    // Bounded wait for the storage node to cut the stalled stream.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stats = call(writer.stats()).await.expect("stats");
        if stats.stalled_streams_closed == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled reader's stream was never closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    release.send(()).expect("release the reader");
    let (followed, received) = reader.join().expect("reader thread");
    assert!(
        followed.is_err(),
        "the cut stream ended without an error: the reader would not follow again"
    );
    // What the reader did get is whole, checksummed frames, in order.
    let mut at = 0;
    let mut last_seq = 0;
    while at < received.len() {
        let (frame, used) = record::decode_frame(&received[at..]).expect("a whole frame");
        if let Frame::Entries(entries) = frame {
            for entry in entries.iter() {
                let entry = entry.expect("entry");
                assert!(entry.seq > last_seq);
                last_seq = entry.seq;
            }
        }
        at += used;
    }
    assert!(last_seq >= 1);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_records_some_only_on_the_disk_answers_each_in_its_place() {
    let cluster = cluster();
    let plan = FaultPlan::new();
    let start = || {
        Node::start_on(
            &cluster.data,
            &cluster.certs,
            any_port(),
            FaultDisk::new(Arc::clone(&plan)),
        )
    };
    let at = |partition: u32, ack: WriteAck, key_len: usize, value_len: usize| RecordAt {
        partition,
        offset: ack.offset,
        len: record::value_record_len(key_len, value_len) as u32,
    };
    // Written before a clean restart: on the disk alone, where the fault
    // disk has nothing in memory, so each is read on a blocking thread.
    let (on_disk_a, on_disk_b) = {
        let node = start().await;
        let client = StorageClient::connect(client_config(&cluster, node.addr))
            .await
            .expect("connect");
        let a = put_one(&client, 1, b"disk-a", b"first").await.expect("put");
        let b = put_one(&client, 3, b"disk-b", b"second")
            .await
            .expect("put");
        client.close();
        node.shutdown().await;
        (at(1, a, 6, 5), at(3, b, 6, 6))
    };
    let unlocked = Arc::clone(&plan);
    tokio::task::spawn_blocking(move || unlocked.wait_until_unlocked())
        .await
        .expect("the engine lets go of the data directory");
    let node = start().await;
    let client = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("connect");
    // Written now: still in its write buffer.
    let in_buffer = put_one(&client, 2, b"buffered", b"third")
        .await
        .expect("put");
    let reads_before = plan.succeeded(Op::Read, Files::ValueLog);
    let reads = [
        on_disk_a,
        // Far past the committed end: fails alone, without a read.
        RecordAt {
            partition: 1,
            offset: 1 << 40,
            len: 64,
        },
        at(2, in_buffer, 8, 5),
        on_disk_b,
    ];
    let records = call(client.get_many(0, &reads)).await.expect("get_many");
    assert_eq!(records.len(), 4);
    let value = |i: usize| {
        let bytes = records[i].as_ref().expect("read");
        let decoded = record::decode_value_record(bytes).expect("verifies");
        (decoded.key.to_vec(), decoded.value.to_vec())
    };
    assert_eq!(value(0), (b"disk-a".to_vec(), b"first".to_vec()));
    assert!(records[1].is_err(), "a read past the end fails alone");
    assert_eq!(value(2), (b"buffered".to_vec(), b"third".to_vec()));
    assert_eq!(value(3), (b"disk-b".to_vec(), b"second".to_vec()));
    assert_eq!(
        plan.succeeded(Op::Read, Files::ValueLog) - reads_before,
        2,
        "the two records on the disk were read from it, the buffered one was not"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_several_records_answers_each_alone_and_refuses_too_many() {
    let cluster = cluster();
    let node = Node::start(&cluster.data, &cluster.certs, any_port()).await;
    let client = StorageClient::connect(client_config(&cluster, node.addr))
        .await
        .expect("connect");
    let first = put_one(&client, 1, b"first", b"one").await.expect("put");
    let second = put_one(&client, 3, b"second", b"two!").await.expect("put");
    let at = |partition: u32, ack: WriteAck, key_len: usize, value_len: usize| RecordAt {
        partition,
        offset: ack.offset,
        len: record::value_record_len(key_len, value_len) as u32,
    };
    let reads = [
        at(3, second, 6, 4),
        // Past the committed end of partition 1: fails alone.
        RecordAt {
            partition: 1,
            offset: first.offset + (1 << 20),
            len: 64,
        },
        at(1, first, 5, 3),
    ];
    let records = call(client.get_many(0, &reads)).await.expect("get_many");
    assert_eq!(records.len(), 3);
    let decoded =
        record::decode_value_record(records[0].as_ref().expect("second")).expect("verifies");
    assert_eq!((decoded.key, decoded.value), (&b"second"[..], &b"two!"[..]));
    assert!(
        records[1].is_err(),
        "a read past the end fails: {records:?}"
    );
    let decoded =
        record::decode_value_record(records[2].as_ref().expect("first")).expect("verifies");
    assert_eq!((decoded.key, decoded.value), (&b"first"[..], &b"one"[..]));

    let too_many = vec![at(1, first, 5, 3); MAX_READS_PER_REQUEST + 1];
    match call(client.get_many(0, &too_many)).await {
        Err(ClientError::Storage(WireError::BadRequest { reason })) => {
            assert!(reason.contains("reads in one request"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let too_long = [RecordAt {
        partition: 1,
        offset: 0,
        len: (MAX_GET_MANY_BYTES / 2 + 1) as u32,
    }; 2];
    match call(client.get_many(0, &too_long)).await {
        Err(ClientError::Storage(WireError::BadRequest { reason })) => {
            assert!(reason.contains("bytes of records"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The connection serves on after the refusals.
    let again = call(client.get_many(0, &reads[..1])).await.expect("again");
    assert!(again[0].is_ok());
}
