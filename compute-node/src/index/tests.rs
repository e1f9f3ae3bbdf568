use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::Barrier;

use proptest::prelude::*;

use super::*;

fn put(seq: u64, offset: u64) -> Location {
    Location {
        seq,
        offset,
        len: 100,
        partition: 1,
        expire_at_ms: 0,
    }
}

/// Every live key and its location, through the scan.
fn scan_all<S: BuildHasher>(index: &Index<S>, count: usize) -> Vec<(Vec<u8>, Location)> {
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = index.scan(cursor, count, |key, location| {
            seen.push((key.to_vec(), *location))
        });
        if cursor == 0 {
            return seen;
        }
    }
}

#[test]
fn the_highest_sequence_wins_whatever_the_order() {
    let index = Index::new();
    assert!(index.apply(b"k", put(5, 10)));
    assert!(
        !index.apply(b"k", put(3, 20)),
        "an older version never replaces a newer one"
    );
    assert_eq!(index.get(b"k"), Some(put(5, 10)));
    assert!(index.apply(b"k", Location::tombstone(7, 2)));
    assert!(
        !index.apply(b"k", put(6, 30)),
        "a delete is not undone by an older put"
    );
    assert!(index.get(b"k").expect("entry").is_tombstone());
    assert_eq!(index.live_keys(), 0, "a deleted key is not counted");
    assert!(index.apply(b"k", put(9, 40)));
    assert_eq!(index.get(b"k"), Some(put(9, 40)));
    assert_eq!(index.live_keys(), 1);
}

#[test]
fn the_live_key_count_follows_every_change() {
    let index = Index::new();
    let changes: [(&[u8], Location); 7] = [
        (b"a", put(1, 0)),
        (b"b", put(2, 0)),
        (b"a", put(3, 0)),
        (b"b", Location::tombstone(4, 0)),
        (b"c", Location::tombstone(5, 0)),
        (b"b", Location::tombstone(6, 0)),
        (b"c", put(7, 0)),
    ];
    for (key, location) in changes {
        index.apply(key, location);
        assert_eq!(index.live_keys(), index.stats().live_keys);
    }
    assert_eq!(index.live_keys(), 2);
    index.drop_tombstones();
    assert_eq!(index.live_keys(), 2);
}

#[test]
fn keys_of_every_length_are_stored_and_found() {
    let index = Index::new();
    let lengths = [
        0usize, 1, 23, 126, 127, 128, 255, 1024, 2046, 2047, 2048, 5000, 70_000,
    ];
    for (seq, &len) in lengths.iter().enumerate() {
        let key: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        assert!(index.apply(&key, put(seq as u64 + 1, len as u64)));
    }
    for (seq, &len) in lengths.iter().enumerate() {
        let key: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        assert_eq!(
            index.get(&key),
            Some(put(seq as u64 + 1, len as u64)),
            "{len}"
        );
        let mut near = key.clone();
        near.push(0xff);
        assert_eq!(index.get(&near), None, "{len} + 1 bytes");
    }
    let mut lengths_seen: Vec<usize> = scan_all(&index, 3).iter().map(|(k, _)| k.len()).collect();
    lengths_seen.sort_unstable();
    assert_eq!(lengths_seen, lengths);
}

#[test]
fn locations_too_wide_to_pack_are_kept_whole() {
    let index = Index::new();
    let wide = Location {
        seq: u64::MAX - 1,
        offset: u64::MAX,
        len: u32::MAX,
        partition: u16::MAX,
        expire_at_ms: 0,
    };
    assert!(index.apply(b"wide", put(1, 1)));
    assert!(index.apply(b"wide", wide));
    assert_eq!(index.get(b"wide"), Some(wide));
    assert!(
        !index.apply(b"wide", put(PACKED_MAX_SEQ, 0)),
        "a packed seq below a wide one loses"
    );
    let newest = Location {
        seq: u64::MAX,
        ..put(0, 7)
    };
    assert!(index.apply(b"wide", newest));
    assert_eq!(index.get(b"wide"), Some(newest));
    assert!(index.apply(b"other", Location::tombstone(PACKED_MAX_SEQ + 1, 300)));
    assert_eq!(
        index.get(b"other"),
        Some(Location::tombstone(PACKED_MAX_SEQ + 1, 300))
    );
    assert_eq!(index.stats().tombstones, 1);
    assert_eq!(index.drop_tombstones(), 1);
    assert_eq!(
        index.get(b"wide"),
        Some(newest),
        "compaction keeps wide locations"
    );
}

#[test]
fn dropping_tombstones_keeps_live_keys() {
    let index = Index::new();
    index.apply(b"a", put(1, 0));
    index.apply(b"b", Location::tombstone(2, 0));
    assert_eq!(index.stats().tombstones, 1);
    assert_eq!(index.drop_tombstones(), 1);
    let stats = index.stats();
    assert_eq!((stats.live_keys, stats.tombstones), (1, 0));
    assert!(index.get(b"b").is_none());
    assert_eq!(index.get(b"a"), Some(put(1, 0)));
}

#[test]
fn a_relocation_applies_only_to_the_place_it_moves_from() {
    let index = Index::new();
    let old = put(5, 100);
    let moved = put(5, 9000);
    index.apply(b"k", old);
    assert!(!index.relocate(b"k", put(5, 101), moved), "other offset");
    assert!(
        !index.relocate(
            b"k",
            Location {
                partition: 2,
                ..old
            },
            moved
        ),
        "other partition"
    );
    assert!(!index.relocate(b"k", put(4, 100), moved), "other seq");
    assert!(
        !index.relocate(b"k", old, put(4, 9000)),
        "a relocation never lowers the seq"
    );
    assert!(!index.relocate(b"absent", old, moved));
    assert_eq!(index.get(b"k"), Some(old));
    assert!(index.relocate(b"k", old, moved));
    assert_eq!(index.get(b"k"), Some(moved));
    index.apply(b"k", put(6, 50));
    assert!(
        !index.relocate(b"k", moved, put(5, 1)),
        "a relocation of a superseded version is ignored"
    );
    assert_eq!(index.get(b"k"), Some(put(6, 50)));
}

