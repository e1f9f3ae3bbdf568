//! Expiry through the engine and a real storage node: an expire entry
//! removes only the version it names, whatever order a rebuild meets the
//! entries in; the writer's active expiry logs a removal for every expired
//! key and counts it; a reader follows those removals; and expiry times
//! survive a rebuild.

mod support;

use std::sync::Arc;
use std::time::Duration;

use compute_node::{BatchOp, Engine, expiry};
use support::{StorageNode, serve_resp, value_for};

/// Longest wait for the active expiry or a reader (far above what either
/// takes: the cycle runs ten times a second).
const WITHIN: Duration = Duration::from_secs(10);

#[test]
fn an_expire_entry_removes_only_the_version_it_names() {
    let node = StorageNode::start(4);
    let engine = node.connect();
    engine.put_on(0, b"k", b"first").expect("put");
    let first_seq = engine.applied_seq();
    engine.put_on(1, b"k", b"second").expect("put");
    let second_seq = engine.applied_seq();
    assert!(second_seq > first_seq);

    // An expiry decided on the first version, logged after the second
    // was written, leaves the second in place.
    let stale = [BatchOp::Expire {
        key: b"k",
        version_seq: first_seq,
    }];
    engine
        .block_on_write(2, &stale)
        .expect("stale expire entry");
    assert_eq!(
        engine.get(b"k").expect("get").as_deref(),
        Some(&b"second"[..])
    );
    drop(engine);
    // The rebuild meets the three entries in three partitions, in
    // whatever order they arrive, and comes to the same answer.
    let engine = node.connect();
    assert_eq!(
        engine.get(b"k").expect("get").as_deref(),
        Some(&b"second"[..])
    );

    let current = [BatchOp::Expire {
        key: b"k",
        version_seq: second_seq,
    }];
    engine.block_on_write(3, &current).expect("expire entry");
    assert_eq!(engine.get(b"k").expect("get"), None);
    drop(engine);
    let engine = node.connect();
    assert_eq!(engine.get(b"k").expect("get"), None, "after a rebuild too");
    assert!(!engine.contains(b"k"));
    // A later write is not touched by either.
    engine.put_on(0, b"k", b"third").expect("put");
    drop(engine);
    let engine = node.connect();
    assert_eq!(
        engine.get(b"k").expect("get").as_deref(),
        Some(&b"third"[..])
    );
}

#[test]
fn active_expiry_logs_and_counts_every_expired_key_and_a_reader_follows() {
    let node = StorageNode::start(4);
    let writer = node.connect();
    let reader = node.connect_reader_view();
    let keys = 600u64;
    let soon = expiry::now_ms() + 300;
    for i in 0..keys {
        let key = format!("key-{i}");
        let value = value_for(key.as_bytes(), 1, 100);
        // Every other key expires soon; the others never do.
        let expire_at_ms = if i % 2 == 0 { soon } else { 0 };
        writer
            .put_expiring_on((i % 4) as usize, key.as_bytes(), &value, expire_at_ms)
            .expect("put");
    }
    // However long the puts took (the soon keys may have expired, and
    // been removed, by now), the counts below hold once the active expiry
    // has done its work: nothing else deletes on this fresh node.
    assert!(reader.wait_until(WITHIN, |r| r.following()));

    assert!(
        writer.wait_until(WITHIN, |w| w.stats().expired_keys == keys / 2),
        "the active expiry removed {} of {} keys",
        writer.stats().expired_keys,
        keys / 2
    );
    let stats = writer.stats();
    assert_eq!(stats.expiring_keys, 0, "no expiring key is left");
    assert_eq!(writer.len(), keys / 2);
    assert_eq!(
        node.deletes_logged(),
        keys / 2,
        "one logged removal per expired key"
    );
    for i in 0..keys {
        let key = format!("key-{i}");
        let expected = (i % 2 == 1).then(|| value_for(key.as_bytes(), 1, 100));
        assert_eq!(
            writer.get(key.as_bytes()).expect("get").as_deref(),
            expected.as_deref(),
            "{key}"
        );
    }
    // The reader applies the writer's expire entries (it removes nothing
    // itself): its index drops the expired versions too.
    assert!(
        reader.wait_until(WITHIN, |r| r.has_applied(&writer.applied_seqs())
            && r.stats().expiring_keys == 0),
        "the reader still counts {} expiring keys",
        reader.stats().expiring_keys
    );
    assert_eq!(reader.len(), keys / 2);
    assert_eq!(reader.stats().expired_keys, 0, "a reader expires nothing");
}

