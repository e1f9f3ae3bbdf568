//! The compute node's engine: it holds no state on its own disk. At start it
//! connects to the storage node (one connection per partition), pulls every
//! partition's key log in parallel and rebuilds the index; then it serves
//! reads from its windows or the storage node, and writes through the
//! storage node, updating the index from each acknowledgement.
//!
//! Each read and write is one async method (for tasks on any tokio
//! runtime; the RESP server uses the engine's own, [`Engine::handle`]),
//! with a blocking form over it for plain threads (not to be called from
//! inside an async task).
//!
//! The storage client tells the engine what happens to its connections on
//! a bounded channel the engine owns; the engine's task that follows it
//! pulls a partition's key-log tail after its connection comes back.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use splitkv_common::client::{ClientConfig, LinkEvent, StorageClient, Welcome};
use splitkv_common::limits::Limits;
use tokio::sync::mpsc;

use crate::batch_gate::BatchGate;
use crate::cache::ValueCache;
use crate::config::EngineConfig;
use crate::error::{EngineError, Result};
use crate::expiry;
use crate::index::{Index, IndexStats};
use crate::rebuild;
use crate::window::{Fetch, PartitionWindows};

/// Counters of the engine's work since it started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) puts: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) point_reads: AtomicU64,
    /// Index entries moved after a read answered `moved`.
    pub(crate) relocations: AtomicU64,
    /// Coalesced put batches sent (see `coalesce`).
    pub(crate) put_batches: AtomicU64,
    /// Coalesced `GetMany` requests sent (see `coalesce::reads`).
    pub(crate) read_batches: AtomicU64,
    pub(crate) window_fetches: AtomicU64,
    pub(crate) window_fetch_bytes: AtomicU64,
    pub(crate) tail_pulls: AtomicU64,
    pub(crate) clears: AtomicU64,
    /// Keys the active expiry removed.
    pub(crate) expired_keys: AtomicU64,
    /// Milliseconds the start's index rebuild took.
    pub(crate) rebuild_ms: AtomicU64,
}

/// A snapshot of the engine's state, for INFO and benchmarks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    /// Partitions (and connections) of the storage node.
    pub partitions: usize,
    /// Connections that are up.
    pub links_up: usize,
    /// The writer epoch held.
    pub epoch: u64,
    /// True once a newer writer has fenced this engine.
    pub fenced: bool,
    /// What the index holds and its memory use.
    pub index: IndexStats,
    /// Puts acknowledged.
    pub puts: u64,
    /// Deletes acknowledged.
    pub deletes: u64,
    /// Gets served.
    pub gets: u64,
    /// Reads answered from memory (the value cache or a window) without
    /// waiting on the network.
    pub hits: u64,
    /// Reads that waited for a window or read their record on its own.
    pub misses: u64,
    /// Reads answered from the value cache (a share of `hits`).
    pub cache_hits: u64,
    /// Reads the value cache could not answer.
    pub cache_misses: u64,
    /// Bytes the value cache holds (keys, values, per-entry overhead).
    pub cache_bytes: u64,
    /// Entries the value cache holds.
    pub cache_entries: u64,
    /// The value cache's bound on `cache_bytes`.
    pub cache_capacity_bytes: u64,
    /// Records read from the storage node (alone, or with others of one
    /// multi-key read in one request).
    pub point_reads: u64,
    /// Index entries moved to where garbage collection put their records,
    /// after a read of the old place answered `moved`.
    pub relocations: u64,
    /// Batches that carried the puts of [`Engine::put_each_async`] (the
    /// RESP server's plain SETs): with `puts`, how well they coalesced.
    pub put_batches: u64,
    /// Requests that carried the records of `point_reads`, each with the
    /// reads of one or more callers that shared a connection's round trip.
    pub read_batches: u64,
    /// Windows fetched.
    pub window_fetches: u64,
    /// Bytes those fetches brought.
    pub window_fetch_bytes: u64,
    /// Key-log tails pulled after reconnections.
    pub tail_pulls: u64,
    /// Keys whose time to live ran out that the writer's active expiry
    /// removed (logged as expire entries).
    pub expired_keys: u64,
    /// Live keys that have an expiry time (expired ones not yet removed
    /// included).
    pub expiring_keys: u64,
    /// The mean time those keys have left, in milliseconds (0 without
    /// any).
    pub avg_ttl_ms: u64,
    /// Milliseconds the index rebuild at start took (every partition's key
    /// log exported and merged, tombstones dropped; connecting not
    /// included).
    pub rebuild_ms: u64,
}

