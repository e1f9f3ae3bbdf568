//! The writes of one EXEC are one unit in storage: after a `kill -9` of the
//! storage node in the middle of a transaction of SETs, a freshly rebuilt
//! index holds all of them or none.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses its connection only"
)]
mod diff;
mod support;

use std::sync::Arc;

use diff::{Connection, Reply, encode};
use support::{StorageNode, serve_resp, value_for};

/// SETs in each transaction.
const KEYS_PER_EXEC: usize = 300;
/// Transactions, each cut by a kill of the storage node.
const ROUNDS: usize = 4;

#[test]
fn an_exec_of_sets_survives_a_storage_kill_whole_or_not_at_all() {
    let mut storage = StorageNode::start(4);
    let engine = Arc::new(storage.connect());
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let mut acknowledged_whole = 0;
    for round in 0..ROUNDS {
        let keys: Vec<Vec<u8>> = (0..KEYS_PER_EXEC)
            .map(|i| format!("tx:{round}:{i}").into_bytes())
            .collect();
        let mut request = encode(cmd!("MULTI"));
        for key in &keys {
            request.extend(encode(cmd!("SET", key, value_for(key, 1, 1024))));
        }
        request.extend(encode(cmd!("EXEC")));
        let mut con = Connection::open(addr);
        con.send(&request);
        // Every SET is queued before EXEC runs: kill the storage node as
        // soon as the last QUEUED arrives, while EXEC's writes are on
        // their way.
        assert_eq!(con.reply().1, Reply::Simple(b"OK".to_vec()), "MULTI");
        for _ in &keys {
            assert_eq!(con.reply().1, Reply::Simple(b"QUEUED".to_vec()));
        }
        storage.kill();
        let exec = con.reply().1;
        storage.resume();
        let fresh = storage.connect_reader_view();
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let values = fresh.get_many(&key_refs).expect("read back");
        let present = values.iter().filter(|v| v.is_some()).count();
        assert!(
            present == 0 || present == KEYS_PER_EXEC,
            "round {round}: {present} of {KEYS_PER_EXEC} SETs of one EXEC survived the kill"
        );
        for (key, value) in keys.iter().zip(&values) {
            if let Some(value) = value {
                assert_eq!(value[..], value_for(key, 1, 1024)[..], "the value of a SET");
            }
        }
        // An EXEC answered with every OK was acknowledged by storage.
        if let Reply::Array(Some(replies)) = &exec
            && replies.iter().all(|r| *r == Reply::Simple(b"OK".to_vec()))
        {
            assert_eq!(
                present, KEYS_PER_EXEC,
                "round {round}: an acknowledged EXEC"
            );
            acknowledged_whole += 1;
        }
    }
    eprintln!("{acknowledged_whole} of {ROUNDS} transactions were acknowledged before the kill");
}
