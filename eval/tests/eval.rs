//! The evaluator end to end, at a small size: `eval run` on its own storage
//! node and against a Redis-protocol server, and `eval crash`.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;

use splitkv_common::certs::DEFAULT_STORAGE_NAMES;

const EVAL: &str = env!("CARGO_BIN_EXE_eval");

/// Runs EVAL with `args` and `--json <a file in dir>`, asserts that it
/// succeeded, and returns the JSON report it wrote.
fn eval_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let path = dir.join("report.json");
    let status = Command::new(EVAL)
        .args(args)
        .arg("--json")
        .arg(&path)
        .status()
        .expect("run eval");
    assert!(status.success(), "eval {args:?} failed: {status}");
    let text = std::fs::read_to_string(&path).expect("report written");
    serde_json::from_str(&text).expect("report is JSON")
}

/// A child process killed (and reaped) when dropped, so that a failing
/// assertion does not leave it running.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn check_run_report(report: &serde_json::Value, keys: u64) {
    let phases = report["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        ["write", "sequential_read", "restart", "hot_random_read"]
    );
    for phase in phases {
        assert_eq!(phase["errors"], 0, "{phase}");
        for field in [
            "seconds",
            "ops",
            "ops_per_sec",
            "mib_per_sec",
            "p50_us",
            "p99_us",
            "p999_us",
            "verified",
        ] {
            assert!(phase[field].is_number(), "{field} in {phase}");
        }
    }
    for read in [&phases[1], &phases[3]] {
        assert_eq!(read["verified"], keys, "every value read back and verified");
        let ratio = read["hit_ratio"].as_f64().expect("the engine reports hits");
        assert!(ratio > 0.9, "hit ratio {ratio} in {read}");
    }
    assert_eq!(phases[0]["verified"], keys);
    assert!(report["total_seconds"].as_f64().expect("total") > 0.0);
}

#[test]
fn a_small_run_on_its_own_storage_node_verifies_everything() {
    // Half the keys carry a time to live, which outlasts the run: they are
    // verified like the rest, through the restart's rebuild too.
    let dir = tempfile::tempdir().expect("tempdir");
    let report = eval_json(
        dir.path(),
        &[
            "run",
            "--threads",
            "4",
            "--per-thread",
            "600",
            "--partitions",
            "4",
            "--ttl-percent",
            "50",
        ],
    );
    check_run_report(&report, 2400);
}

#[test]
fn a_run_with_kept_data_can_be_repeated_on_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    for _ in 0..2 {
        let status = Command::new(EVAL)
            .args([
                "--threads",
                "2",
                "--per-thread",
                "200",
                "--partitions",
                "2",
                "--keep-data",
            ])
            .arg(&data)
            .status()
            .expect("run eval");
        assert!(status.success());
    }
    assert!(
        data.join("MANIFEST").is_file(),
        "the data directory was kept"
    );
}

#[test]
fn an_unreachable_storage_node_is_a_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    splitkv_common::certs::generate_cluster(dir.path(), &["localhost"], false).expect("certs");
    let output = Command::new(EVAL)
        .args(["run", "--storage", "localhost:9"])
        .arg("--certs")
        .arg(dir.path().join("compute"))
        .output()
        .expect("run eval");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("connect"), "{stderr}");
}

