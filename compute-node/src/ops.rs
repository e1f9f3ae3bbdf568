//! The engine's operations: put, get, delete and their batch forms. Each
//! is one async function; the blocking form a plain thread calls runs that
//! same function to completion ([`Engine::block`]).
//!
//! A write is acknowledged to the caller only after the storage node has
//! acknowledged it; the acknowledgement's sequence number and offset update
//! the index, which never moves a key to a lower sequence number. A read
//! resolves the key in the index, then takes the value from the value cache
//! or the record from a ready window (a hit), or reads the record from the
//! storage node (never waiting for a window on its way), and checks a
//! record's checksum, key and sequence number before returning its value
//! (a record in a window has its checksum checked on its first hit there:
//! the window's bytes do not change).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Wake, Waker};

use bytes::Bytes;
use splitkv_common::client::{BatchOp, Call, ClientError};
use splitkv_common::message::{WireError, WriteAck};
use splitkv_common::record::{self, VALUE_HEADER_BYTES};

use crate::engine::{Engine, Inner};
use crate::error::{EngineError, Result};
use crate::expiry;
use crate::index::Location;
use crate::window::Lookup;

/// Reads of one key that may each answer `moved` (garbage collection can
/// free the new place too before the read arrives) before giving up.
const MOVED_READS: usize = 4;

/// Checks a record against the index entry it was read for and returns its
/// value.
fn verify(key: &[u8], location: &Location, bytes: &Bytes) -> std::result::Result<Bytes, String> {
    check_record(key, location, bytes, true)
}

/// Checks a record as [`verify`] does; without `verify_checksum` its
/// checksum is taken as verified (the same bytes verified before).
fn check_record(
    key: &[u8],
    location: &Location,
    bytes: &Bytes,
    verify_checksum: bool,
) -> std::result::Result<Bytes, String> {
    let decoded = if verify_checksum {
        record::decode_value_record(bytes)
    } else {
        record::decode_verified_value_record(bytes)
    }
    .map_err(|e| e.to_string())?;
    if decoded.key != key {
        return Err("the record belongs to another key".into());
    }
    if decoded.seq != location.seq {
        return Err(format!(
            "the record has sequence {}, the index {}",
            decoded.seq, location.seq
        ));
    }
    if decoded.encoded_len() != bytes.len() {
        return Err("the record's length differs from the index's".into());
    }
    Ok(bytes.slice(VALUE_HEADER_BYTES + key.len()..))
}

fn corrupt(key: &[u8], location: &Location, reason: String) -> EngineError {
    EngineError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        wire: WireError::Corrupt {
            partition: u32::from(location.partition),
            offset: location.offset,
            reason,
        },
    }
}

/// The value of a record read on its own, checked like a window's.
pub(crate) fn value_of(key: &[u8], location: &Location, bytes: &Bytes) -> Result<Bytes> {
    verify(key, location, bytes).map_err(|reason| corrupt(key, location, reason))
}

/// A written value for the value cache.
pub(crate) enum Cacheable<'a> {
    /// To be copied into a buffer of its own.
    Borrowed(&'a [u8]),
    /// Already in a buffer of its own.
    Owned(Bytes),
}

