//! `eval crash`: writers put, overwrite, delete and batch-write keys
//! through a compute-node [`Engine`] (each batch through a random partition,
//! so overwrites and deletes land on other partitions than the writes
//! before them) while the test kill -9s the storage node, or a compute node
//! running the writers, at a random moment. Then it reads every key back
//! through a fresh compute node and has the journal
//! ([`storage_node::crash_journal`]) check it: every acknowledged put reads
//! back with its latest acknowledged value, no acknowledged delete came
//! back, no value is wrong, and every batch under way at the kill is there
//! whole or not at all. A round with no acknowledged batch fails.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use compute_node::{Engine, EngineConfig, EngineError};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use storage_node::crash_journal::{
    Batch, BatchSource, Journal, KeySpace, LineRecorder, Mix, Op, Outcome, Recorder, SharedJournal,
    run_writer,
};

use crate::node::OwnCluster;

/// Longest wait for a writer process's first batch (it connects and
/// rebuilds its index first).
const FIRST_BATCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of `eval crash`.
#[derive(clap::Args, Clone)]
pub struct CrashArgs {
    /// Rounds; every third one kills a compute node instead of the storage
    /// node.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Writer threads.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Keys each writer works on (at least 12, the largest batch).
    #[arg(long, default_value_t = 200)]
    keys_per_thread: u64,
    /// Partitions of the storage node.
    #[arg(long, default_value_t = 16)]
    partitions: usize,
    /// Latest moment of the kill after the writers start, in milliseconds
    /// (the kill lands at a random moment from a fifth of this on).
    #[arg(long, default_value_t = 1500)]
    max_kill_ms: u64,
    /// Seed of the random choices (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Options of the hidden `crash-writer` subcommand.
#[derive(clap::Args, Clone)]
pub struct WriterArgs {
    /// The storage node, HOST:PORT.
    #[arg(long)]
    storage: String,
    /// The compute node's certificate directory.
    #[arg(long)]
    certs: PathBuf,
    #[arg(long)]
    threads: usize,
    #[arg(long)]
    keys_per_thread: u64,
    #[arg(long)]
    round: u64,
    #[arg(long)]
    seed: u64,
}

/// What the writers run: single puts and deletes, and batches of puts
/// whose values add up to about a quarter of a write buffer (1 MiB) and
/// some to more than a buffer, so that many of them switch buffers in
/// their middle. Batches through the compute node hold puts only.
fn mix() -> Mix {
    Mix {
        multi_percent: 20,
        multi_ops: 4..12,
        delete_percent: 20,
        deletes_in_multi: false,
        single_value_bytes: 1..6000,
        multi_value_bytes: 8 << 10..64 << 10,
        empty_percent: 5,
        large_percent: 1,
        large_value_bytes: 1_200_000,
    }
}

/// Writes `batch` through `engine`: a single put or delete on its own, a
/// batch of several with one `put_many`.
fn write_batch(engine: &Engine, batch: &Batch) -> compute_node::Result<()> {
    let link = (batch.route % engine.partitions() as u64) as usize;
    match batch.ops.as_slice() {
        [(key, Op::Delete)] => engine.delete_on(link, key.as_bytes()).map(|_| ()),
        [(key, op)] => {
            let value = op.value(key).unwrap_or_default();
            engine.put_on(link, key.as_bytes(), &value)
        }
        ops => {
            let values: Vec<Vec<u8>> = ops
                .iter()
                .map(|(key, op)| op.value(key).unwrap_or_default())
                .collect();
            let items: Vec<(&[u8], &[u8])> = ops
                .iter()
                .zip(&values)
                .map(|((key, _), value)| (key.as_bytes(), value.as_slice()))
                .collect();
            engine.put_many_on(link, &items)
        }
    }
}

/// Runs writer threads `0..threads` on `engine` until `stop` (if any) is
/// set or a write fails, each recording into `recorder`.
fn run_writers(
    engine: &Engine,
    keys: KeySpace,
    round: u64,
    seed: u64,
    recorder: &dyn Recorder,
    stop: Option<&AtomicBool>,
) {
    std::thread::scope(|scope| {
        for writer in 0..keys.writers {
            scope.spawn(move || {
                let mut source = BatchSource::new(keys, writer, round, seed, mix());
                // A failed write ends the writer; it stays under way in the
                // journal.
                let _ = run_writer(&mut source, recorder, stop, |batch| {
                    write_batch(engine, batch)
                });
            });
        }
    });
}

/// Per-round outcome.
#[derive(Debug, Clone, Serialize)]
struct RoundReport {
    round: usize,
    /// storage or compute.
    killed: &'static str,
    kill_after_ms: u64,
    /// For storage-node kills: how long the surviving compute node took to
    /// write again on every connection once the storage node was back.
    recovery_ms: Option<u64>,
    /// Operations acknowledged in the round.
    acknowledged: u64,
    /// Batches acknowledged in the round.
    acknowledged_batches: u64,
    /// Operations under way at the kill.
    in_flight: usize,
    /// Batches under way at the kill, and those of several operations.
    in_flight_batches: usize,
    in_flight_multi_batches: usize,
    /// Of the batches under way: found wholly there, found wholly absent.
    in_flight_applied: usize,
    in_flight_not_applied: usize,
    verified: u64,
    lost: u64,
    wrong: u64,
    resurrected: u64,
    /// Batches under way at the kill found there in part.
    torn_batches: u64,
    /// The journal's verdict, before the recovery check.
    journal_passed: bool,
}

impl RoundReport {
    fn new(
        round: usize,
        killed: &'static str,
        kill_after_ms: u64,
        outcome: &Outcome,
    ) -> RoundReport {
        RoundReport {
            round,
            killed,
            kill_after_ms,
            recovery_ms: None,
            acknowledged: outcome.acknowledged_ops,
            acknowledged_batches: outcome.acknowledged_batches,
            in_flight: outcome.open_ops,
            in_flight_batches: outcome.open_batches,
            in_flight_multi_batches: outcome.open_multi_batches,
            in_flight_applied: outcome.open_applied,
            in_flight_not_applied: outcome.open_not_applied,
            verified: outcome.verified,
            lost: outcome.lost,
            wrong: outcome.wrong,
            resurrected: outcome.resurrected,
            torn_batches: outcome.torn_batches,
            journal_passed: outcome.passed(),
        }
    }

