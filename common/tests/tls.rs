//! Mutual TLS over real QUIC connections on loopback: a correct pair talks,
//! and every way of presenting the wrong credentials is refused during the
//! handshake with the TLS alert that names the fault.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use quinn::{ConnectionError, Endpoint, TransportErrorCode};
use rustls::pki_types::CertificateDer;
use splitkv_common::certs::{self, ClusterLayout, DEFAULT_STORAGE_NAMES};
use splitkv_common::tls::{
    ALPN_PROTOCOL, CA_FILE, CERT_FILE, KEY_FILE, NodeIdentity, anonymous_client_config,
};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);
/// TLS alert `unknown_ca` (RFC 8446 §6.2), as carried in a QUIC
/// CRYPTO_ERROR (0x0100 + alert).
const ALERT_UNKNOWN_CA: u8 = 48;
/// TLS alert `bad_certificate`.
const ALERT_BAD_CERTIFICATE: u8 = 42;
/// TLS alert `unsupported_certificate` (rustls sends it for a wrong
/// extended key usage).
const ALERT_UNSUPPORTED_CERTIFICATE: u8 = 43;
/// TLS alert `certificate_required`.
const ALERT_CERTIFICATE_REQUIRED: u8 = 116;

fn cluster(dir: &tempfile::TempDir, name: &str) -> ClusterLayout {
    certs::generate_cluster(&dir.path().join(name), &DEFAULT_STORAGE_NAMES, false)
        .expect("generate cluster certificates")
}

fn transport() -> Arc<quinn::TransportConfig> {
    Arc::new(quinn::TransportConfig::default())
}

fn loopback() -> SocketAddr {
    (Ipv4Addr::LOCALHOST, 0).into()
}

/// What the server side saw: the handshake outcome, the client's leaf
/// certificate, and whether it ever accepted a stream.
struct ServerOutcome {
    handshake: Result<(), ConnectionError>,
    client_cert: Option<CertificateDer<'static>>,
    accepted_stream: bool,
}

/// Starts a server for `identity` that accepts one connection and answers
/// each bidirectional stream on it with `pong:` + request.
fn start_server(identity: &NodeIdentity) -> (Endpoint, tokio::task::JoinHandle<ServerOutcome>) {
    let config = identity.server_config(transport()).expect("server config");
    let endpoint = Endpoint::server(config, loopback()).expect("bind server");
    let accepting = endpoint.clone();
    let task = tokio::spawn(async move {
        let incoming = accepting.accept().await.expect("an incoming connection");
        match incoming.await {
            Ok(conn) => serve(conn).await,
            Err(e) => ServerOutcome {
                handshake: Err(e),
                client_cert: None,
                accepted_stream: false,
            },
        }
    });
    (endpoint, task)
}

async fn serve(conn: quinn::Connection) -> ServerOutcome {
    let client_cert = leaf_of_peer(&conn);
    let mut accepted_stream = false;
    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
        accepted_stream = true;
        let request = recv.read_to_end(1 << 16).await.expect("read request");
        let mut reply = b"pong:".to_vec();
        reply.extend_from_slice(&request);
        send.write_all(&reply).await.expect("write reply");
        send.finish().expect("finish reply");
    }
    ServerOutcome {
        handshake: Ok(()),
        client_cert,
        accepted_stream,
    }
}

async fn server_outcome(task: tokio::task::JoinHandle<ServerOutcome>) -> ServerOutcome {
    timeout(LIMIT, task)
        .await
        .expect("server finished in time")
        .expect("server task did not panic")
}

fn leaf_of_peer(conn: &quinn::Connection) -> Option<CertificateDer<'static>> {
    let chain = conn
        .peer_identity()?
        .downcast::<Vec<CertificateDer<'static>>>()
        .ok()?;
    chain.first().cloned()
}

fn client_endpoint(config: quinn::ClientConfig) -> Endpoint {
    let mut endpoint = Endpoint::client(loopback()).expect("bind client");
    endpoint.set_default_client_config(config);
    endpoint
}

#[derive(Debug)]
enum ClientFailure {
    /// The handshake itself failed on the client.
    Connect(ConnectionError),
    /// The handshake completed on the client, then the connection was
    /// lost while using a stream.
    Stream(ConnectionError),
}

impl ClientFailure {
    fn error(&self) -> &ConnectionError {
        match self {
            ClientFailure::Connect(e) | ClientFailure::Stream(e) => e,
        }
    }
}