#[test]
fn a_random_key_is_a_live_key() {
    let index = Index::new();
    assert_eq!(index.random_key(7), None);
    index.apply(b"gone", Location::tombstone(1, 0));
    assert_eq!(index.random_key(7), None, "a tombstone is no key");
    for i in 0..100u64 {
        index.apply(&i.to_le_bytes(), put(i + 2, i));
    }
    let mut seen = HashSet::new();
    for random in 0..200u64 {
        let (key, location) = index
            .random_key(random.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .expect("a key");
        assert_eq!(index.get(&key), Some(location));
        assert!(!location.is_tombstone());
        seen.insert(key);
    }
    assert!(seen.len() > 10, "only {} distinct keys", seen.len());
}

#[test]
fn any_cursor_is_accepted_and_yields_only_stored_keys() {
    let index = Index::with_hasher(Colliding);
    let mut stored = HashSet::new();
    for i in 0..3000u64 {
        let key = format!("key:{i}:{}", "x".repeat((i % 90) as usize)).into_bytes();
        index.apply(&key, put(i + 1, i));
        stored.insert(key);
    }
    let cursors = [
        1u64,
        17,
        4095,
        4096,
        4097,
        100_000,
        1 << 32,
        (1 << 32) | 33,
        u64::MAX,
        0xdead_beef,
    ];
    for cursor in cursors {
        let mut keys = 0;
        index.scan(cursor, 50, |key, location| {
            assert!(
                stored.contains(key),
                "cursor {cursor:#x} gave a key never stored"
            );
            assert_eq!(location.len, 100);
            keys += 1;
        });
        assert!(keys <= 50);
    }
}

/// A hasher that sends every key to the same shard, tag and slot.
#[derive(Clone, Default)]
struct Colliding;

impl BuildHasher for Colliding {
    type Hasher = CollidingHasher;
    fn build_hasher(&self) -> CollidingHasher {
        CollidingHasher(0)
    }
}

struct CollidingHasher(u64);

impl Hasher for CollidingHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {}
}

/// A hasher whose hashes differ but share one tag (the bits that the
/// control byte keeps).
#[derive(Clone, Default)]
struct SameTag(DefaultHasher);

impl BuildHasher for SameTag {
    type Hasher = SameTagHasher;
    fn build_hasher(&self) -> SameTagHasher {
        SameTagHasher(self.0.build_hasher())
    }
}

struct SameTagHasher(<DefaultHasher as BuildHasher>::Hasher);

impl Hasher for SameTagHasher {
    fn finish(&self) -> u64 {
        (self.0.finish() & !(0x7f << 49)) | (0x2a << 49)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes)
    }
}

fn exact_answers_under<S: BuildHasher>(index: Index<S>, keys: u64) {
    for i in 0..keys {
        let key = format!("k{i}");
        assert!(index.apply(key.as_bytes(), put(i + 1, i)));
    }
    for i in 0..keys {
        let key = format!("k{i}");
        assert_eq!(index.get(key.as_bytes()), Some(put(i + 1, i)), "{key}");
        assert_eq!(index.get(format!("x{i}").as_bytes()), None);
    }
    for i in (0..keys).step_by(3) {
        index.apply(
            format!("k{i}").as_bytes(),
            Location::tombstone(keys + i + 1, 0),
        );
    }
    index.drop_tombstones();
    for i in 0..keys {
        let expected = (i % 3 != 0).then_some(put(i + 1, i));
        assert_eq!(index.get(format!("k{i}").as_bytes()), expected);
    }
    let scanned: HashSet<Vec<u8>> = scan_all(&index, 7).into_iter().map(|(k, _)| k).collect();
    assert_eq!(scanned.len() as u64, keys - keys.div_ceil(3));
}

#[test]
fn keys_whose_hashes_collide_get_exact_answers() {
    exact_answers_under(Index::with_hasher(Colliding), 2000);
}

#[test]
fn keys_that_share_a_tag_get_exact_answers() {
    exact_answers_under(Index::with_hasher(SameTag::default()), 50_000);
}

#[test]
fn concurrent_writers_and_a_scan_miss_no_key() {
    let index = Index::new();
    let before = 20_000u64;
    for i in 0..before {
        index.apply(&i.to_be_bytes(), put(i + 1, i));
    }
    let start = Barrier::new(3);
    let scanned = std::thread::scope(|scope| {
        for writer in 0..2u64 {
            let (index, start) = (&index, &start);
            scope.spawn(move || {
                start.wait();
                // Both writers put every new key, with interleaved seqs, so
                // every key sees out-of-order arrivals.
                for i in before..before * 4 {
                    let seq = 2 * i + writer;
                    index.apply(&i.to_be_bytes(), put(seq, seq));
                }
            });
        }
        let (index, start) = (&index, &start);
        scope
            .spawn(move || {
                start.wait();
                let mut seen = HashSet::new();
                let mut cursor = 0;
                loop {
                    cursor = index.scan(cursor, 100, |key, _| {
                        seen.insert(key.to_vec());
                    });
                    if cursor == 0 {
                        return seen;
                    }
                }
            })
            .join()
            .expect("scanner")
    });
    for i in 0..before {
        assert!(scanned.contains(&i.to_be_bytes()[..]), "key {i} missed");
    }
    for i in before..before * 4 {
        let seq = 2 * i + 1;
        assert_eq!(index.get(&i.to_be_bytes()), Some(put(seq, seq)));
    }
    assert_eq!(index.live_keys(), before * 4);
    assert_eq!(index.stats().live_keys, before * 4);
}

