//! The key log of a partition: one checksummed frame per write, delete or
//! batch (format in [`splitkv_common::record`]), appended into fixed-size
//! chunks, each a file of its own (`key-NNNNNNNN.log`, chunk `n` holding
//! positions `[n * chunk_bytes, (n + 1) * chunk_bytes)`), preallocated and
//! mapped whole. Positions are never reused; a log may begin at a later
//! chunk than the first (chunks wholly below a checkpoint may go).
//!
//! Space is reserved with `allocate` before a chunk is mapped, so a full
//! disk is an error from [`KeyLog::append`], never a SIGBUS on a store.
//! Frames never straddle chunks; a padding frame ends a chunk early.
//!
//! On open the log is scanned from the start and cut at the first frame
//! that does not verify: everything after a torn frame was never
//! acknowledged. The bytes after the cut are zeroed so that later appends
//! can never line up with stale frames.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use splitkv_common::record::{self, FRAME_HEADER_BYTES, Frame, KeyEntry};

use crate::disk::{Disk, FileKind, Mapping};

const PAGE_BYTES: usize = 4096;
const CHUNK_PREFIX: &str = "key-";
const CHUNK_SUFFIX: &str = ".log";

/// The file name of key-log chunk `index`.
pub(crate) fn chunk_file_name(index: u64) -> String {
    format!("{CHUNK_PREFIX}{index:08}{CHUNK_SUFFIX}")
}

fn parse_chunk_name(name: &str) -> Option<u64> {
    name.strip_prefix(CHUNK_PREFIX)?
        .strip_suffix(CHUNK_SUFFIX)?
        .parse()
        .ok()
}

/// What the opening scan found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// Highest sequence number in any verified frame.
    pub max_seq: u64,
    /// Verified frames.
    pub frames: u64,
    /// Entries in verified frames.
    pub entries: u64,
    /// End of the furthest value-log record any verified entry points at.
    pub max_value_end: u64,
    /// Position where the log was cut (the end of the verified frames).
    pub end: u64,
    /// Bytes of torn or stale data zeroed after the cut.
    pub zeroed_bytes: u64,
}

struct Chunk {
    map: Box<dyn Mapping>,
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as the chunk. Bytes below the
        // log's end are never written again; callers only look at those, or
        // hold the partition lock when looking past them.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.map.len()) }
    }

    fn write(&self, at: usize, bytes: &[u8]) {
        assert!(
            at + bytes.len() <= self.map.len(),
            "key-log write out of bounds"
        );
        // SAFETY: in bounds; only the partition-lock holder appends, and
        // appends only touch bytes past the log's end, which nobody reads.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.as_ptr().add(at), bytes.len())
        }
    }
}

/// The mapped key log of one partition.
pub struct KeyLog {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    chunk_bytes: u64,
    /// Chunk `i` at index `i`; `None` below the first chunk kept.
    chunks: Vec<Option<Arc<Chunk>>>,
    chunk_max_seq: Vec<u64>,
    end: u64,
    /// Entries in the complete frames.
    entries: u64,
    /// The highest sequence number of any entry in the chunks below the
    /// first one kept: 0 without such chunks, `u64::MAX` when the log
    /// opened without them (what they held is not known).
    forgotten_max_seq: u64,
}

