//! `storage-node bench-transport`: the transport's limits and what the
//! protocol gets of them, in one run on loopback, server and client in two
//! runtimes of one process:
//!
//! 1. raw QUIC bulk throughput on one stream (server to client, the
//!    direction of range reads) with the same TLS and transport settings;
//! 2. range reads of 10 MiB through the protocol, the next requested while
//!    the current one arrives (as a compute node prefetches its windows);
//! 3. 4 KiB put round trips (a write batch of one each), 16 connections,
//!    one request in flight each;
//! 4. the same with 64 in flight per connection;
//! 5. the datagram size MTU discovery settled on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use hdrhistogram::Histogram;
use splitkv_common::certs;
use splitkv_common::client::{BatchOp, ClientConfig, StorageClient};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;
use storage_node::server::{Server, ServerConfig};
use storage_node::{IoEngineKind, StorageConfig, StorageEngine};

/// Options of `bench-transport`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// MiB sent on the raw QUIC stream per round.
    #[arg(long, default_value_t = 512)]
    bulk_mib: u64,
    /// MiB of log written to partition 0 and read back in 10 MiB ranges per
    /// round.
    #[arg(long, default_value_t = 512)]
    range_mib: u64,
    /// Rounds of phases 1 and 2, alternated; medians are compared.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds each put phase runs.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Value size of the puts.
    #[arg(long, default_value_t = 4096)]
    value_bytes: usize,
    /// Largest UDP payload MTU discovery may try.
    #[arg(long, default_value_t = TransportSettings::default().max_udp_payload_bytes)]
    max_udp_payload: u16,
    /// Engine for the storage node's O_DIRECT writes.
    #[arg(long, default_value = "uring")]
    io_engine: IoEngineKind,
    /// Directory for the temporary data directory (default: the system's
    /// temporary directory).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

const RANGE_BYTES: usize = 10 << 20;
const CONNECTIONS: usize = 16;

