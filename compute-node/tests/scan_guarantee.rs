//! SCAN's guarantee, as a property of the index walk that SCAN and KEYS
//! are made of: every key present from a walk's first step to its last is
//! returned at least once, and every key returned was present at some time
//! during the walk, while other keys are inserted and deleted, tables grow,
//! and tombstones are dropped (shards compacted) between or during steps.
//! Then the same through the RESP server, with a client writing while
//! another walks.

#[allow(
    dead_code,
    reason = "shared test support; this test uses the storage node and server only"
)]
mod support;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use compute_node::index::{Index, Location};
use proptest::prelude::*;
use support::{StorageNode, serve_resp};

/// What happens to the index between two steps of a walk.
#[derive(Debug, Clone)]
enum Change {
    /// Puts churn key `n` (or a new version of it).
    Insert(u16),
    /// Deletes churn key `n` (a tombstone, whether or not it was live).
    Delete(u16),
    /// Drops every tombstone, compacting the shards that held one.
    DropTombstones,
}

fn change_strategy() -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => (0u16..2000).prop_map(Change::Insert),
        3 => (0u16..2000).prop_map(Change::Delete),
        1 => Just(Change::DropTombstones),
    ]
}

fn stable_key(n: usize) -> Vec<u8> {
    format!("stable:{n}").into_bytes()
}

fn churn_key(n: u16) -> Vec<u8> {
    // Lengths vary so that keys of 2047 bytes or more (a LEB128 length
    // after the header in the arena) are among them.
    let mut key = format!("churn:{n}:").into_bytes();
    key.resize(key.len() + usize::from(n % 150) * 15, b'x');
    key
}

/// The index and the sequence numbers it has been given.
struct Store {
    index: Index,
    next_seq: u64,
}

impl Store {
    fn put(&mut self, key: &[u8]) {
        self.next_seq += 1;
        let location = Location {
            seq: self.next_seq,
            offset: self.next_seq * 64,
            len: 64,
            partition: (self.next_seq % 4) as u16,
            expire_at_ms: 0,
        };
        assert!(self.index.apply(key, location));
    }

    fn delete(&mut self, key: &[u8]) {
        self.next_seq += 1;
        let tombstone = Location::tombstone(self.next_seq, (self.next_seq % 4) as u16);
        assert!(self.index.apply(key, tombstone));
    }

    fn change(&mut self, change: &Change) {
        match *change {
            Change::Insert(n) => self.put(&churn_key(n)),
            Change::Delete(n) => self.delete(&churn_key(n)),
            Change::DropTombstones => {
                self.index.drop_tombstones();
            }
        }
    }
}

/// Keys every walk must return, keys deleted before the walk, and the
/// changes made between its steps.
#[derive(Debug, Clone)]
struct Walk {
    stable: usize,
    deleted_before: Vec<u16>,
    count: usize,
    changes: Vec<Vec<Change>>,
}