impl KeyLog {
    /// Opens (creating and preallocating if needed) the key log whose
    /// chunks are in `dir`, scans it from its first chunk and cuts it after
    /// the last frame that verifies. Chunks must follow one another with no
    /// gap.
    pub fn open(
        disk: &Arc<dyn Disk>,
        dir: &Path,
        chunk_bytes: usize,
    ) -> io::Result<(Self, ScanSummary)> {
        let mut indices: Vec<u64> = disk
            .list_dir(dir)?
            .iter()
            .filter_map(|name| name.to_str().and_then(parse_chunk_name))
            .collect();
        indices.sort_unstable();
        if let Some(pair) = indices.windows(2).find(|w| w[1] != w[0] + 1) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "key-log chunks {} to {} are missing in {}",
                    pair[0] + 1,
                    pair[1] - 1,
                    dir.display()
                ),
            ));
        }
        let first = indices.first().copied().unwrap_or(0);
        let last = indices.last().copied().unwrap_or(0);
        let mut log = Self {
            disk: Arc::clone(disk),
            dir: dir.to_path_buf(),
            chunk_bytes: chunk_bytes as u64,
            chunks: vec![None; first as usize],
            chunk_max_seq: vec![0; first as usize],
            end: first * chunk_bytes as u64,
            entries: 0,
            forgotten_max_seq: if first > 0 { u64::MAX } else { 0 },
        };
        for index in first..=last {
            log.map_chunk(index)?;
        }
        let summary = log.scan()?;
        Ok((log, summary))
    }

    /// Maps chunk `index` (the next one), creating and preallocating its
    /// file if needed.
    fn map_chunk(&mut self, index: u64) -> io::Result<()> {
        debug_assert_eq!(index as usize, self.chunks.len());
        let path = self.dir.join(chunk_file_name(index));
        let created = !self.disk.exists(&path)?;
        let file = self.disk.open(&path, FileKind::Mapped, true)?;
        let len = file.len_bytes()?;
        if len < self.chunk_bytes {
            file.allocate(len, self.chunk_bytes - len)?;
        }
        // A file that is still short may have been created by an attempt
        // that found the disk full: its directory entry is synced now.
        if created || len < self.chunk_bytes {
            self.disk.sync_dir(&self.dir)?;
        }
        let map = file.map(0, self.chunk_bytes as usize)?;
        self.chunks.push(Some(Arc::new(Chunk { map })));
        self.chunk_max_seq.push(0);
        Ok(())
    }

    /// The first position the log still holds: the start of its first
    /// chunk kept.
    pub fn first_position(&self) -> u64 {
        self.chunks.iter().take_while(|c| c.is_none()).count() as u64 * self.chunk_bytes
    }

    /// Lets go of the chunks that lie wholly below `position` (the last
    /// mapped chunk always stays), lowest first, and returns their files
    /// for the caller to delete in that order, so that the chunks left on
    /// disk follow one another whatever point a crash interrupts the
    /// deletion at. Readers holding a snapshot keep their mappings.
    pub(crate) fn forget_chunks_below(&mut self, position: u64) -> Vec<PathBuf> {
        let below = (position / self.chunk_bytes) as usize;
        let last = self.chunks.len().saturating_sub(1);
        let mut files = Vec::new();
        for index in 0..below.min(last) {
            if self.chunks[index].take().is_some() {
                files.push(self.dir.join(chunk_file_name(index as u64)));
                self.forgotten_max_seq = self.forgotten_max_seq.max(self.chunk_max_seq[index]);
            }
        }
        files
    }

    /// The highest sequence number an entry below
    /// [`KeyLog::first_position`] may have: an export of the entries from a
    /// higher one on finds them all in the chunks kept.
    pub(crate) fn forgotten_max_seq(&self) -> u64 {
        self.forgotten_max_seq
    }

    fn scan(&mut self) -> io::Result<ScanSummary> {
        let mut summary = ScanSummary::default();
        let mut cut = None;
        'chunks: for (index, chunk) in self.chunks.iter().enumerate() {
            let Some(chunk) = chunk else {
                continue;
            };
            let bytes = chunk.bytes();
            let mut within = 0usize;
            while within < bytes.len() {
                match record::decode_frame(&bytes[within..]) {
                    Ok((Frame::Entries(entries), used)) => {
                        let max = entries.max_seq();
                        summary.max_seq = summary.max_seq.max(max);
                        summary.frames += 1;
                        for entry in entries.iter().flatten() {
                            summary.entries += 1;
                            let end = entry.value_offset + entry.record_len() as u64;
                            summary.max_value_end = summary.max_value_end.max(end);
                        }
                        self.chunk_max_seq[index] = self.chunk_max_seq[index].max(max);
                        within += used;
                    }
                    Ok((Frame::Pad, _)) => continue 'chunks,
                    Err(_) => {
                        cut = Some(index as u64 * self.chunk_bytes + within as u64);
                        break 'chunks;
                    }
                }
            }
        }
        self.end = cut.unwrap_or(self.chunks.len() as u64 * self.chunk_bytes);
        self.entries = summary.entries;
        summary.end = self.end;
        summary.zeroed_bytes = self.zero_after_end()?;
        Ok(summary)
    }

    /// Zeroes every non-zero page from the end of the log to the end of the
    /// file, and makes that durable.
    fn zero_after_end(&self) -> io::Result<u64> {
        let mut zeroed = 0u64;
        let first = (self.end / self.chunk_bytes) as usize;
        for (index, chunk) in self.chunks.iter().enumerate().skip(first) {
            let Some(chunk) = chunk else {
                continue;
            };
            let start = if index == first {
                (self.end % self.chunk_bytes) as usize
            } else {
                0
            };
            let bytes = chunk.bytes();
            let mut dirty = None::<(usize, usize)>;
            let mut at = start;
            while at < bytes.len() {
                let page_end = (at / PAGE_BYTES + 1) * PAGE_BYTES;
                let stop = page_end.min(bytes.len());
                if bytes[at..stop].iter().any(|&b| b != 0) {
                    chunk.write(at, &vec![0u8; stop - at]);
                    zeroed += (stop - at) as u64;
                    let (lo, _) = dirty.unwrap_or((at, stop));
                    dirty = Some((lo, stop));
                }
                at = stop;
            }
            if let Some((lo, hi)) = dirty {
                chunk.map.flush(lo, hi - lo)?;
            }
        }
        Ok(zeroed)
    }

    /// The position after the last complete frame.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Entries in the complete frames.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Appends one sealed frame (from [`record::FrameBuilder::finish`]) of
    /// `entries` entries whose highest sequence number is `max_seq`, and
    /// returns the new end. When the frame is complete in the mapping it
    /// survives the death of the process; [`KeyLog::sync`] makes it durable.
    /// A failure (a full disk when the next chunk is created) leaves the log
    /// as it was, so the append may be tried again.
    pub fn append(&mut self, frame: &[u8], max_seq: u64, entries: u64) -> io::Result<u64> {
        let len = frame.len() as u64;
        if len > self.chunk_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "key-log frame of {len} bytes exceeds the chunk size {}",
                    self.chunk_bytes
                ),
            ));
        }
        let mut index = self.end / self.chunk_bytes;
        let mut within = self.end % self.chunk_bytes;
        if within + len > self.chunk_bytes {
            index += 1;
            within = 0;
        }
        while index as usize >= self.chunks.len() {
            self.map_chunk(self.chunks.len() as u64)?;
        }
        let old_index = (self.end / self.chunk_bytes) as usize;
        let old_within = (self.end % self.chunk_bytes) as usize;
        if index as usize != old_index
            && old_within + FRAME_HEADER_BYTES <= self.chunk_bytes as usize
        {
            self.chunk(old_index)?
                .write(old_within, &record::pad_frame());
        }
        self.chunk(index as usize)?.write(within as usize, frame);
        self.chunk_max_seq[index as usize] = self.chunk_max_seq[index as usize].max(max_seq);
        self.end = index * self.chunk_bytes + within + len;
        self.entries += entries;
        Ok(self.end)
    }

    fn chunk(&self, index: usize) -> io::Result<&Chunk> {
        self.chunks
            .get(index)
            .and_then(|c| c.as_deref())
            .ok_or_else(|| io::Error::other(format!("key-log chunk {index} is not held")))
    }

    /// A view of the complete frames as they are now, to read without the
    /// partition lock: bytes below the end never change.
    pub fn snapshot(&self) -> KeyLogSnapshot {
        KeyLogSnapshot {
            chunks: self.chunks.clone(),
            chunk_max_seq: self.chunk_max_seq.clone(),
            chunk_bytes: self.chunk_bytes,
            end: self.end,
        }
    }
}