/// Index bytes per key after inserting `keys` keys of `key_len` bytes.
fn bytes_per_key(keys: u64, key_len: usize, reserve: bool) -> f64 {
    let index = Index::new();
    if reserve {
        index.reserve(keys);
    }
    let mut key = vec![0u8; key_len];
    for i in 0..keys {
        let n = key_len.min(8);
        key[..n].copy_from_slice(&i.to_le_bytes()[..n]);
        index.apply(&key, put(i + 1, i * 40));
    }
    let stats = index.stats();
    assert_eq!(stats.live_keys, keys);
    stats.memory_bytes as f64 / keys as f64
}

#[test]
fn a_mebi_keys_of_8_bytes_take_at_most_32_bytes_each() {
    for reserve in [false, true] {
        let per_key = bytes_per_key(1 << 20, 8, reserve);
        assert!(
            per_key <= 32.0,
            "{per_key:.1} bytes per key (reserve {reserve})"
        );
    }
}

#[test]
fn a_mebi_keys_take_at_most_their_length_plus_24_bytes_each() {
    // 2046 bytes is the longest key whose length the header holds.
    for key_len in [4usize, 16, 40, 100, 126, 127, 300, 1024] {
        let per_key = bytes_per_key(1 << 20, key_len, false);
        assert!(
            per_key <= key_len as f64 + 24.0,
            "{key_len}-byte keys: {per_key:.2} bytes per key"
        );
    }
}

#[derive(Debug, Clone)]
enum Op {
    Apply {
        key: usize,
        location: Location,
    },
    ApplyMany {
        changes: Vec<(usize, Location)>,
    },
    Relocate {
        key: usize,
        current: bool,
        to_offset: u64,
        to_partition: u16,
        to_expire_at_ms: Option<u64>,
    },
    /// A new version (seq + 1) of the key's model location with another
    /// expiry (0 removes it): an EXPIRE, PERSIST or SET with a TTL.
    SetExpiry {
        key: usize,
        expire_at_ms: u64,
    },
    /// A tombstone at the seq of the key's model location: an expiry
    /// delete.
    ExpireDelete {
        key: usize,
    },
    Get {
        key: usize,
    },
    Scan {
        count: usize,
    },
    CollectExpired {
        now_ms: u64,
        max_keys: usize,
    },
    DropTombstones,
    Clear {
        seq: u64,
    },
}

/// A pool of keys of varied lengths, some long enough (2047 bytes or more)
/// to carry a LEB128 length after the header.
fn key_pool() -> Vec<Vec<u8>> {
    (0..40usize)
        .map(|i| {
            let len = [1, 3, 8, 16, 126, 2047, 200, 2100][i % 8];
            (0..len).map(|b| (b * 7 + i) as u8).collect()
        })
        .collect()
}

fn expiry_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![5 => Just(0u64), 4 => 1u64..1000, 1 => Just(u64::MAX)]
}

fn location_strategy() -> impl Strategy<Value = Location> {
    (
        prop_oneof![9 => 1u64..200, 1 => (PACKED_MAX_SEQ - 5)..(PACKED_MAX_SEQ + 5)],
        prop_oneof![9 => 0u64..1 << 20, 1 => Just(PACKED_MAX_OFFSET + 1)],
        prop_oneof![2 => Just(0u32), 7 => 20u32..5000, 1 => Just(PACKED_MAX_LEN + 1)],
        prop_oneof![9 => 0u16..16, 1 => Just(PACKED_MAX_PARTITION + 1)],
        expiry_strategy(),
    )
        .prop_map(|(seq, offset, len, partition, expire_at_ms)| Location {
            seq,
            offset,
            len,
            partition,
            expire_at_ms,
        })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..40, location_strategy()).prop_map(|(key, location)| Op::Apply { key, location }),
        2 => proptest::collection::vec((0usize..40, location_strategy()), 0..30)
            .prop_map(|changes| Op::ApplyMany { changes }),
        2 => (0usize..40, any::<bool>(), 0u64..1 << 41, 0u16..300, proptest::option::of(expiry_strategy())).prop_map(
            |(key, current, to_offset, to_partition, to_expire_at_ms)| Op::Relocate {
                key, current, to_offset, to_partition, to_expire_at_ms
            }
        ),
        4 => (0usize..40, expiry_strategy()).prop_map(|(key, expire_at_ms)| Op::SetExpiry { key, expire_at_ms }),
        2 => (0usize..40).prop_map(|key| Op::ExpireDelete { key }),
        3 => (0usize..40).prop_map(|key| Op::Get { key }),
        1 => (1usize..20).prop_map(|count| Op::Scan { count }),
        1 => (prop_oneof![0u64..1100, Just(u64::MAX)], 1usize..8)
            .prop_map(|(now_ms, max_keys)| Op::CollectExpired { now_ms, max_keys }),
        1 => Just(Op::DropTombstones),
        1 => (1u64..100).prop_map(|seq| Op::Clear { seq }),
    ]
}