fn walk_strategy() -> impl Strategy<Value = Walk> {
    (
        0usize..600,
        proptest::collection::vec(0u16..2000, 0..200),
        1usize..64,
        proptest::collection::vec(proptest::collection::vec(change_strategy(), 0..40), 0..80),
    )
        .prop_map(|(stable, deleted_before, count, changes)| Walk {
            stable,
            deleted_before,
            count,
            changes,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Changes made between the steps of a walk, in an order proptest
    /// picks (and shrinks).
    #[test]
    fn a_walk_returns_every_key_present_throughout_it(walk in walk_strategy()) {
        let mut store = Store { index: Index::new(), next_seq: 0 };
        // Keys put and deleted before the walk leave tombstones in it.
        for &n in &walk.deleted_before {
            store.put(&churn_key(n));
            store.delete(&churn_key(n));
        }
        for n in 0..walk.stable {
            store.put(&stable_key(n));
        }
        let mut ever_live: BTreeSet<Vec<u8>> = (0..walk.stable).map(stable_key).collect();
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = store.index.scan(cursor, walk.count, |key, location| {
                assert!(!location.is_tombstone(), "the walk passed a tombstone");
                seen.insert(key.to_vec());
            });
            if cursor == 0 {
                break;
            }
            for change in walk.changes.get(step).into_iter().flatten() {
                if let Change::Insert(n) = change {
                    ever_live.insert(churn_key(*n));
                }
                store.change(change);
            }
            step += 1;
            prop_assert!(step < 1_000_000, "the walk does not end");
        }
        let missing: Vec<_> = (0..walk.stable)
            .map(stable_key)
            .filter(|key| !seen.contains(key))
            .map(|key| String::from_utf8_lossy(&key).into_owned())
            .collect();
        prop_assert!(missing.is_empty(), "the walk missed {missing:?}");
        let strangers: Vec<_> = seen
            .difference(&ever_live)
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect();
        prop_assert!(strangers.is_empty(), "the walk returned keys never live: {strangers:?}");
    }

    /// A writer thread inserts and deletes keys and drops tombstones while
    /// another thread walks the index, with no order between the two.
    #[test]
    fn a_walk_returns_every_key_present_throughout_it_while_another_thread_writes(
        stable in 1usize..2000,
        count in 1usize..100,
        changes in proptest::collection::vec(change_strategy(), 1..400),
    ) {
        let mut store = Store { index: Index::new(), next_seq: 0 };
        for n in 0..stable {
            store.put(&stable_key(n));
        }
        let walking = AtomicBool::new(true);
        let mut seq = store.next_seq;
        let index = &store.index;
        let seen = std::thread::scope(|scope| {
            let walker = scope.spawn(|| {
                let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
                let mut cursor = 0;
                loop {
                    cursor = index.scan(cursor, count, |key, _| {
                        *seen.entry(key.to_vec()).or_default() += 1;
                    });
                    if cursor == 0 {
                        break;
                    }
                }
                walking.store(false, Ordering::Release);
                seen
            });
            // The writer goes on until the walk is over (at least one round
            // of its changes).
            let mut rounds = 0;
            while rounds == 0 || walking.load(Ordering::Acquire) {
                for change in &changes {
                    seq += 1;
                    match *change {
                        Change::Insert(n) => {
                            index.apply(&churn_key(n), Location { seq, offset: seq * 64, len: 64, partition: 0, expire_at_ms: 0 });
                        }
                        Change::Delete(n) => {
                            index.apply(&churn_key(n), Location::tombstone(seq, 0));
                        }
                        Change::DropTombstones => {
                            index.drop_tombstones();
                        }
                    }
                }
                rounds += 1;
            }
            walker.join().expect("the walker")
        });
        let missing: Vec<usize> = (0..stable).filter(|&n| !seen.contains_key(&stable_key(n))).collect();
        prop_assert!(missing.is_empty(), "the walk missed stable keys {missing:?}");
        for key in seen.keys() {
            prop_assert!(
                key.starts_with(b"stable:") || key.starts_with(b"churn:"),
                "the walk returned a key never stored: {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    /// A random key is a live key, and there is one whenever any key is
    /// live.
    #[test]
    fn a_random_key_is_a_live_key(
        live in proptest::collection::btree_set(0u16..2000, 0..50),
        deleted in proptest::collection::btree_set(2000u16..4000, 0..50),
        random in any::<u64>(),
    ) {
        let mut store = Store { index: Index::new(), next_seq: 0 };
        for &n in &deleted {
            store.put(&churn_key(n));
            store.delete(&churn_key(n));
        }
        for &n in &live {
            store.put(&churn_key(n));
        }
        let live_keys: BTreeSet<Vec<u8>> = live.iter().map(|&n| churn_key(n)).collect();
        match store.index.random_key(random) {
            Some((key, location)) => {
                prop_assert!(!location.is_tombstone());
                prop_assert!(live_keys.contains(&key), "{:?} is not live", String::from_utf8_lossy(&key));
            }
            None => prop_assert!(live_keys.is_empty(), "no random key among {} live", live_keys.len()),
        }
    }
}

/// Through the RESP server: one client walks with SCAN and then runs KEYS
/// while another client adds and deletes keys without pause; the walk and
/// KEYS return every key that was there all along, and KEYS each once.
#[test]
fn scan_and_keys_over_resp_return_every_key_present_while_another_client_writes() {
    let storage = StorageNode::start(4);
    let engine = Arc::new(storage.connect());
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let connect = || {
        redis::Client::open(format!("redis://{addr}/"))
            .expect("client")
            .get_connection()
            .expect("connect")
    };
    let stable: BTreeSet<Vec<u8>> = (0..3000).map(stable_key).collect();
    let mut walker = connect();
    let mut mset = redis::cmd("MSET");
    for key in &stable {
        mset.arg(key).arg(b"v");
    }
    let () = mset.query(&mut walker).expect("MSET");
    let walking = AtomicBool::new(true);
    let (seen, keys, rounds) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut writer = connect();
            let mut rounds = 0u64;
            while rounds < 2 || walking.load(Ordering::Acquire) {
                let batch = |round: u64| (0..50).map(move |i| format!("churn:{round}:{i}"));
                let mut mset = redis::cmd("MSET");
                for key in batch(rounds) {
                    mset.arg(key).arg("v");
                }
                let () = mset.query(&mut writer).expect("MSET");
                if rounds > 0 {
                    let mut del = redis::cmd("DEL");
                    for key in batch(rounds - 1) {
                        del.arg(key);
                    }
                    let deleted: i64 = del.query(&mut writer).expect("DEL");
                    assert_eq!(deleted, 50);
                }
                rounds += 1;
            }
            rounds
        });
        let mut seen = BTreeSet::new();
        let mut cursor = "0".to_string();
        loop {
            let (next, page): (String, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(&cursor)
                .arg("COUNT")
                .arg(7)
                .query(&mut walker)
                .expect("SCAN");
            seen.extend(page);
            if next == "0" {
                break;
            }
            cursor = next;
        }
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
            .arg("stable:*")
            .query(&mut walker)
            .expect("KEYS");
        walking.store(false, Ordering::Release);
        (seen, keys, writer.join().expect("the writer"))
    });
    assert!(rounds >= 2);
    let missing: Vec<_> = stable.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "SCAN missed {} stable keys",
        missing.len()
    );
    let keys_once: BTreeSet<Vec<u8>> = keys.iter().cloned().collect();
    assert_eq!(keys_once.len(), keys.len(), "KEYS gave a key twice");
    assert_eq!(keys_once, stable, "KEYS stable:* gave the stable keys");
}