/// An immutable view of a key log's complete frames.
pub struct KeyLogSnapshot {
    chunks: Vec<Option<Arc<Chunk>>>,
    chunk_max_seq: Vec<u64>,
    chunk_bytes: u64,
    end: u64,
}

/// Why an export position was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPosition(pub u64);

impl KeyLogSnapshot {
    /// Makes the log durable from `from` up to `to` (msync).
    pub fn sync(&self, from: u64, to: u64) -> io::Result<()> {
        let mut at = from;
        while at < to {
            let index = (at / self.chunk_bytes) as usize;
            let within = at % self.chunk_bytes;
            let stop = to.min((index as u64 + 1) * self.chunk_bytes);
            let Some(Some(chunk)) = self.chunks.get(index) else {
                break;
            };
            chunk.map.flush(within as usize, (stop - at) as usize)?;
            at = stop;
        }
        Ok(())
    }

    /// The end of the log in this view.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Calls `f` with every entry of the view's frames that start in
    /// `range` (from the start of a frame or of a chunk), in log order (the
    /// frames below the end verified when the log was opened or appended).
    pub(crate) fn for_each_entry(
        &self,
        range: std::ops::Range<u64>,
        mut f: impl FnMut(&KeyEntry<'_>),
    ) {
        let mut pos = range.start;
        while pos < self.end.min(range.end) {
            let index = (pos / self.chunk_bytes) as usize;
            let chunk_start = index as u64 * self.chunk_bytes;
            let next_chunk = chunk_start + self.chunk_bytes;
            let Some(chunk) = self.chunks.get(index).and_then(|c| c.as_deref()) else {
                return;
            };
            let stop = next_chunk.min(self.end);
            let bytes = &chunk.bytes()[(pos - chunk_start) as usize..(stop - chunk_start) as usize];
            match record::decode_frame(bytes) {
                Ok((Frame::Entries(entries), used)) => {
                    for entry in entries.iter().flatten() {
                        f(&entry);
                    }
                    pos += used as u64;
                }
                Ok((Frame::Pad, _)) => pos = next_chunk,
                Err(_) => {
                    debug_assert!(false, "a frame below the end verifies");
                    return;
                }
            }
        }
    }

    /// Copies whole frames that hold an entry with a sequence number of at
    /// least `min_seq` into `out`, starting at position `from` (0, or a
    /// position this method returned), skipping whole chunks that hold only
    /// older entries, until `out` holds about `max_bytes` (at least one frame
    /// when any is left). Returns the position to continue from; it equals
    /// [`KeyLogSnapshot::end`] when the view is exhausted.
    pub fn read_frames(
        &self,
        from: u64,
        min_seq: u64,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<u64, BadPosition> {
        if !from.is_multiple_of(record::FRAME_ALIGN as u64) {
            return Err(BadPosition(from));
        }
        let mut pos = from;
        let start_len = out.len();
        while pos < self.end {
            let index = (pos / self.chunk_bytes) as usize;
            let chunk_start = index as u64 * self.chunk_bytes;
            let next_chunk = chunk_start + self.chunk_bytes;
            let old_only = self.chunk_max_seq.get(index).is_some_and(|&m| m < min_seq);
            if pos == chunk_start && old_only {
                pos = next_chunk;
                continue;
            }
            let chunk = self
                .chunks
                .get(index)
                .and_then(|c| c.as_deref())
                .ok_or(BadPosition(pos))?;
            let stop = next_chunk.min(self.end);
            let bytes = &chunk.bytes()[(pos - chunk_start) as usize..(stop - chunk_start) as usize];
            let (frame, used) = record::decode_frame(bytes).map_err(|_| BadPosition(pos))?;
            match frame {
                Frame::Pad => pos = next_chunk,
                Frame::Entries(entries) => {
                    let framed = bytes.get(..used).ok_or(BadPosition(pos))?;
                    if out.len() > start_len && out.len() - start_len + used > max_bytes {
                        return Ok(pos);
                    }
                    if entries.max_seq() >= min_seq {
                        out.extend_from_slice(framed);
                    }
                    pos += used as u64;
                }
            }
        }
        Ok(pos.min(self.end))
    }
}