async fn connect(
    client: &Endpoint,
    server: SocketAddr,
    server_name: &str,
) -> Result<quinn::Connection, ClientFailure> {
    client
        .connect(server, server_name)
        .expect("start connecting")
        .await
        .map_err(ClientFailure::Connect)
}

/// Sends one request on a new bidirectional stream and returns the reply.
async fn exchange(conn: &quinn::Connection, request: &[u8]) -> Result<Vec<u8>, ClientFailure> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(ClientFailure::Stream)?;
    send.write_all(request).await.map_err(|e| match e {
        quinn::WriteError::ConnectionLost(c) => ClientFailure::Stream(c),
        other => panic!("unexpected write error: {other}"),
    })?;
    send.finish().expect("stream still open");
    recv.read_to_end(1 << 16).await.map_err(|e| match e {
        quinn::ReadToEndError::Read(quinn::ReadError::ConnectionLost(c)) => {
            ClientFailure::Stream(c)
        }
        other => panic!("unexpected read error: {other}"),
    })
}

/// Starts a server for `server_identity`, connects to it with
/// `client_config` naming `server_name`, exchanges one request and closes.
/// Returns the reply (or the first error the client saw) and what the
/// server saw.
async fn attempt(
    server_identity: &NodeIdentity,
    client_config: quinn::ClientConfig,
    server_name: &str,
) -> (Result<Vec<u8>, ClientFailure>, ServerOutcome) {
    let (server, task) = start_server(server_identity);
    let server_addr = server.local_addr().expect("server addr");
    let client = client_endpoint(client_config);
    let result = timeout(LIMIT, async {
        let conn = connect(&client, server_addr, server_name).await?;
        let reply = exchange(&conn, b"ping").await;
        conn.close(0u32.into(), b"done");
        reply
    })
    .await
    .expect("client gave up in time");
    (result, server_outcome(task).await)
}

/// The TLS alert carried by a connection error, whether the peer sent it
/// (`ConnectionClosed`) or this side raised it (`TransportError`).
fn crypto_alert(err: &ConnectionError) -> Option<u8> {
    let code = match err {
        ConnectionError::ConnectionClosed(close) => close.error_code,
        ConnectionError::TransportError(e) => e.code,
        _ => return None,
    };
    (0..=255u8).find(|alert| TransportErrorCode::crypto(*alert) == code)
}

#[tokio::test]
async fn mutual_tls_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = cluster(&dir, "a");
    let storage = NodeIdentity::load(&layout.storage_dir).expect("load storage");
    let compute = NodeIdentity::load(&layout.compute_dir).expect("load compute");
    let (server, task) = start_server(&storage);
    let server_addr = server.local_addr().expect("server addr");
    let client = client_endpoint(compute.client_config(transport()).expect("client config"));

    // The IP SAN 127.0.0.1 is what the client checks here.
    let conn = timeout(LIMIT, connect(&client, server_addr, "127.0.0.1"))
        .await
        .expect("handshake in time")
        .expect("handshake succeeds");
    let alpn = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol);
    assert_eq!(alpn.as_deref(), Some(ALPN_PROTOCOL));
    assert_eq!(leaf_of_peer(&conn).as_ref(), storage.cert_chain().first());

    for request in [&b"ping"[..], &[7u8; 5000][..]] {
        let reply = timeout(LIMIT, exchange(&conn, request))
            .await
            .expect("exchange in time")
            .expect("exchange succeeds");
        assert_eq!(&reply[..5], b"pong:");
        assert_eq!(&reply[5..], request);
    }
    conn.close(0u32.into(), b"done");

    let seen = server_outcome(task).await;
    assert!(seen.handshake.is_ok());
    assert!(seen.accepted_stream);
    assert_eq!(seen.client_cert.as_ref(), compute.cert_chain().first());
}

#[tokio::test]
async fn client_certificate_from_another_ca_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = cluster(&dir, "a");
    let b = cluster(&dir, "b");
    let storage = NodeIdentity::load(&a.storage_dir).expect("load storage");
    // Trusts cluster A (so it accepts the server) but presents B's cert.
    let intruder = NodeIdentity::from_files(
        &a.compute_dir.join(CA_FILE),
        &b.compute_dir.join(CERT_FILE),
        &b.compute_dir.join(KEY_FILE),
    )
    .expect("load intruder");
    let client_config = intruder.client_config(transport()).expect("client config");

    let (result, seen) = attempt(&storage, client_config, "localhost").await;
    // Under TLS 1.3 the client finishes its side of the handshake before
    // the server has judged its certificate, so the refusal arrives as a
    // CONNECTION_CLOSE carrying the server's TLS alert, seen on the first
    // stream operation that waits for the peer.
    let failure = result.expect_err("the server must refuse the client");
    let err = failure.error();
    assert!(
        matches!(err, ConnectionError::ConnectionClosed(_)),
        "expected a close from the server, got {err:?}"
    );
    assert_eq!(crypto_alert(err), Some(ALERT_UNKNOWN_CA), "{err:?}");
    let server_err = seen
        .handshake
        .expect_err("server must refuse the handshake");
    assert_eq!(
        crypto_alert(&server_err),
        Some(ALERT_UNKNOWN_CA),
        "{server_err:?}"
    );
    assert!(!seen.accepted_stream);
}

