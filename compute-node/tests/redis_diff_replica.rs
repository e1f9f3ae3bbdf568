//! Differential test of a read-only compute node against a Redis replica:
//! a `redis-server` master and a replica of it beside a SplitKV writer and
//! a reader of the same storage node. The same writes go to the master and
//! the writer; once the replica and the reader have them (WAIT on the
//! master; the reader's applied sequence number), reads, refused writes
//! and transactions go to the replica and the reader in RESP2 and RESP3,
//! then REPLICAOF NO ONE promotes both, and writes are compared again.
//! Every reply is compared byte for byte, except where a step says why not.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(dead_code, reason = "shared test support; this test uses part of it")]
mod support;

use std::sync::Arc;
use std::time::Duration;

use diff::{Connection, RedisServer, Step, by_shape, compare_replies, encode, exact};
use support::{StorageNode, serve_resp};

/// Sends `steps` to both connections one at a time, comparing the replies.
fn run(steps: &[Step], redis: &mut Connection, splitkv: &mut Connection) {
    for step in steps {
        let args: Vec<&[u8]> = step.args.iter().map(Vec::as_slice).collect();
        let request = encode(&args);
        redis.send(&request);
        splitkv.send(&request);
        compare_replies(step, redis, splitkv);
    }
}

fn writes() -> Vec<Step> {
    vec![
        exact(cmd!("SET", "k1", "one")),
        exact(cmd!("SET", "k2", "two")),
        exact(cmd!("MSET", "k3", "three", "k4", "four")),
        exact(cmd!("SET", "k2", "second")),
        exact(cmd!("DEL", "k4")),
        exact(cmd!("INCR", "counter")),
        exact(cmd!("APPEND", "k1", "+")),
        exact(cmd!("HSET", "h", "a", "1", "b", "2")),
        exact(cmd!("RPUSH", "l", "x", "y")),
        exact(cmd!("SADD", "s", "1", "2")),
        exact(cmd!("ZADD", "z", "1", "m", "2", "n")),
    ]
}

/// What a read-only replica answers: reads, and Redis's refusal of every
/// kind of write, alone and inside MULTI.
fn on_the_replica() -> Vec<Step> {
    vec![
        exact(cmd!("GET", "k1")),
        exact(cmd!("GET", "k2")),
        exact(cmd!("GET", "k4")),
        exact(cmd!("MGET", "k1", "k2", "k3", "k4", "counter")),
        exact(cmd!("EXISTS", "k1", "k2", "k4")),
        exact(cmd!("STRLEN", "k3")),
        exact(cmd!("GETRANGE", "k3", "1", "2")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("TYPE", "k1")),
        exact(cmd!("HGETALL", "h")),
        exact(cmd!("LRANGE", "l", "0", "-1")),
        exact(cmd!("SMEMBERS", "s")),
        exact(cmd!("ZRANGE", "z", "0", "-1", "WITHSCORES")),
        exact(cmd!("TYPE", "z")),
        exact(cmd!("HSET", "h", "c", "3")),
        exact(cmd!("LPUSH", "l", "w")),
        exact(cmd!("BLPOP", "l", "1")),
        exact(cmd!("SADD", "s", "3")),
        exact(cmd!("ZPOPMIN", "z")),
        exact(cmd!("SET", "k1", "changed")),
        exact(cmd!("SET", "fresh", "v", "NX")),
        exact(cmd!("DEL", "k1")),
        exact(cmd!("UNLINK", "k1")),
        exact(cmd!("MSET", "a", "1", "b", "2")),
        exact(cmd!("INCR", "counter")),
        exact(cmd!("INCRBYFLOAT", "counter", "1.5")),
        exact(cmd!("APPEND", "k1", "x")),
        exact(cmd!("SETRANGE", "k1", "0", "x")),
        exact(cmd!("GETDEL", "k1")),
        exact(cmd!("GETSET", "k1", "x")),
        exact(cmd!("RENAME", "k1", "k9")),
        exact(cmd!("FLUSHALL")),
        exact(cmd!("FLUSHDB")),
        // A refused write aborts the transaction it was queued in.
        exact(cmd!("MULTI")),
        exact(cmd!("GET", "k1")),
        exact(cmd!("SET", "k1", "in a transaction")),
        exact(cmd!("EXEC")),
        exact(cmd!("MULTI")),
        exact(cmd!("GET", "k1")),
        exact(cmd!("MGET", "k2", "k3")),
        exact(cmd!("EXEC")),
        // Wrong arity is checked before the role.
        exact(cmd!("SET", "k1")),
        exact(cmd!("GET", "k1")),
        by_shape(
            cmd!("ROLE"),
            "a replica names its master and offset; a reader its storage node and sequence number",
        ),
    ]
}

