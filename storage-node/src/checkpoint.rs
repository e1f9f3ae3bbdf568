//! Checkpoints of a partition's key log (hint files): the entries that
//! still matter as of a key-log position, so that opening the partition,
//! and exporting its key log, costs its keys rather than its history.
//!
//! A checkpoint folds the partition's own entries: of each key it keeps
//! the entry that wins among this partition's entries (the rules of the
//! key directory: the highest sequence number, a delete or expire over the
//! put it names, a relocation over the older place of its version), and
//! the highest clear entry, which drops every entry it clears. Entries that
//! another partition supersedes are kept: every partition's checkpoint
//! then yields, with the key-log tails after them, exactly what the whole
//! key logs yield, in any order. Deletes are kept too, so a delete never
//! stops shadowing an older put of its key in another partition.
//!
//! A checkpoint can also be swept against the node's key directory
//! ([`Fold::finish_swept`]): then it keeps only what a rebuild still
//! needs. A put goes once any partition's entry superseded it (that entry
//! is committed, and it stays until it is superseded or dropped in turn);
//! a delete or expire
//! goes once a newer put superseded it, or once no older version of its key
//! is left anywhere a rebuild can read (its sequence number is below the
//! node's tombstone floor). Bitcask and Badger both shipped the bug where a
//! dropped tombstone let an older put come back; the floor is what stops
//! it. A checkpoint records the sequence number below which it is swept
//! (`swept_below_seq`): no put that a delete or expire with a lower
//! sequence number superseded is in it, or in the key log after it (every
//! write below it was committed as its round began, see
//! [`crate::partition::CheckpointRound`]). The
//! node's floor is the lowest of these over every checkpoint that any
//! partition could still open from (see
//! [`crate::partition::Partition::swept_below_seq`]).
//!
//! On disk: `checkpoint` (the current one) and `checkpoint.prev` (the one
//! before), each a 72-byte header (magic, position, highest sequence
//! number, end of the furthest value-log record, entry count, body length,
//! creation time, swept-below sequence number, body checksum, header
//! checksum) and a body of key-log
//! frames. A new one is written to `checkpoint.tmp`, synced, and made
//! current by renames; the key-log chunks wholly below the previous one's
//! position may then go, so that either checkpoint can be opened from.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use splitkv_common::record::{self, EntryKind, Frame, FrameBuilder, KeyEntry};

use crate::disk::{Disk, FileKind};

/// The current checkpoint's file name.
pub(crate) const CURRENT: &str = "checkpoint";
/// The previous checkpoint's file name.
pub(crate) const PREVIOUS: &str = "checkpoint.prev";
const TEMPORARY: &str = "checkpoint.tmp";
const MAGIC: [u8; 8] = *b"SKVCKPT2";
const HEADER_BYTES: usize = 72;
/// Payload bytes per frame of a checkpoint's body.
const FRAME_PAYLOAD_BYTES: usize = 60 << 10;

/// Why a partition does not open from one of its checkpoint files.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CheckpointError {
    /// There is no such file.
    #[error("none")]
    Missing,
    /// The file could not be read.
    #[error("unreadable: {0}")]
    Unreadable(Arc<std::io::Error>),
    /// The file's bytes do not verify.
    #[error(transparent)]
    Invalid(#[from] InvalidCheckpoint),
    /// The checkpoint verifies but covers a key-log position the key log
    /// does not hold.
    #[error("its position {position} is outside the key log's {first}..{end}")]
    OutsideKeyLog {
        /// The checkpoint's position.
        position: u64,
        /// The key log's first position.
        first: u64,
        /// The key log's end.
        end: u64,
    },
}

/// Why a checkpoint file's bytes do not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidCheckpoint {
    /// Shorter than its header.
    #[error("shorter than its header")]
    Short,
    /// The magic is not a checkpoint's.
    #[error("not a checkpoint")]
    NotACheckpoint,
    /// The header's checksum does not match.
    #[error("header checksum mismatch")]
    HeaderChecksum,
    /// The body length does not fit in memory.
    #[error("body length out of range")]
    BodyLengthOutOfRange,
    /// The body is not as long as the header says.
    #[error("torn: the body is not as long as the header says")]
    Torn,
    /// The body's checksum does not match.
    #[error("body checksum mismatch")]
    BodyChecksum,
}