#[tokio::test]
async fn client_without_certificate_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = cluster(&dir, "a");
    let storage = NodeIdentity::load(&a.storage_dir).expect("load storage");
    let client_config =
        anonymous_client_config(&a.compute_dir.join(CA_FILE), transport()).expect("config");

    let (result, seen) = attempt(&storage, client_config, "localhost").await;
    let failure = result.expect_err("the server must refuse the client");
    let err = failure.error();
    assert_eq!(
        crypto_alert(err),
        Some(ALERT_CERTIFICATE_REQUIRED),
        "{err:?}"
    );
    assert!(seen.handshake.is_err());
    assert!(!seen.accepted_stream);
}

#[tokio::test]
async fn client_trusting_another_ca_refuses_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = cluster(&dir, "a");
    let b = cluster(&dir, "b");
    let storage = NodeIdentity::load(&a.storage_dir).expect("load storage");
    // A's valid compute certificate, but trusting only B's CA.
    let client_identity = NodeIdentity::from_files(
        &b.compute_dir.join(CA_FILE),
        &a.compute_dir.join(CERT_FILE),
        &a.compute_dir.join(KEY_FILE),
    )
    .expect("load client");
    let client_config = client_identity.client_config(transport()).expect("config");

    let (result, seen) = attempt(&storage, client_config, "localhost").await;
    let err = match result {
        Err(ClientFailure::Connect(e)) => e,
        other => panic!("expected the client to refuse during connect, got {other:?}"),
    };
    assert!(
        matches!(err, ConnectionError::TransportError(_)),
        "the refusal must be the client's own, got {err:?}"
    );
    assert_eq!(crypto_alert(&err), Some(ALERT_UNKNOWN_CA), "{err:?}");
    assert!(seen.handshake.is_err());
    assert!(!seen.accepted_stream);
}

#[tokio::test]
async fn client_refuses_a_server_name_not_in_the_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = cluster(&dir, "a");
    let storage = NodeIdentity::load(&a.storage_dir).expect("load storage");
    let compute = NodeIdentity::load(&a.compute_dir).expect("load compute");
    let client_config = compute.client_config(transport()).expect("config");

    let (result, seen) = attempt(&storage, client_config, "elsewhere").await;
    let err = match result {
        Err(ClientFailure::Connect(e)) => e,
        other => panic!("expected a name mismatch, got {other:?}"),
    };
    assert_eq!(crypto_alert(&err), Some(ALERT_BAD_CERTIFICATE), "{err:?}");
    assert!(!seen.accepted_stream);
}

#[tokio::test]
async fn compute_certificate_cannot_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = cluster(&dir, "a");
    let compute = NodeIdentity::load(&a.compute_dir).expect("load compute");
    let client_config = compute.client_config(transport()).expect("config");

    // A compute certificate (client-auth only) used as a server.
    let (result, seen) = attempt(&compute, client_config, "localhost").await;
    let err = match result {
        Err(ClientFailure::Connect(e)) => e,
        other => panic!("expected the client to refuse a compute cert, got {other:?}"),
    };
    assert_eq!(
        crypto_alert(&err),
        Some(ALERT_UNSUPPORTED_CERTIFICATE),
        "{err:?}"
    );
    assert!(!seen.accepted_stream);
}

#[tokio::test]
async fn storage_certificate_cannot_connect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = cluster(&dir, "a");
    let storage = NodeIdentity::load(&a.storage_dir).expect("load storage");
    let client_config = storage.client_config(transport()).expect("config");

    // A storage certificate (server-auth only) used as a client.
    let (result, seen) = attempt(&storage, client_config, "localhost").await;
    let failure = result.expect_err("the server must refuse a storage cert");
    let err = failure.error();
    assert_eq!(
        crypto_alert(err),
        Some(ALERT_UNSUPPORTED_CERTIFICATE),
        "{err:?}"
    );
    assert!(seen.handshake.is_err());
    assert!(!seen.accepted_stream);
}
