//! The read route. A read resolves its keys in the view, takes each value
//! from the value cache or the record from a ready window (a hit), or reads
//! the record from the storage node (never waiting for a window on its
//! way), and checks a record's checksum, key and sequence number before
//! returning its value (a record in a window has its checksum checked on
//! its first hit there: the window's bytes do not change).
//!
//! Record reads are coalesced: the reads that callers send to one storage
//! connection while an earlier `GetMany` of that connection is in flight
//! wait for it and then travel together, one request and one answer for the
//! lot ([`crate::coalesce::lanes`] is the policy, as for writes). A
//! connection with no read in flight sends at once, so an idle node adds
//! no latency; under load, the misses of many clients share a round trip.
//!
//! Each read goes on the same connection as it would alone, so a
//! connection that is down fails only the reads meant for it. Reads have
//! no order between them; a read is sent after the write it must see was
//! acknowledged, whichever batch carries it.
//!
//! Bound: a caller waits for the answer to its reads before it reads again,
//! so a lane holds at most one request (at most
//! [`MAX_READS_PER_REQUEST`] records) per caller.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::{Call, ClientError};
use splitkv_common::message::{MAX_GET_MANY_BYTES, MAX_READS_PER_REQUEST, RecordAt, WireError};
use tokio::sync::oneshot;

use crate::coalesce::lanes::MAX_BATCH_BYTES;
use crate::coalesce::{self, Joined, Lanes, Lead};
use crate::error::{EngineError, Result};
use crate::expiry;
use crate::index::Location;
use crate::storage::{Storage, WhenDown};
use crate::view::{View, value_of};
use crate::window::Fetch;

/// Reads of one key that may each answer `moved` (garbage collection can
/// free the new place too before the read arrives) before giving up.
const MOVED_READS: usize = 4;

/// The outcome of each record of one read request, in the order asked.
pub(crate) type RecordOutcomes = Vec<std::result::Result<Bytes, WireError>>;

/// One caller's reads waiting in a lane, and where their outcomes go.
pub(crate) struct QueuedReads {
    reads: Vec<RecordAt>,
    done: oneshot::Sender<Result<RecordOutcomes>>,
}

/// Most bytes of records in a batch of several callers' reads.
const READ_BATCH_BYTES: usize = if MAX_BATCH_BYTES < MAX_GET_MANY_BYTES {
    MAX_BATCH_BYTES
} else {
    MAX_GET_MANY_BYTES
};

/// What a record of `len` bytes counts for against a batch bound of
/// `max_batch_bytes`: its length, but at least the bound's share of one
/// read, so that no batch of several callers' reads carries more than
/// [`MAX_READS_PER_REQUEST`] reads.
fn read_weight(len: u32, max_batch_bytes: usize) -> usize {
    (len as usize).max(max_batch_bytes.div_ceil(MAX_READS_PER_REQUEST))
}

/// A batch sent, and its answer on its way.
type SentBatch = (Vec<QueuedReads>, Result<Call<RecordOutcomes>>);

/// The records asked of one connection in one request.
struct RecordRequest {
    connection: usize,
    reads: Vec<RecordAt>,
    bytes: u64,
}

impl RecordRequest {
    /// True if `len` more bytes fit in this request.
    fn has_room(&self, len: u32) -> bool {
        self.reads.len() < MAX_READS_PER_REQUEST
            && self.bytes + u64::from(len) <= MAX_GET_MANY_BYTES as u64
    }
}

/// The read route: the view the keys are resolved in, the storage client
/// the records are read through, and the lanes that coalesce those reads
/// (one per connection).
pub(crate) struct Reads {
    view: Arc<View>,
    storage: Arc<Storage>,
    lanes: Lanes<QueuedReads>,
    handle: tokio::runtime::Handle,
}

impl Reads {
    pub(crate) fn new(
        view: Arc<View>,
        storage: Arc<Storage>,
        handle: tokio::runtime::Handle,
    ) -> Self {
        let lanes = Lanes::new(view.partitions(), READ_BATCH_BYTES);
        Self {
            view,
            storage,
            lanes,
            handle,
        }
    }

    /// `key`'s value if a ready window holds its record intact (see
    /// [`View::window_value`]), starting the window fetch the placement
    /// policy wants.
    fn window_value(&self, key: &[u8], location: &Location) -> Option<Bytes> {
        let (value, fetch) = self.view.window_value(key, location);
        if let Some(fetch) = fetch {
            self.spawn_fetch(location.partition as usize, fetch);
        }
        value
    }

