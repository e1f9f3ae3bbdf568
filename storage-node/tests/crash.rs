//! `kill -9` of a process writing to the storage engine loses nothing
//! acknowledged and leaves every batch whole or absent.
//!
//! A child process (this test binary, re-run in child mode) opens the store
//! and runs writer threads that put, overwrite, delete and batch-write keys
//! straight through [`StorageEngine::write`], each batch on a random
//! partition, so overwrites and deletes land on other partitions than the
//! writes before them. The writers report every batch on stdout as begun
//! and as acknowledged ([`storage_node::crash_journal`]). The parent kills
//! the child with SIGKILL at a random moment, sometimes while the value-log
//! writes are slowed or hang (so that the writers wait for buffers in the
//! middle of their batches), reopens the store, reads every key back through
//! an index built from the key logs, and has the journal check it.

mod support;

use std::convert::Infallible;
use std::io::BufReader;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use storage_node::crash_journal::{
    Batch, BatchSource, Journal, KeySpace, LineRecorder, Mix, Outcome, SharedJournal, run_writer,
};
use storage_node::{GcConfig, StorageConfig, StorageEngine, WriteAck, WriteOp};
use support::faults::{FaultDisk, FaultPlan};
use support::{build_index, get, small_config};

const CHILD_DIR_ENV: &str = "SPLITKV_CRASH_CHILD";
const CHILD_MODE_ENV: &str = "SPLITKV_CRASH_MODE";
const CHILD_ROUND_ENV: &str = "SPLITKV_CRASH_ROUND";
const PARTITIONS: usize = 4;
const KEYS: KeySpace = KeySpace {
    writers: 4,
    keys_per_writer: 40,
};
/// Longest wait for the child's first batch (it opens the store first).
const FIRST_BATCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How the child's disk misbehaves in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disturbance {
    None,
    /// Every value-log write sleeps this many milliseconds first.
    SlowFlush(usize),
    /// Value-log writes from this one on never complete. The first
    /// value-log write of a run is the O_DIRECT probe at open, so a pause
    /// from write 1 on stops the very first buffer flush.
    PausedFlush(usize),
}

impl Disturbance {
    fn render(self) -> String {
        match self {
            Disturbance::None => String::new(),
            Disturbance::SlowFlush(ms) => format!("slow:{ms}"),
            Disturbance::PausedFlush(n) => format!("pause:{n}"),
        }
    }

    fn parse(text: &str) -> Disturbance {
        let number = |n: &str| n.parse().expect("disturbance number");
        if let Some(ms) = text.strip_prefix("slow:") {
            Disturbance::SlowFlush(number(ms))
        } else if let Some(n) = text.strip_prefix("pause:") {
            Disturbance::PausedFlush(number(n))
        } else {
            Disturbance::None
        }
    }
}

/// Puts, overwrites and deletes, some of them in small batches.
fn mixed() -> Mix {
    Mix {
        multi_percent: 20,
        multi_ops: 2..6,
        delete_percent: 25,
        deletes_in_multi: true,
        single_value_bytes: 1..3000,
        multi_value_bytes: 1..3000,
        empty_percent: 8,
        large_percent: 2,
        large_value_bytes: 200_000,
    }
}

/// Mostly batches of several operations whose values add up to more than
/// a write buffer (64 KiB in the small configuration), so that a batch
/// switches buffers, and waits for one, in its middle; some hold a record
/// larger than a buffer, which is written on its own.
fn batches() -> Mix {
    Mix {
        multi_percent: 85,
        multi_ops: 6..16,
        delete_percent: 15,
        deletes_in_multi: true,
        single_value_bytes: 1..3000,
        multi_value_bytes: 4096..16384,
        empty_percent: 4,
        large_percent: 2,
        large_value_bytes: 200_000,
    }
}

/// One crash test: the test function (which the child re-runs), the mix
/// its writers run, the store's configuration, and each round's
/// disturbance.
struct Scenario {
    test_name: &'static str,
    mix: fn() -> Mix,
    config: fn(&Path) -> StorageConfig,
    rounds: &'static [Disturbance],
}

/// The small configuration of the engine's tests.
fn small(dir: &Path) -> StorageConfig {
    small_config(dir, PARTITIONS)
}

/// Small segments and a GC thread that looks every 2 ms and copies as fast
/// as it can, and a checkpoint every 32 KiB of key log: collections and
/// checkpoints run all through a round, so that kills land while records
/// are copied, while their relocations are synced, while segments are
/// freed and while checkpoints are written.
fn collecting(dir: &Path) -> StorageConfig {
    let mut config = small_config(dir, PARTITIONS);
    config.segment_bytes = 512 << 10;
    config.limits.max_value_bytes = 256 << 10;
    config.gc = GcConfig {
        interval_ms: 2,
        min_dead_percent: 50,
        copy_bytes_per_s: 0,
        checkpoint_every_keylog_bytes: 32 << 10,
        checkpoint_keylog_growth_percent: 0,
        max_dead_percent_of_live: 200,
    };
    config
}

