//! The value log of a partition: one address space of byte offsets that
//! only grow, stored as a sequence of fixed-size segment files.
//!
//! Segment `n` holds the offsets `[n * segment_bytes, (n + 1) *
//! segment_bytes)` in the file `value-{n:08}.seg`. Offsets are never reused,
//! so a location handed out once names the same bytes for as long as its
//! segment exists; a segment that garbage collection deleted answers
//! [`ValueLog::read_at`] with [`moved`]. A record never straddles two
//! segments: the write path starts the next segment when a record does not
//! fit in what is left of the current one, and the rest of the current one
//! reads as zeros (padding).
//!
//! A segment file is created at the first write into it and preallocated
//! [`PREALLOCATE_BYTES`] ahead of the writes, up to the segment's end.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::aligned::align_up;
use crate::disk::{Disk, DiskFile, FileKind};

/// A segment file is preallocated this far ahead of the writes into it (up
/// to its end), so that writes never extend the file (which would serialise
/// them in the file system) and a full disk shows up at an explicit
/// allocation.
pub(crate) const PREALLOCATE_BYTES: u64 = 32 << 20;

const SEGMENT_PREFIX: &str = "value-";
const SEGMENT_SUFFIX: &str = ".seg";

/// The error a read of a freed segment fails with: the record it looks for
/// has moved (garbage collection copied it to the head of the log).
pub(crate) fn moved(offset: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("value-log offset {offset} is in a segment that was freed"),
    )
}

