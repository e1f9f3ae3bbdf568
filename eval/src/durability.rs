//! `eval durability-write` and `eval durability-verify`: a write load over
//! the Redis protocol that records every acknowledged key in a journal, and
//! a check that every journaled key reads back with its value. Together they
//! show that nothing acknowledged is lost when a node of a deployment is
//! killed in between (the deployment test kills the storage container while
//! the writer runs).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::store::redis_url;
use crate::workload::{check_value, fill_value};

/// Options of `durability-write`.
#[derive(clap::Args, Clone)]
pub struct WriteArgs {
    /// The Redis-protocol server, HOST:PORT or a redis:// URL.
    #[arg(long)]
    resp: String,
    /// File that receives one line per acknowledged key.
    #[arg(long)]
    journal: PathBuf,
    /// How long to keep writing.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
    /// Prefix of the keys (distinct runs use distinct prefixes).
    #[arg(long, default_value = "durable")]
    prefix: String,
}

/// Options of `durability-verify`.
#[derive(clap::Args, Clone)]
pub struct VerifyArgs {
    /// The Redis-protocol server, HOST:PORT or a redis:// URL.
    #[arg(long)]
    resp: String,
    /// The journal `durability-write` wrote.
    #[arg(long)]
    journal: PathBuf,
    /// Bytes per value.
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
}

fn connect(address: &str) -> Result<redis::Connection> {
    let client = redis::Client::open(redis_url(address))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    conn.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(conn)
}

/// Writes distinct keys until the time is up, journaling each one the
/// server acknowledged; rides out errors (a node restarting) by retrying
/// with new keys. True if some writes were acknowledged, and some after the
/// last error (the deployment recovered).
pub fn write(args: WriteArgs) -> Result<bool> {
    let mut journal = std::fs::File::create(&args.journal)
        .with_context(|| format!("creating {}", args.journal.display()))?;
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut conn = None;
    let mut value = vec![0u8; args.value_size];
    let (mut acked, mut errors, mut acked_since_error) = (0u64, 0u64, 0u64);
    let mut i = 0u64;
    while Instant::now() < deadline {
        let c = match conn.take() {
            Some(c) => c,
            None => match connect(&args.resp) {
                Ok(c) => c,
                Err(_) => {
                    errors += 1;
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            },
        };
        let mut c = c;
        let key = format!("{}-{i:08}", args.prefix);
        i += 1;
        fill_value(key.as_bytes(), 0, &mut value);
        match redis::cmd("SET").arg(&key).arg(&value).query::<()>(&mut c) {
            Ok(()) => {
                writeln!(journal, "{key}")?;
                journal.flush()?;
                acked += 1;
                acked_since_error += 1;
                conn = Some(c);
            }
            Err(e) => {
                errors += 1;
                acked_since_error = 0;
                if !e.is_io_error() && !e.is_connection_dropped() {
                    conn = Some(c);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    journal.sync_all()?;
    println!(
        "durability-write: {acked} acknowledged, {errors} failed attempts, {acked_since_error} acknowledged after the last failure"
    );
    Ok(acked > 0 && acked_since_error > 0)
}

/// Reads back every journaled key. True if all are there with their values.
pub fn verify(args: VerifyArgs) -> Result<bool> {
    let journal = std::fs::File::open(&args.journal)
        .with_context(|| format!("opening {}", args.journal.display()))?;
    let mut conn = connect(&args.resp)?;
    let (mut verified, mut missing, mut wrong) = (0u64, 0u64, 0u64);
    let mut scratch = Vec::new();
    for line in BufReader::new(journal).lines() {
        let key = line?;
        if key.is_empty() {
            continue;
        }
        let value: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query(&mut conn)?;
        match value {
            Some(v) if check_value(key.as_bytes(), 0, &v, args.value_size, &mut scratch) => {
                verified += 1
            }
            Some(_) => {
                wrong += 1;
                eprintln!("durability-verify: {key} has a wrong value");
            }
            None => {
                missing += 1;
                eprintln!("durability-verify: {key} is missing");
            }
        }
    }
    println!("durability-verify: {verified} verified, {missing} missing, {wrong} wrong");
    Ok(verified > 0 && missing == 0 && wrong == 0)
}