/// A checkpoint of one partition's key log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// The key-log position it covers: every entry before it is folded in.
    pub(crate) position: u64,
    /// The highest sequence number of any entry folded in.
    pub(crate) max_seq: u64,
    /// The end of the furthest value-log record any folded entry named.
    pub(crate) max_value_end: u64,
    /// Entries in the body.
    pub(crate) entries: u64,
    /// When it was made (Unix milliseconds).
    pub(crate) made_at_ms: u64,
    /// No put that a delete or expire with a lower sequence number
    /// superseded is in this checkpoint or in the key log after its
    /// position (0: no such promise).
    pub(crate) swept_below_seq: u64,
    /// Key-log frames holding the entries.
    pub(crate) body: Vec<u8>,
}

impl Checkpoint {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.body.len());
        out.extend_from_slice(&MAGIC);
        for field in [
            self.position,
            self.max_seq,
            self.max_value_end,
            self.entries,
            self.body.len() as u64,
            self.made_at_ms,
            self.swept_below_seq,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(&crc32c::crc32c(&self.body).to_le_bytes());
        let header_crc = crc32c::crc32c(&out);
        out.extend_from_slice(&header_crc.to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_BYTES);
        out.extend_from_slice(&self.body);
        out
    }

    /// Decodes and verifies a checkpoint file's bytes.
    fn decode(bytes: &[u8]) -> Result<Self, InvalidCheckpoint> {
        let header = bytes.get(..HEADER_BYTES).ok_or(InvalidCheckpoint::Short)?;
        if header[..8] != MAGIC {
            return Err(InvalidCheckpoint::NotACheckpoint);
        }
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
        if crc32c::crc32c(&header[..68]) != u32_at(68) {
            return Err(InvalidCheckpoint::HeaderChecksum);
        }
        let body_len =
            usize::try_from(u64_at(40)).map_err(|_| InvalidCheckpoint::BodyLengthOutOfRange)?;
        let body = bytes
            .get(HEADER_BYTES..)
            .filter(|body| body.len() == body_len)
            .ok_or(InvalidCheckpoint::Torn)?;
        if crc32c::crc32c(body) != u32_at(64) {
            return Err(InvalidCheckpoint::BodyChecksum);
        }
        Ok(Self {
            position: u64_at(8),
            max_seq: u64_at(16),
            max_value_end: u64_at(24),
            entries: u64_at(32),
            made_at_ms: u64_at(48),
            swept_below_seq: u64_at(56),
            body: body.to_vec(),
        })
    }

    /// Copies whole frames of the body that hold an entry with a sequence
    /// number of at least `min_seq` into `out`, from body offset `from` (0,
    /// or an offset this method returned), until `out` holds about
    /// `max_bytes` (at least one frame when any is left). Returns the body
    /// offset to continue from: the body's length once it is exhausted.
    pub(crate) fn read_frames(
        &self,
        from: usize,
        min_seq: u64,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> usize {
        let start_len = out.len();
        let mut at = from;
        while at < self.body.len() {
            let Ok((frame, used)) = record::decode_frame(&self.body[at..]) else {
                debug_assert!(false, "a verified body holds only whole frames");
                return self.body.len();
            };
            if out.len() > start_len && out.len() - start_len + used > max_bytes {
                return at;
            }
            if let Frame::Entries(entries) = frame
                && entries.max_seq() >= min_seq
            {
                out.extend_from_slice(&self.body[at..at + used]);
            }
            at += used;
        }
        at
    }

    /// Calls `f` with every entry of the body.
    pub(crate) fn for_each_entry(&self, mut f: impl FnMut(&KeyEntry<'_>)) {
        let mut at = 0;
        while at < self.body.len() {
            match record::decode_frame(&self.body[at..]) {
                Ok((Frame::Entries(entries), used)) => {
                    for entry in entries.iter().flatten() {
                        f(&entry);
                    }
                    at += used;
                }
                Ok((Frame::Pad, _)) | Err(_) => {
                    debug_assert!(false, "a verified body holds only entry frames");
                    return;
                }
            }
        }
    }
}

/// The entry of a key a fold keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kept {
    kind: EntryKind,
    seq: u64,
    value_offset: u64,
    value_len: u32,
    expire_at_ms: u64,
}