    /// Starts a window fetch in the background.
    fn spawn_fetch(&self, partition: usize, fetch: Fetch) {
        self.view
            .counters
            .window_fetches
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            partition,
            slot = fetch.slot,
            id = fetch.id,
            start = fetch.range.start,
            end = fetch.range.end,
            "window fetch"
        );
        let view = Arc::clone(&self.view);
        let storage = Arc::clone(&self.storage);
        self.handle.spawn(async move {
            let start = fetch.range.start;
            let len = (fetch.range.end - start) as usize;
            let windows = &view.windows[partition];
            match storage.client.read_range(partition, start, len).await {
                Ok((bytes, committed_end)) => {
                    view.counters
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

    /// The value of `key` with its expiry time (see
    /// `Engine::get_expiring_async`): a read of one key.
    pub(crate) async fn get_expiring(this: &Arc<Self>, key: &[u8]) -> Result<Option<(Bytes, u64)>> {
        // One key needs no moment between batches (its index entry changes
        // at once), nor the vectors of a read of several keys until its
        // record must be read from the storage node; then it takes the one
        // remote path, moved-record retry included.
        this.storage.check_key(key)?;
        let view = &this.view;
        view.counters.gets.fetch_add(1, Ordering::Relaxed);
        let Some(location) = view.visible_at(key, expiry::now_ms()) else {
            return Ok(None);
        };
        if let Some(value) = view
            .cached_value(key, &location)
            .or_else(|| this.window_value(key, &location))
        {
            return Ok(Some((value, location.expire_at_ms)));
        }
        let mut read =
            Self::read_remaining(this, &[key], vec![Ok(None)], vec![(0, location)]).await;
        let read = read.pop().unwrap_or(Ok(None))?;
        Ok(read.map(|(value, location)| (value, location.expire_at_ms)))
    }

    /// The values of `keys`, in order, with an outcome per key (see
    /// `Engine::get_each_async`).
    pub(crate) async fn get_each(this: &Arc<Self>, keys: &[&[u8]]) -> Vec<Result<Option<Bytes>>> {
        Self::read(this, keys)
            .await
            .into_iter()
            .map(|read| read.map(|found| found.map(|(value, _)| value)))
            .collect()
    }

    /// Every record read: the value of each of `keys` with the location of
    /// the version read, in order, with an outcome per key. The keys are
    /// checked against the limits and resolved together, at a moment when
    /// no batch is half applied; each is answered from the value cache or a
    /// ready window where it can be, and the records of the rest are read
    /// through their connections' lanes, one `GetMany` per connection. A
    /// record garbage collection moved meanwhile is looked up and read again
    /// the same way, up to [`MOVED_READS`] reads.
    async fn read(this: &Arc<Self>, keys: &[&[u8]]) -> Vec<Result<Option<(Bytes, Location)>>> {
        let view = &this.view;
        let now_ms = expiry::now_ms();
        // Every key as of one moment between batches, so that the keys of
        // one batch are all seen old or all new.
        let locations: Vec<Result<Option<Location>>> = view.batches.resolve(|| {
            keys.iter()
                .map(|key| {
                    this.storage.check_key(key)?;
                    Ok(view.visible_at(key, now_ms))
                })
                .collect()
        });
        let valid = locations.iter().filter(|location| location.is_ok()).count();
        view.counters
            .gets
            .fetch_add(valid as u64, Ordering::Relaxed);
        // The keys whose records are read from the storage node.
        let mut remote: Vec<(usize, Location)> = Vec::new();
        let outcomes: Vec<Result<Option<(Bytes, Location)>>> = keys
            .iter()
            .zip(locations)
            .enumerate()
            .map(|(at, (key, location))| {
                let location = location?;
                let Some(location) = location else {
                    return Ok(None);
                };
                let value = view
                    .cached_value(key, &location)
                    .or_else(|| this.window_value(key, &location));
                if value.is_none() {
                    remote.push((at, location));
                }
                Ok(value.map(|value| (value, location)))
            })
            .collect();
        Self::read_remaining(this, keys, outcomes, remote).await
    }

    /// The rest of a read: the record of each `(at, location)` in `remote`
    /// read through the connections' lanes into `outcomes[at]`, a record
    /// garbage collection moved meanwhile looked up and read again, up to
    /// [`MOVED_READS`] reads.
    async fn read_remaining(
        this: &Arc<Self>,
        keys: &[&[u8]],
        mut outcomes: Vec<Result<Option<(Bytes, Location)>>>,
        mut remote: Vec<(usize, Location)>,
    ) -> Vec<Result<Option<(Bytes, Location)>>> {
        let view = &this.view;
        for _ in 0..MOVED_READS {
            if remote.is_empty() {
                return outcomes;
            }
            let mut moved = Vec::new();
            for ((at, location), record) in Self::read_remote(this, &remote).await {
                let key = keys[at];
                outcomes[at] = match record {
                    Ok(bytes) => value_of(key, &location, &bytes).map(|value| {
                        view.fill_cache(key, &location, &value);
                        Some((value, location))
                    }),
                    Err(EngineError::Storage(ClientError::Storage(WireError::Moved {
                        ..
                    }))) => {
                        moved.push((at, location));
                        continue;
                    }
                    Err(e) => Err(e),
                };
            }
            // Records garbage collection moved: where are they now (rare:
            // only reads that raced a collection)?
            remote.clear();
            for (at, location) in moved {
                match this.relocated(keys[at], &location).await {
                    Ok(Some(moved)) => remote.push((at, moved)),
                    Ok(None) => outcomes[at] = Ok(None),
                    Err(e) => outcomes[at] = Err(e),
                }
            }
        }
        for (at, location) in remote {
            outcomes[at] = Err(EngineError::Storage(ClientError::Storage(
                WireError::Moved {
                    partition: u32::from(location.partition),
                    offset: location.offset,
                },
            )));
        }
        outcomes
    }

    /// Reads the record of each `(key, location)` through its connection's
    /// lane, with one request per connection (more when one would exceed a
    /// request's bounds); returns each with its outcome.
    async fn read_remote(
        this: &Arc<Self>,
        remote: &[(usize, Location)],
    ) -> Vec<((usize, Location), Result<Bytes>)> {
        let mut requests: Vec<RecordRequest> = Vec::new();
        // The request of each connection that still has room.
        let mut open: HashMap<usize, usize> = HashMap::new();
        let places: Vec<(usize, usize)> = remote
            .iter()
            .map(|(_, location)| {
                add_read(&mut requests, &mut open, this.view.partitions(), location)
            })
            .collect();
        let asked: Vec<usize> = requests.iter().map(|request| request.reads.len()).collect();
        let answers = Self::read_records(
            this,
            requests
                .into_iter()
                .map(|request| (request.connection, request.reads))
                .collect(),
        )
        .await;
        remote
            .iter()
            .zip(places)
            .map(|(&read, (request, at))| {
                let record = match &answers[request] {
                    Ok(records) => match records.get(at) {
                        Some(Ok(bytes)) => Ok(bytes.clone()),
                        Some(Err(wire)) => {
                            Err(EngineError::Storage(ClientError::Storage(wire.clone())))
                        }
                        None => Err(EngineError::AnswerCount {
                            asked: asked[request],
                            answered: records.len(),
                        }),
                    },
                    Err(e) => Err(e.clone()),
                };
                (read, record)
            })
            .collect()
    }

    /// Where `key`'s version at `location` is now that garbage collection
    /// moved it: the storage node's answer when it names the same version
    /// (the index entry is moved there), else whatever the index holds now
    /// (a newer version acknowledged meanwhile), `None` if that is no value.
    async fn relocated(&self, key: &[u8], location: &Location) -> Result<Option<Location>> {
        let partition = location.partition as usize;
        let client = &self.storage.client;
        let located = self
            .storage
            .submit(partition, WhenDown::Fail, || client.locate(partition, key))
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
            self.view.relocate(key, *location, moved);
            return Ok(Some(moved));
        }
        Ok(self
            .view
            .visible(key)
            .filter(|now| !now.same_place(location)))
    }

    /// Reads the records of each `(connection, reads)` request, each
    /// through its connection's lane, and returns each request's outcomes
    /// in the order of `requests`. Every request is valid alone as a
    /// `GetMany` (at most [`MAX_READS_PER_REQUEST`] reads and, for more than
    /// one, at most [`MAX_GET_MANY_BYTES`]). The requests that find their
    /// lane idle are sent at once, together, and answered after one round
    /// trip; the others wait for their lane's batch in flight and go with
    /// the next one.
    async fn read_records(
        this: &Arc<Self>,
        requests: Vec<(usize, Vec<RecordAt>)>,
    ) -> Vec<Result<RecordOutcomes>> {
        let max_batch_bytes = this.lanes.max_batch_bytes();
        let mut answers = Vec::with_capacity(requests.len());
        let mut leads = Vec::new();
        for (connection, reads) in requests {
            let lane = connection % this.view.partitions();
            let weight = reads
                .iter()
                .map(|read| read_weight(read.len, max_batch_bytes))
                .sum();
            let (done, answer) = oneshot::channel();
            answers.push(answer);
            if let Joined::Lead { batch } =
                this.lanes.join(lane, QueuedReads { reads, done }, weight)
            {
                // Held from the moment the lane is taken: if this future is
                // dropped at any later await, the guard hands the lane on.
                let lead = Lead {
                    route: this,
                    lane,
                    hand_on: Reads::spawn_lane,
                };
                leads.push((lead, batch));
            }
        }
        // Every lead batch is sent before any is waited for, so that they
        // share the round trip.
        let mut sent = Vec::with_capacity(leads.len());
        for (lead, batch) in leads {
            let batch = this.send_read_batch(lead.lane, batch).await;
            sent.push((lead, batch));
        }
        for (lead, batch) in sent {
            Self::answer_read_batch(batch).await;
            drop(lead);
        }
        coalesce::answers(answers).await
    }

    /// Sends `lane`'s next batch of reads on a task of its own, if any
    /// collected; that task hands the lane on in turn when it is done.
    fn spawn_lane(this: &Arc<Self>, lane: usize) {
        if let Some(next) = this.lanes.next_batch(lane) {
            let reads = Arc::clone(this);
            this.handle.spawn(async move {
                let _lead = Lead {
                    route: &reads,
                    lane,
                    hand_on: Reads::spawn_lane,
                };
                let sent = reads.send_read_batch(lane, next).await;
                Self::answer_read_batch(sent).await;
            });
        }
    }

    /// Sends the reads of `batch` as one `GetMany` through `connection`.
    async fn send_read_batch(&self, connection: usize, batch: Vec<QueuedReads>) -> SentBatch {
        let reads: Vec<RecordAt> = batch
            .iter()
            .flat_map(|queued| queued.reads.iter().copied())
            .collect();
        let counters = &self.view.counters;
        counters
            .point_reads
            .fetch_add(reads.len() as u64, Ordering::Relaxed);
        counters.read_batches.fetch_add(1, Ordering::Relaxed);
        let client = &self.storage.client;
        let call = self
            .storage
            .submit(connection, WhenDown::Fail, || {
                client.get_many(connection, &reads)
            })
            .await;
        (batch, call)
    }

    /// Waits for a batch's answer and hands each caller its records'
    /// outcomes; a batch that failed as a whole fails every read in it.
    async fn answer_read_batch((batch, call): SentBatch) {
        let outcomes = match call {
            Ok(call) => call.wait().await.map_err(EngineError::from),
            Err(e) => Err(e),
        };
        let asked: usize = batch.iter().map(|queued| queued.reads.len()).sum();
        let outcomes = outcomes.and_then(|outcomes| {
            if outcomes.len() == asked {
                Ok(outcomes)
            } else {
                Err(EngineError::AnswerCount {
                    asked,
                    answered: outcomes.len(),
                })
            }
        });
        match outcomes {
            Ok(outcomes) => {
                let mut outcomes = outcomes.into_iter();
                for queued in batch {
                    let own = outcomes.by_ref().take(queued.reads.len()).collect();
                    // A caller that went away no longer wants the answer.
                    let _ = queued.done.send(Ok(own));
                }
            }
            Err(e) => {
                for queued in batch {
                    let _ = queued.done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Adds a read of the record at `location` to the open request of its
/// connection, or to a new one; returns the request and the read's place
/// in it.
fn add_read(
    requests: &mut Vec<RecordRequest>,
    open: &mut HashMap<usize, usize>,
    connections: usize,
    location: &Location,
) -> (usize, usize) {
    let connection = location.partition as usize % connections;
    let request = match open.get(&connection) {
        Some(&request) if requests[request].has_room(location.len) => request,
        _ => {
            requests.push(RecordRequest {
                connection,
                reads: Vec::new(),
                bytes: 0,
            });
            open.insert(connection, requests.len() - 1);
            requests.len() - 1
        }
    };
    let batch = &mut requests[request];
    batch.reads.push(RecordAt {
        partition: u32::from(location.partition),
        offset: location.offset,
        len: location.len,
    });
    batch.bytes += u64::from(location.len);
    (request, batch.reads.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_batch_of_small_reads_holds_more_reads_than_a_request_may() {
        let lanes = Lanes::new(1, READ_BATCH_BYTES);
        let bound = lanes.max_batch_bytes();
        // Records of one byte: the count, not the bytes, is what binds.
        assert!(matches!(lanes.join(0, 0, 1), Joined::Lead { .. }));
        for n in 0..2 * MAX_READS_PER_REQUEST {
            assert_eq!(lanes.join(0, n, read_weight(1, bound)), Joined::Queued);
        }
        let first = lanes.next_batch(0).expect("a batch");
        assert_eq!(first.len(), MAX_READS_PER_REQUEST);
        let second = lanes.next_batch(0).expect("a batch");
        assert_eq!(second.len(), MAX_READS_PER_REQUEST);
        assert_eq!(lanes.next_batch(0), None);
        // Records of 4 KiB: the bytes bind, below the count.
        assert!(matches!(lanes.join(0, 0, 1), Joined::Lead { .. }));
        for n in 0..MAX_READS_PER_REQUEST {
            assert_eq!(lanes.join(0, n, read_weight(4096, bound)), Joined::Queued);
        }
        let batch = lanes.next_batch(0).expect("a batch");
        assert_eq!(batch.len(), bound / 4096);
        assert!(batch.len() * 4096 <= MAX_GET_MANY_BYTES);
    }
}