/// A storage node (this binary's own subcommand) with fresh certificates
/// under `dir`: the node, its address, and the certificate directory.
fn start_storage_node(dir: &Path) -> (KillOnDrop, std::net::SocketAddr, std::path::PathBuf) {
    let certs = dir.join("certs");
    splitkv_common::certs::generate_cluster(&certs, &DEFAULT_STORAGE_NAMES, false).expect("certs");
    let mut node = Command::new(EVAL)
        .args([
            "storage-node",
            "--partitions",
            "4",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--certs")
        .arg(certs.join("storage"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map(KillOnDrop)
        .expect("storage node");
    let stdout = node.0.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .expect("ready line");
    let addr: std::net::SocketAddr = line
        .split_whitespace()
        .nth(1)
        .expect("address")
        .parse()
        .expect("address");
    (node, addr, certs)
}

/// An engine in this process, the writer or a reader, in front of the
/// storage node at `storage`, serving the Redis protocol on a loopback port
/// (returned with the engine).
fn serve_resp(
    storage: std::net::SocketAddr,
    certs: &Path,
    writer: bool,
) -> (Arc<compute_node::Engine>, std::net::SocketAddr) {
    let identity =
        splitkv_common::tls::NodeIdentity::load(&certs.join("compute")).expect("identity");
    let mut config = compute_node::EngineConfig::new(
        format!("localhost:{}", storage.port()),
        Arc::new(identity),
    );
    config.writer = writer;
    let engine = Arc::new(compute_node::Engine::connect(config).expect("engine"));
    let listener = engine
        .handle()
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("listen");
    let resp_addr = listener.local_addr().expect("address");
    let resp_config = compute_node::resp::RespConfig {
        requirepass: None,
        storage: storage.to_string(),
    };
    engine.handle().spawn(compute_node::resp::serve(
        Arc::clone(&engine),
        listener,
        resp_config,
        std::future::pending(),
    ));
    (engine, resp_addr)
}

#[test]
fn the_same_workload_runs_over_the_redis_protocol() {
    // Half the keys are set with PX, and read back before it passes.
    // A storage node, and a RESP server in front of an engine in this
    // process.
    let dir = tempfile::tempdir().expect("tempdir");
    let (node, storage, certs) = start_storage_node(dir.path());
    let (_engine, resp_addr) = serve_resp(storage, &certs, true);

    let report = eval_json(
        dir.path(),
        &[
            "run",
            "--threads",
            "4",
            "--per-thread",
            "300",
            "--resp",
            &resp_addr.to_string(),
            "--ttl-percent",
            "50",
        ],
    );
    check_run_report(&report, 1200);
    assert_eq!(report["catch_ups"], serde_json::json!([]), "no readers");
    drop(node);
}

#[test]
fn the_reads_go_through_readers_once_they_have_caught_up() {
    // A writer and two readers, each an engine in this process behind a
    // RESP server; eval writes through the writer and reads through both.
    let dir = tempfile::tempdir().expect("tempdir");
    let (node, storage, certs) = start_storage_node(dir.path());
    let (writer, writer_addr) = serve_resp(storage, &certs, true);
    let readers: Vec<_> = (0..2).map(|_| serve_resp(storage, &certs, false)).collect();
    let reader_list = readers
        .iter()
        .map(|(_, addr)| addr.to_string())
        .collect::<Vec<_>>()
        .join(",");

    let report = eval_json(
        dir.path(),
        &[
            "run",
            "--threads",
            "4",
            "--per-thread",
            "300",
            "--resp",
            &writer_addr.to_string(),
            "--readers",
            &reader_list,
        ],
    );
    let phases = report["phases"].as_array().expect("phases");
    for phase in phases {
        assert_eq!(phase["errors"], 0, "{phase}");
        assert_eq!(phase["verified"], 1200, "{phase}");
    }
    // Every read went to a reader: the writer's engine answered none.
    assert_eq!(writer.stats().gets, 0, "reads answered by the writer");
    let served: u64 = readers
        .iter()
        .map(|(engine, _)| {
            let gets = engine.stats().gets;
            assert!(gets > 0, "a reader answered no read");
            gets
        })
        .sum();
    assert!(served >= 2 * 1200, "{served} reads answered by the readers");

    let catch_ups = report["catch_ups"].as_array().expect("catch_ups");
    let before: Vec<&str> = catch_ups
        .iter()
        .map(|c| c["before"].as_str().expect("before"))
        .collect();
    assert_eq!(before, ["sequential_read", "hot_random_read"]);
    for catch_up in catch_ups {
        let target = catch_up["writer_applied_seq"].as_u64().expect("seq");
        assert!(target >= 1200, "{catch_up}");
        assert!(catch_up["seconds"].is_number());
        let waited = catch_up["readers"].as_array().expect("readers");
        assert_eq!(waited.len(), 2, "{catch_up}");
        for (reader, (_, addr)) in waited.iter().zip(&readers) {
            assert_eq!(reader["address"], addr.to_string());
            assert!(reader["polls"].as_u64().expect("polls") >= 1);
            assert!(reader["first"]["applied_seq"].is_u64(), "{reader}");
            assert!(reader["last"]["applied_seq"].as_u64().expect("seq") >= target);
            assert_eq!(reader["last"]["lag_entries"], 0, "{reader}");
            assert!(reader["last"]["lag_ms"].is_u64(), "{reader}");
        }
    }
    drop(node);
}

#[test]
fn readers_without_a_writer_are_refused() {
    let output = Command::new(EVAL)
        .args(["run", "--readers", "127.0.0.1:9"])
        .output()
        .expect("run eval");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--resp"), "{stderr}");
}

#[test]
fn the_crash_test_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = eval_json(
        dir.path(),
        &[
            "crash",
            "--rounds",
            "3",
            "--threads",
            "3",
            "--keys-per-thread",
            "60",
            "--partitions",
            "4",
            "--max-kill-ms",
            "900",
        ],
    );
    let rounds = report["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 3, "{report}");
    assert_eq!(report["passed"], true, "{report}");
    assert!(
        rounds.iter().any(|r| r["killed"] == "compute"),
        "a compute node was killed"
    );
    assert!(
        rounds.iter().any(|r| r["killed"] == "storage"),
        "the storage node was killed"
    );
    for round in rounds {
        assert!(
            round["acknowledged"].as_u64().expect("acknowledged") > 0,
            "{round}"
        );
        for field in ["lost", "wrong", "resurrected", "torn_batches"] {
            assert_eq!(round[field], 0, "{field} in {round}");
        }
        assert_eq!(
            round["verified"].as_u64().expect("verified"),
            3 * 60,
            "every key verified in {round}"
        );
    }
    let batches_at_kills: u64 = rounds
        .iter()
        .map(|r| r["in_flight_multi_batches"].as_u64().expect("batches"))
        .sum();
    assert!(
        batches_at_kills > 0,
        "no kill landed while a batch of several was under way: {report}"
    );
}