impl EngineStats {
    /// Index memory per live key (0 without keys).
    pub fn index_bytes_per_key(&self) -> f64 {
        if self.index.live_keys == 0 {
            0.0
        } else {
            self.index.memory_bytes as f64 / self.index.live_keys as f64
        }
    }

    /// Hits as a share of reads (1 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        let reads = self.hits + self.misses;
        if reads == 0 {
            1.0
        } else {
            self.hits as f64 / reads as f64
        }
    }
}

/// State shared by the engine's callers and its background tasks.
pub(crate) struct Inner {
    pub(crate) config: EngineConfig,
    pub(crate) client: StorageClient,
    pub(crate) index: Index,
    pub(crate) windows: Vec<PartitionWindows>,
    /// Values of hot keys, for reads no window covers.
    pub(crate) cache: ValueCache,
    /// Per partition: the highest sequence number acknowledged in it.
    /// After its connection comes back, the key-log tail past it is pulled,
    /// so a write whose acknowledgement was lost becomes visible.
    pub(crate) acked_seq: Vec<AtomicU64>,
    pub(crate) counters: Counters,
    pub(crate) handle: tokio::runtime::Handle,
    next_partition: AtomicUsize,
    next_client_partition: AtomicUsize,
    /// Woken each time a reader applies followed key-log entries, and each
    /// time the writer's active expiry removes keys.
    pub(crate) applied: tokio::sync::Notify,
    /// Per partition, for a reader: its key-log stream has caught up with
    /// the end it found and is following what is appended.
    pub(crate) follow_caught_up: Vec<AtomicBool>,
    /// True for the writer (configured as one, or a promoted reader).
    pub(crate) writer: AtomicBool,
    /// A reader's tasks that follow the key logs.
    pub(crate) followers: parking_lot::Mutex<Vec<tokio::task::AbortHandle>>,
    /// The writer's active expiry task.
    pub(crate) expirer: parking_lot::Mutex<Option<tokio::task::AbortHandle>>,
    /// Keeps multi-key reads from seeing part of a batch.
    pub(crate) batches: BatchGate,
    /// The lanes that coalesce plain puts, one per partition.
    pub(crate) put_lanes: crate::coalesce::Lanes<crate::coalesce::QueuedRun>,
    /// The lanes that coalesce the record reads of multi-key reads, one per
    /// connection.
    pub(crate) read_lanes: crate::coalesce::Lanes<crate::coalesce::reads::QueuedReads>,
    /// Per partition: key-log entries applied (the rebuild's and, for a
    /// reader, the followed ones).
    pub(crate) applied_entries: Vec<AtomicU64>,
    /// Per partition: milliseconds since the engine started at which
    /// entries were last applied.
    pub(crate) applied_at_ms: Vec<AtomicU64>,
    pub(crate) started: std::time::Instant,
}

impl Inner {
    pub(crate) fn partitions(&self) -> usize {
        self.windows.len()
    }

    /// Notes one acknowledged write of this node's own: a key-log entry of
    /// `partition` at `seq`. Counted among the applied entries too, so that
    /// a writer that becomes a reader measures its lag from what it holds
    /// (an entry pulled after a reconnection and then acknowledged counts
    /// twice, which can only make the lag read lower).
    pub(crate) fn note_acked(&self, partition: usize, seq: u64) {
        self.applied_entries[partition].fetch_add(1, Ordering::AcqRel);
        self.acked_seq[partition].fetch_max(seq, Ordering::AcqRel);
    }

    /// Notes key-log entries of `partition` merged into the index.
    /// The entry count is raised before the sequence number, so whoever
    /// sees the sequence number sees the count.
    pub(crate) fn note_applied(&self, partition: usize, merged: &rebuild::Merged) {
        self.applied_at_ms[partition].store(self.uptime_ms(), Ordering::Release);
        self.applied_entries[partition].fetch_add(merged.entries, Ordering::AcqRel);
        self.windows[partition].note_committed_end(merged.value_end);
        self.acked_seq[partition].fetch_max(merged.max_seq, Ordering::AcqRel);
    }

    pub(crate) fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn is_writer(&self) -> bool {
        self.writer.load(Ordering::Acquire)
    }

