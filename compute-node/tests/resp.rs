//! The Redis-protocol server with a real Redis client (the `redis` crate)
//! and raw TCP, in front of a real engine and storage node.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use compute_node::Engine;
use support::{StorageNode, serve_resp, value_for};

struct Server {
    addr: SocketAddr,
    engine: Arc<Engine>,
    _stop: tokio::sync::oneshot::Sender<()>,
    _storage: StorageNode,
}

fn start(requirepass: Option<&str>) -> Server {
    let storage = StorageNode::start(4);
    let engine = Arc::new(storage.connect());
    let (addr, stop) = serve_resp(&engine, &storage, requirepass);
    Server {
        addr,
        engine,
        _stop: stop,
        _storage: storage,
    }
}

fn client(server: &Server) -> redis::Connection {
    redis::Client::open(format!("redis://{}/", server.addr))
        .expect("client")
        .get_connection()
        .expect("connect")
}

fn raw(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream
}

fn read_all(mut stream: TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    out
}

#[test]
fn the_commands_work_with_a_real_client() {
    let server = start(None);
    let mut con = client(&server);
    let pong: String = redis::cmd("PING").query(&mut con).expect("ping");
    assert_eq!(pong, "PONG");
    let echoed: Vec<u8> = redis::cmd("ECHO")
        .arg(b"hi\r\nthere")
        .query(&mut con)
        .expect("echo");
    assert_eq!(echoed, b"hi\r\nthere");
    let () = redis::cmd("SET")
        .arg("k1")
        .arg("v1")
        .query(&mut con)
        .expect("set");
    let binary = value_for(b"bin", 0, 70_000);
    let () = redis::cmd("SET")
        .arg(&b"k\x002"[..])
        .arg(&binary)
        .query(&mut con)
        .expect("set binary");
    let v1: Option<String> = redis::cmd("GET").arg("k1").query(&mut con).expect("get");
    assert_eq!(v1.as_deref(), Some("v1"));
    let got: Vec<u8> = redis::cmd("GET")
        .arg(&b"k\x002"[..])
        .query(&mut con)
        .expect("get binary");
    assert_eq!(got, binary);
    let missing: Option<String> = redis::cmd("GET")
        .arg("nope")
        .query(&mut con)
        .expect("get missing");
    assert_eq!(missing, None);
    let () = redis::cmd("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut con)
        .expect("mset");
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .arg("c")
        .query(&mut con)
        .expect("mget");
    assert_eq!(values, vec![Some("1".into()), Some("2".into()), None]);
    let exists: i64 = redis::cmd("EXISTS")
        .arg("a")
        .arg("b")
        .arg("c")
        .arg("a")
        .query(&mut con)
        .expect("exists");
    assert_eq!(exists, 3);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).expect("dbsize");
    assert_eq!(size, 4);
    let removed: i64 = redis::cmd("DEL")
        .arg("a")
        .arg("c")
        .arg("k1")
        .query(&mut con)
        .expect("del");
    assert_eq!(removed, 2);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).expect("dbsize");
    assert_eq!(size, 2);
    let info: String = redis::cmd("INFO").query(&mut con).expect("info");
    assert!(info.contains("index_bytes_per_key:"), "{info}");
    assert!(info.contains("hit_ratio:"), "{info}");
    assert!(info.contains("storage_connections_up:4"), "{info}");
    assert!(info.contains("fenced:0"), "{info}");
    let count: i64 = redis::cmd("COMMAND")
        .arg("COUNT")
        .query(&mut con)
        .expect("command count");
    assert!(count >= 13);
    let table: redis::Value = redis::cmd("COMMAND").query(&mut con).expect("command");
    assert!(matches!(table, redis::Value::Array(ref entries) if entries.len() as i64 == count));
}

