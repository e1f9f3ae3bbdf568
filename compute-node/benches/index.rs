//! Index benchmark: bytes per key (the index's own accounting and the
//! process's RSS growth) and insert and lookup throughput on 1 and 2
//! threads, for the compute node's index and, in the same run, for
//! `hashbrown::HashMap<Vec<u8>, Location>`.
//!
//! Each memory case runs in a child process of its own, so that the RSS
//! delta of one case is not hidden by memory an earlier case freed.
//!
//! `cargo bench -p compute-node --bench index` (add `-- --quick` for the
//! small sizes only).

use std::hash::BuildHasher;
use std::process::Command;
use std::sync::Barrier;
use std::time::Instant;

use compute_node::index::{Index, Location};
use parking_lot::RwLock;

type Reference = hashbrown::HashMap<Vec<u8>, Location>;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// The `i`-th key of `len` bytes (distinct for every `i` below 2^(8 len)).
fn fill_key(key: &mut [u8], i: u64) {
    let n = key.len().min(8);
    key[..n].copy_from_slice(&i.to_le_bytes()[..n]);
}

fn location(i: u64) -> Location {
    Location {
        seq: i + 1,
        offset: i * 41,
        len: 41,
        partition: (i % 16) as u16,
    }
}

/// Child process: builds one structure and prints its accounted bytes
/// and the RSS growth it caused.
fn memory_case(structure: &str, key_len: usize, keys: u64) {
    let before = rss_bytes();
    let mut key = vec![0xabu8; key_len];
    match structure {
        "index" | "index-presized" => {
            let index = Index::new();
            if structure == "index-presized" {
                index.reserve(keys);
            }
            for i in 0..keys {
                fill_key(&mut key, i);
                index.apply(&key, location(i));
            }
            let accounted = index.stats().memory_bytes;
            println!("{accounted} {}", rss_bytes().saturating_sub(before));
        }
        "hashbrown" => {
            let mut map = Reference::default();
            for i in 0..keys {
                fill_key(&mut key, i);
                map.insert(key.clone(), location(i));
            }
            let accounted = map.allocation_size() as u64 + keys * key_len as u64;
            println!("{accounted} {}", rss_bytes().saturating_sub(before));
        }
        other => eprintln!("unknown structure {other}"),
    }
}

fn run_memory_case(structure: &str, key_len: usize, keys: u64) -> Option<(f64, f64)> {
    let exe = std::env::current_exe().ok()?;
    let output = Command::new(exe)
        .args([
            "--memory-case",
            structure,
            &key_len.to_string(),
            &keys.to_string(),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut numbers = text
        .split_whitespace()
        .filter_map(|n| n.parse::<f64>().ok());
    let accounted = numbers.next()?;
    let rss = numbers.next()?;
    Some((accounted / keys as f64, rss / keys as f64))
}

/// Runs `work(thread, range)` on `threads` threads over `0..keys` split
/// evenly; returns operations per second.
fn timed(threads: usize, keys: u64, work: impl Fn(u64, u64) + Sync) -> f64 {
    let start = Barrier::new(threads + 1);
    let per_thread = keys / threads as u64;
    let elapsed = std::thread::scope(|scope| {
        for t in 0..threads as u64 {
            let (work, start) = (&work, &start);
            scope.spawn(move || {
                start.wait();
                work(t * per_thread, (t + 1) * per_thread);
            });
        }
        start.wait();
        Instant::now()
    });
    // The scope returns once every thread has finished.
    let seconds = elapsed.elapsed().as_secs_f64();
    (per_thread * threads as u64) as f64 / seconds
}

fn throughput_index<S: BuildHasher + Sync>(
    index: &Index<S>,
    threads: usize,
    keys: u64,
) -> (f64, f64) {
    let insert = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        for i in from..to {
            fill_key(&mut key, i);
            index.apply(&key, location(i));
        }
    });
    let lookup = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        let mut found = 0u64;
        for i in from..to {
            fill_key(&mut key, i.wrapping_mul(0x9E37_79B9) % keys);
            found += u64::from(index.get(&key).is_some());
        }
        assert_eq!(found, to - from);
    });
    (insert, lookup)
}