    /// Starts a window fetch in the background.
    pub(crate) fn spawn_fetch(self: &Arc<Self>, partition: usize, fetch: Fetch) {
        self.counters.window_fetches.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            partition,
            slot = fetch.slot,
            id = fetch.id,
            start = fetch.range.start,
            end = fetch.range.end,
            "window fetch"
        );
        let inner = Arc::clone(self);
        self.handle.spawn(async move {
            let start = fetch.range.start;
            let len = (fetch.range.end - start) as usize;
            let windows = &inner.windows[partition];
            match inner.client.read_range(partition, start, len).await {
                Ok((bytes, committed_end)) => {
                    inner
                        .counters
                        .window_fetch_bytes
                        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    let range = start..start + bytes.len() as u64;
                    windows.complete(fetch.id, range, bytes, committed_end);
                }
                Err(e) => {
                    tracing::debug!(partition, "window fetch failed: {e}");
                    windows.fail(fetch.id);
                }
            }
        });
    }

    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        self.config
            .limits
            .check_key(key)
            .map_err(EngineError::Invalid)
    }

    pub(crate) fn check_value(&self, value: &[u8]) -> Result<()> {
        self.config
            .limits
            .check_value(value)
            .map_err(EngineError::Invalid)
    }

    /// The partition a caller that names none writes to: one per thread,
    /// spread round robin, so that one thread's operations stay in order.
    pub(crate) fn thread_partition(&self) -> usize {
        thread_local! {
            static PARTITION: Cell<Option<usize>> = const { Cell::new(None) };
        }
        PARTITION.with(|partition| match partition.get() {
            Some(p) => p % self.partitions(),
            None => {
                let p = self.next_partition();
                partition.set(Some(p));
                p
            }
        })
    }

    /// A partition for a new caller (e.g. a RESP client), spread round
    /// robin.
    pub(crate) fn next_partition(&self) -> usize {
        self.next_partition.fetch_add(1, Ordering::Relaxed) % self.partitions()
    }

    pub(crate) fn reconnect_wait(&self) -> Duration {
        Duration::from_millis(self.config.reconnect_wait_ms)
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }
}

