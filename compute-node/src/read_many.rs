//! Multi-key reads ([`Engine::get_each_async`]: MGET, and the runs of
//! plain GETs of a RESP client's turn): the keys are resolved together,
//! answered from the value cache or a window where they can be, and the
//! records of the rest are read with one request per connection of the
//! storage node (`GetMany`), not one per key, shared with the reads of
//! other callers that wait for the same connection (`coalesce::reads`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::ClientError;
use splitkv_common::message::{MAX_GET_MANY_BYTES, MAX_READS_PER_REQUEST, RecordAt, WireError};

use crate::engine::{Engine, Inner};
use crate::error::{EngineError, Result};
use crate::expiry;
use crate::index::Location;
use crate::ops::value_of;

/// One key of a multi-key read: answered, or waiting for its record.
enum KeyRead {
    Done(Result<Option<Bytes>>),
    /// The record at `location` is the `at`-th of request `request`.
    Remote {
        location: Location,
        request: usize,
        at: usize,
    },
}

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

impl Engine {
    /// The values of `keys`, in order, with an outcome per key: one key's
    /// failure (a bad key, a record that fails its checks) fails only that
    /// key. The keys are resolved together, at a moment when no batch is
    /// half applied: of the keys of one batch (an MSET, an EXEC, a
    /// followed key-log frame) either all are seen as the batch left them
    /// or none. Records not in the value cache or a ready window are read
    /// with one request per storage connection (windows on their way are
    /// not waited for), so the batch costs one round trip.
    pub async fn get_each_async(&self, keys: &[&[u8]]) -> Vec<Result<Option<Bytes>>> {
        let inner = &self.inner;
        let now_ms = expiry::now_ms();
        // Every key as of one moment between batches, so that the keys of
        // one batch are all seen old or all new.
        let locations: Vec<Result<Option<Location>>> = inner.batches.resolve(|| {
            keys.iter()
                .map(|key| {
                    inner.check_key(key)?;
                    Ok(inner.visible_at(key, now_ms))
                })
                .collect()
        });
        let valid = locations.iter().filter(|location| location.is_ok()).count();
        inner
            .counters
            .gets
            .fetch_add(valid as u64, Ordering::Relaxed);
        let mut requests: Vec<RecordRequest> = Vec::new();
        // The request of each connection that still has room.
        let mut open: HashMap<usize, usize> = HashMap::new();
        let reads: Vec<KeyRead> = keys
            .iter()
            .zip(locations)
            .map(|(key, location)| match location {
                Ok(Some(location)) => {
                    if let Some(value) = inner.cached_value(key, &location) {
                        return KeyRead::Done(Ok(Some(value)));
                    }
                    if let Some(value) = inner.window_value(key, &location) {
                        return KeyRead::Done(Ok(Some(value)));
                    }
                    let (request, at) = add_read(&mut requests, &mut open, inner, &location);
                    KeyRead::Remote {
                        location,
                        request,
                        at,
                    }
                }
                Ok(None) => KeyRead::Done(Ok(None)),
                Err(e) => KeyRead::Done(Err(e)),
            })
            .collect();
        // The location of each key read from the storage node.
        let remote: Vec<Option<Location>> = reads
            .iter()
            .map(|read| match read {
                KeyRead::Remote { location, .. } => Some(*location),
                KeyRead::Done(_) => None,
            })
            .collect();
        let asked: Vec<usize> = requests.iter().map(|request| request.reads.len()).collect();
        let answers = Inner::read_records(
            inner,
            requests
                .into_iter()
                .map(|request| (request.connection, request.reads))
                .collect(),
        )
        .await;
        let mut outcomes: Vec<Result<Option<Bytes>>> = reads
            .into_iter()
            .zip(keys)
            .map(|(read, key)| match read {
                KeyRead::Done(done) => done,
                KeyRead::Remote {
                    location,
                    request,
                    at,
                } => {
                    let record = match &answers[request] {
                        Ok(records) => match records.get(at) {
                            Some(Ok(bytes)) => Ok(bytes.clone()),
                            Some(Err(wire)) => {
                                Err(EngineError::Storage(ClientError::Storage(wire.clone())))
                            }
                            None => Err(EngineError::Storage(ClientError::Protocol(format!(
                                "{} outcomes for {} reads",
                                records.len(),
                                asked[request]
                            )))),
                        },
                        Err(e) => Err(e.for_each_op()),
                    };
                    let value = value_of(key, &location, &record?)?;
                    inner.fill_cache(key, &location, &value);
                    Ok(Some(value))
                }
            })
            .collect();
        // Records garbage collection moved are looked up and read again, one
        // by one (rare: only reads that raced a collection).
        for (outcome, (key, location)) in outcomes.iter_mut().zip(keys.iter().zip(&remote)) {
            let Some(location) = location else {
                continue;
            };
            if let Err(e) = outcome
                && matches!(e.wire(), Some(WireError::Moved { .. }))
            {
                *outcome = match inner.relocated(key, location).await {
                    Ok(Some(moved)) => match inner.read_record(key, moved).await {
                        Ok(Some((at, bytes))) => value_of(key, &at, &bytes).map(|value| {
                            inner.fill_cache(key, &at, &value);
                            Some(value)
                        }),
                        Ok(None) => Ok(None),
                        Err(e) => Err(e),
                    },
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                };
            }
        }
        outcomes
    }
}

/// Adds a read of the record at `location` to the open request of its
/// connection, or to a new one; returns the request and the read's place
/// in it.
fn add_read(
    requests: &mut Vec<RecordRequest>,
    open: &mut HashMap<usize, usize>,
    inner: &Inner,
    location: &Location,
) -> (usize, usize) {
    let connection = location.partition as usize % inner.partitions();
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
