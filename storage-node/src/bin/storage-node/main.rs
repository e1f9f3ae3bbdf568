//! `storage-node`: serve a data directory over QUIC, make the cluster's
//! certificates, or measure the transport.

mod bench_transport;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use splitkv_common::certs::{self, DEFAULT_STORAGE_NAMES};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;
use storage_node::server::{self, ServerConfig};
use storage_node::{Durability, GcConfig, IoEngineKind, Limits, StorageConfig};

/// The SplitKV storage node.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a data directory to compute nodes over QUIC with mutual TLS.
    Serve(ServeArgs),
    /// Make a cluster CA and certificates for a storage node and a compute node.
    GenCerts(GenCertsArgs),
    /// Measure the transport on loopback: raw QUIC bulk throughput, range
    /// reads and put round trips through the protocol.
    BenchTransport(bench_transport::BenchArgs),
    /// Check that a storage node answers (for health checks): completes a
    /// TLS handshake with it, needing only the cluster CA certificate.
    Probe(ProbeArgs),
}

/// Options of `probe`.
#[derive(Args)]
struct ProbeArgs {
    /// The storage node, HOST:PORT (HOST must be a name in its certificate).
    #[arg(long, default_value = "localhost:7000")]
    addr: String,
    /// The cluster CA certificate.
    #[arg(long)]
    ca: PathBuf,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 2_000)]
    timeout_ms: u64,
}

/// Options of `serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// UDP address to listen on.
    #[arg(long, default_value = "0.0.0.0:7000")]
    listen: SocketAddr,
    /// Data directory (created if missing; locked while served).
    #[arg(long)]
    data_dir: PathBuf,
    /// Directory with this node's ca.pem, cert.pem and key.pem (see gen-certs).
    #[arg(long)]
    certs: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
    /// How long a following reader compute node may take nothing of its
    /// key-log stream before the stream is closed (it then follows again),
    /// in milliseconds.
    #[arg(long, default_value_t = splitkv_common::message::DEFAULT_FOLLOW_STALL_MS)]
    follow_stall_ms: u64,
    /// Largest UDP payload MTU discovery may try (it settles on what the
    /// path carries).
    #[arg(long, default_value_t = TransportSettings::default().max_udp_payload_bytes)]
    max_udp_payload: u16,
    /// Worker threads of the async runtime that serves the connections
    /// (default: one per CPU). Flushes and point reads run on their own
    /// threads whatever this is.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
}

/// Options of the storage engine.
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// Partitions of a new data directory (one per compute-node connection).
    #[arg(long, default_value_t = 16)]
    partitions: usize,
    /// What an acknowledgement guarantees: mmap (survives a process crash)
    /// or sync (survives power loss).
    #[arg(long, default_value = "mmap")]
    durability: Durability,
    /// Engine for O_DIRECT writes: uring (falls back to psync, with a
    /// warning, where io_uring is refused) or psync.
    #[arg(long, default_value = "uring")]
    io_engine: IoEngineKind,
    /// Longest key accepted, in bytes.
    #[arg(long, default_value_t = Limits::default().max_key_bytes)]
    max_key_bytes: usize,
    /// Longest value accepted, in bytes.
    #[arg(long, default_value_t = Limits::default().max_value_bytes)]
    max_value_bytes: usize,
    /// Size of each value-log segment of a new data directory, in bytes (a
    /// multiple of 4096 that holds the largest record): space is reclaimed
    /// a segment at a time.
    #[arg(long, default_value_t = storage_node::config::DEFAULT_SEGMENT_BYTES)]
    segment_bytes: u64,
    /// How often garbage collection looks for a segment to collect, in
    /// milliseconds (0: never on its own).
    #[arg(long, default_value_t = GcConfig::default().interval_ms)]
    gc_interval_ms: u64,
    /// Garbage collection frees a segment once this share of its record
    /// bytes, in percent, is dead.
    #[arg(long, default_value_t = GcConfig::default().min_dead_percent,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    gc_min_dead_percent: u8,
    /// Garbage collection copies live records at most this fast, in bytes
    /// per second, plus a quarter of the bytes written meanwhile (0: no
    /// limit).
    #[arg(long, default_value_t = GcConfig::default().copy_bytes_per_s)]
    gc_copy_bytes_per_s: u64,
    /// Checkpoint a partition's key log also while serving, once this many
    /// bytes were appended since its last checkpoint (0: only at a clean
    /// stop): a restart after a crash replays at most about the larger of
    /// this and the checkpoint's size per partition.
    #[arg(long, default_value_t = GcConfig::default().checkpoint_every_keylog_bytes)]
    checkpoint_every_keylog_bytes: u64,
    /// Checkpoint while serving only once the key log appended since the
    /// last checkpoint is also at least this share, in percent, of that
    /// checkpoint's size (0: whenever --checkpoint-every-keylog-bytes were
    /// appended).
    #[arg(long, default_value_t = GcConfig::default().checkpoint_keylog_growth_percent)]
    checkpoint_keylog_growth_percent: u64,
    /// Puts wait for the next garbage-collection pass (at most a second
    /// each) while the node's dead bytes exceed this share of its live
    /// bytes, in percent, plus a segment per partition (0: never).
    #[arg(long, default_value_t = GcConfig::default().max_dead_percent_of_live)]
    gc_max_dead_percent_of_live: u64,
    /// Free disk space kept for garbage collection, in bytes: puts are
    /// refused as disk full while the data directory's file system has
    /// less, and resume once it has more (0: no reserve).
    #[arg(long, default_value_t = storage_node::config::DEFAULT_DISK_RESERVE_BYTES)]
    disk_reserve_bytes: u64,
    /// Memory for copies of the latest flushes of the value logs, so that
    /// reading bytes written a moment ago needs no disk read (0: none).
    #[arg(long, default_value_t = storage_node::config::DEFAULT_RECENT_WRITE_BYTES)]
    recent_write_bytes: u64,
    /// How long to wait for the data directory's lock while another process
    /// holds it, in milliseconds, before refusing to start (a node killed a
    /// moment ago lets it go a little after it has ended).
    #[arg(long, default_value_t = storage_node::dir_lock::DEFAULT_LOCK_WAIT_MS)]
    lock_wait_ms: u64,
}

