//! What the evaluator writes and reads: keys and values derived from
//! numbers, so that every value read can be checked without keeping a copy,
//! and the order of the hot random read.

/// A bijective 64-bit mixer (splitmix64's finaliser): distinct inputs give
/// distinct, random-looking outputs.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The 8-byte key of writer `thread`'s `i`-th put. Distinct for every
/// `(thread, i)` with `i < 2^40`.
pub fn key(thread: usize, i: u64) -> [u8; 8] {
    mix(((thread as u64) << 40) | i).to_be_bytes()
}

/// Fills `out` with the value that belongs to `key` (and `version`, for
/// tests that overwrite): a pseudo-random stream seeded by both.
pub fn fill_value(key: &[u8], version: u64, out: &mut [u8]) {
    let mut seed = version.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (i, b) in key.iter().enumerate() {
        seed ^= u64::from(*b) << ((i % 8) * 8);
    }
    let mut state = mix(seed) | 1;
    let mut chunks = out.chunks_exact_mut(8);
    for chunk in &mut chunks {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let bytes = state.to_le_bytes();
        rest.copy_from_slice(&bytes[..rest.len()]);
    }
}

/// True if `value` is exactly what [`fill_value`] makes for `key` and
/// `version` at this length. `scratch` is reused to avoid an allocation.
pub fn check_value(
    key: &[u8],
    version: u64,
    value: &[u8],
    expected_len: usize,
    scratch: &mut Vec<u8>,
) -> bool {
    if value.len() != expected_len {
        return false;
    }
    scratch.resize(expected_len, 0);
    fill_value(key, version, scratch);
    scratch[..] == *value
}

/// The writer whose keys reader `thread` reads: the one half way round.
pub fn partner(thread: usize, threads: usize) -> usize {
    (thread + threads / 2) % threads
}

/// The order in which the hot random read visits a writer's `keys` keys:
/// regions of `per_region` consecutive keys (about 10 MiB of the writer's
/// log), from the newest region to the oldest, each visited in a shuffled
/// order; every key exactly once. Region edges fall wherever the keys
/// fall, not on the storage node's blocks.
pub fn hot_order(keys: u64, per_region: u64, seed: u64) -> Vec<u64> {
    let per_region = per_region.max(1);
    let mut order = Vec::with_capacity(keys as usize);
    let mut top = keys;
    let mut state = mix(seed) | 1;
    while top > 0 {
        let bottom = top.saturating_sub(per_region);
        let start = order.len();
        order.extend(bottom..top);
        let region = &mut order[start..];
        for i in (1..region.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            region.swap(i, (state % (i as u64 + 1)) as usize);
        }
        top = bottom;
    }
    order
}

/// Keys per hot region: as many as fill `region_bytes` of log with records
/// of `record_bytes`.
pub fn keys_per_region(region_bytes: u64, record_bytes: u64) -> u64 {
    (region_bytes / record_bytes.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_across_threads_and_indexes() {
        let mut seen = HashSet::new();
        for t in 0..16 {
            for i in 0..5000 {
                assert!(seen.insert(key(t, i)), "duplicate key for ({t}, {i})");
            }
        }
    }

    #[test]
    fn values_derive_from_keys_and_check() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        fill_value(&key(1, 2), 0, &mut a);
        fill_value(&key(1, 3), 0, &mut b);
        assert_ne!(a, b, "different keys, different values");
        let mut scratch = Vec::new();
        assert!(check_value(&key(1, 2), 0, &a, 4096, &mut scratch));
        assert!(!check_value(&key(1, 3), 0, &a, 4096, &mut scratch));
        assert!(
            !check_value(&key(1, 2), 1, &a, 4096, &mut scratch),
            "another version"
        );
        let mut flipped = a.clone();
        flipped[4000] ^= 1;
        assert!(!check_value(&key(1, 2), 0, &flipped, 4096, &mut scratch));
        assert!(!check_value(&key(1, 2), 0, &a[..4095], 4096, &mut scratch));
        let mut odd = vec![0u8; 13];
        fill_value(b"k", 0, &mut odd);
        assert!(check_value(b"k", 0, &odd, 13, &mut scratch));
    }

    #[test]
    fn readers_pair_with_the_writer_half_way_round() {
        assert_eq!(partner(0, 16), 8);
        assert_eq!(partner(9, 16), 1);
        assert_eq!(partner(0, 1), 0);
        let readers: HashSet<usize> = (0..16).map(|t| partner(t, 16)).collect();
        assert_eq!(
            readers.len(),
            16,
            "every writer is read by exactly one reader"
        );
    }

    #[test]
    fn the_hot_order_visits_every_key_once_newest_region_first() {
        let keys = 10_000;
        let per_region = 2542;
        let order = hot_order(keys, per_region, 7);
        assert_eq!(order.len(), keys as usize);
        let unique: HashSet<u64> = order.iter().copied().collect();
        assert_eq!(unique.len(), keys as usize, "every key exactly once");
        let regions: Vec<&[u64]> = order.chunks(per_region as usize).collect();
        assert!(
            regions[0].iter().all(|&k| k >= keys - per_region),
            "the first region is the newest"
        );
        for pair in regions.windows(2) {
            let older_max = pair[1].iter().max().expect("keys");
            let newer_min = pair[0].iter().min().expect("keys");
            assert!(older_max < newer_min, "regions move from newest to oldest");
        }
        let first = regions[0];
        assert!(
            first.windows(2).any(|w| w[0] > w[1]),
            "inside a region the order is shuffled"
        );
    }

    #[test]
    fn region_edges_are_not_aligned_to_blocks() {
        let record = splitkv_common::record::value_record_len(8, 4096) as u64;
        let per_region = keys_per_region(10 << 20, record);
        assert!(
            per_region * record <= 10 << 20,
            "a region's records fit in 10 MiB"
        );
        assert_ne!(
            (per_region * record) % 4096,
            0,
            "region edges are not on 4 KiB blocks"
        );
    }
}
