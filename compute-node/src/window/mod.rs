//! A partition's two read windows: the bytes and the placement policy
//! ([`policy`]). A read never waits for a window: one whose window is still
//! on its way reads its record on its own.

pub mod policy;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

pub use policy::{Decision, Fetch, WindowPolicy};

/// Records at least this long have their checksum verified once per window
/// (two of them never start in the same granule of this size); shorter
/// ones, cheap to check, on every hit.
pub const VERIFIED_ONCE_BYTES: usize = 1024;

/// One window's bytes, and which of its records have been verified.
#[derive(Debug, Clone)]
struct Filled {
    start: u64,
    bytes: Bytes,
    /// Per [`VERIFIED_ONCE_BYTES`] granule of `bytes`: 0, or one past the
    /// offset (in `bytes`) of the record starting there whose checksum
    /// verified.
    verified: Arc<[AtomicU32]>,
}

impl Filled {
    fn new(start: u64, bytes: Bytes) -> Self {
        let granules = if u32::try_from(bytes.len()).is_ok() {
            bytes.len().div_ceil(VERIFIED_ONCE_BYTES)
        } else {
            0
        };
        Self {
            start,
            verified: (0..granules).map(|_| AtomicU32::new(0)).collect(),
            bytes,
        }
    }

    fn record(&self, offset: u64, len: u64) -> Option<WindowRecord> {
        let at = offset.checked_sub(self.start)? as usize;
        let end = at.checked_add(len as usize)?;
        if end > self.bytes.len() {
            return None;
        }
        let mark = (len as usize >= VERIFIED_ONCE_BYTES)
            .then_some(at / VERIFIED_ONCE_BYTES)
            .filter(|&granule| granule < self.verified.len())
            .map(|granule| RecordMark {
                marks: Arc::clone(&self.verified),
                granule,
                tag: at as u32 + 1,
            });
        Some(WindowRecord {
            bytes: self.bytes.slice(at..end),
            mark,
        })
    }
}

/// Where a window notes that one record's checksum verified.
#[derive(Debug)]
struct RecordMark {
    marks: Arc<[AtomicU32]>,
    granule: usize,
    tag: u32,
}

/// A record's bytes in a ready window.
#[derive(Debug)]
pub struct WindowRecord {
    /// The record's bytes (header, key and value).
    pub bytes: Bytes,
    mark: Option<RecordMark>,
}

impl WindowRecord {
    /// Whether these very bytes (this record, in this window) had their
    /// checksum verified by an earlier hit ([`WindowRecord::mark_verified`]).
    pub fn checksum_verified(&self) -> bool {
        self.mark
            .as_ref()
            .is_some_and(|m| m.marks[m.granule].load(Ordering::Acquire) == m.tag)
    }

    /// Notes that the record's checksum verified, so that later hits on it
    /// in this window skip the check (records shorter than
    /// [`VERIFIED_ONCE_BYTES`] are checked on every hit).
    pub fn mark_verified(&self) {
        if let Some(m) = &self.mark {
            m.marks[m.granule].store(m.tag, Ordering::Release);
        }
    }
}

/// The placement policy and the bytes of the windows it placed.
#[derive(Debug)]
struct Windows {
    policy: WindowPolicy,
    filled: [Option<Filled>; 2],
}

/// What a lookup found.
#[derive(Debug)]
pub enum WindowLookup {
    /// The record, from a ready window (a hit).
    Hit(WindowRecord),
    /// Read the record on its own (no ready window holds it).
    PointRead,
}

/// The windows of one partition.
#[derive(Debug)]
pub struct PartitionWindows {
    windows: Mutex<Windows>,
    /// The highest committed end known: raised by every acknowledged write
    /// without taking `windows`' lock, and handed to the policy on each
    /// read.
    committed_end: AtomicU64,
}

impl PartitionWindows {
    /// Windows of `window_bytes` over a log whose committed end is not yet
    /// known (it is learnt from acknowledgements and fetches).
    pub fn new(window_bytes: u64) -> Self {
        Self {
            windows: Mutex::new(Windows {
                policy: WindowPolicy::new(window_bytes, 0),
                filled: [None, None],
            }),
            committed_end: AtomicU64::new(0),
        }
    }

    /// Raises the known committed end (no lock: a put calls it for every
    /// acknowledgement).
    pub fn note_committed_end(&self, end: u64) {
        self.committed_end.fetch_max(end, Ordering::AcqRel);
    }

    /// Looks up the record at `[offset, offset + len)` and returns what to do,
    /// with the fetch to start (if any).
    pub fn lookup(&self, offset: u64, len: u64) -> (WindowLookup, Option<Fetch>) {
        let mut st = self.windows.lock();
        st.policy
            .note_committed_end(self.committed_end.load(Ordering::Acquire));
        let (decision, fetch) = st.policy.on_read(offset, len);
        if let Some(fetch) = &fetch {
            st.filled[fetch.slot] = None;
        }
        let lookup = match decision {
            Decision::Hit { slot } => {
                match st.filled[slot].as_ref().and_then(|f| f.record(offset, len)) {
                    Some(record) => WindowLookup::Hit(record),
                    None => WindowLookup::PointRead,
                }
            }
            Decision::Wait { .. } | Decision::PointRead => WindowLookup::PointRead,
        };
        (lookup, fetch)
    }

    /// Stores the bytes fetch `id` brought (the log from `range.start`).
    pub fn complete(&self, id: u64, range: Range<u64>, bytes: Bytes, committed_end: u64) {
        let mut st = self.windows.lock();
        if let Some(slot) = st.policy.fetched(id, range.clone(), committed_end) {
            st.filled[slot] = Some(Filled::new(range.start, bytes));
        }
    }

    /// Records that fetch `id` failed: its window is emptied.
    pub fn fail(&self, id: u64) {
        self.windows.lock().policy.failed(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_checksum_counts_as_verified_only_for_that_record_in_that_window() {
        let bytes = Bytes::from(vec![7u8; 8 * VERIFIED_ONCE_BYTES]);
        let filled = Filled::new(1000, bytes.clone());
        let large = VERIFIED_ONCE_BYTES as u64 * 2;
        let first = filled.record(1000, large).expect("inside the window");
        assert_eq!(first.bytes.len() as u64, large);
        assert!(!first.checksum_verified(), "not before a hit verified it");
        first.mark_verified();
        assert!(
            filled
                .record(1000, large)
                .expect("again")
                .checksum_verified()
        );
        // Another offset in the same granule, and another granule: not it.
        assert!(
            !filled
                .record(1100, large)
                .expect("inside")
                .checksum_verified()
        );
        assert!(
            !filled
                .record(1000 + 4096, large)
                .expect("inside")
                .checksum_verified()
        );
        // A short record is checked on every hit.
        let short = filled.record(1000 + 6000, 100).expect("inside");
        short.mark_verified();
        assert!(
            !filled
                .record(1000 + 6000, 100)
                .expect("again")
                .checksum_verified()
        );
        // The same bytes fetched into a window again start unverified.
        assert!(
            !Filled::new(1000, bytes)
                .record(1000, large)
                .expect("inside")
                .checksum_verified()
        );
        assert!(filled.record(999, 10).is_none());
        assert!(filled.record(1000 + 8 * 1024 - 10, 11).is_none());
    }
}