    fn passed(&self) -> bool {
        self.journal_passed && self.wrong == 0
    }
}

/// Runs the crash rounds; true if every round passed.
pub fn run(args: CrashArgs) -> Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let largest_batch = mix().multi_ops.end as u64;
    if args.keys_per_thread < largest_batch {
        return Err(anyhow!(
            "--keys-per-thread must be at least {largest_batch}, the largest batch"
        ));
    }
    eprintln!("crash test: {} rounds, seed {seed}", args.rounds);
    let mut cluster = OwnCluster::start(None, args.partitions)?;
    let port = cluster.node.as_ref().map_or(0, |n| n.addr.port());
    let mut journal = Journal::default();
    let mut reports = Vec::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..args.rounds {
        let kill_after = rng.random_range(args.max_kill_ms / 5..=args.max_kill_ms.max(1));
        let round_seed = seed.wrapping_add(round as u64 * 7919);
        let compute = round % 3 == 2;
        journal.begin_round();
        let report = if compute {
            compute_round(&args, &cluster, &mut journal, round, round_seed, kill_after)?
        } else {
            storage_round(
                &args,
                &mut cluster,
                port,
                &mut journal,
                round,
                round_seed,
                kill_after,
            )?
        };
        let recovery = report
            .recovery_ms
            .map_or(String::new(), |ms| format!(", writing again after {ms} ms"));
        println!(
            "round {:>2}: kill -9 of the {:<7} after {:>4} ms: {:>6} acknowledged, {:>2} in flight in {} batches ({} of several; {} whole, {} absent), {:>5} keys verified, {} lost, {} wrong, {} resurrected, {} torn{recovery}{}",
            report.round,
            report.killed,
            report.kill_after_ms,
            report.acknowledged,
            report.in_flight,
            report.in_flight_batches,
            report.in_flight_multi_batches,
            report.in_flight_applied,
            report.in_flight_not_applied,
            report.verified,
            report.lost,
            report.wrong,
            report.resurrected,
            report.torn_batches,
            if report.passed() { "" } else { "  FAILED" }
        );
        reports.push(report);
    }
    cluster.stop()?;
    let passed = reports.iter().all(RoundReport::passed);
    if let Some(path) = &args.json {
        let doc = serde_json::json!({ "seed": seed, "passed": passed, "rounds": reports });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(passed)
}

fn crash_engine_config(cluster: &OwnCluster) -> Result<EngineConfig> {
    let mut config = crate::engine_config(cluster.storage(), &cluster.compute_certs)?;
    config.reconnect_wait_ms = 300;
    config.request_timeout_ms = 1_000;
    Ok(config)
}

fn key_space(args: &CrashArgs) -> KeySpace {
    KeySpace {
        writers: args.threads,
        keys_per_writer: args.keys_per_thread,
    }
}

fn storage_round(
    args: &CrashArgs,
    cluster: &mut OwnCluster,
    port: u16,
    journal: &mut Journal,
    round: usize,
    seed: u64,
    kill_after: u64,
) -> Result<RoundReport> {
    let engine = Engine::connect(crash_engine_config(cluster)?)?;
    let shared = SharedJournal::new(std::mem::take(journal));
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<()> {
        let (engine, shared, stop) = (&engine, &shared, &stop);
        scope.spawn(move || {
            run_writers(
                engine,
                key_space(args),
                round as u64,
                seed,
                shared,
                Some(stop),
            );
        });
        std::thread::sleep(Duration::from_millis(kill_after));
        let killed = cluster.kill9();
        stop.store(true, Ordering::Relaxed);
        killed
    })?;
    *journal = shared.into_inner();
    cluster.restart(port)?;
    // The compute node that lived through the crash writes again, on every
    // connection, within 10 s of the storage node being back.
    let back = std::time::Instant::now();
    let mut recovered = 0;
    for link in 0..engine.partitions() {
        while back.elapsed() < Duration::from_secs(10) {
            if engine
                .put_on(link, format!("probe-{link}").as_bytes(), b"after the crash")
                .is_ok()
            {
                recovered += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let recovery = back.elapsed();
    drop(engine);
    let mut report = verify(args, cluster, journal, round, "storage", kill_after)?;
    report.recovery_ms = Some(recovery.as_millis() as u64);
    if recovered < args.partitions {
        eprintln!(
            "round {round}: only {recovered} of {} connections wrote again within 10 s",
            args.partitions
        );
        report.wrong += 1;
    }
    Ok(report)
}

fn compute_round(
    args: &CrashArgs,
    cluster: &OwnCluster,
    journal: &mut Journal,
    round: usize,
    seed: u64,
    kill_after: u64,
) -> Result<RoundReport> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["crash-writer", "--storage", &cluster.storage()])
        .arg("--certs")
        .arg(&cluster.compute_certs)
        .args(["--threads", &args.threads.to_string()])
        .args(["--keys-per-thread", &args.keys_per_thread.to_string()])
        .args(["--round", &round.to_string()])
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the compute-node writer")?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no stdout from the writer"))?;
    let shared = Arc::new(SharedJournal::new(std::mem::take(journal)));
    let reader = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || shared.read_events(BufReader::new(stdout)))
    };
    // The writer connects (rebuilding its index) before it writes: time the
    // kill from its first batch.
    if !shared.wait_for_first_event(FIRST_BATCH_TIMEOUT) {
        eprintln!("round {round}: the writer began no batch within {FIRST_BATCH_TIMEOUT:?}");
    }
    std::thread::sleep(Duration::from_millis(kill_after));
    child.kill().context("kill -9 of the compute node")?;
    child.wait()?;
    reader
        .join()
        .map_err(|_| anyhow!("the journal reader panicked"))?;
    *journal = Arc::try_unwrap(shared)
        .map_err(|_| anyhow!("journal still shared"))?
        .into_inner();
    verify(args, cluster, journal, round, "compute", kill_after)
}

