//! Garbage collection of one value-log segment: its live records are
//! copied to the head of the log through the partition's own write path,
//! each logged as a relocation (a put entry with the version's own
//! sequence number), and the segment is freed once the copies are durable.
//!
//! A record is copied only while the key directory names it as its key's
//! newest version; a write of the key that commits between that look and
//! the copy's commit makes the copy dead at once (the directory decides by
//! sequence number), so a copy never brings an old version back. Readers
//! that were reading the segment finish (they hold its open file); later
//! reads there answer `moved`.

use splitkv_common::message::WriteAck;
use splitkv_common::record::{self, RecordError};

use super::Partition;
use super::writer::WriteOp;
use std::collections::BTreeMap;

use crate::directory::{Place, SegmentUsage};
use crate::error::{Result, StorageError};
use crate::partition::MAX_RANGE_BYTES;

/// Record bytes copied per relocation batch.
const BATCH_RECORD_BYTES: usize = 256 << 10;

/// What collecting a segment did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Collected {
    /// Records copied to the head of the log.
    pub(crate) relocated_records: u64,
    /// Bytes of those records.
    pub(crate) relocated_bytes: u64,
    /// Disk bytes the freed segment file held.
    pub(crate) freed_bytes: u64,
}

impl Partition {
    /// The segments below `below` that garbage collection should collect,
    /// deadest first: those with at least `min_dead_percent` of their
    /// record bytes dead (see [`eligible_segments`]).
    pub(crate) fn gc_candidates(&self, min_dead_percent: u8, below: u64) -> Vec<u64> {
        let head = self.head_segment().min(below);
        let usage = self.node.directory.segment_usage(self.id);
        let files = self.vlog.segment_ids();
        eligible_segments(&usage, &files, head, min_dead_percent)
    }

