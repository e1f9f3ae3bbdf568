//! A partition's two read windows: the bytes and the placement policy
//! ([`policy`]). A read never waits for a window: one whose window is still
//! on its way reads its record on its own.

pub mod policy;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

pub use policy::{Decision, Fetch, WindowPolicy};

/// One window's bytes.
#[derive(Debug, Clone)]
struct Filled {
    start: u64,
    bytes: Bytes,
}

impl Filled {
    fn slice(&self, offset: u64, len: u64) -> Option<Bytes> {
        let at = offset.checked_sub(self.start)? as usize;
        let end = at.checked_add(len as usize)?;
        (end <= self.bytes.len()).then(|| self.bytes.slice(at..end))
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
pub enum Lookup {
    /// The record's bytes, from a ready window (a hit).
    Hit(Bytes),
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
    pub fn lookup(&self, offset: u64, len: u64) -> (Lookup, Option<Fetch>) {
        let mut st = self.windows.lock();
        st.policy
            .note_committed_end(self.committed_end.load(Ordering::Acquire));
        let (decision, fetch) = st.policy.on_read(offset, len);
        if let Some(fetch) = &fetch {
            st.filled[fetch.slot] = None;
        }
        let lookup = match decision {
            Decision::Hit { slot } => {
                match st.filled[slot].as_ref().and_then(|f| f.slice(offset, len)) {
                    Some(bytes) => Lookup::Hit(bytes),
                    None => Lookup::PointRead,
                }
            }
            Decision::Wait { .. } | Decision::PointRead => Lookup::PointRead,
        };
        (lookup, fetch)
    }

    /// Stores the bytes fetch `id` brought (the log from `range.start`).
    pub fn complete(&self, id: u64, range: Range<u64>, bytes: Bytes, committed_end: u64) {
        let mut st = self.windows.lock();
        if let Some(slot) = st.policy.fetched(id, range.clone(), committed_end) {
            st.filled[slot] = Some(Filled {
                start: range.start,
                bytes,
            });
        }
    }

    /// Records that fetch `id` failed: its window is emptied.
    pub fn fail(&self, id: u64) {
        self.windows.lock().policy.failed(id);
    }
}
