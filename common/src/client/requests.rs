//! Requests on a connection's control stream: the one write request (a
//! batch of writes, [`StorageClient::write_many`]), the one read request
//! (of records, [`StorageClient::get_many`]), and the node-wide calls
//! (clear, sync, stats, locate, ping). A request too large for the storage
//! node's frame limit is refused before it is sent; each returns a
//! [`Call`] for its answer.

use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;

use super::call::{self, Call, Reply, unexpected};
use super::link::encode_frame;
use super::{ClientError, StorageClient};
use crate::frame;
use crate::message::{
    self, BatchEntry, RecordAt, RecordRead, Request, RequestBody, ResponseBody, StatsReport,
    WireError, WriteAck,
};

/// One write of a batch applied as one unit ([`StorageClient::write_many`]),
/// over any kind of bytes `B`: borrowed ([`BatchOp`]) or in buffers of
/// their own. What a command writes to a key, from the moment it is made to
/// the request that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyWrite<B> {
    /// Put `key` = `value`.
    Put {
        /// The key.
        key: B,
        /// The value.
        value: B,
        /// When this version expires (absolute Unix milliseconds; 0: never).
        expire_at_ms: u64,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: B,
    },
    /// The version of `key` with sequence number `version_seq` expired: it
    /// is gone, and a newer version of the key is not touched (so an
    /// expiry never removes a write that came after it was decided).
    Expire {
        /// The key.
        key: B,
        /// Sequence number of the expired version.
        version_seq: u64,
    },
}

/// A write of a batch over borrowed bytes.
pub type BatchOp<'a> = KeyWrite<&'a [u8]>;

impl<B> KeyWrite<B> {
    /// A put that never expires.
    pub fn put(key: B, value: B) -> Self {
        Self::put_expiring(key, value, 0)
    }

    /// A put of a version that expires at `expire_at_ms` (absolute Unix
    /// milliseconds; 0: never).
    pub fn put_expiring(key: B, value: B, expire_at_ms: u64) -> Self {
        KeyWrite::Put {
            key,
            value,
            expire_at_ms,
        }
    }

    /// A delete of `key`.
    pub fn delete(key: B) -> Self {
        KeyWrite::Delete { key }
    }
}

impl<B: AsRef<[u8]>> KeyWrite<B> {
    /// The key the write is about.
    pub fn key(&self) -> &[u8] {
        match self {
            KeyWrite::Put { key, .. } | KeyWrite::Delete { key } | KeyWrite::Expire { key, .. } => {
                key.as_ref()
            }
        }
    }

    /// The value a put writes (`None` for the other writes).
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            KeyWrite::Put { value, .. } => Some(value.as_ref()),
            KeyWrite::Delete { .. } | KeyWrite::Expire { .. } => None,
        }
    }

    /// The same write over other bytes, each made by `bytes`.
    pub fn map<C>(&self, bytes: impl Fn(&[u8]) -> C) -> KeyWrite<C> {
        match self {
            KeyWrite::Put {
                key,
                value,
                expire_at_ms,
            } => KeyWrite::Put {
                key: bytes(key.as_ref()),
                value: bytes(value.as_ref()),
                expire_at_ms: *expire_at_ms,
            },
            KeyWrite::Delete { key } => KeyWrite::Delete {
                key: bytes(key.as_ref()),
            },
            KeyWrite::Expire { key, version_seq } => KeyWrite::Expire {
                key: bytes(key.as_ref()),
                version_seq: *version_seq,
            },
        }
    }

    /// The write as it travels, without key or value.
    fn entry(&self) -> BatchEntry {
        match self {
            KeyWrite::Put {
                value,
                expire_at_ms,
                ..
            } => BatchEntry::Put {
                value_len: value.as_ref().len() as u32,
                expire_at_ms: *expire_at_ms,
            },
            KeyWrite::Delete { .. } => BatchEntry::Delete,
            KeyWrite::Expire { version_seq, .. } => BatchEntry::Expire {
                version_seq: *version_seq,
            },
        }
    }
}

/// The records of a [`ResponseBody::Records`] answer, as slices of its
/// blob.
fn split_records(
    outcomes: &[RecordRead],
    blob: &Bytes,
) -> Result<Vec<Result<Bytes, WireError>>, ClientError> {
    let mut at = 0usize;
    let mut records = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        records.push(match outcome {
            RecordRead::Read { len } => {
                let end = at.saturating_add(*len as usize);
                if end > blob.len() {
                    return Err(ClientError::Protocol(format!(
                        "records past the end of a {} byte answer",
                        blob.len()
                    )));
                }
                let record = blob.slice(at..end);
                at = end;
                Ok(record)
            }
            RecordRead::Failed(e) => Err(e.clone()),
        });
    }
    if at != blob.len() {
        return Err(ClientError::Protocol(format!(
            "{} bytes of records in a {} byte answer",
            at,
            blob.len()
        )));
    }
    Ok(records)
}