#[test]
fn expiry_times_survive_a_rebuild_and_a_passed_one_is_gone() {
    let node = StorageNode::start(4);
    let far = 4_102_444_800_000; // 2100-01-01
    let soon = expiry::now_ms() + 200;
    {
        let engine = node.connect();
        engine.put_expiring_on(0, b"far", b"v", far).expect("put");
        engine.put_expiring_on(1, b"soon", b"v", soon).expect("put");
        engine.put_on(2, b"never", b"v").expect("put");
        // Dropped before the active expiry can remove `soon`.
    }
    std::thread::sleep(Duration::from_millis(
        soon.saturating_sub(expiry::now_ms()) + 50,
    ));
    let engine = node.connect();
    assert_eq!(engine.expire_at_ms(b"far"), Some(far));
    assert_eq!(engine.expire_at_ms(b"never"), Some(0));
    assert_eq!(engine.expire_at_ms(b"soon"), None);
    assert_eq!(engine.get(b"soon").expect("get"), None);
    assert_eq!(engine.len(), 2);
    let mut walked = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = engine.scan_keys(cursor, 10, |key| walked.push(key.to_vec()));
        if cursor == 0 {
            break;
        }
    }
    walked.sort();
    assert_eq!(walked, vec![b"far".to_vec(), b"never".to_vec()]);
}

/// The value of `field` in an INFO reply.
fn info_field(info: &str, field: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

#[test]
fn info_shows_expiring_keys_their_mean_ttl_and_expired_keys() {
    let node = StorageNode::start(4);
    let engine = Arc::new(node.connect());
    let (addr, _stop) = serve_resp(&engine, &node, None);
    let client = redis::Client::open(format!("redis://{addr}")).expect("client");
    let mut con = client.get_connection().expect("connect");
    for i in 0..10 {
        redis::cmd("SET")
            .arg(format!("timed-{i}"))
            .arg("v")
            .arg("EX")
            .arg(100)
            .query::<()>(&mut con)
            .expect("set ex");
    }
    for i in 0..5 {
        redis::cmd("SET")
            .arg(format!("plain-{i}"))
            .arg("v")
            .query::<()>(&mut con)
            .expect("set");
    }
    let keyspace: String = redis::cmd("INFO")
        .arg("keyspace")
        .query(&mut con)
        .expect("info");
    let db0 = info_field(&keyspace, "db0");
    let (head, avg_ttl) = db0.rsplit_once(",avg_ttl=").expect("avg_ttl");
    assert_eq!(head, "keys=15,expires=10", "{db0}");
    let avg_ttl: u64 = avg_ttl.parse().expect("a number");
    assert!(
        (90_000..=100_000).contains(&avg_ttl),
        "mean time left {avg_ttl} ms"
    );

    for i in 0..3 {
        redis::cmd("SET")
            .arg(format!("short-{i}"))
            .arg("v")
            .arg("PX")
            .arg(100)
            .query::<()>(&mut con)
            .expect("set px");
    }
    assert!(
        engine.wait_until(WITHIN, |e| e.stats().expired_keys == 3),
        "the short keys were not removed"
    );
    let stats: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut con)
        .expect("info");
    assert_eq!(info_field(&stats, "expired_keys"), "3");
    let keyspace: String = redis::cmd("INFO")
        .arg("keyspace")
        .query(&mut con)
        .expect("info");
    assert!(
        info_field(&keyspace, "db0").starts_with("keys=15,expires=10,avg_ttl=9"),
        "{keyspace}"
    );
}

/// The engine's batch write, blocking.
trait BlockOnWrite {
    fn block_on_write(&self, partition: usize, ops: &[BatchOp<'_>]) -> compute_node::Result<()>;
}

impl BlockOnWrite for Engine {
    fn block_on_write(&self, partition: usize, ops: &[BatchOp<'_>]) -> compute_node::Result<()> {
        self.handle()
            .block_on(self.write_many_async(partition, ops))
    }
}
