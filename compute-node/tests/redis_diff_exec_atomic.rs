//! The writes of one EXEC are one unit in storage: after a `kill -9` of the
//! storage node while EXEC's writes are on their way (a transaction of
//! SETs, or of SETs, RENAMEs and DELs), a freshly rebuilt index holds all
//! of them or none.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses its connection only"
)]
mod diff;
mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use compute_node::Engine;
use diff::{Connection, Reply, encode};
use support::{StorageNode, serve_resp, value_for};

/// SETs in each transaction of SETs.
const KEYS_PER_EXEC: usize = 300;
/// Keys of each kind in a mixed transaction.
const MIXED_KEYS: usize = 100;
/// Transactions, each cut by a kill of the storage node.
const ROUNDS: usize = 6;
/// The kill follows EXEC by `round` times this, so that the rounds cut
/// EXEC's writes at different moments (before, during, after).
const KILL_STEP: Duration = Duration::from_micros(600);

/// SETs `key` to `value`, trying again while the compute node's connection
/// to a just restarted storage node is still the old one (a write on a lost
/// connection fails, and the link comes back in the background).
fn set_once_the_link_is_back(con: &mut Connection, key: &[u8], value: &[u8]) {
    for _ in 0..500 {
        con.send(&encode(cmd!("SET", key, value)));
        match con.reply().1 {
            Reply::Simple(ok) if ok == b"OK" => return,
            Reply::Error(text) if text.starts_with(b"ERR storage") => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => panic!("SET answered {other:?}"),
        }
    }
    panic!("the compute node did not write again within 5 s of the storage node's restart");
}

/// Queues `commands` in a transaction on a connection of its own, waits
/// until every one is QUEUED, then sends EXEC and kill -9s the storage node
/// `kill_after` later. Returns EXEC's reply.
fn exec_cut_by_a_kill(
    addr: SocketAddr,
    storage: &mut StorageNode,
    commands: &[u8],
    count: usize,
    kill_after: Duration,
) -> Reply {
    let mut con = Connection::open(addr);
    set_once_the_link_is_back(&mut con, b"probe", b"the link is up");
    let mut request = encode(cmd!("MULTI"));
    request.extend_from_slice(commands);
    con.send(&request);
    assert_eq!(con.reply().1, Reply::Simple(b"OK".to_vec()), "MULTI");
    for _ in 0..count {
        assert_eq!(con.reply().1, Reply::Simple(b"QUEUED".to_vec()));
    }
    con.send(&encode(cmd!("EXEC")));
    std::thread::sleep(kill_after);
    storage.kill();
    let exec = con.reply().1;
    storage.resume();
    exec
}

/// True for an EXEC reply of `count` replies, none an error: storage
/// acknowledged the transaction.
fn acknowledged(exec: &Reply, count: usize) -> bool {
    matches!(exec, Reply::Array(Some(replies))
        if replies.len() == count && !replies.iter().any(|r| matches!(r, Reply::Error(_))))
}

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
        let mut commands = Vec::new();
        for key in &keys {
            commands.extend(encode(cmd!("SET", key, value_for(key, 1, 1024))));
        }
        let kill_after = KILL_STEP * round as u32;
        let exec = exec_cut_by_a_kill(addr, &mut storage, &commands, keys.len(), kill_after);
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
                // What the engine holds is the RESP layer's stored form.
                let string = compute_node::datatypes::string_slice(value).expect("a string");
                assert_eq!(string, &value_for(key, 1, 1024)[..], "the value of a SET");
            }
        }
        if acknowledged(&exec, KEYS_PER_EXEC) {
            assert_eq!(
                present, KEYS_PER_EXEC,
                "round {round}: an acknowledged EXEC"
            );
            acknowledged_whole += 1;
        }
    }
    eprintln!("{acknowledged_whole} of {ROUNDS} transactions were acknowledged before the kill");
}

fn mixed_keys(round: usize, i: usize) -> [Vec<u8>; 4] {
    ["set", "src", "dst", "del"].map(|kind| format!("mx:{round}:{kind}:{i}").into_bytes())
}

/// What the mixed transaction of `round` did, read back through `engine`:
/// `Some(true)` if all of its writes are there, `Some(false)` if none is,
/// `None` if only some are.
fn mixed_outcome(engine: &Engine, round: usize) -> Option<bool> {
    // What the engine holds is the RESP layer's stored form of a string.
    let get = |key: &[u8]| {
        let stored = engine.get(key).expect("read back")?;
        Some(
            compute_node::datatypes::string_slice(&stored)
                .expect("a string")
                .to_vec(),
        )
    };
    let mut outcomes = (0..MIXED_KEYS).map(|i| {
        let [set, src, dst, del] = mixed_keys(round, i);
        let (set, src_value, dst, del_value) = (get(&set), get(&src), get(&dst), get(&del));
        let done = set == Some(value_for(&mixed_keys(round, i)[0], 1, 512))
            && src_value.is_none()
            && dst == Some(value_for(&src, 1, 512))
            && del_value.is_none();
        let untouched = set.is_none()
            && src_value == Some(value_for(&src, 1, 512))
            && dst.is_none()
            && del_value == Some(value_for(&del, 1, 512));
        match (done, untouched) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    });
    let first = outcomes.next().flatten()?;
    outcomes.all(|o| o == Some(first)).then_some(first)
}

#[test]
fn an_exec_of_sets_renames_and_dels_survives_a_storage_kill_whole_or_not_at_all() {
    let mut storage = StorageNode::start(4);
    let engine = Arc::new(storage.connect());
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let mut acknowledged_whole = 0;
    for round in 0..ROUNDS {
        let mut setup = Connection::open(addr);
        for i in 0..MIXED_KEYS {
            let [_, src, _, del] = mixed_keys(round, i);
            for key in [src, del] {
                set_once_the_link_is_back(&mut setup, &key, &value_for(&key, 1, 512));
            }
        }
        let mut commands = Vec::new();
        for i in 0..MIXED_KEYS {
            let [set, src, dst, del] = mixed_keys(round, i);
            commands.extend(encode(cmd!("SET", &set, value_for(&set, 1, 512))));
            commands.extend(encode(cmd!("RENAME", &src, &dst)));
            commands.extend(encode(cmd!("DEL", &del)));
        }
        let kill_after = KILL_STEP * round as u32;
        let exec = exec_cut_by_a_kill(addr, &mut storage, &commands, MIXED_KEYS * 3, kill_after);
        let outcome = mixed_outcome(&storage.connect_reader_view(), round);
        assert!(
            outcome.is_some(),
            "round {round}: only part of one EXEC survived the kill"
        );
        if acknowledged(&exec, MIXED_KEYS * 3) {
            assert_eq!(outcome, Some(true), "round {round}: an acknowledged EXEC");
            acknowledged_whole += 1;
        }
    }
    eprintln!("{acknowledged_whole} of {ROUNDS} transactions were acknowledged before the kill");
}