impl StorageClient {
    /// Sends a request on the control stream of `partition`'s connection,
    /// its blob the concatenation of `blob`. A request the storage node
    /// would refuse as too large a frame (which would cost the whole
    /// connection) is refused here and not sent.
    fn call<T>(
        &self,
        partition: usize,
        body: RequestBody<'_>,
        blob: &[&[u8]],
        convert: call::Convert<T>,
    ) -> Result<Call<T>, ClientError> {
        let max =
            message::max_frame_bytes(self.welcome.max_key_bytes, self.welcome.max_value_bytes);
        let too_large = |what: &str, len: usize, max: usize| {
            ClientError::Invalid(WireError::TooLarge {
                what: what.to_string(),
                len: len as u64,
                max: max as u64,
            })
        };
        let blob_len: usize = blob.iter().map(|part| part.len()).sum();
        if blob_len > max {
            return Err(too_large("request", blob_len, max));
        }
        let live = self.live(partition)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let encoded = encode_frame(&Request { id, body }, blob);
        let meta_len = encoded.len() - frame::FRAME_PREFIX_BYTES - blob_len;
        if meta_len > frame::MAX_META_BYTES {
            return Err(too_large(
                "the request's keys",
                meta_len,
                frame::MAX_META_BYTES,
            ));
        }
        if encoded.len() > max {
            return Err(too_large("request", encoded.len(), max));
        }
        let rx = live.send(partition, id, encoded, Instant::now() + self.timeout())?;
        Ok(Call::new(rx, convert))
    }

    /// Fails if a newer writer has fenced this client.
    pub(super) fn check_writer(&self) -> Result<(), ClientError> {
        match self.state.fenced() {
            Some(fenced) => Err(ClientError::Storage(fenced)),
            None => Ok(()),
        }
    }

    /// Applies every write to `partition` as one unit (all or none after a
    /// crash), in order. The acknowledgements come back in the same order
    /// (a delete's offset is 0). The caller checks keys and values against
    /// the limits where it makes the writes; a request over the frame limit
    /// is refused here.
    pub fn write_many<B: AsRef<[u8]>>(
        &self,
        partition: usize,
        ops: &[KeyWrite<B>],
    ) -> Result<Call<Vec<WriteAck>>, ClientError> {
        self.check_writer()?;
        let keys = ops.iter().map(KeyWrite::key).collect();
        let entries = ops.iter().map(KeyWrite::entry).collect();
        let values: Vec<&[u8]> = ops.iter().filter_map(KeyWrite::value).collect();
        self.call(
            partition,
            RequestBody::WriteMany { keys, ops: entries },
            &values,
            |reply| match reply.body {
                ResponseBody::WrittenMany(acks) => Ok(acks),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// Deletes every key of the storage node, through the connection of
    /// `partition` (see [`RequestBody::Clear`]). The acknowledgement's
    /// sequence number is the clear's: every record below it is gone.
    pub fn clear(&self, partition: usize) -> Result<Call<WriteAck>, ClientError> {
        self.check_writer()?;
        self.call(partition, RequestBody::Clear, &[], written)
    }

    /// Reads records through the connection of `connection`, with an
    /// outcome per record in the order of `reads` (each verified by the
    /// storage node; the caller should check the key it expects): one
    /// request and one answer for them all. At most
    /// [`message::MAX_READS_PER_REQUEST`] reads, and, for more than one, at
    /// most [`message::MAX_GET_MANY_BYTES`] in all; the storage node refuses
    /// more.
    pub fn get_many(
        &self,
        connection: usize,
        reads: &[RecordAt],
    ) -> Result<Call<Vec<Result<Bytes, WireError>>>, ClientError> {
        let body = RequestBody::GetMany {
            reads: reads.to_vec(),
        };
        self.call(
            connection % self.partitions().max(1),
            body,
            &[],
            |reply| match reply.body {
                ResponseBody::Records(outcomes) => split_records(&outcomes, &reply.blob),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// Makes everything acknowledged durable against power loss.
    pub fn sync(&self) -> Result<Call<()>, ClientError> {
        self.call(0, RequestBody::Sync, &[], |reply: Reply| match reply.body {
            ResponseBody::Synced => Ok(()),
            other => Err(unexpected(&other)),
        })
    }

    /// The storage node's counters and state.
    pub fn stats(&self) -> Result<Call<StatsReport>, ClientError> {
        self.call(0, RequestBody::Stats, &[], |reply| match reply.body {
            ResponseBody::Stats(report) => Ok(report),
            other => Err(unexpected(&other)),
        })
    }

    /// Where the newest version of `key` is on the node (through the
    /// connection of `partition`): asked after a read answered
    /// [`WireError::Moved`].
    pub fn locate(
        &self,
        partition: usize,
        key: &[u8],
    ) -> Result<Call<Option<crate::message::VersionAt>>, ClientError> {
        self.call(
            partition % self.partitions().max(1),
            RequestBody::Locate { key },
            &[],
            |reply| match reply.body {
                ResponseBody::Located(located) => Ok(located),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// A round trip on the connection of `partition`.
    pub fn ping(&self, partition: usize) -> Result<Call<()>, ClientError> {
        self.call(partition, RequestBody::Ping, &[], |reply| {
            match reply.body {
                ResponseBody::Pong => Ok(()),
                other => Err(unexpected(&other)),
            }
        })
    }
}

/// The acknowledgement a clear is answered with.
fn written(reply: Reply) -> Result<WriteAck, ClientError> {
    match reply.body {
        ResponseBody::Written(ack) => Ok(ack),
        other => Err(unexpected(&other)),
    }
}