impl Kept {
    fn of(entry: &KeyEntry<'_>) -> Self {
        Self {
            kind: entry.kind,
            seq: entry.seq,
            value_offset: entry.value_offset,
            value_len: entry.value_len,
            expire_at_ms: entry.expire_at_ms,
        }
    }

    /// The highest sequence number this entry decides: a put's own, a
    /// delete's own, an expire's expired version.
    fn decides(&self) -> u64 {
        match self.kind {
            EntryKind::Expire { version_seq } => version_seq,
            _ => self.seq,
        }
    }

    fn is_put(&self) -> bool {
        self.kind == EntryKind::Put
    }

    /// Whether `self` wins over `other` for the same key of one partition.
    fn beats(&self, other: &Kept) -> bool {
        let (mine, theirs) = (self.decides(), other.decides());
        if mine != theirs {
            return mine > theirs;
        }
        match (self.is_put(), other.is_put()) {
            // A delete or expire beats the put it names.
            (false, true) => true,
            (true, false) => false,
            // The same version further on: a relocation.
            (true, true) => self.value_offset > other.value_offset,
            (false, false) => self.seq > other.seq,
        }
    }
}

/// Folds a partition's entries into a checkpoint.
#[derive(Debug, Default)]
pub(crate) struct Fold {
    keys: HashMap<Vec<u8>, Kept>,
    clear_seq: Option<u64>,
    max_seq: u64,
    max_value_end: u64,
}

impl Fold {
    /// Folds in `entry` (in any order).
    pub(crate) fn add(&mut self, entry: &KeyEntry<'_>) {
        self.max_seq = self.max_seq.max(entry.seq);
        if entry.kind == EntryKind::Put {
            self.max_value_end = self
                .max_value_end
                .max(entry.value_offset + entry.record_len() as u64);
        }
        if entry.kind == EntryKind::Clear {
            self.clear_seq = Some(self.clear_seq.unwrap_or(0).max(entry.seq));
            return;
        }
        let kept = Kept::of(entry);
        match self.keys.get_mut(entry.key) {
            Some(old) => {
                if kept.beats(old) {
                    *old = kept;
                }
            }
            None => {
                self.keys.insert(entry.key.to_vec(), kept);
            }
        }
    }

    /// Folds in every entry of `checkpoint`, and its bounds.
    pub(crate) fn add_checkpoint(&mut self, checkpoint: &Checkpoint) {
        checkpoint.for_each_entry(|entry| self.add(entry));
        self.max_seq = self.max_seq.max(checkpoint.max_seq);
        self.max_value_end = self.max_value_end.max(checkpoint.max_value_end);
    }

    /// The checkpoint of everything folded, covering the key log up to
    /// `position`, not swept.
    #[cfg(test)]
    pub(crate) fn finish(self, position: u64, made_at_ms: u64) -> Checkpoint {
        self.finish_swept(position, made_at_ms, 0, |_| true)
    }