/// A compute node's engine. Thread-safe; cheap to share behind an `Arc`.
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Engine {
    /// Connects to the storage node, begins a new writer epoch (fencing any
    /// older writer; not for a reader), and rebuilds the index from every
    /// partition's key log. Blocking; starts the engine's own runtime.
    pub fn connect(config: EngineConfig) -> Result<Self> {
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        runtime.thread_name("compute-engine").enable_all();
        if let Some(workers) = config.worker_threads {
            runtime.worker_threads(workers.max(1));
        }
        let runtime = runtime.build().map_err(EngineError::Runtime)?;
        let inner = runtime.block_on(connect_inner(config, runtime.handle().clone()))?;
        Ok(Self {
            inner,
            runtime: Some(runtime),
        })
    }

    /// The engine's runtime: its connections, window fetches and key-log
    /// pulls run there, and tasks that call the async methods may too.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.inner.handle
    }

    /// Number of partitions (and connections).
    pub fn partitions(&self) -> usize {
        self.inner.partitions()
    }

    /// True for a writer (configured as one, or a promoted reader); false
    /// for a reader, which follows the writer's key logs and whose writes
    /// the storage node refuses.
    pub fn is_writer(&self) -> bool {
        self.inner.is_writer()
    }

    /// The highest sequence number this engine has applied (acknowledged
    /// to it, or, for a reader, followed).
    pub fn applied_seq(&self) -> u64 {
        self.inner
            .acked_seq
            .iter()
            .map(|seq| seq.load(Ordering::Acquire))
            .max()
            .unwrap_or(0)
    }

    /// Per partition, the highest sequence number this engine has applied
    /// there. Sequence numbers are the storage node's, one counter for all
    /// partitions, so a reader has everything a writer had acknowledged
    /// once each of its figures is at least the writer's.
    pub fn applied_seqs(&self) -> Vec<u64> {
        self.inner
            .acked_seq
            .iter()
            .map(|seq| seq.load(Ordering::Acquire))
            .collect()
    }

    /// True if this engine has applied, in every partition, at least
    /// `seqs` (another engine's [`Engine::applied_seqs`]).
    pub fn has_applied(&self, seqs: &[u64]) -> bool {
        self.inner
            .acked_seq
            .iter()
            .zip(seqs)
            .all(|(mine, &theirs)| mine.load(Ordering::Acquire) >= theirs)
    }

    /// For a reader: true while every partition's key-log stream has caught
    /// up with the end it found and follows what is appended.
    pub fn following(&self) -> bool {
        self.inner
            .follow_caught_up
            .iter()
            .all(|caught_up| caught_up.load(Ordering::Acquire))
    }

    /// Waits until `condition` holds, checking it again each time a reader
    /// applies followed key-log entries or the writer's active expiry
    /// removes keys; returns false if `timeout` passes first. Blocking (not
    /// to be called from inside an async task).
    pub fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&Engine) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        self.inner.handle.block_on(async {
            loop {
                let applied = self.inner.applied.notified();
                let mut applied = std::pin::pin!(applied);
                applied.as_mut().enable();
                if condition(self) {
                    return true;
                }
                if tokio::time::timeout_at(deadline, applied).await.is_err() {
                    return condition(self);
                }
            }
        })
    }

    /// A partition for a new caller that wants its writes kept in order
    /// (for example one RESP client connection): round robin over the
    /// first [`EngineConfig::client_partitions`] partitions.
    pub fn assign_partition(&self) -> usize {
        let inner = &self.inner;
        let spread = match inner.config.client_partitions {
            0 => inner.partitions(),
            n => n.min(inner.partitions()),
        };
        inner.next_client_partition.fetch_add(1, Ordering::Relaxed) % spread
    }

    /// The storage node's own figures (one stats request): per partition
    /// its segments, live and dead bytes, garbage collection and
    /// checkpoints, and why it refuses writes, if it does.
    pub async fn storage_stats_async(&self) -> Result<splitkv_common::message::StatsReport> {
        Ok(self.inner.client.stats()?.wait().await?)
    }

    /// Counters and state.
    pub fn stats(&self) -> EngineStats {
        let c = &self.inner.counters;
        let index = self.inner.index.stats();
        let cache = self.inner.cache.stats();
        let client = &self.inner.client;
        EngineStats {
            partitions: self.partitions(),
            links_up: (0..self.partitions()).filter(|&l| client.is_up(l)).count(),
            epoch: client.epoch(),
            fenced: client.is_fenced(),
            index,
            puts: c.puts.load(Ordering::Relaxed),
            deletes: c.deletes.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            cache_bytes: cache.bytes,
            cache_entries: cache.entries,
            cache_capacity_bytes: cache.capacity_bytes,
            point_reads: c.point_reads.load(Ordering::Relaxed),
            relocations: c.relocations.load(Ordering::Relaxed),
            put_batches: c.put_batches.load(Ordering::Relaxed),
            read_batches: c.read_batches.load(Ordering::Relaxed),
            window_fetches: c.window_fetches.load(Ordering::Relaxed),
            window_fetch_bytes: c.window_fetch_bytes.load(Ordering::Relaxed),
            tail_pulls: c.tail_pulls.load(Ordering::Relaxed),
            expired_keys: c.expired_keys.load(Ordering::Relaxed),
            expiring_keys: self.inner.index.expiring_keys(),
            avg_ttl_ms: self
                .inner
                .index
                .avg_expire_at_ms()
                .map_or(0, |at| at.saturating_sub(expiry::now_ms())),
            rebuild_ms: c.rebuild_ms.load(Ordering::Relaxed),
        }
    }

    /// Keys with a value that has not expired.
    pub fn len(&self) -> u64 {
        let index = &self.inner.index;
        // Expired at now: expiry times below it.
        let expired = index.expired_keys_present(expiry::now_ms().saturating_sub(1));
        index.live_keys().saturating_sub(expired)
    }

    /// True if the index holds no live key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.inner.client.close();
        if let Some(runtime) = self.runtime.take() {
            // Let the storage node hear of the close, so that it stops
            // sending to this engine now (a reader's key-log streams among
            // it) rather than at its idle timeout. Not possible from inside
            // an async task, where blocking is not allowed.
            if tokio::runtime::Handle::try_current().is_err() {
                runtime.block_on(self.inner.client.wait_closed(CLOSE_WAIT));
            }
            // The client is closed: what is left are reconnection loops and
            // fetches whose results nobody wants.
            runtime.shutdown_background();
        }
    }
}

/// How long a dropped engine waits for its connections' close to reach the
/// storage node.
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// Link events the storage client may queue for the engine before it
/// waits: a few per partition's connection.
const MAX_QUEUED_LINK_EVENTS: usize = 64;