#[test]
fn errors_keep_the_connection() {
    let server = start(None);
    let mut con = client(&server);
    let err = redis::cmd("NOSUCHCOMMAND")
        .query::<()>(&mut con)
        .expect_err("unknown command");
    assert!(err.to_string().contains("unknown command"), "{err}");
    let err = redis::cmd("GET")
        .query::<()>(&mut con)
        .expect_err("wrong arity");
    assert!(
        err.to_string().contains("wrong number of arguments"),
        "{err}"
    );
    let err = redis::cmd("MSET")
        .arg("a")
        .query::<()>(&mut con)
        .expect_err("odd MSET");
    assert!(
        err.to_string().contains("wrong number of arguments"),
        "{err}"
    );
    let err = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("EX")
        .arg("10")
        .arg("KEEPTTL")
        .query::<()>(&mut con)
        .expect_err("options");
    assert!(err.to_string().contains("syntax error"), "{err}");
    let err = redis::cmd("SET")
        .arg(vec![b'k'; 2000])
        .arg("v")
        .query::<()>(&mut con)
        .expect_err("key too long");
    assert!(err.to_string().contains("limit"), "{err}");
    let pong: String = redis::cmd("PING")
        .query(&mut con)
        .expect("the connection survives");
    assert_eq!(pong, "PONG");
}

#[test]
fn pipelined_commands_take_effect_and_answer_in_order() {
    let server = start(None);
    let mut con = client(&server);
    let mut pipe = redis::pipe();
    for i in 0..200 {
        pipe.cmd("SET").arg(format!("key{i}")).arg(format!("v{i}"));
        if i % 10 == 9 {
            pipe.cmd("GET").arg(format!("key{i}"));
        }
    }
    pipe.cmd("SET").arg("key5").arg("overwritten");
    pipe.cmd("GET").arg("key5");
    pipe.cmd("DEL").arg("key6");
    pipe.cmd("GET").arg("key6");
    let replies: Vec<redis::Value> = pipe.query(&mut con).expect("pipeline");
    assert_eq!(replies.len(), 200 + 20 + 4);
    let mut at = 0;
    for i in 0..200 {
        assert_eq!(replies[at], redis::Value::Okay, "SET {i}");
        at += 1;
        if i % 10 == 9 {
            assert_eq!(
                replies[at],
                redis::Value::BulkString(format!("v{i}").into_bytes()),
                "GET after SET {i}"
            );
            at += 1;
        }
    }
    assert_eq!(
        replies[at + 1],
        redis::Value::BulkString(b"overwritten".to_vec())
    );
    assert_eq!(replies[at + 2], redis::Value::Int(1));
    assert_eq!(replies[at + 3], redis::Value::Nil);
}

#[test]
fn auth_is_required_when_a_password_is_set() {
    let server = start(Some("s3cret"));
    let mut con = client(&server);
    let err = redis::cmd("GET")
        .arg("k")
        .query::<()>(&mut con)
        .expect_err("no auth");
    assert!(err.to_string().contains("NOAUTH"), "{err}");
    let err = redis::cmd("AUTH")
        .arg("wrong")
        .query::<()>(&mut con)
        .expect_err("wrong password");
    assert!(err.to_string().contains("WRONGPASS"), "{err}");
    let () = redis::cmd("AUTH")
        .arg("s3cret")
        .query(&mut con)
        .expect("auth");
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut con)
        .expect("set after auth");
    let authed = redis::Client::open(format!("redis://:s3cret@{}/", server.addr))
        .expect("client")
        .get_connection()
        .expect("connect with password");
    drop(authed);
}