    /// The checkpoint of what was folded, covering the key log up to
    /// `position`, keeping of the winners only those `needed` says a
    /// rebuild still needs, and promising that it is swept below
    /// `swept_below_seq` (see the module documentation; 0 promises
    /// nothing).
    pub(crate) fn finish_swept(
        self,
        position: u64,
        made_at_ms: u64,
        swept_below_seq: u64,
        needed: impl Fn(&KeyEntry<'_>) -> bool,
    ) -> Checkpoint {
        let mut body = Vec::new();
        let mut frame = FrameBuilder::default();
        let mut entries = 0u64;
        let mut payload = 0usize;
        frame.begin();
        let mut push = |entry: &KeyEntry<'_>, body: &mut Vec<u8>, frame: &mut FrameBuilder| {
            let len = entry.encoded_len();
            if payload > 0 && payload + len > FRAME_PAYLOAD_BYTES {
                body.extend_from_slice(frame.finish());
                frame.begin();
                payload = 0;
            }
            frame.push(entry);
            payload += len;
            entries += 1;
        };
        if let Some(seq) = self.clear_seq {
            let clear = KeyEntry {
                kind: EntryKind::Clear,
                seq,
                value_offset: 0,
                value_len: 0,
                expire_at_ms: 0,
                key: &[],
            };
            push(&clear, &mut body, &mut frame);
        }
        let cleared_below = self.clear_seq.unwrap_or(0);
        for (key, kept) in &self.keys {
            if kept.decides() < cleared_below {
                continue;
            }
            let entry = KeyEntry {
                kind: kept.kind,
                seq: kept.seq,
                value_offset: kept.value_offset,
                value_len: kept.value_len,
                expire_at_ms: kept.expire_at_ms,
                key,
            };
            if needed(&entry) {
                push(&entry, &mut body, &mut frame);
            }
        }
        if entries > 0 {
            body.extend_from_slice(frame.finish());
        }
        Checkpoint {
            position,
            max_seq: self.max_seq,
            max_value_end: self.max_value_end,
            entries,
            made_at_ms,
            swept_below_seq,
            body,
        }
    }
}

/// Writes `checkpoint` as the current one of partition directory `dir`
/// (the current one becoming the previous), durably, before returning.
pub(crate) fn store(disk: &dyn Disk, dir: &Path, checkpoint: &Checkpoint) -> std::io::Result<()> {
    let tmp = dir.join(TEMPORARY);
    let _ = disk.remove_file(&tmp);
    let file = disk.open(&tmp, FileKind::Plain, true)?;
    file.write_at(&checkpoint.encode(), 0)?;
    file.sync_data()?;
    drop(file);
    let current = dir.join(CURRENT);
    if disk.exists(&current)? {
        disk.rename(&current, &dir.join(PREVIOUS))?;
    }
    disk.rename(&tmp, &current)?;
    disk.sync_dir(dir)
}

/// A checkpoint file read and verified, or why it cannot be opened from.
pub(crate) type Loaded = Result<Arc<Checkpoint>, CheckpointError>;