pub fn run(args: BenchArgs) -> Result<()> {
    let dir = match &args.dir {
        Some(dir) => tempfile::tempdir_in(dir)?,
        None => tempfile::tempdir()?,
    };
    let certs = dir.path().join("certs");
    certs::generate_cluster(&certs, &["localhost"], false)?;
    let storage_identity = NodeIdentity::load(&certs.join("storage"))?;
    let compute_identity = Arc::new(NodeIdentity::load(&certs.join("compute"))?);
    let transport = TransportSettings {
        max_udp_payload_bytes: args.max_udp_payload,
        ..TransportSettings::default()
    };

    let mut config = StorageConfig::new(dir.path().join("data"));
    config.io_engine = args.io_engine;
    let engine = Arc::new(StorageEngine::open(config)?);
    let server_rt = runtime("bench-server")?;
    let client_rt = runtime("bench-client")?;

    // The storage node and a raw QUIC server with the same settings.
    let listen: SocketAddr = "127.0.0.1:0".parse()?;
    let server_config = ServerConfig {
        listen,
        transport,
        follow_stall_ms: splitkv_common::message::DEFAULT_FOLLOW_STALL_MS,
    };
    let (node_addr, raw_addr) = server_rt.block_on(async {
        let server = Server::bind(Arc::clone(&engine), &storage_identity, &server_config)?;
        let node_addr = server.local_addr()?;
        tokio::spawn(server.run(std::future::pending()));
        let raw = transport.server_endpoint(
            listen,
            storage_identity.server_config(Arc::new(transport.transport_config()))?,
            &storage_identity,
        )?;
        let raw_addr = raw.local_addr()?;
        tokio::spawn(raw_bulk_server(raw));
        anyhow::Ok((node_addr, raw_addr))
    })?;
    println!(
        "loopback, {} cores, storage io engine {}, MTU discovery bound {} B",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        engine.io_engine(),
        args.max_udp_payload
    );

    // 1 and 2, alternated a few times (this machine's figures drift), and
    // compared by their medians.
    fill_partition(&engine, 0, args.range_mib << 20)?;
    let mut client_config = ClientConfig::new(
        format!("localhost:{}", node_addr.port()),
        Arc::clone(&compute_identity),
    );
    client_config.transport = transport;
    client_config.request_timeout_ms = 30_000;
    let client = Arc::new(client_rt.block_on(StorageClient::connect(client_config))?);
    let mut raw = Vec::new();
    let mut ranges = Vec::new();
    for _ in 0..args.rounds {
        raw.push(client_rt.block_on(raw_bulk(
            raw_addr,
            &compute_identity,
            transport,
            args.bulk_mib << 20,
        ))?);
        ranges.push(client_rt.block_on(range_reads(&client))?);
    }
    let (raw_mibs, range_mibs) = (median(&mut raw), median(&mut ranges));
    println!(
        "1. raw QUIC, one stream:                 {raw_mibs:8.0} MiB/s  (median of {raw:.0?})"
    );
    println!(
        "2. range reads of 10 MiB, 2 in flight:   {range_mibs:8.0} MiB/s  (median of {ranges:.0?}; {:.0}% of raw)",
        100.0 * range_mibs / raw_mibs
    );

    let settled = min_mtu(&client);
    // 3 and 4. Put round trips.
    let value = Bytes::from(vec![0xA5u8; args.value_bytes]);
    let seconds = Duration::from_secs(args.seconds);
    let (rate, latency) = puts_one_in_flight(&client, &value, seconds)?;
    println!(
        "3. {} B puts, 16 conns x 1 in flight:   {rate:8.0} puts/s  p50 {:.0} us  p99 {:.0} us  p999 {:.0} us",
        args.value_bytes,
        latency.value_at_quantile(0.5) as f64 / 1e3,
        latency.value_at_quantile(0.99) as f64 / 1e3,
        latency.value_at_quantile(0.999) as f64 / 1e3,
    );
    let rate = client_rt.block_on(puts_many_in_flight(&client, &value, seconds, 64))?;
    println!(
        "4. {} B puts, 16 conns x 64 in flight: {rate:8.0} puts/s",
        args.value_bytes
    );

    // 5. MTU: what discovery settled on before the overload of phase 4,
    // and again once black-hole detection (which losses under overload can
    // trigger) has cooled down.
    let after_overload = min_mtu(&client);
    std::thread::sleep(Duration::from_secs(3));
    let _ = puts_one_in_flight(&client, &value, Duration::from_secs(1))?;
    println!(
        "5. datagram size from MTU discovery:     {settled} B (bound {} B; {after_overload} B right after phase 4, {} B after a 3 s cooldown and 1 s of puts)",
        args.max_udp_payload,
        min_mtu(&client)
    );
    client.close();
    drop(client);
    engine.close()?;
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The smallest datagram size any link uses.
fn min_mtu(client: &StorageClient) -> u16 {
    (0..client.partitions())
        .filter_map(|i| client.current_mtu(i))
        .min()
        .unwrap_or(0)
}

fn runtime(name: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()
        .context("starting a runtime")
}

/// Accepts streams whose request is an 8-byte length, and answers each with
/// that many bytes in 1 MiB chunks taken in turn from 64 MiB of data, more
/// than the CPU caches hold, as a range read's bytes come from memory the
/// caches do not hold either.
async fn raw_bulk_server(endpoint: quinn::Endpoint) {
    let data: Vec<u8> = (0..64u32 << 20).map(|i| (i >> 12) as u8).collect();
    let block = Bytes::from(data);
    while let Some(incoming) = endpoint.accept().await {
        let block = block.clone();
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let block = block.clone();
                tokio::spawn(async move {
                    let mut len = [0u8; 8];
                    if recv.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut left = u64::from_le_bytes(len);
                    let mut at = 0usize;
                    while left > 0 {
                        let n = left.min(1 << 20) as usize;
                        if at + n > block.len() {
                            at = 0;
                        }
                        if send.write_chunk(block.slice(at..at + n)).await.is_err() {
                            return;
                        }
                        at += n;
                        left -= n as u64;
                    }
                    let _ = send.finish();
                });
            }
        });
    }
}

async fn raw_bulk(
    addr: SocketAddr,
    identity: &NodeIdentity,
    transport: TransportSettings,
    bytes: u64,
) -> Result<f64> {
    let mut endpoint = transport.client_endpoint(addr)?;
    endpoint
        .set_default_client_config(identity.client_config(Arc::new(transport.transport_config()))?);
    let conn = endpoint.connect(addr, "localhost")?.await?;
    // Warm up (congestion window, MTU discovery) before timing.
    let _ = fetch(&conn, 64 << 20).await?;
    let start = Instant::now();
    let got = fetch(&conn, bytes).await?;
    let mibs = got as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64();
    conn.close(0u32.into(), b"done");
    Ok(mibs)
}