#[test]
fn malformed_input_gets_an_error_and_a_closed_connection() {
    let server = start(None);
    let mut stream = raw(&server);
    stream.write_all(b"*1\r\n+PING\r\n").expect("write");
    let reply = read_all(stream);
    assert!(
        reply.starts_with(b"-ERR Protocol error"),
        "{}",
        String::from_utf8_lossy(&reply)
    );

    // An announced bulk length over the limit is refused from its header.
    let mut stream = raw(&server);
    stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999999999\r\n")
        .expect("write");
    let reply = read_all(stream);
    assert!(
        reply.starts_with(b"-ERR Protocol error: invalid bulk length"),
        "{}",
        String::from_utf8_lossy(&reply)
    );

    // Inline commands work, and QUIT closes.
    let mut stream = raw(&server);
    stream
        .write_all(b"PING\r\nQUIT\r\nPING\r\n")
        .expect("write");
    assert_eq!(read_all(stream), b"+PONG\r\n+OK\r\n");

    // A client that vanishes mid-command costs nothing.
    let mut stream = raw(&server);
    stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc")
        .expect("write");
    drop(stream);
    let mut con = client(&server);
    let value: Option<String> = redis::cmd("GET")
        .arg("k")
        .query(&mut con)
        .expect("server still serves");
    assert_eq!(value, None, "the half-sent SET did nothing");
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[test]
fn a_client_that_does_not_read_is_slowed_not_buffered() {
    let server = start(None);
    // Requests of about 1 KiB for replies of about 4 KiB: a server that kept
    // reading and buffered its answers would hold four bytes for every byte
    // the client sends.
    let key = format!("big-{}", "k".repeat(996));
    let value = value_for(key.as_bytes(), 0, 4096);
    server.engine.put(key.as_bytes(), &value).expect("put");
    let request = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).into_bytes();
    let mut reply = format!("${}\r\n", value.len()).into_bytes();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\n");

    let before = resident_bytes();
    let mut stream = raw(&server);
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    // Try to send 128 MiB of requests (512 MiB of replies) without reading
    // any reply. The stream is the request repeated: `chunk` holds whole
    // requests, so writing on from `sent % chunk.len()` keeps it so. Once
    // the server stops reading, the socket buffers fill (a few MiB, at most
    // the kernel's limits: far less than this) and a write blocks until
    // its timeout.
    let chunk = request.repeat(64);
    let tried: usize = 128 << 20;
    let mut sent = 0;
    while sent < tried {
        match stream.write(&chunk[sent % chunk.len()..]) {
            Ok(0) => panic!("the server closed the connection after {sent} bytes"),
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("writing requests failed after {sent} bytes: {e}"),
        }
    }
    assert!(
        sent < tried / 2,
        "the server read {} MiB of requests from a client that reads no reply",
        sent >> 20
    );
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 200 << 20,
        "the server buffered {} MiB for a client that does not read",
        grown >> 20
    );
    // Another client is served meanwhile.
    let mut con = client(&server);
    let pong: String = redis::cmd("PING").query(&mut con).expect("ping");
    assert_eq!(pong, "PONG");
    // The stalled client was slowed, not dropped: once it reads, every
    // complete request it sent is answered, in order, with the value.
    let complete = sent / request.len();
    assert!(complete > 0, "not one whole request was sent");
    let mut replies = std::io::BufReader::with_capacity(1 << 20, stream);
    let mut got = vec![0u8; reply.len()];
    for i in 0..complete {
        replies
            .read_exact(&mut got)
            .unwrap_or_else(|e| panic!("reply {i} of {complete}: {e}"));
        assert!(got == reply, "reply {i} of {complete} is not the value");
    }
}

#[test]
fn before_auth_a_client_cannot_make_the_server_hold_a_large_command() {
    let server = start(Some("s3cret"));
    let value = vec![b'v'; 100 << 10];

    // The header of a 100 KiB argument is refused before AUTH.
    let mut stream = raw(&server);
    let header = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", value.len());
    stream.write_all(header.as_bytes()).expect("write");
    let reply = read_all(stream);
    assert!(
        reply.starts_with(b"-ERR Protocol error"),
        "{}",
        String::from_utf8_lossy(&reply)
    );

    // After AUTH the same command is fine.
    let mut con = redis::Client::open(format!("redis://:s3cret@{}/", server.addr))
        .expect("client")
        .get_connection()
        .expect("connect with password");
    let () = redis::cmd("SET")
        .arg("k")
        .arg(&value)
        .query(&mut con)
        .expect("set after auth");
    let read: Vec<u8> = redis::cmd("GET").arg("k").query(&mut con).expect("get");
    assert_eq!(read, value);
}

#[test]
fn an_mget_of_many_keys_answers_every_key_in_order() {
    let server = start(None);
    let mut con = client(&server);
    let keys: Vec<String> = (0..300).map(|i| format!("many:{i}")).collect();
    for key in keys.iter().step_by(3) {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(value_for(key.as_bytes(), 1, 100))
            .query(&mut con)
            .expect("set");
    }
    let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query(&mut con).expect("mget");
    assert_eq!(values.len(), keys.len());
    for (i, (key, value)) in keys.iter().zip(&values).enumerate() {
        let expected = (i % 3 == 0).then(|| value_for(key.as_bytes(), 1, 100));
        assert_eq!(value, &expected, "{key}");
    }
}