/// The current and previous checkpoints of partition directory `dir`,
/// each `Err` with the reason if it is missing, torn or corrupt.
pub(crate) fn load(disk: &dyn Disk, dir: &Path) -> (Loaded, Loaded) {
    let read = |name: &str| -> Loaded {
        let path = dir.join(name);
        let unreadable = |e| CheckpointError::Unreadable(Arc::new(e));
        let file = match disk.open(&path, FileKind::Plain, false) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CheckpointError::Missing);
            }
            Err(e) => return Err(unreadable(e)),
        };
        let len = file.len_bytes().map_err(unreadable)?;
        let mut bytes = vec![0u8; len as usize];
        let got = file.read_at(&mut bytes, 0).map_err(unreadable)?;
        bytes.truncate(got);
        Ok(Arc::new(Checkpoint::decode(&bytes)?))
    };
    (read(CURRENT), read(PREVIOUS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EntryKind, seq: u64, offset: u64, key: &[u8]) -> KeyEntry<'_> {
        KeyEntry {
            kind,
            seq,
            value_offset: offset,
            value_len: if kind == EntryKind::Put { 10 } else { 0 },
            expire_at_ms: 0,
            key,
        }
    }

    fn kept(checkpoint: &Checkpoint) -> HashMap<Vec<u8>, (EntryKind, u64, u64)> {
        let mut out = HashMap::new();
        checkpoint.for_each_entry(|e| {
            out.insert(e.key.to_vec(), (e.kind, e.seq, e.value_offset));
        });
        out
    }

    #[test]
    fn a_fold_keeps_what_wins_within_the_partition() {
        let mut fold = Fold::default();
        fold.add(&entry(EntryKind::Put, 1, 0, b"a"));
        fold.add(&entry(EntryKind::Put, 3, 100, b"a"));
        fold.add(&entry(EntryKind::Put, 2, 50, b"b"));
        fold.add(&entry(EntryKind::Delete, 4, 0, b"b"));
        fold.add(&entry(EntryKind::Put, 5, 200, b"c"));
        fold.add(&entry(EntryKind::Expire { version_seq: 5 }, 6, 0, b"c"));
        fold.add(&entry(EntryKind::Put, 7, 300, b"d"));
        fold.add(&entry(EntryKind::Put, 7, 900, b"d"));
        let checkpoint = fold.finish(4096, 1);
        let kept = kept(&checkpoint);
        assert_eq!(kept[&b"a"[..]], (EntryKind::Put, 3, 100));
        assert_eq!(kept[&b"b"[..]], (EntryKind::Delete, 4, 0));
        assert_eq!(kept[&b"c"[..]].0, EntryKind::Expire { version_seq: 5 });
        assert_eq!(kept[&b"d"[..]], (EntryKind::Put, 7, 900), "the relocation");
        assert_eq!(checkpoint.entries, 4);
        assert_eq!(checkpoint.max_seq, 7);
        assert_eq!(
            checkpoint.max_value_end,
            900 + record::value_record_len(1, 10) as u64
        );
    }

    #[test]
    fn a_clear_drops_what_it_clears_and_stays() {
        let mut fold = Fold::default();
        fold.add(&entry(EntryKind::Put, 1, 0, b"a"));
        fold.add(&entry(EntryKind::Delete, 2, 0, b"b"));
        fold.add(&entry(EntryKind::Clear, 3, 0, b""));
        fold.add(&entry(EntryKind::Put, 4, 100, b"c"));
        let checkpoint = fold.finish(8192, 1);
        let kept = kept(&checkpoint);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[&b""[..]], (EntryKind::Clear, 3, 0));
        assert_eq!(kept[&b"c"[..]], (EntryKind::Put, 4, 100));
    }

    #[test]
    fn a_swept_checkpoint_keeps_only_what_it_is_told_and_records_its_sweep() {
        let mut fold = Fold::default();
        fold.add(&entry(EntryKind::Put, 1, 0, b"a"));
        fold.add(&entry(EntryKind::Delete, 2, 0, b"b"));
        fold.add(&entry(EntryKind::Put, 3, 100, b"c"));
        fold.add(&entry(EntryKind::Clear, 0, 0, b""));
        let checkpoint = fold.finish_swept(4096, 1, 10, |e| e.key != b"b");
        let kept = kept(&checkpoint);
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(!kept.contains_key(&b"b"[..]));
        assert_eq!(checkpoint.entries, 3);
        assert_eq!(checkpoint.max_seq, 3, "what was dropped still counts");
        assert_eq!(checkpoint.swept_below_seq, 10);
        let decoded = Checkpoint::decode(&checkpoint.encode()).expect("decodes");
        assert_eq!(decoded.swept_below_seq, 10);
    }

    #[test]
    fn a_checkpoint_round_trips_and_any_damage_is_detected() {
        let mut fold = Fold::default();
        for i in 0..5000u64 {
            let key = format!("key-{i}");
            fold.add(&entry(EntryKind::Put, i + 1, i * 64, key.as_bytes()));
        }
        let checkpoint = fold.finish(1 << 20, 42);
        assert!(
            checkpoint.body.len() > FRAME_PAYLOAD_BYTES,
            "several frames"
        );
        let bytes = checkpoint.encode();
        assert_eq!(Checkpoint::decode(&bytes).as_ref(), Ok(&checkpoint));
        for at in [0, 9, 30, 58, 65, 69, HEADER_BYTES + 5, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(Checkpoint::decode(&damaged).is_err(), "byte {at}");
        }
        assert!(
            Checkpoint::decode(&bytes[..bytes.len() - 100]).is_err(),
            "torn"
        );
        let mut entries = 0;
        checkpoint.for_each_entry(|_| entries += 1);
        assert_eq!(entries, 5000);
    }
}