    /// The partition's id.
    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// Value bytes of the puts written since the node started (not
    /// relocations).
    pub(crate) fn written_value_bytes(&self) -> u64 {
        self.counters
            .value_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The segment being written.
    pub(crate) fn head_segment(&self) -> u64 {
        self.vlog.segment_of(self.state.lock().tail())
    }

    /// Copies `live`, the live records of segment `id` in offset order (see
    /// [`crate::directory::KeyDirectory::live_in_segments`]), to the head of the log, as
    /// relocations; [`Partition::free_segment`] frees it once
    /// [`Partition::sync`] has made the copies durable. `pace` is called
    /// with the bytes of each batch copied and may pause; it returns false
    /// to stop (the segment is then kept). Returns `None` if the segment
    /// cannot be collected now (it is the one being written, or collection
    /// stopped).
    pub(crate) fn copy_segment(
        &self,
        id: u64,
        live: &[(Box<[u8]>, Place)],
        pace: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<Collected>> {
        if self.vlog.is_freed(id) || self.vlog.segment_of(self.state.lock().tail()) <= id {
            return Ok(None);
        }
        let mut collected = Collected::default();
        let mut at = 0;
        while at < live.len() {
            // One range read covers the records of up to 16 MiB.
            let span_start = live[at].1.offset;
            let mut span_end = at;
            while span_end < live.len() {
                let place = &live[span_end].1;
                let end = place.offset + u64::from(place.record_len);
                if end - span_start > MAX_RANGE_BYTES as u64 {
                    break;
                }
                span_end += 1;
            }
            let last = &live[span_end - 1].1;
            let span_len = (last.offset + u64::from(last.record_len) - span_start) as usize;
            let read = self.read_range(span_start, span_len)?;
            let bytes = read.bytes();
            if bytes.len() < span_len {
                return Err(StorageError::corrupt(
                    self.id,
                    span_start + bytes.len() as u64,
                    RecordError::Truncated {
                        needed: span_len,
                        available: bytes.len(),
                    },
                ));
            }
            let mut batch: Vec<WriteOp<'_>> = Vec::new();
            let mut batch_bytes = 0usize;
            let mut frame_bytes = record::FRAME_HEADER_BYTES;
            for (key, place) in &live[at..span_end] {
                let within = (place.offset - span_start) as usize;
                let bytes = &bytes[within..within + place.record_len as usize];
                let op = relocation(self.id, key, place, bytes)?;
                let entry_bytes = record::entry_len(key.len(), place.expire_at_ms);
                let frame_full =
                    record::frame_len(frame_bytes + entry_bytes) > self.node.keylog_chunk_bytes / 2;
                if !batch.is_empty() && (batch_bytes >= BATCH_RECORD_BYTES || frame_full) {
                    if !self.relocate(&batch, pace, batch_bytes)? {
                        return Ok(None);
                    }
                    collected.relocated_records += batch.len() as u64;
                    collected.relocated_bytes += batch_bytes as u64;
                    batch.clear();
                    batch_bytes = 0;
                    frame_bytes = record::FRAME_HEADER_BYTES;
                }
                batch.push(op);
                batch_bytes += bytes.len();
                frame_bytes += entry_bytes;
            }
            if !batch.is_empty() {
                if !self.relocate(&batch, pace, batch_bytes)? {
                    return Ok(None);
                }
                collected.relocated_records += batch.len() as u64;
                collected.relocated_bytes += batch_bytes as u64;
            }
            at = span_end;
        }
        Ok(Some(collected))
    }

    /// Frees segment `id`, whose live records [`Partition::copy_segment`]
    /// copied (`collected`), after a [`Partition::sync`] that began after
    /// the copy: the copies and the entries that made the rest of its
    /// records dead are durable, in either durability mode, before the
    /// originals go; the caller has checked that no live record is left in
    /// it. Returns `None`, keeping the segment, if a write buffer still
    /// holds part of it.
    pub(crate) fn free_segment(
        &self,
        id: u64,
        mut collected: Collected,
    ) -> Result<Option<Collected>> {
        let start = id * self.vlog.segment_bytes();
        let range = start..start + self.vlog.segment_bytes();
        {
            let st = self.state.lock();
            let mut unflushed = st.slots.iter().filter_map(|slot| slot.unflushed());
            if unflushed.any(|held| held.start < range.end && held.end > range.start) {
                return Ok(None);
            }
        }
        collected.freed_bytes = self.vlog.file_bytes(id);
        self.vlog.free(id).map_err(|e| {
            StorageError::io(
                format!("freeing value-log segment {id} of partition {}", self.id),
                e,
            )
        })?;
        self.node.directory.forget_segment(self.id, id);
        self.counters
            .gc_runs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.counters
            .reclaimed_bytes
            .fetch_add(collected.freed_bytes, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(collected))
    }

    /// Writes one batch of relocations, then paces.
    fn relocate(
        &self,
        batch: &[WriteOp<'_>],
        pace: &mut dyn FnMut(u64) -> bool,
        bytes: usize,
    ) -> Result<bool> {
        let mut acks = vec![WriteAck::default(); batch.len()];
        self.write(batch, None, &mut acks)?;
        Ok(pace(bytes as u64))
    }
}

/// The relocation of the record `bytes` that the directory places at
/// `place` for `key`, after checking that the bytes are that record.
fn relocation<'a>(
    partition: usize,
    key: &'a [u8],
    place: &Place,
    bytes: &'a [u8],
) -> Result<WriteOp<'a>> {
    let corrupt = |source| StorageError::corrupt(partition, place.offset, source);
    let decoded = record::decode_value_record(bytes).map_err(corrupt)?;
    if decoded.key != key || decoded.seq != place.seq {
        return Err(corrupt(RecordError::Malformed(
            "the record is not the version the key directory names",
        )));
    }
    Ok(WriteOp::Relocate {
        key,
        value: decoded.value,
        seq: place.seq,
        expire_at_ms: place.expire_at_ms,
    })
}

/// The segments to collect, most dead bytes first (ties: the oldest
/// first): of the segments in `files` below `head` (the segment being
/// written), those with at least `min_dead_percent` of their record bytes
/// dead (a segment with no record bytes at all counts as wholly dead).
pub(crate) fn eligible_segments(
    usage: &BTreeMap<u64, SegmentUsage>,
    files: &[u64],
    head: u64,
    min_dead_percent: u8,
) -> Vec<u64> {
    let mut eligible: Vec<(u64, u64)> = files
        .iter()
        .filter(|&&id| id < head)
        .filter_map(|&id| {
            let segment = usage.get(&id).copied().unwrap_or_default();
            (segment.dead_bytes * 100 >= u64::from(min_dead_percent) * segment.written_bytes)
                .then_some((id, segment.dead_bytes))
        })
        .collect();
    eligible.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    eligible.into_iter().map(|(id, _)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(entries: &[(u64, u64, u64)]) -> BTreeMap<u64, SegmentUsage> {
        entries
            .iter()
            .map(|&(id, written_bytes, dead_bytes)| {
                (
                    id,
                    SegmentUsage {
                        written_bytes,
                        dead_bytes,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn eligible_segments_below_the_head_come_deadest_first() {
        let u = usage(&[(0, 100, 40), (1, 100, 60), (2, 100, 90), (3, 100, 100)]);
        assert_eq!(
            eligible_segments(&u, &[0, 1, 2, 3], 3, 50),
            vec![2, 1],
            "3 is the head"
        );
        assert_eq!(
            eligible_segments(&u, &[0, 1, 3], 3, 50),
            vec![1],
            "2 has no file"
        );
        assert!(eligible_segments(&u, &[0, 1, 2, 3], 3, 95).is_empty());
        assert_eq!(eligible_segments(&u, &[0, 1, 2, 3], 3, 0), vec![2, 1, 0]);
    }

    #[test]
    fn a_segment_without_records_is_wholly_dead_and_ties_go_to_the_oldest() {
        let u = usage(&[(1, 100, 50), (2, 100, 50)]);
        assert_eq!(eligible_segments(&u, &[0, 3], 5, 50), vec![0, 3]);
        assert_eq!(eligible_segments(&u, &[2, 1], 5, 50), vec![1, 2]);
        assert!(eligible_segments(&u, &[1, 2], 1, 50).is_empty());
    }
}
