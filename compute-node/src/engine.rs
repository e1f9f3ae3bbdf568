//! The compute node's engine: it holds no state on its own disk. At start it
//! connects to the storage node (one connection per partition), pulls every
//! partition's key log in parallel and rebuilds its view (the index, the
//! value cache, the read windows); then it serves reads from its view or the
//! storage node, and writes through the storage node, updating the view
//! from each acknowledgement.
//!
//! The engine is wiring: the [`View`] is the in-memory state, the write
//! route ([`Writes`]) and the read route ([`Reads`]) are given it and the
//! storage client, and the node's [`Role`] runs the active expiry or a
//! reader's followers. Each read and write is one async method (for tasks
//! on any tokio runtime; the RESP server uses the engine's own,
//! [`Engine::handle`]), with a blocking form over it for plain threads
//! (not to be called from inside an async task).
//!
//! The storage client tells the engine what happens to its connections on
//! a bounded channel the engine owns; the role's task that follows it
//! pulls a partition's key-log tail after its connection comes back.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::Bytes;
use splitkv_common::client::{BatchOp, ClientConfig, KeyWrite, StorageClient, Welcome};
use splitkv_common::limits::Limits;
use tokio::sync::mpsc;

use crate::config::EngineConfig;
use crate::error::Result;
use crate::expiry;
use crate::index::{IndexStats, Location};
use crate::reads::Reads;
use crate::rebuild;
use crate::replication::{self, Promotion, Replication, Role};
use crate::storage::Storage;
use crate::view::View;
use crate::walk;
use crate::writes::Writes;

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
    /// `WriteMany` requests that carried the writes (every write goes
    /// through its partition's lane): with `puts` and `deletes`, how well
    /// they coalesced.
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

/// A compute node's engine. Thread-safe; cheap to share behind an `Arc`.
pub struct Engine {
    view: Arc<View>,
    storage: Arc<Storage>,
    writes: Arc<Writes>,
    reads: Arc<Reads>,
    role: Arc<Role>,
    config: EngineConfig,
    handle: tokio::runtime::Handle,
    next_partition: AtomicUsize,
    next_client_partition: AtomicUsize,
    runtime: Option<tokio::runtime::Runtime>,
}

/// How long a dropped engine waits for its connections' close to reach the
/// storage node. Each connection's close frame leaves at its driver's next
/// run, microseconds after the close; the connections are idle only after
/// their draining period (three probe timeouts, about 100 ms on loopback),
/// which the storage node does not need, so the wait ends well before it.
const CLOSE_WAIT: Duration = Duration::from_millis(20);

/// Link events the storage client may queue for the engine before it
/// waits: a few per partition's connection.
const MAX_QUEUED_LINK_EVENTS: usize = 64;

