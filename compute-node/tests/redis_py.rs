//! redis-py (the latest, whose default connection sends `HELLO 3`) works
//! against the compute node unchanged: with its default settings and with
//! `protocol=2`.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses its server only"
)]
mod diff;
#[allow(
    dead_code,
    reason = "shared test support; this test uses the storage node only"
)]
mod support;

use std::process::Command;

#[test]
fn redis_py_works_with_default_settings_and_with_protocol_2() {
    let node = diff::ComputeNode::start(None);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/redis_py_client.py"
    );
    let check = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed for this test (apt-get install python3): {e}")
        });
    assert!(
        check.status.success(),
        "redis-py is not installed: pip install redis ({})",
        String::from_utf8_lossy(&check.stderr)
    );
    let run = Command::new("python3")
        .arg(script)
        .arg(node.addr.port().to_string())
        .output()
        .expect("run python3");
    assert!(
        run.status.success(),
        "redis-py failed against the compute node:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains("redis-py: ok"));
}