impl EngineArgs {
    fn config(&self, data_dir: PathBuf) -> StorageConfig {
        let mut config = StorageConfig::new(data_dir);
        config.partitions = self.partitions;
        config.durability = self.durability;
        config.io_engine = self.io_engine;
        config.segment_bytes = self.segment_bytes;
        config.disk_reserve_bytes = self.disk_reserve_bytes;
        config.recent_write_bytes = self.recent_write_bytes;
        config.lock_wait_ms = self.lock_wait_ms;
        config.gc = GcConfig {
            interval_ms: self.gc_interval_ms,
            min_dead_percent: self.gc_min_dead_percent,
            copy_bytes_per_s: self.gc_copy_bytes_per_s,
            checkpoint_every_keylog_bytes: self.checkpoint_every_keylog_bytes,
            checkpoint_keylog_growth_percent: self.checkpoint_keylog_growth_percent,
            max_dead_percent_of_live: self.gc_max_dead_percent_of_live,
        };
        config.limits = Limits {
            max_key_bytes: self.max_key_bytes,
            max_value_bytes: self.max_value_bytes,
        };
        config
    }
}

/// Options of `gen-certs`.
#[derive(Args)]
struct GenCertsArgs {
    /// Output directory: ca/ (CA certificate and key), storage/ and compute/
    /// (each node's certificate, key and the CA certificate).
    #[arg(long)]
    out: PathBuf,
    /// Host names and IP addresses the storage node's certificate is valid
    /// for (repeatable). Default: localhost, 127.0.0.1, ::1, storage.
    #[arg(long = "host")]
    hosts: Vec<String>,
    /// Replace existing certificates.
    #[arg(long, conflicts_with = "keep_existing")]
    force: bool,
    /// If a complete set of certificates is already there, keep it and
    /// succeed (for a deployment step that runs on every start).
    #[arg(long)]
    keep_existing: bool,
}

fn main() -> Result<()> {
    init_logging();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::GenCerts(args) => gen_certs(args),
        Command::BenchTransport(args) => bench_transport::run(args),
        Command::Probe(args) => probe(args),
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

fn serve(args: ServeArgs) -> Result<()> {
    let identity = NodeIdentity::load(&args.certs).with_context(|| {
        format!(
            "loading the storage node's certificates from {}",
            args.certs.display()
        )
    })?;
    let transport = TransportSettings {
        max_udp_payload_bytes: args.max_udp_payload,
        ..TransportSettings::default()
    };
    let config = ServerConfig {
        listen: args.listen,
        transport,
        follow_stall_ms: args.follow_stall_ms,
    };
    server::serve_blocking(
        args.engine.config(args.data_dir.clone()),
        &identity,
        &config,
        args.threads.map(usize::from),
        |_, _| {},
        shutdown_signal(),
    )?;
    Ok(())
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::error!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
    }
}

fn probe(args: ProbeArgs) -> Result<()> {
    let transport = TransportSettings::default();
    let config = splitkv_common::tls::anonymous_client_config(
        &args.ca,
        Arc::new(transport.transport_config()),
    )?;
    let host = args
        .addr
        .rsplit_once(':')
        .map_or(args.addr.as_str(), |(h, _)| h)
        .to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let addr = tokio::net::lookup_host(&args.addr)
            .await?
            .next()
            .with_context(|| format!("{} resolves to no address", args.addr))?;
        let endpoint = transport.client_endpoint(addr)?;
        let connecting = endpoint.connect_with(config, addr, &host)?;
        let timeout = std::time::Duration::from_millis(args.timeout_ms);
        match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok(conn)) => {
                conn.close(0u32.into(), b"probe");
                println!("storage node at {} answers", args.addr);
                Ok(())
            }
            Ok(Err(e)) => anyhow::bail!("storage node at {} refused the handshake: {e}", args.addr),
            Err(_) => anyhow::bail!("no answer from {} within {} ms", args.addr, args.timeout_ms),
        }
    })
}

fn gen_certs(args: GenCertsArgs) -> Result<()> {
    if args.keep_existing && certs::cluster_is_complete(&args.out) {
        println!(
            "certificates already present in {}; kept",
            args.out.display()
        );
        return Ok(());
    }
    let hosts: Vec<String> = if args.hosts.is_empty() {
        DEFAULT_STORAGE_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        args.hosts
    };
    let layout = certs::generate_cluster(&args.out, &hosts, args.force)?;
    println!(
        "CA (keep its key with whoever issues certificates): {}",
        layout.ca_dir.display()
    );
    println!(
        "storage node (--certs): {}  valid for {}",
        layout.storage_dir.display(),
        hosts.join(", ")
    );
    println!("compute node (--certs): {}", layout.compute_dir.display());
    Ok(())
}