/// Checks every key through a fresh compute node and settles the journal
/// on what is there.
fn verify(
    args: &CrashArgs,
    cluster: &OwnCluster,
    journal: &mut Journal,
    round: usize,
    killed: &'static str,
    kill_after: u64,
) -> Result<RoundReport> {
    // The checking node has the default request deadline, not the writers'
    // short one: it checks what is stored, not how fast it answers.
    let engine = Engine::connect(crate::engine_config(
        cluster.storage(),
        &cluster.compute_certs,
    )?)
    .context("connecting a fresh compute node")?;
    let outcome = journal.verify(key_space(args).keys(), |key| {
        read_for_check(&engine, key, round)
    });
    for failure in &outcome.failures {
        eprintln!("round {round}: {failure}");
    }
    Ok(RoundReport::new(round, killed, kill_after, &outcome))
}

/// Attempts at reading one key while checking; a failed read (a deadline,
/// a lost connection) says nothing about what is stored, so it is tried
/// again, and only the last failure counts.
const READ_ATTEMPTS: usize = 3;

/// Reads `key` for the check, trying a failed read again up to
/// [`READ_ATTEMPTS`] times in all. A value that reads back wrong is never
/// tried again: it is the answer.
fn read_for_check(
    engine: &Engine,
    key: &str,
    round: usize,
) -> Result<Option<Vec<u8>>, EngineError> {
    let mut attempt = 1;
    loop {
        match engine.get(key.as_bytes()) {
            Ok(value) => return Ok(value.map(|v| v.to_vec())),
            Err(e) if attempt < READ_ATTEMPTS => {
                eprintln!("round {round}: reading {key} failed ({e}); trying again");
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Body of `crash-writer`: a compute node of its own running the writers,
/// reporting each batch on stdout before it starts and after its
/// acknowledgement (see [`storage_node::crash_journal::Event`]), until it
/// is killed.
pub fn writer(args: WriterArgs) -> Result<()> {
    let mut config = crate::engine_config(args.storage, &args.certs)?;
    config.reconnect_wait_ms = 300;
    let engine = Engine::connect(config)?;
    let keys = KeySpace {
        writers: args.threads,
        keys_per_writer: args.keys_per_thread,
    };
    let recorder = LineRecorder::new(std::io::stdout());
    run_writers(&engine, keys, args.round, args.seed, &recorder, None);
    Ok(())
}