/// The index's ordering rule: a higher seq wins, and so does a tombstone
/// at the seq of a live put.
fn replaces(old: &Location, new: &Location) -> bool {
    let relocated = old.seq == new.seq
        && !old.is_tombstone()
        && !new.is_tombstone()
        && old.partition == new.partition
        && new.offset > old.offset;
    old.seq < new.seq
        || (old.seq == new.seq && new.is_tombstone() && !old.is_tombstone())
        || relocated
}

/// The model's answer to `collect_expired` with no limit, sorted.
fn model_expired(model: &HashMap<Vec<u8>, Location>, now_ms: u64) -> Vec<(Vec<u8>, Location)> {
    let mut expired: Vec<(Vec<u8>, Location)> = model
        .iter()
        .filter(|(_, l)| l.live_expiry().is_some_and(|ms| ms <= now_ms))
        .map(|(k, l)| (k.clone(), *l))
        .collect();
    expired.sort_by(|a, b| a.0.cmp(&b.0));
    expired
}

/// Checks every shard's counts and bounds against a walk of it.
fn audit<S: BuildHasher>(index: &Index<S>) {
    for shard in index.shards.iter() {
        shard.read().audit(&index.hasher);
    }
}

/// Calls `collect_expired` from cursor 0 often enough to go round once
/// (as many calls as a full one needs, plus one), checking each call's
/// answer; returns every key returned, sorted and deduplicated.
fn collect_cycle<S: BuildHasher>(
    index: &Index<S>,
    now_ms: u64,
    max_keys: usize,
    expected: usize,
) -> Vec<(Vec<u8>, Location)> {
    let mut all = Vec::new();
    let mut cursor = 0;
    for _ in 0..expected.div_ceil(max_keys) + 1 {
        let (expired, next) = index.collect_expired(now_ms, cursor, max_keys);
        assert!(expired.len() <= max_keys);
        let distinct: HashSet<&Vec<u8>> = expired.iter().map(|(k, _)| k).collect();
        assert_eq!(distinct.len(), expired.len(), "a call returns a key once");
        all.extend(expired);
        cursor = next;
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup();
    all
}

/// A pool of 8 long keys (2041 to 2062 bytes, the longer ones carrying a
/// LEB128 length): stored in one shard, a few of them gaining a TTL (each a
/// move) leave it mostly dead, so moves compact it.
fn long_key_pool() -> Vec<Vec<u8>> {
    (0..8usize)
        .map(|i| (0..2041 + 3 * i).map(|b| (b * 3 + i) as u8).collect())
        .collect()
}

/// Runs `ops` against `index` and a `HashMap` model, key `n` of an op
/// being `keys[n % keys.len()]`.
fn check_against_model<S: BuildHasher>(
    index: Index<S>,
    keys: Vec<Vec<u8>>,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let pick = |n: usize| n % keys.len();
    let ops = ops.into_iter().map(|op| match op {
        Op::Apply { key, location } => Op::Apply {
            key: pick(key),
            location,
        },
        Op::ApplyMany { changes } => Op::ApplyMany {
            changes: changes.into_iter().map(|(k, l)| (pick(k), l)).collect(),
        },
        Op::Relocate {
            key,
            current,
            to_offset,
            to_partition,
            to_expire_at_ms,
        } => Op::Relocate {
            key: pick(key),
            current,
            to_offset,
            to_partition,
            to_expire_at_ms,
        },
        Op::SetExpiry { key, expire_at_ms } => Op::SetExpiry {
            key: pick(key),
            expire_at_ms,
        },
        Op::ExpireDelete { key } => Op::ExpireDelete { key: pick(key) },
        Op::Get { key } => Op::Get { key: pick(key) },
        other => other,
    });
    let mut model: HashMap<Vec<u8>, Location> = HashMap::new();
    let mut floor = 0;
    for op in ops {
        match op {
            Op::Apply { key, location } => {
                let key = &keys[key];
                let newer = location.seq >= floor
                    && model.get(key).is_none_or(|old| replaces(old, &location));
                if newer {
                    model.insert(key.clone(), location);
                }
                prop_assert_eq!(index.apply(key, location), newer);
            }
            Op::ApplyMany { changes } => {
                let mut newer = 0;
                for (key, location) in &changes {
                    let key = &keys[*key];
                    if location.seq >= floor
                        && model.get(key).is_none_or(|old| replaces(old, location))
                    {
                        model.insert(key.clone(), *location);
                        newer += 1;
                    }
                }
                let changes: Vec<(&[u8], Location)> = changes
                    .iter()
                    .map(|(key, l)| (&keys[*key][..], *l))
                    .collect();
                prop_assert_eq!(index.apply_many(&changes), newer);
            }
            Op::Relocate {
                key,
                current,
                to_offset,
                to_partition,
                to_expire_at_ms,
            } => {
                let key = &keys[key];
                let from = match (current, model.get(key)) {
                    (true, Some(location)) => *location,
                    _ => put(3, to_offset / 2),
                };
                let to = Location {
                    offset: to_offset,
                    partition: to_partition,
                    expire_at_ms: to_expire_at_ms.unwrap_or(from.expire_at_ms),
                    ..from
                };
                let moves = model.get(key).is_some_and(|l| l.same_place(&from));
                if moves {
                    model.insert(key.clone(), to);
                }
                prop_assert_eq!(index.relocate(key, from, to), moves);
            }
            Op::SetExpiry { key, expire_at_ms } => {
                let key = &keys[key];
                let location = match model.get(key) {
                    Some(old) if old.seq < u64::MAX => Location {
                        seq: old.seq + 1,
                        expire_at_ms,
                        ..*old
                    },
                    Some(old) => *old,
                    None => Location {
                        expire_at_ms,
                        ..put(floor.max(1), 0)
                    },
                };
                let newer = location.seq >= floor
                    && model.get(key).is_none_or(|old| replaces(old, &location));
                if newer {
                    model.insert(key.clone(), location);
                }
                prop_assert_eq!(index.apply(key, location), newer);
            }
            Op::ExpireDelete { key } => {
                let key = &keys[key];
                let tombstone = match model.get(key) {
                    Some(old) => Location::tombstone(old.seq, old.partition),
                    None => Location::tombstone(floor.max(1), 0),
                };
                let newer = tombstone.seq >= floor
                    && model.get(key).is_none_or(|old| replaces(old, &tombstone));
                prop_assert_eq!(
                    newer,
                    model.get(key).is_none_or(|old| !old.is_tombstone()),
                    "a tombstone at a put's seq beats it, and only a put"
                );
                if newer {
                    model.insert(key.clone(), tombstone);
                }
                prop_assert_eq!(index.apply(key, tombstone), newer);
            }
            Op::Get { key } => {
                prop_assert_eq!(index.get(&keys[key]), model.get(&keys[key]).copied());
            }
            Op::CollectExpired { now_ms, max_keys } => {
                let expected = model_expired(&model, now_ms);
                let (mut all, _) = index.collect_expired(now_ms, 0, usize::MAX);
                all.sort_by(|a, b| a.0.cmp(&b.0));
                prop_assert_eq!(&all, &expected);
                let cycled = collect_cycle(&index, now_ms, max_keys, expected.len());
                prop_assert_eq!(&cycled, &expected);
                prop_assert_eq!(index.expired_keys_present(now_ms), expected.len() as u64);
            }
            Op::Scan { count } => {
                let mut scanned = scan_all(&index, count);
                scanned.sort_by(|a, b| a.0.cmp(&b.0));
                let mut live: Vec<(Vec<u8>, Location)> = model
                    .iter()
                    .filter(|(_, l)| !l.is_tombstone())
                    .map(|(k, l)| (k.clone(), *l))
                    .collect();
                live.sort_by(|a, b| a.0.cmp(&b.0));
                prop_assert_eq!(scanned, live);
            }
            Op::DropTombstones => {
                let tombstones = model.values().filter(|l| l.is_tombstone()).count() as u64;
                model.retain(|_, l| !l.is_tombstone());
                prop_assert_eq!(index.drop_tombstones(), tombstones);
            }
            Op::Clear { seq } => {
                let removed = model
                    .values()
                    .filter(|l| l.seq < seq && !l.is_tombstone())
                    .count() as u64;
                model.retain(|_, l| l.seq >= seq);
                floor = floor.max(seq);
                prop_assert_eq!(index.clear_below(seq), removed);
            }
        }
        let live = model.values().filter(|l| !l.is_tombstone()).count() as u64;
        prop_assert_eq!(index.live_keys(), live);
        let stats = index.stats();
        prop_assert_eq!(stats.live_keys, live);
        prop_assert_eq!(stats.tombstones, model.len() as u64 - live);
        let expiries: Vec<u64> = model.values().filter_map(Location::live_expiry).collect();
        let sum: u128 = expiries.iter().map(|&ms| u128::from(ms)).sum();
        prop_assert_eq!(index.expiry_totals(), (expiries.len() as u64, sum));
        prop_assert_eq!(index.expiring_keys(), expiries.len() as u64);
        prop_assert_eq!(
            index.avg_expire_at_ms(),
            (!expiries.is_empty()).then(|| (sum / expiries.len() as u128) as u64)
        );
        audit(&index);
    }
    for (key, location) in &model {
        prop_assert_eq!(index.get(key), Some(*location));
    }
    Ok(())
}

proptest! {
    #[test]
    fn the_index_answers_like_a_hash_map(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        check_against_model(Index::new(), key_pool(), ops)?;
    }

    #[test]
    fn a_colliding_index_answers_like_a_hash_map(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        check_against_model(Index::with_hasher(Colliding), key_pool(), ops)?;
    }

    #[test]
    fn an_index_of_long_keys_in_one_shard_answers_like_a_hash_map(
        ops in proptest::collection::vec(op_strategy(), 1..300)
    ) {
        check_against_model(Index::with_hasher(OneShard::default()), long_key_pool(), ops)?;
    }
}

#[test]
fn a_clear_removes_what_is_below_it_and_refuses_it_afterwards() {
    let index = Index::new();
    for i in 0..1000u64 {
        index.apply(format!("k{i}").as_bytes(), put(i + 1, i));
    }
    index.apply(b"k3", Location::tombstone(1001, 0));
    // The clear at 900: keys 0..899 (seq 1..900) and their tombstones go.
    assert_eq!(index.clear_below(900), 898, "live keys removed");
    assert_eq!(index.floor_seq(), 900);
    assert_eq!(index.live_keys(), 101);
    let stats = index.stats();
    assert_eq!((stats.live_keys, stats.tombstones), (101, 1));
    assert_eq!(index.get(b"k0"), None, "removed, not a tombstone");
    assert!(
        index
            .get(b"k3")
            .expect("a newer delete stays")
            .is_tombstone()
    );
    assert_eq!(
        index.get(b"k899"),
        Some(put(900, 899)),
        "at the clear's seq: stays"
    );
    // Late arrivals below the clear are refused, new keys included.
    assert!(!index.apply(b"k5", put(500, 1)));
    assert!(!index.apply(b"fresh", put(899, 1)));
    assert!(index.apply(b"fresh", put(1002, 1)));
    assert_eq!(index.live_keys(), 102);
    // An older clear changes nothing.
    assert_eq!(index.clear_below(10), 0);
    assert_eq!(index.live_keys(), 102);
    let scanned: HashSet<Vec<u8>> = scan_all(&index, 7).into_iter().map(|(k, _)| k).collect();
    assert_eq!(scanned.len(), 102);
    assert!(scanned.contains(&b"fresh"[..]) && !scanned.contains(&b"k0"[..]));
}

#[test]
fn a_clear_racing_with_inserts_keeps_exactly_those_at_or_above_it() {
    const CLEAR_SEQ: u64 = 20_000;
    let index = Index::new();
    let start = Barrier::new(3);
    std::thread::scope(|scope| {
        for writer in 0..2u64 {
            let (index, start) = (&index, &start);
            scope.spawn(move || {
                start.wait();
                // Interleaved seqs on both sides of the clear.
                for i in 0..20_000u64 {
                    let seq = i * 2 + writer;
                    index.apply(format!("w{writer}-{i}").as_bytes(), put(seq, 0));
                }
            });
        }
        start.wait();
        index.clear_below(CLEAR_SEQ);
    });
    let mut expected = 0;
    for writer in 0..2u64 {
        for i in 0..20_000u64 {
            let seq = i * 2 + writer;
            let found = index.get(format!("w{writer}-{i}").as_bytes());
            if seq >= CLEAR_SEQ {
                assert_eq!(found, Some(put(seq, 0)), "seq {seq} stays");
                expected += 1;
            } else {
                assert_eq!(found, None, "seq {seq} is below the clear");
            }
        }
    }
    assert_eq!(index.live_keys(), expected);
    assert_eq!(index.stats().live_keys, expected);
}

fn expiring(seq: u64, offset: u64, expire_at_ms: u64) -> Location {
    Location {
        expire_at_ms,
        ..put(seq, offset)
    }
}

#[test]
fn a_tombstone_at_a_puts_seq_replaces_it_whatever_the_order() {
    let index = Index::new();
    assert!(index.apply(b"k", expiring(5, 10, 1000)));
    assert!(
        index.apply(b"k", Location::tombstone(5, 1)),
        "an expiry delete beats the version it names"
    );
    assert_eq!(index.get(b"k"), Some(Location::tombstone(5, 1)));
    assert_eq!((index.live_keys(), index.expiring_keys()), (0, 0));

    let index = Index::new();
    assert!(index.apply(b"k", Location::tombstone(5, 1)));
    assert!(
        !index.apply(b"k", expiring(5, 10, 1000)),
        "the put it named, arriving later, loses"
    );
    assert_eq!(index.get(b"k"), Some(Location::tombstone(5, 1)));
    assert!(
        !index.apply(b"k", Location::tombstone(5, 2)),
        "a tie between tombstones keeps the first"
    );
    assert_eq!(index.get(b"k"), Some(Location::tombstone(5, 1)));
    assert!(index.apply(b"k", put(6, 20)), "a later write wins");
    assert_eq!(index.get(b"k"), Some(put(6, 20)));
    assert_eq!(index.live_keys(), 1);
    assert!(
        !index.apply(b"k", put(6, 10)),
        "a tie with a put further back in the same value log keeps the entry"
    );
    assert!(
        !index.apply(
            b"k",
            Location {
                partition: 2,
                ..put(6, 30)
            }
        ),
        "a tie with a put of another partition keeps the entry"
    );
    assert_eq!(index.get(b"k"), Some(put(6, 20)));
    assert!(
        index.apply(b"k", put(6, 30)),
        "the same version further on in the same value log is a relocation and wins"
    );
    assert_eq!(index.get(b"k"), Some(put(6, 30)));
    assert_eq!(index.live_keys(), 1);
}

#[test]
fn expiries_are_stored_counted_and_survive_compaction() {
    let index = Index::new();
    let wide = Location {
        seq: PACKED_MAX_SEQ + 1,
        offset: PACKED_MAX_OFFSET + 1,
        expire_at_ms: 700,
        ..put(0, 0)
    };
    let long_key = vec![b'l'; 2100];
    index.apply(b"a", expiring(1, 0, 100));
    index.apply(b"b", expiring(2, 0, 300));
    index.apply(&long_key, expiring(3, 0, u64::MAX));
    index.apply(b"w", wide);
    index.apply(b"plain", put(4, 0));
    index.apply(b"gone", Location::tombstone(5, 0));
    assert_eq!(index.get(b"a"), Some(expiring(1, 0, 100)));
    assert_eq!(index.get(&long_key), Some(expiring(3, 0, u64::MAX)));
    assert_eq!(index.get(b"w"), Some(wide));
    assert_eq!(index.expiring_keys(), 4);
    let sum = 100u128 + 300 + 700 + u128::from(u64::MAX);
    assert_eq!(index.avg_expire_at_ms(), Some((sum / 4) as u64));
    // Removing an expiry keeps the slot (and moves nothing).
    assert!(index.apply(b"a", put(6, 0)));
    assert_eq!(index.get(b"a"), Some(put(6, 0)));
    assert_eq!(index.expiring_keys(), 3);
    assert!(index.apply(b"a", expiring(7, 0, 50)));
    assert_eq!(index.get(b"a"), Some(expiring(7, 0, 50)));
    audit(&index);
    assert_eq!(index.drop_tombstones(), 1);
    for (key, location) in [
        (&b"a"[..], expiring(7, 0, 50)),
        (b"b", expiring(2, 0, 300)),
        (&long_key, expiring(3, 0, u64::MAX)),
        (b"w", wide),
        (b"plain", put(4, 0)),
    ] {
        assert_eq!(index.get(key), Some(location));
    }
    assert_eq!(index.expiring_keys(), 4);
    assert_eq!(
        index.avg_expire_at_ms(),
        Some(((sum - 100 + 50) / 4) as u64)
    );
    audit(&index);
    assert_eq!(Index::new().avg_expire_at_ms(), None);
}

/// A hasher whose hashes differ but all pick shard 0.
#[derive(Clone, Default)]
struct OneShard(DefaultHasher);

impl BuildHasher for OneShard {
    type Hasher = OneShardHasher;
    fn build_hasher(&self) -> OneShardHasher {
        OneShardHasher(self.0.build_hasher())
    }
}

struct OneShardHasher(<DefaultHasher as BuildHasher>::Hasher);

impl Hasher for OneShardHasher {
    fn finish(&self) -> u64 {
        self.0.finish() >> SHARDS.trailing_zeros()
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes)
    }
}