#[test]
fn the_redis_crate_works_in_resp3() {
    let server = start(None);
    let mut con = redis::Client::open(format!("redis://{}/?protocol=resp3", server.addr))
        .expect("client")
        .get_connection()
        .expect("connect in RESP3");
    let () = redis::cmd("SET")
        .arg("k3")
        .arg("v3")
        .query(&mut con)
        .expect("set");
    let value: redis::Value = redis::cmd("GET").arg("k3").query(&mut con).expect("get");
    assert_eq!(value, redis::Value::BulkString(b"v3".to_vec()));
    let missing: redis::Value = redis::cmd("GET")
        .arg("nope")
        .query(&mut con)
        .expect("get missing");
    assert_eq!(missing, redis::Value::Nil, "RESP3's null");
    let hello: redis::Value = redis::cmd("HELLO").query(&mut con).expect("hello");
    assert!(
        matches!(&hello, redis::Value::Map(pairs) if pairs.iter().any(|(k, v)| *k == redis::Value::BulkString(b"proto".to_vec()) && *v == redis::Value::Int(3))),
        "{hello:?}"
    );
    let config: redis::Value = redis::cmd("CONFIG")
        .arg("GET")
        .arg("databases")
        .query(&mut con)
        .expect("config get");
    assert!(matches!(config, redis::Value::Map(_)), "{config:?}");
}

/// Sends `request` and reads until `expected` bytes of replies arrived.
fn exchange(stream: &mut TcpStream, request: &[u8], expected: usize) -> String {
    stream.write_all(request).expect("write");
    let mut got = vec![0u8; expected];
    stream.read_exact(&mut got).expect("replies");
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn client_setinfo_and_no_touch_answer_as_redis_7_2() {
    // Redis 7.2 commands: the differential tests' redis-server may be
    // older, so the replies are checked here as Redis 7.2's source writes
    // them.
    let server = start(None);
    let mut stream = raw(&server);
    let replies = [
        ("CLIENT SETINFO LIB-NAME my-lib\r\n", "+OK\r\n"),
        ("CLIENT SETINFO lib-ver 1.2.3\r\n", "+OK\r\n"),
        (
            "CLIENT SETINFO BOGUS x\r\n",
            "-ERR Unrecognized option 'BOGUS'\r\n",
        ),
        (
            "CLIENT SETINFO LIB-NAME\r\n",
            "-ERR wrong number of arguments for 'client|setinfo' command\r\n",
        ),
        ("CLIENT NO-TOUCH on\r\n", "+OK\r\n"),
        ("CLIENT NO-TOUCH off\r\n", "+OK\r\n"),
        ("CLIENT NO-TOUCH maybe\r\n", "-ERR syntax error\r\n"),
    ];
    for (request, reply) in replies {
        assert_eq!(
            exchange(&mut stream, request.as_bytes(), reply.len()),
            reply,
            "{request}"
        );
    }
    let mut con = client(&server);
    let info: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut con)
        .expect("list");
    assert!(info.contains("lib-name=my-lib lib-ver=1.2.3"), "{info}");
    let err = redis::cmd("CLIENT")
        .arg("SETINFO")
        .arg("LIB-NAME")
        .arg("has space")
        .query::<()>(&mut con)
        .expect_err("a name with a space");
    assert!(
        err.to_string()
            .contains("lib-name cannot contain spaces, newlines or special characters"),
        "{err}"
    );
}

#[test]
fn no_other_client_sees_half_of_a_transaction() {
    let server = start(None);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut con = client(&server);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let (x, y): (Option<String>, Option<String>) = redis::cmd("MGET")
                        .arg("iso:x")
                        .arg("iso:y")
                        .query(&mut con)
                        .expect("mget");
                    assert_eq!(x, y, "a reader saw half of a transaction");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut con = client(&server);
    for i in 0..300 {
        // The GET between the SETs makes EXEC carry the commands out one by
        // one (not as one batch of SETs).
        let replies: (String, Option<String>, String) = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("iso:x")
            .arg(i)
            .cmd("GET")
            .arg("iso:x")
            .cmd("SET")
            .arg("iso:y")
            .arg(i)
            .query(&mut con)
            .expect("exec");
        assert_eq!(replies.1, Some(i.to_string()));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for reader in readers {
        let reads = reader.join().expect("reader");
        assert!(reads > 0, "the reader never read");
    }
}