impl Inner {
    /// Records an acknowledged put in the index, then in the value cache
    /// (`value`, when the cache takes values of its size): from the index
    /// change on, no read returns an older version.
    pub(crate) fn record_put(
        &self,
        partition: usize,
        key: &[u8],
        value_len: usize,
        expire_at_ms: u64,
        value: Option<Cacheable<'_>>,
        ack: WriteAck,
    ) {
        let len = record::value_record_len(key.len(), value_len);
        let location = Location {
            seq: ack.seq,
            offset: ack.offset,
            len: len as u32,
            partition: partition as u16,
            expire_at_ms,
        };
        if self.index.apply(key, location) {
            match value {
                Some(Cacheable::Borrowed(value)) => self.cache.insert(key, location, value),
                Some(Cacheable::Owned(value)) => self.cache.insert_owned(key, location, value),
                None => self.cache.remove(key, ack.seq),
            }
        }
        self.note_acked(partition, ack.seq);
        self.windows[partition].note_committed_end(ack.offset + len as u64);
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the acknowledgements of a batch, one per op in order.
    /// Returns how many of its expiries removed a version from the index.
    fn record_write_many(
        &self,
        partition: usize,
        ops: &[BatchOp<'_>],
        acks: Vec<WriteAck>,
    ) -> Result<u64> {
        if acks.len() != ops.len() {
            return Err(EngineError::Storage(ClientError::Protocol(format!(
                "{} acknowledgements for a batch of {} writes",
                acks.len(),
                ops.len()
            ))));
        }
        let mut expired = 0;
        for (op, ack) in ops.iter().zip(acks) {
            match *op {
                BatchOp::Put {
                    key,
                    value,
                    expire_at_ms,
                } => {
                    let cached = self
                        .cache
                        .admits(value.len())
                        .then_some(Cacheable::Borrowed(value));
                    self.record_put(partition, key, value.len(), expire_at_ms, cached, ack);
                }
                BatchOp::Delete { key } => self.record_delete(partition, key, ack),
                BatchOp::Expire { key, version_seq } => {
                    expired += u64::from(self.record_expire(partition, key, version_seq, ack));
                }
            }
        }
        Ok(expired)
    }

    /// Applies `ops` through `partition` as one unit and records their
    /// acknowledgements (see [`Engine::write_many_async`]). Returns how many
    /// of its expiries removed a version from the index.
    pub(crate) async fn write_batch(&self, partition: usize, ops: &[BatchOp<'_>]) -> Result<u64> {
        let partition = self.prepare_batch(partition, ops)?;
        let acks = submit_write(self, partition, || self.client.write_many(partition, ops))
            .await?
            .wait()
            .await?;
        self.batches
            .apply(|| self.record_write_many(partition, ops, acks))
    }

    /// Records an acknowledged expire entry: the version at `version_seq`
    /// leaves the index (a tombstone at its own sequence number, which a
    /// newer version outranks). Returns true if it removed that version.
    fn record_expire(&self, partition: usize, key: &[u8], version_seq: u64, ack: WriteAck) -> bool {
        let removed = self
            .index
            .apply(key, Location::tombstone(version_seq, partition as u16));
        if removed {
            self.cache.remove(key, version_seq);
        }
        self.note_acked(partition, ack.seq);
        removed
    }

    /// Applies a clear entry with sequence number `seq` (FLUSHALL): every
    /// version below it leaves the index and the value cache, and no
    /// acknowledgement below it is applied from then on. Returns the live
    /// keys removed. Does nothing for a clear already applied.
    pub(crate) fn apply_clear(&self, seq: u64) -> u64 {
        if seq <= self.index.floor_seq() {
            return 0;
        }
        let removed = self.index.clear_below(seq);
        self.cache.clear_below(seq);
        self.counters.clears.fetch_add(1, Ordering::Relaxed);
        removed
    }

    fn record_delete(&self, partition: usize, key: &[u8], ack: WriteAck) {
        self.index
            .apply(key, Location::tombstone(ack.seq, partition as u16));
        self.cache.remove(key, ack.seq);
        self.note_acked(partition, ack.seq);
        self.counters.deletes.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks a write's key (and value) against the limits and returns the
    /// partition it goes to.
    pub(crate) fn prepare_write(
        &self,
        partition: usize,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<usize> {
        self.check_key(key)?;
        if let Some(value) = value {
            self.check_value(value)?;
        }
        Ok(partition % self.partitions())
    }

    /// Like [`Inner::prepare_write`], for every op of a batch.
    fn prepare_batch(&self, partition: usize, ops: &[BatchOp<'_>]) -> Result<usize> {
        for op in ops {
            match *op {
                BatchOp::Put { key, value, .. } => {
                    self.prepare_write(partition, key, Some(value))?
                }
                BatchOp::Delete { key } | BatchOp::Expire { key, .. } => {
                    self.prepare_write(partition, key, None)?
                }
            };
        }
        Ok(partition % self.partitions())
    }

    /// Where a live key's newest record is (none for a deleted or expired
    /// key), counting the read.
    fn resolve(&self, key: &[u8]) -> Result<Option<Location>> {
        self.check_key(key)?;
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        Ok(self.visible(key))
    }

    /// `key`'s location if it has a value that has not expired.
    pub(crate) fn visible(&self, key: &[u8]) -> Option<Location> {
        self.visible_at(key, expiry::now_ms())
    }

    /// `key`'s location if it has a value that has not expired at `now_ms`.
    pub(crate) fn visible_at(&self, key: &[u8], now_ms: u64) -> Option<Location> {
        self.index
            .get(key)
            .filter(|location| expiry::is_visible(location, now_ms))
    }

    fn hit(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    fn miss(&self) {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Looks the record up in the windows, starting a fetch if the policy
    /// wants one.
    fn lookup(self: &Arc<Self>, location: &Location) -> Lookup {
        let partition = location.partition as usize;
        let (lookup, fetch) =
            self.windows[partition].lookup(location.offset, u64::from(location.len));
        if let Some(fetch) = fetch {
            self.spawn_fetch(partition, fetch);
        }
        lookup
    }

    /// `key`'s value if a ready window holds its record intact, counting
    /// the read as a hit or a miss; `None`: read the record on its own (a
    /// window that will hold it may be on its way, and is not waited for).
    pub(crate) fn window_value(self: &Arc<Self>, key: &[u8], location: &Location) -> Option<Bytes> {
        let value = match self.lookup(location) {
            // A record's checksum is verified once per window: on its
            // first hit there.
            Lookup::Hit(record) => {
                let verified = record.checksum_verified();
                let value = check_record(key, location, &record.bytes, !verified).ok();
                if value.is_some() && !verified {
                    record.mark_verified();
                }
                value
            }
            Lookup::PointRead => None,
        };
        if value.is_some() {
            self.hit();
        } else {
            self.miss();
        }
        value
    }

    /// `key`'s value from the value cache, if it holds the version at
    /// `location`.
    pub(crate) fn cached_value(&self, key: &[u8], location: &Location) -> Option<Bytes> {
        let value = self.cache.get(key, location)?;
        self.hit();
        Some(value)
    }

    /// Caches a value read from the storage node, if the index still names
    /// the record it came from (a newer write may have been acknowledged
    /// meanwhile; the cache then keeps the newer version).
    pub(crate) fn fill_cache(&self, key: &[u8], location: &Location, value: &[u8]) {
        if self.cache.admits(value.len()) && self.index.get(key) == Some(*location) {
            self.cache.insert(key, *location, value);
        }
    }

    /// Reads `key`'s record at `location` on its own. If garbage collection
    /// moved it (the read answers `moved`), asks the storage node where the
    /// version is now, moves the index entry there and reads it there.
    /// Returns the location read with the record, or `None` if the key has
    /// no value any more (deleted or overwritten by a delete meanwhile).
    pub(crate) async fn read_record(
        &self,
        key: &[u8],
        mut location: Location,
    ) -> Result<Option<(Location, Bytes)>> {
        for _ in 0..MOVED_READS {
            match self.point_read(&location).await?.wait().await {
                Ok(bytes) => return Ok(Some((location, bytes))),
                Err(ClientError::Storage(WireError::Moved { .. })) => {
                    match self.relocated(key, &location).await? {
                        Some(moved) => location = moved,
                        None => return Ok(None),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(EngineError::Storage(ClientError::Storage(
            WireError::Moved {
                partition: u32::from(location.partition),
                offset: location.offset,
            },
        )))
    }

    /// Where `key`'s version at `location` is now that garbage collection
    /// moved it: the storage node's answer when it names the same version
    /// (the index entry is moved there), else whatever the index holds now
    /// (a newer version acknowledged meanwhile), `None` if that is no value.
    pub(crate) async fn relocated(
        &self,
        key: &[u8],
        location: &Location,
    ) -> Result<Option<Location>> {
        let partition = location.partition as usize;
        let located = submit(self, partition, WhenDown::Fail, || {
            self.client.locate(partition, key)
        })
        .await?
        .wait()
        .await?;
        if let Some(at) = located
            && at.seq == location.seq
            && at.record.partition == u32::from(location.partition)
        {
            let moved = Location {
                seq: at.seq,
                offset: at.record.offset,
                len: at.record.len,
                partition: location.partition,
                expire_at_ms: location.expire_at_ms,
            };
            self.counters.relocations.fetch_add(1, Ordering::Relaxed);
            self.index.relocate(key, *location, moved);
            return Ok(Some(moved));
        }
        Ok(self.visible(key).filter(|now| !now.same_place(location)))
    }

    /// Sends a read of the record at `location` on its own.
    async fn point_read(&self, location: &Location) -> Result<Call<Bytes>> {
        self.counters.point_reads.fetch_add(1, Ordering::Relaxed);
        let partition = location.partition as usize;
        submit(self, partition, WhenDown::Fail, || {
            self.client
                .get(partition, location.offset, location.len as usize)
        })
        .await
    }
}

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

/// What [`submit`] does when the connection is down.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenDown {
    /// Wait for it to come back (up to the reconnect wait), then send.
    Wait,
    /// Fail at once.
    Fail,
}

/// Sends a request with `send`. While the connection of `partition` is
/// full it waits for room (up to a request deadline each time); if the
/// connection is down it waits for it to come back once, or fails, as
/// `when_down` says. A request that was never sent can be sent again safely.
pub(crate) async fn submit<T>(
    inner: &Inner,
    partition: usize,
    when_down: WhenDown,
    send: impl Fn() -> std::result::Result<Call<T>, ClientError>,
) -> Result<Call<T>> {
    let mut waited_up = when_down == WhenDown::Fail;
    loop {
        match send() {
            Err(ClientError::Unavailable { .. }) if !waited_up => {
                waited_up = true;
                inner
                    .client
                    .wait_up(partition, inner.reconnect_wait())
                    .await?;
            }
            Err(ClientError::Busy { .. }) => {
                inner
                    .client
                    .wait_for_room(partition, inner.request_timeout())
                    .await?;
            }
            other => return Ok(other?),
        }
    }
}

/// Sends a write with `send` as [`submit`] does, waiting for a connection
/// that is down; a reader refuses it before sending.
pub(crate) async fn submit_write<T>(
    inner: &Inner,
    partition: usize,
    send: impl Fn() -> std::result::Result<Call<T>, ClientError>,
) -> Result<Call<T>> {
    if !inner.is_writer() {
        return Err(EngineError::ReadOnly);
    }
    submit(inner, partition, WhenDown::Wait, send).await
}

impl Engine {
    /// Runs `operation` to completion on the calling thread, with the
    /// engine's runtime for its timers and spawned work: how every blocking
    /// method runs its async core. An operation that completes without
    /// waiting (a read from a window) costs one poll; one that waits parks
    /// the thread until it is woken. Must not be called from inside an
    /// async task.
    pub(crate) fn block<T>(&self, operation: impl Future<Output = T>) -> T {
        let _runtime = self.inner.handle.enter();
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
        self.put_on(self.inner.thread_partition(), key, value)
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
        self.block(async {
            let pending = self.start_put(partition, key, value, expire_at_ms).await?;
            self.finish_put(pending).await
        })
    }

    /// Puts every pair as one unit into the calling thread's partition:
    /// after a crash either all of them or none are there. Blocking.
    pub fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_many_on(self.inner.thread_partition(), items)
    }

    /// Like [`Engine::put_many`], into `partition`. Blocking.
    pub fn put_many_on(&self, partition: usize, items: &[(&[u8], &[u8])]) -> Result<()> {
        self.block(self.put_many_async(partition, items))
    }

    /// Puts every pair into `partition` as one unit (all or none after a
    /// crash); returns once the storage node has acknowledged them.
    pub async fn put_many_async(&self, partition: usize, items: &[(&[u8], &[u8])]) -> Result<()> {
        let ops: Vec<BatchOp<'_>> = items
            .iter()
            .map(|&(key, value)| BatchOp::put(key, value))
            .collect();
        self.write_many_async(partition, &ops).await
    }

    /// Applies every op (puts, deletes, expiries) through `partition` as
    /// one unit: after a crash either all of them or none are there, and
    /// they take effect in order (a key written twice ends with the later
    /// op). Returns once the storage node has acknowledged them.
    pub async fn write_many_async(&self, partition: usize, ops: &[BatchOp<'_>]) -> Result<()> {
        self.inner.write_batch(partition, ops).await.map(|_| ())
    }

    /// Deletes every key (FLUSHALL), through `partition`'s connection.
    /// Returns once every partition of the storage node has acknowledged
    /// its clear entry, with the guarantees of a write: after a crash of
    /// either node no key written before the call comes back. Writes
    /// acknowledged after it returns stay; writes concurrent with it may
    /// be cleared or stay.
    pub async fn clear_all_async(&self, partition: usize) -> Result<()> {
        let inner = &self.inner;
        let partition = partition % inner.partitions();
        let ack = submit_write(inner, partition, || inner.client.clear(partition))
            .await?
            .wait()
            .await?;
        inner.apply_clear(ack.seq);
        for each in 0..inner.partitions() {
            // Nothing below the clear can come back, so a tail pull after
            // a reconnect starts past it.
            inner.note_acked(each, ack.seq);
        }
        Ok(())
    }

    /// [`Engine::clear_all_async`] through the calling thread's partition.
    /// Blocking.
    pub fn clear_all(&self) -> Result<()> {
        self.block(self.clear_all_async(self.inner.thread_partition()))
    }

    /// Deletes `key` through the calling thread's partition. Returns
    /// whether the key existed (as far as this engine knew). Blocking.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.delete_on(self.inner.thread_partition(), key)
    }

    /// Like [`Engine::delete`], through `partition`. Blocking.
    pub fn delete_on(&self, partition: usize, key: &[u8]) -> Result<bool> {
        self.block(self.delete_async(partition, key))
    }

    /// Deletes `key` through `partition` (the tombstone is logged there);
    /// returns once acknowledged, with whether the key existed.
    pub async fn delete_async(&self, partition: usize, key: &[u8]) -> Result<bool> {
        let inner = &self.inner;
        let partition = inner.prepare_write(partition, key, None)?;
        let existed = self.contains(key);
        let ack = submit_write(inner, partition, || inner.client.delete(partition, key))
            .await?
            .wait()
            .await?;
        inner.record_delete(partition, key, ack);
        Ok(existed)
    }

    /// True if `key` has a live value that has not expired (as far as this
    /// engine knows).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.inner.visible(key).is_some()
    }

    /// When `key`'s value expires: `None` if it has no live value, `Some(0)`
    /// if it never expires, else the absolute Unix time in milliseconds.
    pub fn expire_at_ms(&self, key: &[u8]) -> Option<u64> {
        self.inner
            .visible(key)
            .map(|location| location.expire_at_ms)
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
        let inner = &self.inner;
        let Some(location) = inner.resolve(key)? else {
            return Ok(None);
        };
        let expiring = |value| Ok(Some((value, location.expire_at_ms)));
        if let Some(value) = inner.cached_value(key, &location) {
            return expiring(value);
        }
        if let Some(value) = inner.window_value(key, &location) {
            return expiring(value);
        }
        let Some((location, bytes)) = inner.read_record(key, location).await? else {
            return Ok(None);
        };
        let value = value_of(key, &location, &bytes)?;
        inner.fill_cache(key, &location, &value);
        Ok(Some((value, location.expire_at_ms)))
    }

    /// The values of `keys`, in order; the first error fails the batch.
    /// Records not in a window are requested together, so the batch costs
    /// one round trip. Blocking.
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        self.block(self.get_each_async(keys)).into_iter().collect()
    }
}

/// A put that has been sent and not yet acknowledged (see
/// [`Engine::start_put`]).
#[must_use = "a put takes effect in the index only once finished"]
pub struct PendingPut<K> {
    partition: usize,
    key: K,
    value_len: usize,
    expire_at_ms: u64,
    /// A copy of the value for the value cache, if it takes values of its
    /// size.
    cached: Option<Bytes>,
    call: Call<WriteAck>,
}

impl Engine {
    /// Sends a put into `partition` without waiting for its
    /// acknowledgement, so that several puts of one caller are in flight at
    /// once (they take effect in the order sent). The version expires at
    /// `expire_at_ms` (absolute Unix milliseconds; 0: never). If the
    /// connection is down or full it waits for it first. Finish with
    /// [`Engine::finish_put`].
    pub async fn start_put<K: AsRef<[u8]>>(
        &self,
        partition: usize,
        key: K,
        value: &[u8],
        expire_at_ms: u64,
    ) -> Result<PendingPut<K>> {
        let inner = &self.inner;
        let partition = inner.prepare_write(partition, key.as_ref(), Some(value))?;
        let call = submit_write(inner, partition, || {
            inner
                .client
                .put(partition, key.as_ref(), value, expire_at_ms)
        })
        .await?;
        let cached = inner
            .cache
            .admits(value.len())
            .then(|| Bytes::copy_from_slice(value));
        Ok(PendingPut {
            partition,
            key,
            value_len: value.len(),
            expire_at_ms,
            cached,
            call,
        })
    }

    /// Waits for a put's acknowledgement and records it in the index.
    pub async fn finish_put<K: AsRef<[u8]>>(&self, pending: PendingPut<K>) -> Result<()> {
        let ack = pending.call.wait().await?;
        self.inner.record_put(
            pending.partition,
            pending.key.as_ref(),
            pending.value_len,
            pending.expire_at_ms,
            pending.cached.map(Cacheable::Owned),
            ack,
        );
        Ok(())
    }
}