#[test]
fn keys_that_gain_a_ttl_move_and_their_old_bytes_are_compacted_away() {
    const KEYS: u64 = 20_000;
    let index = Index::with_hasher(OneShard::default());
    let key = |i: u64| format!("key:{i}").into_bytes();
    for i in 0..KEYS {
        index.apply(&key(i), put(i + 1, i));
    }
    let generation = || index.shards[0].read().generation();
    let start_generation = generation();
    let compacted_bytes = index.stats().memory_bytes;
    // A walk in small steps, with every key gaining a TTL (each one a
    // move) a few keys per step, in an order that moves keys both ahead of
    // and behind the cursor.
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut cursor = 0;
    let mut next = 0u64;
    let mut generations = HashSet::new();
    loop {
        cursor = index.scan(cursor, 13, |key, _| {
            *seen.entry(key.to_vec()).or_default() += 1
        });
        for _ in 0..20 {
            if next < KEYS {
                let i = (next * 7919) % KEYS;
                assert!(index.apply(&key(i), expiring(KEYS + 1 + i, i, 1000 + i)));
                next += 1;
            }
        }
        generations.insert(generation());
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(next, KEYS, "the walk outlasted the moves");
    assert_ne!(generation(), start_generation, "the shard was compacted");
    for i in 0..KEYS {
        assert!(seen.contains_key(&key(i)), "key {i} missed");
        assert_eq!(
            index.get(&key(i)),
            Some(expiring(KEYS + 1 + i, i, 1000 + i))
        );
    }
    assert!(
        seen.values().all(|&n| n <= 3),
        "no key is passed again and again"
    );
    audit(&index);
    assert_eq!(index.expiring_keys(), KEYS);
    // After the moves, what dead copies remain take less than half the
    // room of the live entries (8 bytes more each than before).
    let per_key = index.stats().memory_bytes as f64 / KEYS as f64;
    let before = compacted_bytes as f64 / KEYS as f64;
    assert!(
        per_key < (before + 8.0) * 1.5,
        "{per_key:.1} bytes per key, {before:.1} before"
    );
    // Once compacted, nothing dead is left and the keys cost 8 bytes more.
    index.drop_tombstones();
    audit(&index);
    let per_key = index.stats().memory_bytes as f64 / KEYS as f64;
    assert!(
        per_key <= before + 8.5,
        "{per_key:.1} bytes per key, {before:.1} before"
    );
    // Keys whose TTL is removed keep their slot (holding 0) until a
    // compaction drops it; one tombstone gives the shard one.
    for i in 0..KEYS {
        index.apply(&key(i), put(3 * KEYS + i, i));
    }
    assert_eq!(index.expiring_keys(), 0);
    assert_eq!(index.expired_keys_present(u64::MAX), 0);
    let slotted = index.stats().memory_bytes;
    index.drop_tombstones();
    assert_eq!(index.stats().memory_bytes, slotted, "nothing to drop");
    index.apply(b"extra", Location::tombstone(4 * KEYS, 0));
    assert_eq!(index.drop_tombstones(), 1);
    audit(&index);
    let per_key = index.stats().memory_bytes as f64 / KEYS as f64;
    assert!(
        per_key <= before + 0.5,
        "{per_key:.1} bytes per key, {before:.1} before"
    );
}

#[test]
fn a_walk_racing_with_moves_misses_no_key() {
    const KEYS: u64 = 40_000;
    let index = Index::new();
    for i in 0..KEYS {
        index.apply(&i.to_be_bytes(), put(i + 1, i));
    }
    let start = Barrier::new(2);
    let scanned = std::thread::scope(|scope| {
        let (index, start) = (&index, &start);
        scope.spawn(move || {
            start.wait();
            // Every key gains a TTL (a move), loses it, and gains one again
            // after the compactions that dropped its slot.
            for round in 0..3u64 {
                for i in 0..KEYS {
                    let seq = (round + 1) * KEYS + i + 1;
                    let expire_at_ms = if round == 1 { 0 } else { 5 + i };
                    index.apply(&i.to_be_bytes(), expiring(seq, i, expire_at_ms));
                }
                if round == 1 {
                    index.drop_tombstones();
                }
            }
        });
        start.wait();
        let mut seen = HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = index.scan(cursor, 50, |key, _| {
                seen.insert(key.to_vec());
            });
            if cursor == 0 {
                return seen;
            }
        }
    });
    for i in 0..KEYS {
        assert!(scanned.contains(&i.to_be_bytes()[..]), "key {i} missed");
        assert_eq!(
            index.get(&i.to_be_bytes()),
            Some(expiring(3 * KEYS + i + 1, i, 5 + i))
        );
    }
    audit(&index);
}

