//! `compute-node`: a Redis-protocol server in front of a SplitKV engine.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use compute_node::resp::{self, RespConfig};
use compute_node::{Engine, EngineConfig};
use splitkv_common::tls::NodeIdentity;

/// The allocator: mimalloc. Against glibc malloc, with redis-benchmark
/// `-d 4096 -c 16 -r 5000`, it cut the compute node's CPU per cached GET
/// by about a fifth at `-P 16` and per SET by about 7 % at `-P 1` (README,
/// "Allocator"). The storage node keeps glibc: there it measured no gain.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The SplitKV compute node.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Redis protocol (RESP2) in front of a storage node.
    Serve(ServeArgs),
    /// Check that a compute node answers PING (for health checks).
    Ping(PingArgs),
}

#[derive(Args)]
struct PingArgs {
    /// The compute node's Redis-protocol address.
    #[arg(long, default_value = "127.0.0.1:6379")]
    addr: String,
    /// Password, if the node requires one.
    #[arg(long, env = "SPLITKV_REQUIREPASS")]
    password: Option<String>,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 2_000)]
    timeout_ms: u64,
}

#[derive(Args)]
struct ServeArgs {
    /// The storage node, HOST:PORT (HOST must be a name in its certificate).
    #[arg(long)]
    storage: String,
    /// Directory with this node's ca.pem, cert.pem and key.pem.
    #[arg(long)]
    certs: PathBuf,
    /// TCP address for Redis clients.
    #[arg(long, default_value = "127.0.0.1:6379")]
    listen: SocketAddr,
    /// Password clients must give with AUTH.
    #[arg(long, env = "SPLITKV_REQUIREPASS")]
    requirepass: Option<String>,
    /// Serve as a reader: never fence the writer, follow its writes through
    /// the storage node, answer writes as a read-only Redis replica does
    /// (`REPLICAOF NO ONE` promotes it to the writer).
    #[arg(long)]
    read_only: bool,
    /// Size of each of a partition's two read windows, in MiB.
    #[arg(long, default_value_t = 10)]
    window_mib: u64,
    /// Bound of the hot-value cache, in bytes (0 turns it off).
    #[arg(long, default_value_t = compute_node::config::DEFAULT_CACHE_BYTES)]
    cache_bytes: u64,
    /// Deadline of each request to the storage node, in milliseconds.
    #[arg(long, default_value_t = 5_000)]
    request_timeout_ms: u64,
    /// Longest value accepted, in bytes.
    #[arg(long, default_value_t = splitkv_common::limits::DEFAULT_MAX_VALUE_BYTES)]
    max_value_bytes: usize,
    /// Worker threads of the async runtime (default: one per CPU).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Partitions the Redis clients' writes are spread over, round robin:
    /// the SETs of the clients that share a partition share its requests
    /// to the storage node (0: every partition).
    #[arg(long, default_value_t = compute_node::config::DEFAULT_CLIENT_PARTITIONS)]
    client_partitions: usize,
    /// How long to keep trying to reach the storage node at start (it may
    /// be starting too), in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    connect_wait_ms: u64,
}

fn main() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(args),
        Command::Ping(args) => ping(args),
    }
}

fn serve(args: ServeArgs) -> Result<()> {
    let identity = NodeIdentity::load(&args.certs).with_context(|| {
        format!(
            "loading the compute node's certificates from {}",
            args.certs.display()
        )
    })?;
    let mut config = EngineConfig::new(args.storage.clone(), Arc::new(identity));
    config.window_bytes = args.window_mib << 20;
    config.cache_bytes = args.cache_bytes;
    config.request_timeout_ms = args.request_timeout_ms;
    config.limits.max_value_bytes = args.max_value_bytes;
    config.worker_threads = args.threads.map(usize::from);
    config.client_partitions = args.client_partitions;
    config.writer = !args.read_only;
    let engine = Arc::new(connect_with_retries(
        config,
        &args.storage,
        args.connect_wait_ms,
    )?);
    let handle = engine.handle().clone();
    let resp_config = RespConfig {
        requirepass: args.requirepass.filter(|p| !p.is_empty()),
        storage: args.storage,
    };
    handle.block_on(async {
        let listener =
            listen(args.listen).with_context(|| format!("listening on {}", args.listen))?;
        tracing::info!(
            listen = %listener.local_addr()?,
            keys = engine.len(),
            role = if engine.is_writer() { "writer" } else { "reader" },
            "compute node serving the Redis protocol"
        );
        resp::serve(
            Arc::clone(&engine),
            listener,
            resp_config,
            shutdown_signal(),
        )
        .await;
        anyhow::Ok(())
    })?;
    tracing::info!("compute node stopped");
    Ok(())
}

/// Connections the kernel keeps waiting for `accept` (capped by
/// `net.core.somaxconn`): room for a thousand clients that connect at once,
/// where the default of 1024 overflowed and reset some of them.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds the RESP listener with [`LISTEN_BACKLOG`].
fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Connects the engine, retrying with backoff for up to `wait_ms` while the
/// storage node cannot be reached (a refused certificate or a fenced writer
/// is not retried).
fn connect_with_retries(config: EngineConfig, storage: &str, wait_ms: u64) -> Result<Engine> {
    use splitkv_common::client::ClientError;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
    let mut backoff = std::time::Duration::from_millis(100);
    loop {
        match Engine::connect(config.clone()) {
            Ok(engine) => return Ok(engine),
            Err(compute_node::EngineError::Storage(ClientError::Connect { reason, .. }))
                if std::time::Instant::now() + backoff < deadline =>
            {
                tracing::info!("storage node at {storage} not reachable yet ({reason}); retrying");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("connecting to the storage node at {storage}"));
            }
        }
    }
}

/// Sends (AUTH and) PING over a plain TCP connection and expects PONG.
fn ping(args: PingArgs) -> Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let timeout = std::time::Duration::from_millis(args.timeout_ms);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&args.addr)?
        .next()
        .with_context(|| format!("{} resolves to no address", args.addr))?;
    let stream = std::net::TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {}", args.addr))?;
    stream.set_read_timeout(Some(timeout))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if let Some(password) = args.password.as_ref().filter(|p| !p.is_empty()) {
        write!(
            writer,
            "*2\r\n$4\r\nAUTH\r\n${}\r\n{password}\r\n",
            password.len()
        )?;
        reader.read_line(&mut line)?;
        anyhow::ensure!(line.starts_with("+OK"), "AUTH refused: {}", line.trim());
        line.clear();
    }
    writer.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    reader.read_line(&mut line)?;
    anyhow::ensure!(
        line.starts_with("+PONG"),
        "unexpected answer to PING: {}",
        line.trim()
    );
    println!("compute node at {} answers", args.addr);
    Ok(())
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
            }
        }
        Err(e) => {
            tracing::error!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