/// The child: writes until it is killed. Exits with status 3 if a write
/// fails, so that the parent can tell that from a kill.
fn run_child(scenario: &Scenario, dir: &str) {
    let disturbance =
        Disturbance::parse(&std::env::var(CHILD_MODE_ENV).expect("child mode is set"));
    let round: u64 = std::env::var(CHILD_ROUND_ENV)
        .expect("child round is set")
        .parse()
        .expect("round number");
    let plan = FaultPlan::new();
    match disturbance {
        Disturbance::None => {}
        Disturbance::SlowFlush(ms) => plan.direct_write_delay_ms.store(ms, Ordering::SeqCst),
        Disturbance::PausedFlush(n) => plan.pause_direct_writes_from.store(n, Ordering::SeqCst),
    }
    let engine =
        StorageEngine::open_with_disk((scenario.config)(Path::new(dir)), FaultDisk::new(plan))
            .expect("child opens the store");
    let recorder = LineRecorder::new(std::io::stdout());
    std::thread::scope(|scope| {
        for writer in 0..KEYS.writers {
            let (engine, recorder) = (&engine, &recorder);
            scope.spawn(move || {
                let mut source = BatchSource::new(KEYS, writer, round, 0x5EED, (scenario.mix)());
                let failed = run_writer(&mut source, recorder, None, |batch| {
                    write_batch(engine, batch)
                });
                if let Err(e) = failed {
                    eprintln!("child writer {writer}: write failed: {e}");
                    std::process::exit(3);
                }
            });
        }
    });
}

/// Writes `batch` as one call of [`StorageEngine::write`] on a partition
/// chosen by its route.
fn write_batch(engine: &StorageEngine, batch: &Batch) -> storage_node::error::Result<()> {
    let values: Vec<Option<Vec<u8>>> = batch.ops.iter().map(|(k, op)| op.value(k)).collect();
    let ops: Vec<WriteOp<'_>> = batch
        .ops
        .iter()
        .zip(&values)
        .map(|((key, _), value)| match value {
            Some(value) => WriteOp::Put {
                key: key.as_bytes(),
                value,
                expire_at_ms: 0,
            },
            None => WriteOp::Delete {
                key: key.as_bytes(),
            },
        })
        .collect();
    let mut acks = vec![WriteAck::default(); ops.len()];
    let partition = (batch.route % PARTITIONS as u64) as usize;
    engine.write(partition, None, &ops, &mut acks)
}

/// One round: start the child, kill it with SIGKILL at a random moment
/// after its first batch, reopen the store and verify every key.
fn run_round(
    scenario: &Scenario,
    dir: &Path,
    round: u64,
    disturbance: Disturbance,
    journal: Journal,
) -> (Journal, Outcome) {
    let mode = disturbance.render();
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", scenario.test_name, "--nocapture"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_MODE_ENV, &mode)
        .env(CHILD_ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let mut journal = journal;
    journal.begin_round();
    let shared = Arc::new(SharedJournal::new(journal));
    let reader = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || shared.read_events(BufReader::new(stdout)))
    };
    let started = shared.wait_for_first_event(FIRST_BATCH_TIMEOUT);
    let mut rng = rand::rngs::StdRng::seed_from_u64(round);
    if started {
        std::thread::sleep(Duration::from_millis(rng.random_range(150..500)));
    }
    child.kill().expect("kill -9 the child");
    let status = child.wait().expect("reap the child");
    reader.join().expect("reader");
    assert!(started, "round {round} ({mode}): the child began no batch");
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "round {round} ({mode}): the child ended before the kill: {status}"
    );
    let mut journal = Arc::try_unwrap(shared)
        .expect("the reader is done")
        .into_inner();

    let mut config = (scenario.config)(dir);
    // The parent reads with no collection of its own.
    config.gc.interval_ms = 0;
    let engine = StorageEngine::open(config).expect("reopen after kill -9");
    let index = build_index(&engine);
    let outcome = journal.verify(KEYS.keys(), |key| {
        Ok::<_, Infallible>(get(&engine, &index, key.as_bytes()))
    });
    // With the value-log writes hanging, every writer can be stuck in its
    // first batch, waiting for a buffer, before anything is acknowledged:
    // such a round still checks that those batches are whole or absent and
    // that the rounds before lost nothing.
    let passed = if matches!(disturbance, Disturbance::PausedFlush(_)) {
        outcome.broke_no_rule()
    } else {
        outcome.passed()
    };
    assert!(passed, "round {round} ({mode}): {:#?}", outcome);
    assert_eq!(
        outcome.verified,
        KEYS.writers as u64 * KEYS.keys_per_writer,
        "every key verified"
    );
    eprintln!(
        "round {round} ({mode}): {} batches ({} ops) acknowledged, {} under way at the kill ({} of several: {} applied, {} not), {} buffers replayed",
        outcome.acknowledged_batches,
        outcome.acknowledged_ops,
        outcome.open_batches,
        outcome.open_multi_batches,
        outcome.open_applied,
        outcome.open_not_applied,
        engine
            .recovery_report()
            .iter()
            .map(|r| r.replayed_buffers)
            .sum::<usize>()
    );
    (journal, outcome)
}