#[test]
fn collect_expired_finds_expired_keys_a_bounded_batch_at_a_time() {
    let index = Index::new();
    // 3000 keys expiring at 1..=3000 ms, 1000 without a TTL, 500 deleted.
    for i in 0..3000u64 {
        index.apply(format!("ttl:{i}").as_bytes(), expiring(i + 1, i, i + 1));
    }
    for i in 0..1000u64 {
        index.apply(format!("plain:{i}").as_bytes(), put(10_000 + i, i));
    }
    for i in 0..500u64 {
        let key = format!("ttl:{i}");
        index.apply(key.as_bytes(), Location::tombstone(i + 1, 1));
    }
    // Nothing is expired at 500 ms: the deleted keys were the first 500.
    assert_eq!(index.expired_keys_present(500), 0);
    assert!(index.collect_expired(500, 0, 100).0.is_empty());
    assert_eq!(index.expired_keys_present(1000), 500);
    assert_eq!(index.expired_keys_present(u64::MAX), 2500);
    assert_eq!(index.expiring_keys(), 2500);
    assert_eq!(
        index.live_keys(),
        3500,
        "an expired key is live until deleted"
    );
    // A full cycle in batches of 64 finds each of the 1500 keys expired at
    // 2000 ms.
    let mut found: HashMap<Vec<u8>, Location> = HashMap::new();
    let mut cursor = 0;
    for _ in 0..1500usize.div_ceil(64) + 1 {
        let (batch, next) = index.collect_expired(2000, cursor, 64);
        assert!(batch.len() <= 64);
        for (key, location) in batch {
            let n: u64 = std::str::from_utf8(&key)
                .expect("utf-8")
                .strip_prefix("ttl:")
                .expect("a TTL key")
                .parse()
                .expect("a number");
            assert!((500..2000).contains(&n), "key {n}");
            assert_eq!(location, expiring(n + 1, n, n + 1));
            found.insert(key, location);
        }
        cursor = next;
    }
    assert_eq!(found.len(), 1500);
    // The caller deletes them (tombstones at their seqs); then none is left,
    // and after one walk every shard's bound is exact again (no walk).
    for (key, location) in &found {
        assert!(index.apply(key, Location::tombstone(location.seq, 0)));
    }
    assert_eq!(index.expired_keys_present(2000), 0);
    assert_eq!(index.expiring_keys(), 1000);
    for shard in index.shards.iter() {
        assert!(shard.read().next_expiry_ms() > 2000, "bound set exactly");
    }
    let (none, _) = index.collect_expired(2000, cursor, 64);
    assert!(none.is_empty());
    // Any cursor is accepted; cursor 0 with room for all finds them all.
    for cursor in [1u64, u64::MAX, 0xdead_beef, (300 << 32) | 5] {
        let (batch, _) = index.collect_expired(u64::MAX, cursor, 10_000);
        assert_eq!(batch.len(), 1000, "cursor {cursor:#x}");
    }
    let (empty, _) = index.collect_expired(u64::MAX, 0, 0);
    assert!(empty.is_empty());
    audit(&index);
}

