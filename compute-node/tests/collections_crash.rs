//! Collections survive `kill -9` of either node: [`CLIENTS`] clients push
//! to and pop from lists, add to and remove from sets, set hash fields and
//! add to sorted sets, each on keys of its own, through a real
//! `compute-node serve`, while the storage node (a process of its own) is
//! killed with SIGKILL and restarted, and the compute node is killed and a
//! new one started (rebuilding from the key logs). Each client keeps a
//! model of its keys: an acknowledged change must be there, an answer lost
//! to a kill may or may not have been applied but never twice, and at the
//! end every key holds exactly its model, with each collection's length
//! equal to the elements it holds.

#[allow(dead_code, reason = "this test neither signals nor samples its nodes")]
mod process;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use process::{Files, StorageSettings};

const TEST_NAME: &str = "collections_lose_no_acknowledged_change_to_kill_9_of_either_node";
const PARTITIONS: usize = 4;
const CLIENTS: usize = 16;
/// Changes acknowledged between two kills.
const ACKS_PER_ROUND: u64 = 1500;
const ROUND_TIMEOUT: Duration = Duration::from_secs(60);

/// One client's keys as it believes them to be.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    list: VecDeque<String>,
    set: BTreeSet<String>,
    hash: BTreeMap<String, String>,
    zset: BTreeMap<String, i64>,
}

fn keys(client: usize) -> [String; 4] {
    ["l", "s", "h", "z"].map(|t| format!("{t}:{client}"))
}

/// The change `n` of `client`: the command, and the model it leaves.
fn change(client: usize, n: u64, model: &Model) -> (redis::Cmd, Model) {
    let [l, s, h, z] = keys(client);
    let mut next = model.clone();
    let mut cmd;
    match n % 7 {
        0 | 1 => {
            cmd = redis::cmd("RPUSH");
            cmd.arg(&l).arg(n.to_string());
            next.list.push_back(n.to_string());
        }
        2 => {
            cmd = redis::cmd("LPOP");
            cmd.arg(&l);
            next.list.pop_front();
        }
        3 => {
            let member = format!("m{}", n % 40);
            cmd = redis::cmd("SADD");
            cmd.arg(&s).arg(&member);
            next.set.insert(member);
        }
        4 => {
            let member = format!("m{}", (n * 7) % 40);
            cmd = redis::cmd("SREM");
            cmd.arg(&s).arg(&member);
            next.set.remove(&member);
        }
        5 => {
            let field = format!("f{}", n % 25);
            cmd = redis::cmd("HSET");
            cmd.arg(&h).arg(&field).arg(n.to_string());
            next.hash.insert(field, n.to_string());
        }
        _ => {
            let member = format!("m{}", n % 30);
            cmd = redis::cmd("ZADD");
            cmd.arg(&z).arg(n as i64).arg(&member);
            next.zset.insert(member, n as i64);
        }
    }
    (cmd, next)
}

/// What the node holds for `client`'s keys, checking that each length
/// command agrees with the elements read.
fn read(con: &mut redis::Connection, client: usize) -> redis::RedisResult<Model> {
    let [l, s, h, z] = keys(client);
    let list: Vec<String> = redis::cmd("LRANGE").arg(&l).arg(0).arg(-1).query(con)?;
    let llen: usize = redis::cmd("LLEN").arg(&l).query(con)?;
    let set: BTreeSet<String> = redis::cmd("SMEMBERS").arg(&s).query(con)?;
    let scard: usize = redis::cmd("SCARD").arg(&s).query(con)?;
    let hash: BTreeMap<String, String> = redis::cmd("HGETALL").arg(&h).query(con)?;
    let hlen: usize = redis::cmd("HLEN").arg(&h).query(con)?;
    let zset: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg(&z)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)?;
    let zcard: usize = redis::cmd("ZCARD").arg(&z).query(con)?;
    assert_eq!(llen, list.len(), "{l}: LLEN agrees with its elements");
    assert_eq!(scard, set.len(), "{s}: SCARD agrees with its members");
    assert_eq!(hlen, hash.len(), "{h}: HLEN agrees with its fields");
    assert_eq!(zcard, zset.len(), "{z}: ZCARD agrees with its members");
    Ok(Model {
        list: list.into_iter().collect(),
        set,
        hash,
        zset: zset.into_iter().collect(),
    })
}