fn after_the_promotion() -> Vec<Step> {
    vec![
        exact(cmd!("SET", "k1", "promoted")),
        exact(cmd!("GET", "k1")),
        exact(cmd!("INCR", "counter")),
        exact(cmd!("DEL", "k3")),
        exact(cmd!("MGET", "k1", "k2", "k3", "counter")),
        exact(cmd!("HSET", "h", "c", "3")),
        exact(cmd!("HGETALL", "h")),
        exact(cmd!("LPOP", "l")),
        exact(cmd!("MULTI")),
        exact(cmd!("SET", "k5", "five")),
        exact(cmd!("GET", "k5")),
        exact(cmd!("EXEC")),
        exact(cmd!("DBSIZE")),
        by_shape(
            cmd!("ROLE"),
            "the offsets are each server's own; neither has replicas",
        ),
        exact(cmd!("REPLICAOF", "NO", "ONE")),
        exact(cmd!("SET", "k6", "still the writer")),
    ]
}

#[test]
fn a_reader_answers_as_a_redis_replica_and_replicaof_no_one_promotes_it() {
    let master = RedisServer::start(None);
    let master_port = master.addr.port().to_string();
    let replica = RedisServer::start_with_args(None, &["--replicaof", "127.0.0.1", &master_port]);
    let storage = StorageNode::start(4);
    let writer = Arc::new(storage.connect());
    let reader = Arc::new(storage.connect_reader_view());
    let (writer_addr, _stop_writer) = serve_resp(&writer, &storage, None);
    let (reader_addr, _stop_reader) = serve_resp(&reader, &storage, None);

    let mut to_master = Connection::open(master.addr);
    let mut to_writer = Connection::open(writer_addr);
    run(&writes(), &mut to_master, &mut to_writer);
    // The replica has the writes once the master's WAIT counts it.
    to_master.send(&encode(cmd!("WAIT", "1", "10000")));
    assert_eq!(
        to_master.reply().0,
        b":1\r\n",
        "the Redis replica did not acknowledge the writes"
    );
    assert!(
        reader.wait_until(Duration::from_secs(10), |r| r
            .has_applied(&writer.applied_seqs())),
        "the reader did not apply the writer's writes"
    );

    let mut replica2 = Connection::open(replica.addr);
    let mut reader2 = Connection::open(reader_addr);
    run(&on_the_replica(), &mut replica2, &mut reader2);
    let mut replica3 = Connection::open(replica.addr);
    let mut reader3 = Connection::open(reader_addr);
    run(
        &[by_shape(
            cmd!("HELLO", "3"),
            "HELLO's version and id are each server's own",
        )],
        &mut replica3,
        &mut reader3,
    );
    run(&on_the_replica(), &mut replica3, &mut reader3);

    run(
        &[exact(cmd!("REPLICAOF", "NO", "ONE"))],
        &mut replica2,
        &mut reader2,
    );
    assert!(reader.is_writer());
    run(&after_the_promotion(), &mut replica2, &mut reader2);
    run(&after_the_promotion(), &mut replica3, &mut reader3);

    // The old writer was fenced: its writes are refused, not lost quietly.
    to_writer.send(&encode(cmd!("SET", "k1", "from the old writer")));
    let (refused, _) = to_writer.reply();
    assert!(
        refused.starts_with(b"-READONLY"),
        "the old writer answered {:?}",
        String::from_utf8_lossy(&refused)
    );
    assert_eq!(
        reader.get(b"k1").expect("get").as_deref(),
        Some(&b"promoted"[..])
    );
}