async fn fetch(conn: &quinn::Connection, bytes: u64) -> Result<u64> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(&bytes.to_le_bytes()).await?;
    send.finish()?;
    let mut got = 0u64;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await? {
        got += chunk.bytes.len() as u64;
    }
    if got != bytes {
        return Err(anyhow!("raw stream carried {got} of {bytes} bytes"));
    }
    Ok(got)
}

/// Writes `bytes` of 4 KiB records into `partition` directly.
fn fill_partition(engine: &StorageEngine, partition: usize, bytes: u64) -> Result<()> {
    let value = vec![0x3Cu8; 4096];
    for i in 0..bytes / 4096 {
        engine.put(partition, &i.to_be_bytes(), &value)?;
    }
    Ok(())
}

/// Reads the partition from start to end in 10 MiB ranges, the next one
/// requested while the current one arrives (as a compute node prefetches
/// its next window).
async fn range_reads(client: &Arc<StorageClient>) -> Result<f64> {
    let (_, end) = client.read_range(0, 0, RANGE_BYTES).await?;
    let start = Instant::now();
    let fetch = |offset: u64| {
        let client = Arc::clone(client);
        tokio::spawn(async move { client.read_range(0, offset, RANGE_BYTES).await })
    };
    let mut read = 0u64;
    let mut next = fetch(0);
    let mut offset = 0u64;
    while offset < end {
        let following = offset + RANGE_BYTES as u64;
        let prefetch = (following < end).then(|| fetch(following));
        let (bytes, _) = next.await??;
        read += bytes.len() as u64;
        offset = following;
        match prefetch {
            Some(task) => next = task,
            None => break,
        }
    }
    if read != end {
        return Err(anyhow!("range reads returned {read} of {end} bytes"));
    }
    Ok(read as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64())
}

fn puts_one_in_flight(
    client: &Arc<StorageClient>,
    value: &Bytes,
    seconds: Duration,
) -> Result<(f64, Histogram<u64>)> {
    let stop = Instant::now() + seconds;
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|link| {
            let client = Arc::clone(client);
            let value = value.clone();
            std::thread::spawn(move || -> Result<(u64, Histogram<u64>)> {
                let mut latency = Histogram::<u64>::new(3)?;
                let mut count = 0u64;
                while Instant::now() < stop {
                    let key = ((link as u64) << 48 | count).to_be_bytes();
                    let started = Instant::now();
                    let put = [BatchOp::put(&key, &value)];
                    client.write_many(link, &put)?.wait_blocking()?;
                    latency.record(started.elapsed().as_nanos() as u64)?;
                    count += 1;
                }
                Ok((count, latency))
            })
        })
        .collect();
    let started = Instant::now();
    let mut total = 0;
    let mut latency = Histogram::<u64>::new(3)?;
    for worker in workers {
        let (count, hist) = worker
            .join()
            .map_err(|_| anyhow!("put thread panicked"))??;
        total += count;
        latency.add(hist)?;
    }
    Ok((total as f64 / started.elapsed().as_secs_f64(), latency))
}

async fn puts_many_in_flight(
    client: &Arc<StorageClient>,
    value: &Bytes,
    seconds: Duration,
    depth: usize,
) -> Result<f64> {
    let stop = Instant::now() + seconds;
    let total = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for link in 0..CONNECTIONS {
        for lane in 0..depth {
            let client = Arc::clone(client);
            let value = value.clone();
            let total = Arc::clone(&total);
            tasks.push(tokio::spawn(async move {
                let mut count = 0u64;
                while Instant::now() < stop {
                    let key = ((link as u64) << 48 | (lane as u64) << 32 | count).to_be_bytes();
                    let put = [BatchOp::put(&key, &value)];
                    client.write_many(link, &put)?.wait().await?;
                    count += 1;
                }
                total.fetch_add(count, Ordering::Relaxed);
                anyhow::Ok(())
            }));
        }
    }
    let started = Instant::now();
    for task in tasks {
        task.await??;
    }
    Ok(total.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}