async fn connect_inner(
    mut config: EngineConfig,
    handle: tokio::runtime::Handle,
) -> Result<Arc<Inner>> {
    let (events, events_rx) = mpsc::channel(MAX_QUEUED_LINK_EVENTS);
    let mut client_config = ClientConfig::new(config.storage.clone(), Arc::clone(&config.identity));
    client_config.writer = config.writer;
    client_config.request_timeout_ms = config.request_timeout_ms;
    client_config.connect_timeout_ms = config.connect_timeout_ms;
    client_config.transport = config.transport;
    client_config.max_frame_bytes = splitkv_common::message::max_frame_bytes(
        config.limits.max_key_bytes,
        config.limits.max_value_bytes,
    );
    client_config.max_in_flight_requests = config.max_in_flight_requests;
    client_config.outbox_bytes = config.outbox_bytes;
    client_config.link_events = Some(events);
    let client = StorageClient::connect(client_config).await?;
    let partitions = client.partitions();
    adopt_node_limits(&mut config, client.welcome());
    let config_writer = config.writer;
    let put_lanes = crate::coalesce::lanes_for(partitions, &config.limits);
    let inner = Arc::new(Inner {
        windows: (0..partitions)
            .map(|_| PartitionWindows::new(config.window_bytes))
            .collect(),
        cache: ValueCache::new(config.cache_bytes),
        acked_seq: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
        config,
        client,
        index: Index::new(),
        counters: Counters::default(),
        handle,
        next_partition: AtomicUsize::new(0),
        next_client_partition: AtomicUsize::new(0),
        applied: tokio::sync::Notify::new(),
        follow_caught_up: (0..partitions).map(|_| AtomicBool::new(false)).collect(),
        writer: AtomicBool::new(config_writer),
        followers: parking_lot::Mutex::new(Vec::new()),
        expirer: parking_lot::Mutex::new(None),
        batches: BatchGate::default(),
        put_lanes,
        read_lanes: crate::coalesce::reads::read_lanes_for(partitions),
        applied_entries: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
        applied_at_ms: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
        started: std::time::Instant::now(),
    });
    tokio::spawn(follow_link_events(Arc::downgrade(&inner), events_rx));
    let started = std::time::Instant::now();
    rebuild::rebuild_index(&inner).await?;
    let rebuild_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    inner
        .counters
        .rebuild_ms
        .store(rebuild_ms, Ordering::Relaxed);
    if inner.is_writer() {
        expiry::spawn_active_expiry(&inner);
    } else {
        crate::follow::spawn_followers(&inner);
    }
    let stats = inner.index.stats();
    tracing::info!(
        keys = stats.live_keys,
        partitions,
        epoch = inner.client.epoch(),
        seconds = started.elapsed().as_secs_f64(),
        "index rebuilt from the storage node's key logs"
    );
    Ok(inner)
}

/// Consumes what the storage client tells of its connections until the
/// engine is gone: after a reconnection, pulls the partition's key-log
/// tail; once fenced, turns the writer into a reader.
async fn follow_link_events(inner: Weak<Inner>, mut events: mpsc::Receiver<LinkEvent>) {
    while let Some(event) = events.recv().await {
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match event {
            // A reader's follower catches up by itself.
            LinkEvent::Reconnected {
                partition,
                generation,
            } if inner.is_writer() => {
                tracing::debug!(partition, generation, "connection back; pulling the tail");
                rebuild::spawn_tail_pull(inner, partition);
            }
            LinkEvent::Reconnected { .. } => {}
            LinkEvent::Down { partition } => {
                tracing::debug!(partition, "connection lost; its requests failed");
            }
            LinkEvent::Fenced { current_epoch } => {
                crate::replication::demote(&inner, current_epoch)
            }
        }
    }
}

/// Lowers the engine's limits to what the storage node accepts (a write
/// over the node's limits would be refused there anyway; here it gets the
/// engine's clear error without a round trip), and windows to the longest
/// range the protocol reads.
fn adopt_node_limits(config: &mut EngineConfig, welcome: &Welcome) {
    let mut window_bytes = config.window_bytes as usize;
    let Limits {
        max_key_bytes,
        max_value_bytes,
    } = &mut config.limits;
    let limits = [
        ("max_key_bytes", max_key_bytes, welcome.max_key_bytes),
        ("max_value_bytes", max_value_bytes, welcome.max_value_bytes),
        (
            "window_bytes",
            &mut window_bytes,
            splitkv_common::limits::MAX_RANGE_BYTES,
        ),
    ];
    for (name, ours, limit) in limits {
        if *ours > limit {
            tracing::info!(
                name,
                configured = *ours,
                limit,
                "lowered to the storage node's limit"
            );
            *ours = limit;
        }
    }
    config.window_bytes = window_bytes as u64;
}