/// Runs the scenario's rounds on one store (each round starts from what the
/// rounds before it left) and returns each round's outcome, or runs the
/// child if this process is one.
fn run_scenario(scenario: &Scenario) -> Option<Vec<(Disturbance, Outcome)>> {
    run_scenario_counting_freed(scenario).map(|(outcomes, _)| outcomes)
}

/// [`run_scenario`], also returning how many value-log segments garbage
/// collection had freed by the end (freed segments never come back).
fn run_scenario_counting_freed(scenario: &Scenario) -> Option<(Vec<(Disturbance, Outcome)>, u64)> {
    if let Ok(dir) = std::env::var(CHILD_DIR_ENV) {
        run_child(scenario, &dir);
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut journal = Journal::default();
    let mut outcomes = Vec::new();
    for (round, disturbance) in scenario.rounds.iter().enumerate() {
        let (next, outcome) = run_round(scenario, dir.path(), round as u64, *disturbance, journal);
        journal = next;
        outcomes.push((*disturbance, outcome));
    }
    Some((outcomes, freed_segments(dir.path())))
}

/// Value-log segments missing below each partition's newest one: the ones
/// garbage collection freed.
fn freed_segments(dir: &Path) -> u64 {
    (0..PARTITIONS)
        .map(|partition| {
            let ids: Vec<u64> = std::fs::read_dir(dir.join(format!("p{partition:03}")))
                .expect("partition directory")
                .filter_map(|entry| {
                    let name = entry.expect("entry").file_name();
                    let name = name.to_str()?.to_string();
                    name.strip_prefix("value-")?
                        .strip_suffix(".seg")?
                        .parse()
                        .ok()
                })
                .collect();
            ids.iter().max().map_or(0, |max| max + 1 - ids.len() as u64)
        })
        .sum()
}

#[test]
fn kill_9_in_the_middle_of_writes_loses_nothing_acknowledged() {
    use Disturbance::{None, PausedFlush, SlowFlush};
    run_scenario(&Scenario {
        test_name: "kill_9_in_the_middle_of_writes_loses_nothing_acknowledged",
        mix: mixed,
        config: small,
        rounds: &[
            None,
            SlowFlush(15),
            PausedFlush(2),
            None,
            PausedFlush(6),
            SlowFlush(40),
            None,
            PausedFlush(1),
            None,
            SlowFlush(5),
            PausedFlush(12),
            None,
            SlowFlush(25),
            PausedFlush(3),
            None,
            None,
        ],
    });
}

#[test]
fn kill_9_during_batches_leaves_each_batch_whole_or_absent() {
    use Disturbance::{None, PausedFlush, SlowFlush};
    let Some(outcomes) = run_scenario(&Scenario {
        test_name: "kill_9_during_batches_leaves_each_batch_whole_or_absent",
        mix: batches,
        config: small,
        rounds: &[
            PausedFlush(1),
            None,
            PausedFlush(4),
            SlowFlush(30),
            PausedFlush(9),
            None,
            PausedFlush(2),
            SlowFlush(10),
        ],
    }) else {
        return;
    };
    // Every round checked that no batch was torn; here, that the kill did
    // land in the middle of batches. With the value-log writes hanging,
    // every writer ends up waiting for a buffer inside its current batch.
    for (round, (disturbance, outcome)) in outcomes.iter().enumerate() {
        if matches!(disturbance, PausedFlush(_)) {
            assert!(
                outcome.open_multi_batches > 0,
                "round {round} ({disturbance:?}): no batch of several under way at the kill: {outcome:?}"
            );
        }
    }
    let decided: usize = outcomes
        .iter()
        .map(|(_, o)| o.open_applied + o.open_not_applied)
        .sum();
    assert!(
        decided > 0,
        "no batch under way at a kill could be told applied or not"
    );
}

#[test]
fn kill_9_while_garbage_collection_runs_loses_nothing_and_brings_nothing_back() {
    use Disturbance::{None, PausedFlush, SlowFlush};
    let Some((outcomes, freed)) = run_scenario_counting_freed(&Scenario {
        test_name: "kill_9_while_garbage_collection_runs_loses_nothing_and_brings_nothing_back",
        mix: mixed,
        config: collecting,
        rounds: &[
            None,
            SlowFlush(5),
            None,
            PausedFlush(40),
            SlowFlush(20),
            None,
            PausedFlush(15),
            None,
            SlowFlush(2),
            None,
            PausedFlush(70),
            None,
        ],
    }) else {
        return;
    };
    // Every round verified every key (nothing acknowledged lost, no
    // deleted key back); here, that collections did run and free segments
    // between the kills.
    eprintln!("{freed} segments freed over {} rounds", outcomes.len());
    assert!(
        freed >= outcomes.len() as u64,
        "only {freed} segments freed in {} rounds",
        outcomes.len()
    );
}
