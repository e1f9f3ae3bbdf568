//! A write buffer: a file of its own, mapped `MAP_SHARED`, made of a 4 KiB
//! header page and a data area that is later written to the value log at
//! the offset the header names.
//!
//! Header (little endian): `magic u64 | state u32 | reserved u32 | base u64 |
//! fill u64`. `base` is the value-log offset of the first data byte, `fill`
//! the bytes of complete records in the data area. Records are copied in
//! before `fill` grows past them, so `fill` never covers a torn record.
//!
//! The buffer itself knows nothing of locking: the partition decides who may
//! touch which bytes (see the safety notes on the accessors).

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::aligned::align_up;
use crate::disk::{Disk, DiskFile, FileKind, Mapping};

/// Size of the header page in front of the data area.
pub const HEADER_BYTES: usize = 4096;
const MAGIC: u64 = u64::from_le_bytes(*b"SKVBUF01");

/// Lifecycle of a buffer, as stored in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferState {
    /// Empty or already written to the value log: recovery ignores it.
    Free,
    /// Receiving records; not yet written to the value log.
    Filling,
    /// Full (or closed early); its write to the value log is queued or under
    /// way.
    Sealed,
}

impl BufferState {
    fn code(self) -> u32 {
        match self {
            BufferState::Free => 0,
            BufferState::Filling => 1,
            BufferState::Sealed => 2,
        }
    }

    fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(BufferState::Free),
            1 => Some(BufferState::Filling),
            2 => Some(BufferState::Sealed),
            _ => None,
        }
    }

    /// True if the buffer holds records that the value log does not have yet.
    pub fn is_unflushed(self) -> bool {
        self != BufferState::Free
    }
}

/// The header as read from the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferHeader {
    /// Lifecycle state.
    pub state: BufferState,
    /// Value-log offset of the first data byte.
    pub base: u64,
    /// Bytes of complete records.
    pub fill: u64,
}

/// One mapped write buffer.
pub struct WriteBuffer {
    _file: Arc<dyn DiskFile>,
    map: Box<dyn Mapping>,
    capacity: usize,
}

impl WriteBuffer {
    /// Opens (or creates, preallocated) the buffer file at `path` with a data
    /// area of `capacity` bytes. A new or unrecognised header is
    /// initialised as free.
    pub fn open(disk: &dyn Disk, path: &Path, capacity: usize) -> io::Result<Self> {
        let file = disk.open(path, FileKind::Mapped, true)?;
        let total = HEADER_BYTES + capacity;
        file.allocate(0, total as u64)?;
        let map = file.map(0, total)?;
        let buffer = Self {
            _file: file,
            map,
            capacity,
        };
        if buffer.read_u64(0) != MAGIC {
            buffer.write_header(BufferHeader {
                state: BufferState::Free,
                base: 0,
                fill: 0,
            });
            buffer.write_u64(0, MAGIC);
        }
        Ok(buffer)
    }

    /// Capacity of the data area in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Reads the header. An unknown state code reads as `Sealed`, so that
    /// recovery errs on the side of writing the data out.
    pub fn header(&self) -> BufferHeader {
        BufferHeader {
            state: BufferState::from_code(self.read_u64(8) as u32).unwrap_or(BufferState::Sealed),
            base: self.read_u64(16),
            fill: self.read_u64(24),
        }
    }

    /// Writes a whole header. `fill` and `base` are stored before `state`,
    /// so a crash in between never pairs a live state with stale fields.
    pub fn write_header(&self, header: BufferHeader) {
        self.write_u64(24, header.fill);
        self.write_u64(16, header.base);
        self.write_u64(8, u64::from(header.state.code()));
    }

    /// Stores a new state only.
    pub fn set_state(&self, state: BufferState) {
        self.write_u64(8, u64::from(state.code()));
    }

    /// Stores a new fill only (after the records below it are complete).
    pub fn set_fill(&self, fill: u64) {
        self.write_u64(24, fill);
    }