/// Key-log chunk of a rebuild: about 1 MiB of one-entry frames with 8-byte keys.
const CHUNK_CHANGES: u64 = 26_214;

/// Inserts through [`Index::apply_many`] a chunk at a time, as a rebuild
/// does; returns operations per second.
fn batched_insert<S: BuildHasher + Sync>(index: &Index<S>, threads: usize, keys: u64) -> f64 {
    timed(threads, keys, |from, to| {
        let mut chunk: Vec<([u8; 8], Location)> = Vec::with_capacity(CHUNK_CHANGES as usize);
        let mut i = from;
        while i < to {
            chunk.clear();
            let end = (i + CHUNK_CHANGES).min(to);
            for j in i..end {
                let mut key = [0u8; 8];
                fill_key(&mut key, j);
                chunk.push((key, location(j)));
            }
            let changes: Vec<(&[u8], Location)> = chunk.iter().map(|(k, l)| (&k[..], *l)).collect();
            index.apply_many(&changes);
            i = end;
        }
    })
}

fn throughput_reference(threads: usize, keys: u64) -> (f64, f64) {
    let map = RwLock::new(Reference::default());
    let insert = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        for i in from..to {
            fill_key(&mut key, i);
            map.write().insert(key.to_vec(), location(i));
        }
    });
    let lookup = timed(threads, keys, |from, to| {
        let mut key = [0u8; 8];
        let mut found = 0u64;
        for i in from..to {
            fill_key(&mut key, i.wrapping_mul(0x9E37_79B9) % keys);
            found += u64::from(map.read().get(&key[..]).is_some());
        }
        assert_eq!(found, to - from);
    });
    (insert, lookup)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--memory-case") {
        let key_len = args[3].parse().expect("key length");
        let keys = args[4].parse().expect("key count");
        memory_case(&args[2], key_len, keys);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let mebi = 1u64 << 20;
    let mut cases = vec![
        (8usize, mebi),
        (16, mebi),
        (40, mebi),
        (100, mebi),
        (1024, mebi / 4),
    ];
    if !quick {
        cases.push((1024, mebi));
        cases.push((8, 16 * mebi));
    }
    println!(
        "memory (bytes per key: accounted / RSS delta; bound for the index: 32 for 8-byte keys, key length + 24)"
    );
    println!(
        "{:>9} {:>9} {:>22} {:>22}",
        "key bytes", "keys", "index", "hashbrown<Vec<u8>,_>"
    );
    for (key_len, keys) in cases {
        let show = |r: Option<(f64, f64)>| {
            r.map_or_else(
                || "failed".to_string(),
                |(a, rss)| format!("{a:.1} / {rss:.1}"),
            )
        };
        let index = show(run_memory_case("index", key_len, keys));
        let presized = show(run_memory_case("index-presized", key_len, keys));
        let reference = show(run_memory_case("hashbrown", key_len, keys));
        println!("{key_len:>9} {keys:>9} {index:>22} {presized:>22} {reference:>22}");
    }

    let keys = if quick { mebi / 4 } else { mebi };
    println!();
    println!("throughput, {keys} 8-byte keys (Mops/s; hashbrown behind one RwLock)");
    println!(
        "{:>7} {:>14} {:>14} {:>16} {:>16} {:>16} {:>16}",
        "threads",
        "index insert",
        "index lookup",
        "presized insert",
        "presized batched",
        "hashbrown insert",
        "hashbrown lookup"
    );
    for threads in [1usize, 2] {
        let (insert, lookup) = throughput_index(&Index::new(), threads, keys);
        let presized = Index::new();
        presized.reserve(keys);
        let (presized_insert, _) = throughput_index(&presized, threads, keys);
        let batched = Index::new();
        batched.reserve(keys);
        let batched_insert = batched_insert(&batched, threads, keys);
        let (ref_insert, ref_lookup) = throughput_reference(threads, keys);
        println!(
            "{threads:>7} {:>14.2} {:>14.2} {:>16.2} {:>16.2} {:>16.2} {:>16.2}",
            insert / 1e6,
            lookup / 1e6,
            presized_insert / 1e6,
            batched_insert / 1e6,
            ref_insert / 1e6,
            ref_lookup / 1e6
        );
    }
}
