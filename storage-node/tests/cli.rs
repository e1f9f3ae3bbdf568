//! The `storage-node` binary: certificates, serving, and a clean stop on
//! SIGTERM that keeps everything acknowledged.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use splitkv_common::client::{BatchOp, ClientConfig, StorageClient};
use splitkv_common::message::RecordAt;
use splitkv_common::record;
use splitkv_common::tls::NodeIdentity;

const BIN: &str = env!("CARGO_BIN_EXE_storage-node");

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `storage-node serve` and waits until it says it is serving.
fn serve(data: &Path, certs: &Path, port: u16) -> Child {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--partitions",
            "4",
        ])
        .arg("--data-dir")
        .arg(data)
        .arg("--certs")
        .arg(certs.join("storage"))
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start storage-node");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        let line = line.expect("log line");
        if line.contains("storage node serving") {
            break;
        }
    }
    // Keep draining the log so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    child
}

fn sigterm(child: &Child) {
    // SAFETY: plain kill(2) on our child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["serve", "--help"],
        vec!["gen-certs", "--help"],
        vec!["bench-transport", "--help"],
    ] {
        let out = Command::new(BIN).args(&args).output().expect("run");
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}

#[test]
fn gen_certs_writes_node_directories_without_the_ca_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args([
            "gen-certs",
            "--host",
            "storage.example",
            "--host",
            "10.1.2.3",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for node in ["storage", "compute"] {
        for file in ["ca.pem", "cert.pem", "key.pem"] {
            assert!(dir.path().join(node).join(file).is_file(), "{node}/{file}");
        }
        assert!(!dir.path().join(node).join("ca-key.pem").exists());
    }
    assert!(dir.path().join("ca").join("ca-key.pem").is_file());
    let again = Command::new(BIN)
        .args(["gen-certs", "--out"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(
        !again.status.success(),
        "existing certificates are not overwritten"
    );
}

#[test]
fn sigterm_stops_cleanly_and_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let data = dir.path().join("data");
    let status = Command::new(BIN)
        .args(["gen-certs", "--out"])
        .arg(&certs)
        .status()
        .expect("gen-certs");
    assert!(status.success());
    let port = free_port();
    let mut node = serve(&data, &certs, port);

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let identity = Arc::new(NodeIdentity::load(&certs.join("compute")).expect("identity"));
    let config = ClientConfig::new(format!("localhost:{port}"), identity);
    let client = runtime
        .block_on(StorageClient::connect(config.clone()))
        .expect("connect");
    let mut acks = Vec::new();
    for i in 0..200u32 {
        let key = format!("key-{i}");
        let value = [i as u8; 1000];
        let acks_of_one = client
            .write_many((i % 4) as usize, &[BatchOp::put(key.as_bytes(), &value)])
            .expect("send")
            .wait_blocking()
            .expect("put");
        let [ack] = acks_of_one[..] else {
            panic!("one acknowledgement for a batch of one: {acks_of_one:?}");
        };
        acks.push((i, key, ack));
    }
    drop(client);

    sigterm(&node);
    let status = node.wait().expect("wait");
    assert!(
        status.success(),
        "storage-node exits cleanly on SIGTERM: {status}"
    );

    let mut node = serve(&data, &certs, port);
    let client = runtime
        .block_on(StorageClient::connect(config))
        .expect("reconnect");
    for (i, key, ack) in &acks {
        let read = RecordAt {
            partition: *i % 4,
            offset: ack.offset,
            len: record::value_record_len(key.len(), 1000) as u32,
        };
        let mut records = client
            .get_many((*i % 4) as usize, &[read])
            .expect("send")
            .wait_blocking()
            .expect("read after restart");
        assert_eq!(records.len(), 1, "one outcome for the one read");
        let bytes = records.pop().expect("one").expect("read after restart");
        let rec = record::decode_value_record(&bytes).expect("record");
        assert_eq!(rec.key, key.as_bytes());
        assert_eq!(rec.value, &[*i as u8; 1000][..]);
    }
    drop(client);
    sigterm(&node);
    assert!(node.wait().expect("wait").success());
}