/// Whether `e` is the error of [`moved`].
pub(crate) fn is_moved(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

/// The file name of segment `id`.
pub(crate) fn segment_file_name(id: u64) -> String {
    format!("{SEGMENT_PREFIX}{id:08}{SEGMENT_SUFFIX}")
}

/// The segment id a file name stands for, if it is a segment's.
fn parse_segment_name(name: &str) -> Option<u64> {
    name.strip_prefix(SEGMENT_PREFIX)?
        .strip_suffix(SEGMENT_SUFFIX)?
        .parse()
        .ok()
}

/// How a read reaches a segment's bytes.
#[derive(Clone, Copy)]
pub(crate) enum Via {
    /// O_DIRECT, from the device.
    Direct,
    /// Through the page cache, waiting for the device where needed.
    Cache,
    /// Through the page cache, never waiting for the device.
    CacheNoWait,
}

struct Segment {
    file: Arc<dyn DiskFile>,
    /// Bytes of the file allocated on disk.
    allocated_bytes: Mutex<u64>,
}

/// The segments of one partition's value log.
///
/// Thread-safe: reads, writes and syncs of different ranges run at once.
/// Writes into one segment are positional and never overlap (the write
/// path hands every range out once).
pub(crate) struct ValueLog {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    segment_bytes: u64,
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    /// Segments deleted by garbage collection: reads there answer `moved`.
    freed: RwLock<BTreeSet<u64>>,
    /// Segments written since their last sync.
    unsynced: Mutex<BTreeSet<u64>>,
}

impl ValueLog {
    /// Opens the segments found in `dir` (a partition directory).
    pub(crate) fn open(disk: Arc<dyn Disk>, dir: &Path, segment_bytes: u64) -> io::Result<Self> {
        assert!(
            segment_bytes > 0 && segment_bytes.is_multiple_of(crate::aligned::DIRECT_ALIGN as u64),
            "segment size is a positive multiple of the block size"
        );
        let mut segments = BTreeMap::new();
        for name in disk.list_dir(dir)? {
            let Some(id) = name.to_str().and_then(parse_segment_name) else {
                continue;
            };
            let file = disk.open(&dir.join(&name), FileKind::Direct, false)?;
            let allocated_bytes = Mutex::new(file.len_bytes()?);
            segments.insert(
                id,
                Arc::new(Segment {
                    file,
                    allocated_bytes,
                }),
            );
        }
        // Below the newest segment, an id without a file was freed (or
        // never written, in which case nothing points into it either).
        let newest = segments.keys().next_back().copied().unwrap_or(0);
        let freed = (0..newest)
            .filter(|id| !segments.contains_key(id))
            .collect();
        Ok(Self {
            disk,
            dir: dir.to_path_buf(),
            segment_bytes,
            segments: RwLock::new(segments),
            freed: RwLock::new(freed),
            unsynced: Mutex::new(BTreeSet::new()),
        })
    }

    /// Size of every segment in bytes.
    pub(crate) fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// The segment holding `offset`.
    pub(crate) fn segment_of(&self, offset: u64) -> u64 {
        offset / self.segment_bytes
    }

    /// The end of the segment holding `offset`: where the next one starts.
    pub(crate) fn segment_end(&self, offset: u64) -> u64 {
        (self.segment_of(offset) + 1) * self.segment_bytes
    }

    /// How many segments have a file.
    pub(crate) fn segment_count(&self) -> usize {
        self.segments.read().len()
    }

    /// The ids of the segments that have a file, oldest first.
    pub(crate) fn segment_ids(&self) -> Vec<u64> {
        self.segments.read().keys().copied().collect()
    }

    /// Disk bytes segment `id`'s file has allocated (0 without a file).
    pub(crate) fn file_bytes(&self, id: u64) -> u64 {
        self.segment(id)
            .map_or(0, |segment| *segment.allocated_bytes.lock())
    }

    /// Whether segment `id` was freed.
    pub(crate) fn is_freed(&self, id: u64) -> bool {
        self.freed.read().contains(&id)
    }

    /// Where the first freed segment after `offset` starts (`u64::MAX` if
    /// none is freed after it).
    pub(crate) fn freed_from(&self, offset: u64) -> u64 {
        let id = self.segment_of(offset);
        self.freed
            .read()
            .range(id..)
            .next()
            .map_or(u64::MAX, |&freed| freed * self.segment_bytes)
    }

    fn segment(&self, id: u64) -> Option<Arc<Segment>> {
        self.segments.read().get(&id).cloned()
    }

    fn newest_id(&self) -> Option<u64> {
        self.segments.read().keys().next_back().copied()
    }

    /// The segment `id`, created (and its directory entry synced) if it has
    /// no file yet.
    fn segment_for_write(&self, id: u64) -> io::Result<Arc<Segment>> {
        if let Some(segment) = self.segment(id) {
            return Ok(segment);
        }
        let mut segments = self.segments.write();
        if let Some(segment) = segments.get(&id) {
            return Ok(Arc::clone(segment));
        }
        if self.freed.read().contains(&id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("segment {id} was freed and is never written again"),
            ));
        }
        let path = self.dir.join(segment_file_name(id));
        let file = self.disk.open(&path, FileKind::Direct, true)?;
        self.disk.sync_dir(&self.dir)?;
        let segment = Arc::new(Segment {
            allocated_bytes: Mutex::new(file.len_bytes()?),
            file,
        });
        segments.insert(id, Arc::clone(&segment));
        Ok(segment)
    }

    /// Writes all of `data` (aligned, inside one segment) at `offset`,
    /// allocating ahead first. Returns once the write has completed; the
    /// bytes are durable after [`ValueLog::sync_data`].
    pub(crate) fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let id = self.segment_of(offset);
        let start = offset - id * self.segment_bytes;
        let end = start + data.len() as u64;
        if end > self.segment_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {}-byte write at value-log offset {offset} crosses the end of segment {id}",
                    data.len()
                ),
            ));
        }
        let segment = self.segment_for_write(id)?;
        {
            let mut allocated = segment.allocated_bytes.lock();
            if end > *allocated {
                let target = align_up(end + PREALLOCATE_BYTES).min(self.segment_bytes);
                segment.file.allocate(*allocated, target - *allocated)?;
                *allocated = target;
            }
        }
        segment.file.write_at(data, start)?;
        self.unsynced.lock().insert(id);
        Ok(())
    }

    /// Reads into `buf` from `offset` with O_DIRECT (aligned); see
    /// [`ValueLog::read_via`] for what it returns.
    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // Only a read that is not to wait comes back without a count.
        Ok(self.read_via(buf, offset, Via::Direct)?.unwrap_or_default())
    }

    /// Reads into `buf` from `offset` the way `via` says (through the page
    /// cache only for ranges whose writes have completed). Returns the bytes
    /// read: fewer than `buf.len()` only past the end of the newest segment
    /// or at a freed segment after the first byte; `None` only for
    /// [`Via::CacheNoWait`], when some byte is not in the page cache. The
    /// unwritten rest of an older segment reads as zeros. Fails with
    /// [`moved`] if `offset` is in a freed segment.
    pub(crate) fn read_via(
        &self,
        buf: &mut [u8],
        offset: u64,
        via: Via,
    ) -> io::Result<Option<usize>> {
        let newest = self.newest_id();
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let id = self.segment_of(at);
            let start = at - id * self.segment_bytes;
            let len = ((self.segment_bytes - start) as usize).min(buf.len() - done);
            let part = &mut buf[done..done + len];
            match self.segment(id) {
                Some(segment) => {
                    let got = match via {
                        Via::Direct => segment.file.read_at(part, start)?,
                        Via::Cache => segment.file.read_cached_at(part, start)?,
                        Via::CacheNoWait => {
                            match segment.file.read_cached_nowait_at(part, start)? {
                                Some(got) => got,
                                None => return Ok(None),
                            }
                        }
                    };
                    if got < len {
                        if Some(id) == newest {
                            return Ok(Some(done + got));
                        }
                        part[got..].fill(0);
                    }
                }
                None if self.is_freed(id) => {
                    if done == 0 {
                        return Err(moved(at));
                    }
                    return Ok(Some(done));
                }
                None if newest.is_some_and(|n| id < n) => part.fill(0),
                None => return Ok(Some(done)),
            }
            done += len;
        }
        Ok(Some(done))
    }

    /// Makes every completed write durable (fdatasync of each segment
    /// written since its last sync).
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        let ids = std::mem::take(&mut *self.unsynced.lock());
        for (n, &id) in ids.iter().enumerate() {
            let Some(segment) = self.segment(id) else {
                continue;
            };
            if let Err(e) = segment.file.sync_data() {
                self.unsynced.lock().extend(ids.iter().skip(n));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Deletes segment `id`: later reads there answer [`moved`]. Readers
    /// already reading it finish (they hold the open file, whose space the
    /// file system frees when the last of them lets go).
    pub(crate) fn free(&self, id: u64) -> io::Result<()> {
        self.freed.write().insert(id);
        let removed = self.segments.write().remove(&id);
        self.unsynced.lock().remove(&id);
        if removed.is_some() {
            self.disk
                .remove_file(&self.dir.join(segment_file_name(id)))?;
            self.disk.sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aligned::{AlignedBuf, DIRECT_ALIGN};
    use crate::disk::OsDisk;
    use crate::uring::IoEngineKind;

    const SEGMENT: u64 = 4 * DIRECT_ALIGN as u64;

    fn block(byte: u8) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(DIRECT_ALIGN);
        buf.fill(byte);
        buf
    }

    fn open(dir: &Path) -> ValueLog {
        let disk: Arc<dyn Disk> = Arc::new(OsDisk::new(IoEngineKind::Psync));
        ValueLog::open(disk, dir, SEGMENT).expect("open")
    }

    #[test]
    fn names_round_trip_and_other_files_are_not_segments() {
        assert_eq!(parse_segment_name(&segment_file_name(7)), Some(7));
        assert_eq!(parse_segment_name("key.log"), None);
        assert_eq!(parse_segment_name("value-x.seg"), None);
    }

    #[test]
    fn reads_cross_segments_and_read_skipped_tails_as_zeros() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = open(dir.path());
        log.write_at(&block(1), 0).expect("write segment 0");
        // Segment 0's last three blocks are skipped; segment 2 is never
        // written: both read as zeros below the newest segment.
        log.write_at(&block(3), 3 * SEGMENT)
            .expect("write segment 3");
        assert_eq!(log.segment_ids(), vec![0, 3]);

        let mut buf = AlignedBuf::zeroed(4 * SEGMENT as usize);
        buf.fill(0xEE);
        let got = log.read_at(&mut buf, 0).expect("read");
        // The newest segment is preallocated to its end: zeros past the
        // write, up to the file's end.
        assert_eq!(got, 4 * SEGMENT as usize, "stops at the newest file's end");
        assert!(buf[..DIRECT_ALIGN].iter().all(|&b| b == 1));
        assert!(
            buf[DIRECT_ALIGN..3 * SEGMENT as usize]
                .iter()
                .all(|&b| b == 0)
        );
        let third = 3 * SEGMENT as usize;
        assert!(buf[third..third + DIRECT_ALIGN].iter().all(|&b| b == 3));
        let mut past = AlignedBuf::zeroed(DIRECT_ALIGN);
        assert_eq!(log.read_at(&mut past, 4 * SEGMENT).expect("read past"), 0);

        let crossing = log.write_at(&AlignedBuf::zeroed(2 * DIRECT_ALIGN), SEGMENT - 4096);
        assert_eq!(
            crossing.expect_err("crosses").kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn a_freed_segment_answers_moved_and_stays_freed_after_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let log = open(dir.path());
            for id in 0..3 {
                log.write_at(&block(id as u8 + 1), id * SEGMENT)
                    .expect("write");
            }
            log.sync_data().expect("sync");
            log.free(1).expect("free");
            let mut buf = AlignedBuf::zeroed(DIRECT_ALIGN);
            let err = log.read_at(&mut buf, SEGMENT).expect_err("freed");
            assert!(is_moved(&err), "{err}");
            // A range from the segment before stops at the freed one.
            let mut buf = AlignedBuf::zeroed(2 * SEGMENT as usize);
            assert_eq!(log.read_at(&mut buf, 0).expect("read"), SEGMENT as usize);
            assert!(log.write_at(&block(9), SEGMENT).is_err(), "never rewritten");
        }
        let log = open(dir.path());
        assert_eq!(log.segment_ids(), vec![0, 2]);
        assert!(log.is_freed(1));
        let mut buf = AlignedBuf::zeroed(DIRECT_ALIGN);
        assert_eq!(
            log.read_at(&mut buf, 2 * SEGMENT).expect("read"),
            DIRECT_ALIGN
        );
        assert!(buf.iter().all(|&b| b == 3));
        assert!(!dir.path().join(segment_file_name(1)).exists());
    }
}
