//! `eval`: SplitKV's evaluator.
//!
//! * `eval run` (also `eval` alone): the write, sequential-read, restart and
//!   hot-random-read phases with every value verified; against a storage
//!   node the evaluator starts itself, a running one (`--storage`), or any
//!   Redis-protocol server (`--resp`); with `--readers`, the reads go
//!   through SplitKV reader compute nodes that follow the `--resp` writer.
//! * `eval crash`: kill -9 of the storage node, or of a compute node, in the
//!   middle of writes and batches; nothing acknowledged may be lost, and a
//!   batch is there whole or not at all.
//! * `eval random-reads`: random GETs, Zipf-distributed or uniform, of a
//!   data set through any Redis-protocol server, every value verified.

mod crash;
mod durability;
mod node;
mod random_reads;
mod readers;
mod report;
mod run;
mod store;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use compute_node::EngineConfig;
use splitkv_common::tls::NodeIdentity;

use crate::node::OwnCluster;
use crate::readers::ReadersStore;
use crate::run::RunShape;
use crate::store::{EngineStore, RespStore, Store};

/// SplitKV's evaluator.
#[derive(Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Write, read in order, restart, read a moving hot region; verify all.
    Run(RunArgs),
    /// Kill -9 the storage node or a compute node during writes and batches;
    /// verify that nothing acknowledged was lost and no batch was torn.
    Crash(crash::CrashArgs),
    /// Write distinct keys over the Redis protocol for a while, journaling
    /// every acknowledged one (for kill tests of a deployment).
    DurabilityWrite(durability::WriteArgs),
    /// Check that every key in a durability-write journal reads back right.
    DurabilityVerify(durability::VerifyArgs),
    /// Random GETs (Zipf or uniform keys) of a data set through a
    /// Redis-protocol server, every value verified: GET/s, latency and the
    /// value cache's hit ratio.
    RandomReads(random_reads::RandomReadArgs),
    /// Serve a storage node (started by the evaluator itself).
    #[command(hide = true)]
    StorageNode(node::NodeArgs),
    /// Run crash-test writers in a compute node of their own (started by
    /// `eval crash`).
    #[command(hide = true)]
    CrashWriter(crash::WriterArgs),
}

/// Options of `eval run`.
#[derive(Args, Clone)]
struct RunArgs {
    /// Threads (each one writer and one reader).
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Keys each thread writes.
    #[arg(long, default_value_t = 16384)]
    per_thread: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
    /// A running storage node, HOST:PORT (with --certs). Without it the
    /// evaluator starts its own on loopback with fresh certificates.
    #[arg(long, requires = "certs")]
    storage: Option<String>,
    /// The compute node's certificate directory, for --storage.
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Drive a Redis-protocol server at HOST:PORT (or a redis:// URL)
    /// instead of the in-process engine.
    #[arg(long, conflicts_with = "storage")]
    resp: Option<String>,
    /// Read through these SplitKV reader compute nodes (`compute-node serve
    /// --read-only`), HOST:PORT or redis:// URLs separated by commas, the
    /// threads spread over them; --resp is their writer, which takes the
    /// writes. Each read phase first waits until every reader has applied
    /// what the writer had.
    #[arg(long, requires = "resp", value_delimiter = ',', num_args = 1..)]
    readers: Vec<String>,
    /// Longest wait for the readers to catch up before a read phase, in
    /// milliseconds.
    #[arg(long, default_value_t = 30_000)]
    catch_up_timeout_ms: u64,
    /// Keep the data directory of the evaluator's own storage node here.
    #[arg(long)]
    keep_data: Option<PathBuf>,
    /// Partitions of the evaluator's own storage node.
    #[arg(long, default_value_t = 16)]
    partitions: usize,
    /// Size of the hot region, in MiB.
    #[arg(long, default_value_t = 10)]
    region_mib: u64,
    /// Percent of the keys written with a time to live (`--ttl-secs`), so
    /// that expiry is exercised at scale: those keys carry their expiry
    /// time through the restart, and the read phases check that they are
    /// there (the TTL outlasts the run by default).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    ttl_percent: u8,
    /// The time to live of those keys, in seconds.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    ttl_secs: u64,
    /// Bytes of the engine's hot-value cache, in MiB (0 turns it off;
    /// default: the compute node's default).
    #[arg(long)]
    cache_mib: Option<u64>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::Crash(args)) => crash::run(args),
        Some(Command::StorageNode(args)) => node::serve(args).map(|()| true),
        Some(Command::CrashWriter(args)) => crash::writer(args).map(|()| true),
        Some(Command::DurabilityWrite(args)) => durability::write(args),
        Some(Command::DurabilityVerify(args)) => durability::verify(args),
        Some(Command::RandomReads(args)) => random_reads::run(args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("eval: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the phases; true if every value was verified.
fn run(args: RunArgs) -> Result<bool> {
    let shape = RunShape {
        threads: args.threads.max(1),
        per_thread: args.per_thread,
        value_size: args.value_size,
        region_bytes: args.region_mib << 20,
        ttl_percent: args.ttl_percent,
        ttl_ms: args.ttl_secs.saturating_mul(1000),
    };
    let mut cluster = None;
    let mut store: Box<dyn Store> = match (&args.resp, &args.storage) {
        (Some(address), _) if !args.readers.is_empty() => Box::new(ReadersStore::connect(
            address,
            &args.readers,
            shape.threads,
            Duration::from_millis(args.catch_up_timeout_ms),
        )?),
        (Some(address), _) => Box::new(RespStore::connect(address, shape.threads)?),
        (None, Some(storage)) => {
            // clap requires --certs with --storage.
            let certs = args.certs.clone().context("--storage needs --certs")?;
            let mut config = engine_config(storage.clone(), &certs)?;
            apply_cache_mib(&mut config, args.cache_mib);
            Box::new(EngineStore::connect(config, "running".into())?)
        }
        (None, None) => {
            let own = OwnCluster::start(args.keep_data.as_deref(), args.partitions)?;
            let mut config = engine_config(own.storage(), &own.compute_certs)?;
            apply_cache_mib(&mut config, args.cache_mib);
            let note = format!(
                "started by eval, {} partitions, io engine {}",
                args.partitions,
                own.node.as_ref().map_or("?", |n| n.io_engine.as_str())
            );
            cluster = Some(own);
            Box::new(EngineStore::connect(config, note)?)
        }
    };
    let report = run::run(store.as_mut(), shape)?;
    drop(store);
    if let Some(mut own) = cluster {
        own.stop()?;
    }
    println!("{}", report.table());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if report.failed() {
        eprintln!("eval: some operations failed or some values were missing or wrong");
    }
    Ok(!report.failed())
}

/// Sets the engine's value-cache size from `--cache-mib`, if given.
fn apply_cache_mib(config: &mut EngineConfig, cache_mib: Option<u64>) {
    if let Some(mib) = cache_mib {
        config.cache_bytes = mib << 20;
    }
}

/// An engine configuration for the storage node at `storage`.
fn engine_config(storage: String, certs: &std::path::Path) -> Result<EngineConfig> {
    let identity = NodeIdentity::load(certs)
        .with_context(|| format!("loading certificates from {}", certs.display()))?;
    Ok(EngineConfig::new(storage, Arc::new(identity)))
}