/// INFO's `tail_pulls`: key-log tails the compute node has pulled after
/// its storage connections came back.
fn tail_pulls(con: &mut redis::Connection) -> redis::RedisResult<u64> {
    let info: String = redis::cmd("INFO").arg("splitkv").query(con)?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("tail_pulls:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0))
}

/// Changes `client`'s keys until `stop`, keeping its model; an answer lost
/// to a kill is settled by reading the keys back once the nodes serve and
/// the compute node has pulled the key-log tails the storage node's
/// restarts call for (`pulls_due`): a write whose acknowledgement was lost
/// becomes visible only with that pull, which runs after the compute node
/// serves again, so the outcome is read after it.
fn run(
    client: usize,
    addr: &Mutex<SocketAddr>,
    stop: &AtomicBool,
    acks: &AtomicU64,
    pulls_due: &AtomicU64,
) -> Settled {
    let mut model = Model::default();
    let mut connection: Option<redis::Connection> = None;
    let mut n = 0u64;
    let mut uncertain: Option<Model> = None;
    while !stop.load(Ordering::Relaxed) {
        let con = match &mut connection {
            Some(con) => con,
            None => {
                let target = *addr.lock();
                match redis::Client::open(format!("redis://{target}/"))
                    .and_then(|c| c.get_connection())
                {
                    Ok(con) => connection.insert(con),
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                }
            }
        };
        if let Some(after) = uncertain.take() {
            match tail_pulls(con) {
                Ok(pulled) if pulled >= pulls_due.load(Ordering::SeqCst) => {}
                Ok(_) => {
                    uncertain = Some(after);
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(_) => {
                    uncertain = Some(after);
                    connection = None;
                    continue;
                }
            }
            match read(con, client) {
                Ok(found) => {
                    assert!(
                        found == model || found == after,
                        "client {client}: after a lost answer the keys hold {found:?}, \
                         neither {model:?} nor {after:?}"
                    );
                    model = found;
                }
                Err(e) => {
                    uncertain = Some(after);
                    if e.kind() == redis::ErrorKind::Io {
                        connection = None;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            continue;
        }
        n += 1;
        let (cmd, after) = change(client, n, &model);
        match cmd.query::<redis::Value>(con) {
            Ok(redis::Value::ServerError(_)) | Err(_) => {
                // Refused or lost: it may have been applied or not.
                uncertain = Some(after);
                connection = None;
            }
            Ok(reply) => {
                if n % 7 == 2 {
                    let expected = model.list.front().cloned();
                    let got: Option<String> =
                        redis::from_redis_value(reply).expect("LPOP's answer");
                    assert_eq!(
                        got, expected,
                        "client {client}: LPOP pops the oldest element"
                    );
                }
                model = after;
                acks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Settled {
        model,
        unsettled: uncertain,
    }
}

/// What a client knows of its keys when it stops: the model, and the one
/// it leaves if its last change, whose answer was lost, was applied.
struct Settled {
    model: Model,
    unsettled: Option<Model>,
}

fn wait_for_acks(acks: &AtomicU64, wanted: u64, what: &str) {
    let deadline = Instant::now() + ROUND_TIMEOUT;
    while acks.load(Ordering::Relaxed) < wanted {
        assert!(
            Instant::now() < deadline,
            "{what}: no {wanted} acknowledged changes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn collections_lose_no_acknowledged_change_to_kill_9_of_either_node() {
    if process::run_storage_child_if_asked() {
        return;
    }
    let files = Files::new();
    let (mut storage, port, _) =
        process::start_storage(TEST_NAME, &files, StorageSettings::new(PARTITIONS), |_| {
            None
        });
    let settings = StorageSettings {
        port,
        ..StorageSettings::new(PARTITIONS)
    };
    let (mut compute, first_addr) =
        process::start_compute("compute node", port, &files.compute_certs, &[], "info");
    let addr = Arc::new(Mutex::new(first_addr));
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let pulls_due = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (addr, stop, acks, pulls_due) = (
                Arc::clone(&addr),
                Arc::clone(&stop),
                Arc::clone(&acks),
                Arc::clone(&pulls_due),
            );
            std::thread::spawn(move || run(client, &addr, &stop, &acks, &pulls_due))
        })
        .collect();

    for round in 0..4 {
        wait_for_acks(
            &acks,
            acks.load(Ordering::Relaxed) + ACKS_PER_ROUND,
            "before a kill",
        );
        if round == 2 {
            // A compute node started afresh rebuilds: it owes no pulls.
            pulls_due.store(0, Ordering::SeqCst);
            compute.kill9();
            let (restarted, new_addr) =
                process::start_compute("compute node", port, &files.compute_certs, &[], "info");
            compute = restarted;
            *addr.lock() = new_addr;
        } else {
            // Counted before the kill, so that no client settles a lost
            // answer between the restart and the count.
            pulls_due.fetch_add(PARTITIONS as u64, Ordering::SeqCst);
            storage.kill9();
            let (restarted, _, _) = process::start_storage(TEST_NAME, &files, settings, |_| None);
            storage = restarted;
        }
    }
    wait_for_acks(
        &acks,
        acks.load(Ordering::Relaxed) + ACKS_PER_ROUND,
        "after the last kill",
    );
    stop.store(true, Ordering::Relaxed);
    let models: Vec<Settled> = clients
        .into_iter()
        .map(|c| c.join().expect("client"))
        .collect();

    // A compute node started afresh rebuilds the collections from the key
    // logs: each holds exactly its model.
    compute.kill9();
    let (_fresh, fresh_addr) = process::start_compute(
        "fresh compute node",
        port,
        &files.compute_certs,
        &[],
        "info",
    );
    let mut con = redis::Client::open(format!("redis://{fresh_addr}/"))
        .expect("client")
        .get_connection()
        .expect("connect");
    for (client, settled) in models.iter().enumerate() {
        let found = read(&mut con, client).expect("read back");
        if settled.unsettled.as_ref() != Some(&found) {
            assert_eq!(
                found, settled.model,
                "client {client}'s keys after the kills"
            );
        }
    }
    drop(storage);
}