#[test]
fn a_shard_without_expired_keys_is_not_walked() {
    let index = Index::with_hasher(OneShard::default());
    for i in 0..100u64 {
        index.apply(&i.to_le_bytes(), expiring(i + 1, i, 1000 + i));
    }
    let bound = || index.shards[0].read().next_expiry_ms();
    assert_eq!(bound(), 1000);
    // Raising the smallest expiry leaves the bound low until a walk.
    index.apply(&0u64.to_le_bytes(), expiring(200, 0, 5000));
    assert_eq!(bound(), 1000);
    assert_eq!(index.expired_keys_present(1000), 0);
    assert_eq!(bound(), 1001, "the walk set the bound exactly");
    // A partial walk (the batch is full) leaves it be.
    index.apply(&1u64.to_le_bytes(), expiring(201, 1, 6000));
    let (batch, cursor) = index.collect_expired(1050, 0, 10);
    assert_eq!(batch.len(), 10);
    assert_eq!(bound(), 1001);
    // Going on round to where that stopped walks the shard in two parts,
    // neither of which is a whole walk.
    let (round, next) = index.collect_expired(1050, cursor, 1000);
    assert_eq!(round.len(), 49, "keys 2..=50 expire by 1050");
    assert_eq!(next, cursor, "a whole round ends where it began");
    let mut keys: Vec<Vec<u8>> = batch.iter().chain(&round).map(|(k, _)| k.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 49);
    assert_eq!(bound(), 1001);
    // One walk from the start is whole.
    let (all, next) = index.collect_expired(1050, 0, 1000);
    assert_eq!((all.len(), next), (49, 0));
    assert_eq!(bound(), 1002);
    // All expiries gone: the bound is "none", exactly, without a walk.
    for i in 0..100u64 {
        index.apply(&i.to_le_bytes(), put(300 + i, i));
    }
    assert_eq!(bound(), u64::MAX);
}

#[test]
fn a_mebi_keys_of_8_bytes_with_a_ttl_take_at_most_40_bytes_each() {
    for reserve in [false, true] {
        let index = Index::new();
        let keys = 1u64 << 20;
        if reserve {
            index.reserve(keys);
        }
        for i in 0..keys {
            index.apply(
                &i.to_le_bytes(),
                expiring(i + 1, i * 40, 1_700_000_000_000 + i),
            );
        }
        let stats = index.stats();
        assert_eq!((stats.live_keys, index.expiring_keys()), (keys, keys));
        let per_key = stats.memory_bytes as f64 / keys as f64;
        assert!(
            per_key <= 40.0,
            "{per_key:.1} bytes per key (reserve {reserve})"
        );
    }
}