/// Wakes a thread parked in [`Engine::block`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    /// The calling thread's waker for [`Engine::block`] (a wake-up that
    /// comes before the park is not lost: the park returns at once).
    static THREAD_WAKER: Waker = Waker::from(Arc::new(Unpark(std::thread::current())));
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
        let runtime = runtime.build()?;
        let mut engine = runtime.block_on(Self::wire(config, runtime.handle().clone()))?;
        engine.runtime = Some(runtime);
        Ok(engine)
    }

    /// Connects the storage client, wires the view, the routes and the
    /// role together, and rebuilds the view.
    async fn wire(mut config: EngineConfig, handle: tokio::runtime::Handle) -> Result<Self> {
        let (events, events_rx) = mpsc::channel(MAX_QUEUED_LINK_EVENTS);
        let mut client_config =
            ClientConfig::new(config.storage.clone(), Arc::clone(&config.identity));
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
        let client = Arc::new(StorageClient::connect(client_config).await?);
        let partitions = client.partitions();
        adopt_node_limits(&mut config, client.welcome());
        let view = Arc::new(View::new(
            partitions,
            config.window_bytes,
            config.cache_bytes,
        ));
        let storage = Arc::new(Storage::new(
            Arc::clone(&client),
            config.limits,
            Duration::from_millis(config.reconnect_wait_ms),
            Duration::from_millis(config.request_timeout_ms),
            config.writer,
        ));
        let writes = Arc::new(Writes::new(
            Arc::clone(&view),
            Arc::clone(&storage),
            handle.clone(),
        ));
        let reads = Arc::new(Reads::new(
            Arc::clone(&view),
            Arc::clone(&storage),
            handle.clone(),
        ));
        let role = Arc::new(Role::new(Arc::clone(&writes), handle.clone()));
        tokio::spawn(replication::follow_link_events(
            Arc::downgrade(&role),
            events_rx,
        ));
        let started = std::time::Instant::now();
        rebuild::rebuild_index(&view, &client).await?;
        let rebuild_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        view.counters
            .rebuild_ms
            .store(rebuild_ms, Ordering::Relaxed);
        role.start();
        let stats = view.index.stats();
        tracing::info!(
            keys = stats.live_keys,
            partitions,
            epoch = client.epoch(),
            seconds = started.elapsed().as_secs_f64(),
            "index rebuilt from the storage node's key logs"
        );
        Ok(Self {
            view,
            storage,
            writes,
            reads,
            role,
            config,
            handle,
            next_partition: AtomicUsize::new(0),
            next_client_partition: AtomicUsize::new(0),
            runtime: None,
        })
    }

    /// The engine's runtime: its connections, window fetches and key-log
    /// pulls run there, and tasks that call the async methods may too.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// The limits of keys and values this engine accepts (the configured
    /// ones, lowered to the storage node's).
    pub fn limits(&self) -> &Limits {
        self.storage.limits()
    }

    /// Number of partitions (and connections).
    pub fn partitions(&self) -> usize {
        self.view.partitions()
    }

    /// True for a writer (configured as one, or a promoted reader); false
    /// for a reader, which follows the writer's key logs and whose writes
    /// the storage node refuses.
    pub fn is_writer(&self) -> bool {
        self.storage.is_writer()
    }

    /// The highest sequence number this engine has applied (acknowledged
    /// to it, or, for a reader, followed).
    pub fn applied_seq(&self) -> u64 {
        self.view.acked_seqs().into_iter().max().unwrap_or(0)
    }

    /// Per partition, the highest sequence number this engine has applied
    /// there. Sequence numbers are the storage node's, one counter for all
    /// partitions, so a reader has everything a writer had acknowledged
    /// once each of its figures is at least the writer's.
    pub fn applied_seqs(&self) -> Vec<u64> {
        self.view.acked_seqs()
    }

    /// True if this engine has applied, in every partition, at least
    /// `seqs` (another engine's [`Engine::applied_seqs`]).
    pub fn has_applied(&self, seqs: &[u64]) -> bool {
        self.view
            .acked_seqs()
            .iter()
            .zip(seqs)
            .all(|(mine, theirs)| mine >= theirs)
    }

    /// For a reader: true while every partition's key-log stream has caught
    /// up with the end it found and follows what is appended.
    pub fn following(&self) -> bool {
        self.view.all_caught_up()
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
        self.handle.block_on(async {
            loop {
                let applied = self.view.applied_changed();
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

    /// The partition a caller that names none writes to: one per thread,
    /// spread round robin, so that one thread's operations stay in order.
    fn thread_partition(&self) -> usize {
        thread_local! {
            static PARTITION: Cell<Option<usize>> = const { Cell::new(None) };
        }
        PARTITION.with(|partition| match partition.get() {
            Some(p) => p % self.partitions(),
            None => {
                let p = self.next_partition.fetch_add(1, Ordering::Relaxed) % self.partitions();
                partition.set(Some(p));
                p
            }
        })
    }

    /// A partition for a new caller that wants its writes kept in order
    /// (for example one RESP client connection): round robin over the
    /// first [`EngineConfig::client_partitions`] partitions.
    pub fn assign_partition(&self) -> usize {
        let spread = match self.config.client_partitions {
            0 => self.partitions(),
            n => n.min(self.partitions()),
        };
        self.next_client_partition.fetch_add(1, Ordering::Relaxed) % spread
    }

    /// The storage node's own figures (one stats request): per partition
    /// its segments, live and dead bytes, garbage collection and
    /// checkpoints, and why it refuses writes, if it does.
    pub async fn storage_stats_async(&self) -> Result<splitkv_common::message::StatsReport> {
        Ok(self.storage.client.stats()?.wait().await?)
    }

    /// Counters and state.
    pub fn stats(&self) -> EngineStats {
        let view = &self.view;
        let c = &view.counters;
        let index = view.index.stats();
        let cache = view.cache.stats();
        let client = &self.storage.client;
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
            expiring_keys: view.index.expiring_keys(),
            avg_ttl_ms: view
                .index
                .avg_expire_at_ms()
                .map_or(0, |at| at.saturating_sub(expiry::now_ms())),
            rebuild_ms: c.rebuild_ms.load(Ordering::Relaxed),
        }
    }

    /// Keys with a value that has not expired.
    pub fn len(&self) -> u64 {
        let index = &self.view.index;
        // Expired at now: expiry times below it.
        let expired = index.expired_keys_present(expiry::now_ms().saturating_sub(1));
        index.live_keys().saturating_sub(expired)
    }

    /// True if the index holds no live key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the index holds for `key`: where its newest version is, a
    /// tombstone for a deleted or expired one (until the tombstones are
    /// dropped), `None` for a key it does not know. For comparing versions
    /// (WATCH); [`Engine::contains`] tells whether the key has a value.
    pub fn location(&self, key: &[u8]) -> Option<Location> {
        self.view.index.get(key)
    }

    /// One step of a walk over every live key: starting at `cursor` (0 to
    /// begin), visits about `count` index entries, passes each live key to
    /// `f`, and returns the cursor to go on from (0 once the walk is
    /// complete). A key present from the first step to the last is passed
    /// at least once, whatever is added or deleted meanwhile; a key may be
    /// passed twice. Any `u64` is a valid cursor (one that names no place
    /// ends the walk). Expired keys are not passed. `f` must not use the
    /// engine.
    pub fn scan_keys(&self, cursor: u64, count: usize, f: impl FnMut(&[u8])) -> u64 {
        walk::scan_keys(&self.view.index, cursor, count, f)
    }

    /// A live key that has not expired, picked at random (not uniformly),
    /// or `None` if there is none.
    pub fn random_key(&self) -> Option<Vec<u8>> {
        walk::random_key(&self.view.index)
    }

    /// Runs `operation` to completion on the calling thread, with the
    /// engine's runtime for its timers and spawned work: how every blocking
    /// method runs its async core. An operation that completes without
    /// waiting (a read from a window) costs one poll; one that waits parks
    /// the thread until it is woken. Must not be called from inside an
    /// async task.
    fn block<T>(&self, operation: impl Future<Output = T>) -> T {
        let _runtime = self.handle.enter();
        let mut operation = std::pin::pin!(operation);
        THREAD_WAKER.with(|waker| {
            let mut cx = Context::from_waker(waker);
            loop {
                if let Poll::Ready(done) = operation.as_mut().poll(&mut cx) {
                    return done;
                }
                std::thread::park();
            }
        })
    }

    /// Puts `key` = `value` into the calling thread's partition. Returns
    /// once the storage node has acknowledged it. Blocking.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_on(self.thread_partition(), key, value)
    }

    /// Puts `key` = `value` into `partition`; one caller's writes to one
    /// partition take effect in order. Blocking.
    pub fn put_on(&self, partition: usize, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_expiring_on(partition, key, value, 0)
    }

    /// [`Engine::put_on`] of a version that expires at `expire_at_ms`
    /// (absolute Unix milliseconds; 0: never). Blocking.
    pub fn put_expiring_on(
        &self,
        partition: usize,
        key: &[u8],
        value: &[u8],
        expire_at_ms: u64,
    ) -> Result<()> {
        let put = KeyWrite::Put {
            key: Bytes::copy_from_slice(key),
            value: Bytes::copy_from_slice(value),
            expire_at_ms,
        };
        self.block(self.write_async(partition, vec![put]))
    }

    /// Puts every pair as one unit into the calling thread's partition:
    /// after a crash either all of them or none are there. Blocking.
    pub fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_many_on(self.thread_partition(), items)
    }

    /// Like [`Engine::put_many`], into `partition`. Blocking.
    pub fn put_many_on(&self, partition: usize, items: &[(&[u8], &[u8])]) -> Result<()> {
        self.block(self.put_many_async(partition, items))
    }

    /// Puts every pair into `partition` as one unit (all or none after a
    /// crash); returns once the storage node has acknowledged them.
    pub async fn put_many_async(&self, partition: usize, items: &[(&[u8], &[u8])]) -> Result<()> {
        let puts = items
            .iter()
            .map(|&(key, value)| {
                KeyWrite::put(Bytes::copy_from_slice(key), Bytes::copy_from_slice(value))
            })
            .collect();
        self.write_async(partition, puts).await
    }

    /// Applies every op (puts, deletes, expiries) through `partition` as
    /// one unit: after a crash either all of them or none are there, and
    /// they take effect in order (a key written twice ends with the later
    /// op). Returns once the storage node has acknowledged them.
    pub async fn write_many_async(&self, partition: usize, ops: &[BatchOp<'_>]) -> Result<()> {
        let writes = ops
            .iter()
            .map(|op| op.map(Bytes::copy_from_slice))
            .collect();
        self.write_async(partition, writes).await
    }

    /// Applies `writes` through `partition` as one unit, as
    /// [`Engine::write_many_async`] does: the route every write takes. The
    /// writes of the callers of one partition that arrive while its
    /// previous batch is in flight travel to the storage node together.
    pub async fn write_async(&self, partition: usize, writes: Vec<KeyWrite<Bytes>>) -> Result<()> {
        Writes::write(&self.writes, partition, writes)
            .await
            .map(|_| ())
    }

    /// Puts each `(key, value)` pair (without expiry) through `partition`
    /// with an outcome per pair, in order: a pair over the limits fails
    /// alone, without being sent. The runs of the callers of one partition
    /// that arrive while its previous batch is in flight travel to the
    /// storage node together, in as few requests as the frame limit allows
    /// (one, but for large values); one caller's puts
    /// take effect in its order, and each is in the index, and readable,
    /// before its outcome is returned. A failed batch fails every put in
    /// it; as for any write, one that failed after it was sent may or may
    /// not have happened.
    pub async fn put_each_async(
        &self,
        partition: usize,
        pairs: Vec<(Bytes, Bytes)>,
    ) -> Vec<Result<()>> {
        Writes::put_each(&self.writes, partition, pairs).await
    }

    /// Deletes every key (FLUSHALL), through `partition`'s connection.
    /// Returns once every partition of the storage node has acknowledged
    /// its clear entry, with the guarantees of a write: after a crash of
    /// either node no key written before the call comes back. Writes
    /// acknowledged after it returns stay; writes concurrent with it may
    /// be cleared or stay.
    pub async fn clear_all_async(&self, partition: usize) -> Result<()> {
        self.writes.clear_all(partition).await
    }

    /// [`Engine::clear_all_async`] through the calling thread's partition.
    /// Blocking.
    pub fn clear_all(&self) -> Result<()> {
        self.block(self.clear_all_async(self.thread_partition()))
    }

    /// Deletes `key` through the calling thread's partition. Returns
    /// whether the key existed (as far as this engine knew). Blocking.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.delete_on(self.thread_partition(), key)
    }

    /// Like [`Engine::delete`], through `partition`. Blocking.
    pub fn delete_on(&self, partition: usize, key: &[u8]) -> Result<bool> {
        self.block(self.delete_async(partition, key))
    }

    /// Deletes `key` through `partition` (the tombstone is logged there);
    /// returns once acknowledged, with whether the key existed.
    pub async fn delete_async(&self, partition: usize, key: &[u8]) -> Result<bool> {
        let existed = self.contains(key);
        let delete = KeyWrite::Delete {
            key: Bytes::copy_from_slice(key),
        };
        self.write_async(partition, vec![delete]).await?;
        Ok(existed)
    }

    /// True if `key` has a live value that has not expired (as far as this
    /// engine knows).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.view.visible(key).is_some()
    }

    /// When `key`'s value expires: `None` if it has no live value, `Some(0)`
    /// if it never expires, else the absolute Unix time in milliseconds.
    pub fn expire_at_ms(&self, key: &[u8]) -> Option<u64> {
        self.view.visible(key).map(|location| location.expire_at_ms)
    }

    /// The value of `key`, `None` if it has none. Blocking.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.block(self.get_async(key))
    }

    /// The value of `key`, `None` if it has none: from the value cache, a
    /// ready window, or read on its own (never waiting for a window on its
    /// way).
    pub async fn get_async(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.get_expiring_async(key).await?.map(|(value, _)| value))
    }

    /// The value of `key` with its expiry time (absolute Unix
    /// milliseconds, 0 for never), `None` if it has no value: both of the
    /// same version, read as [`Engine::get_async`] reads.
    pub async fn get_expiring_async(&self, key: &[u8]) -> Result<Option<(Bytes, u64)>> {
        Reads::get_expiring(&self.reads, key).await
    }

    /// The values of `keys`, in order; the first error fails the batch.
    /// Records not in a window are requested together, so the batch costs
    /// one round trip. Blocking.
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        self.block(self.get_each_async(keys)).into_iter().collect()
    }

    /// The values of `keys`, in order, with an outcome per key: one key's
    /// failure (a bad key, a record that fails its checks) fails only that
    /// key. The keys are resolved together, at a moment when no batch is
    /// half applied: of the keys of one batch (an MSET, an EXEC, a
    /// followed key-log frame) either all are seen as the batch left them
    /// or none. Records not in the value cache or a ready window are read
    /// with one request per storage connection (windows on their way are
    /// not waited for), so the batch costs one round trip.
    pub async fn get_each_async(&self, keys: &[&[u8]]) -> Vec<Result<Option<Bytes>>> {
        Reads::get_each(&self.reads, keys).await
    }

    /// Turns this reader into the writer without rebuilding its index: a
    /// new writer epoch fences the old writer (its later writes fail; none
    /// is acknowledged and lost), the reader catches up to the key logs'
    /// committed ends, and from then on its writes are accepted. A writer
    /// is left as it is (its epoch is returned). If catching up fails the
    /// engine is already the epoch's holder but stays read-only; promoting
    /// again retries the catch-up.
    pub async fn promote_async(&self) -> Result<Promotion> {
        self.role.promote().await
    }

    /// [`Engine::promote_async`], blocking.
    pub fn promote(&self) -> Result<Promotion> {
        self.block(self.promote_async())
    }

    /// This node's role and, for a reader, its lag behind the storage
    /// node's key logs (one stats request to the storage node).
    pub async fn replication_async(&self) -> Result<Replication> {
        self.role.replication().await
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let client = &self.storage.client;
        client.close();
        if let Some(runtime) = self.runtime.take() {
            // Let the storage node hear of the close, so that it stops
            // sending to this engine now (a reader's key-log streams among
            // it) rather than at its idle timeout. Not possible from inside
            // an async task, where blocking is not allowed.
            if tokio::runtime::Handle::try_current().is_err() {
                runtime.block_on(client.wait_closed(CLOSE_WAIT));
            }
            // The client is closed: what is left are reconnection loops and
            // fetches whose results nobody wants.
            runtime.shutdown_background();
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