    /// The data bytes `[offset, offset + len)` for writing.
    ///
    /// # Safety
    /// No other reference to these bytes may exist while the returned slice
    /// lives, and no one else may access them concurrently.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn data_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.capacity, "buffer write out of bounds");
        // SAFETY: in bounds of the mapping; exclusivity is the caller's
        // contract.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(HEADER_BYTES + offset), len) }
    }

    /// The data bytes `[offset, offset + len)` for reading.
    ///
    /// # Safety
    /// No one may write these bytes while the returned slice lives.
    pub unsafe fn data(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.capacity, "buffer read out of bounds");
        // SAFETY: in bounds of the mapping; immutability is the caller's
        // contract.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(HEADER_BYTES + offset), len) }
    }

    /// The records below `fill` padded with zeros to the next 4 KiB
    /// boundary, as the value log receives them: zeroes the data bytes
    /// `[fill, align_up(fill))` (a reused buffer holds stale bytes there)
    /// and returns `[0, align_up(fill))`. Sealing, the flusher and recovery
    /// all write a buffer out through this, so stale bytes never reach the
    /// value log below the committed end.
    ///
    /// # Safety
    /// No one else may access the padding bytes concurrently, and no one may
    /// write the bytes below `fill` while the returned slice lives.
    pub unsafe fn padded_records(&self, fill: u64) -> &[u8] {
        let fill = (fill as usize).min(self.capacity);
        let padded = (align_up(fill as u64) as usize).min(self.capacity);
        // SAFETY: the padding is the caller's alone (the contract above).
        unsafe { self.data_mut(fill, padded - fill) }.fill(0);
        // SAFETY: no one writes below `fill` (the contract above), and the
        // padding was written just above, through a reference now gone.
        unsafe { self.data(0, padded) }
    }

    /// Makes the header page durable (msync).
    pub fn sync_header(&self) -> io::Result<()> {
        self.map.flush(0, HEADER_BYTES)
    }

    /// Makes data bytes `[offset, offset + len)` and the header durable.
    pub fn sync_data(&self, offset: usize, len: usize) -> io::Result<()> {
        if len > 0 {
            self.map.flush(HEADER_BYTES + offset, len)?;
        }
        self.sync_header()
    }

    fn read_u64(&self, at: usize) -> u64 {
        debug_assert!(at + 8 <= HEADER_BYTES && at.is_multiple_of(8));
        // SAFETY: header fields are 8-byte aligned inside the mapping; a
        // volatile read keeps the compiler from caching a value another
        // thread of this process may have stored under the partition lock.
        unsafe { std::ptr::read_volatile(self.map.as_ptr().add(at).cast::<u64>()) }.to_le()
    }

    fn write_u64(&self, at: usize, value: u64) {
        debug_assert!(at + 8 <= HEADER_BYTES && at.is_multiple_of(8));
        // SAFETY: as in read_u64; an aligned 8-byte store is never torn by
        // the death of the process.
        unsafe { std::ptr::write_volatile(self.map.as_ptr().add(at).cast::<u64>(), value.to_le()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::OsDisk;
    use crate::uring::IoEngineKind;

    #[test]
    fn padded_records_zero_the_stale_tail_of_the_last_block() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = OsDisk::new(IoEngineKind::Psync);
        let buffer = WriteBuffer::open(&disk, &dir.path().join("buffer"), 16 << 10).expect("open");
        // An earlier cycle of the buffer left bytes everywhere.
        // SAFETY: the test is the buffer's only user.
        unsafe { buffer.data_mut(0, 16 << 10) }.fill(0xAA);

        // SAFETY: as above.
        let padded = unsafe { buffer.padded_records(100) };
        assert_eq!(padded.len(), 4096);
        assert!(padded[..100].iter().all(|&b| b == 0xAA), "records kept");
        assert!(padded[100..].iter().all(|&b| b == 0), "padding zeroed");
        // SAFETY: as above.
        let after = unsafe { buffer.data(4096, 4096) };
        assert!(after.iter().all(|&b| b == 0xAA), "nothing past the block");

        // SAFETY: as above.
        assert_eq!(unsafe { buffer.padded_records(8192) }.len(), 8192);
        // SAFETY: as above.
        assert!(unsafe { buffer.padded_records(0) }.is_empty());
    }
}
