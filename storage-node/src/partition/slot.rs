//! The cycle of one write-buffer slot, as an explicit state machine:
//!
//! ```text
//! Flushed ──open──▶ Filling ──seal──▶ Sealed ──start_flush──▶ Flushing ──finish_flush──▶ Flushed
//!                      │                 ▲                        │
//!                      └─seal (empty)─▶ Flushed    abort_flush ───┘
//! ```
//!
//! Each transition is a method that panics when called from any other
//! state: a slot out of step with its buffer would serve or overwrite the
//! wrong bytes, so it is never let through. The slot only records where the
//! buffer is in its cycle; the partition keeps the buffer's header in step.

use std::ops::Range;

/// Where one write buffer is in its cycle, as the partition tracks it.
///
/// `base` is the value-log offset of the buffer's first byte, `fill` the
/// bytes of complete records in it, `synced` how much of `fill` has been
/// msynced (sync durability).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufferSlot {
    /// Holds nothing the value log lacks (empty, or written out): free to
    /// be filled again.
    Flushed,
    /// The active buffer: receiving records.
    Filling { base: u64, fill: u64, synced: u64 },
    /// Full (or closed early) and queued for the flusher.
    Sealed { base: u64, fill: u64, synced: u64 },
    /// Being written to the value log by the flusher.
    Flushing { base: u64, fill: u64, synced: u64 },
}

/// What sealing a slot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sealing {
    /// The buffer held records covering `[base, base + fill)`: it is now
    /// `Sealed`, waiting for the flusher.
    Sealed { base: u64, fill: u64 },
    /// The buffer held nothing: it is `Flushed` again, and `base` is free
    /// for the next buffer.
    Empty { base: u64 },
}

impl BufferSlot {
    /// A buffer that recovery found unflushed and could not write out: it
    /// waits for the flusher with all of its `fill` on disk already.
    pub(crate) fn recovered_unflushed(base: u64, fill: u64) -> Self {
        BufferSlot::Sealed {
            base,
            fill,
            synced: fill,
        }
    }

    /// The value-log range of complete records this buffer holds and the
    /// value log may not have yet.
    pub(crate) fn unflushed(&self) -> Option<Range<u64>> {
        match *self {
            BufferSlot::Flushed => None,
            BufferSlot::Filling { base, fill, .. }
            | BufferSlot::Sealed { base, fill, .. }
            | BufferSlot::Flushing { base, fill, .. } => Some(base..base + fill),
        }
    }

    /// True for the active buffer.
    pub(crate) fn is_filling(&self) -> bool {
        matches!(self, BufferSlot::Filling { .. })
    }

    /// True if the buffer may be opened for filling.
    pub(crate) fn is_flushed(&self) -> bool {
        matches!(self, BufferSlot::Flushed)
    }

    /// True while the buffer waits for, or is under, its write to the value
    /// log.
    pub(crate) fn awaits_flush(&self) -> bool {
        matches!(
            self,
            BufferSlot::Sealed { .. } | BufferSlot::Flushing { .. }
        )
    }

    /// The fill of the active buffer, if this is it.
    pub(crate) fn filling_end(&self) -> Option<u64> {
        match *self {
            BufferSlot::Filling { base, fill, .. } => Some(base + fill),
            _ => None,
        }
    }

    /// `Flushed → Filling`: the buffer starts receiving records at value-log
    /// offset `base`.
    pub(crate) fn open(&mut self, base: u64) {
        match *self {
            BufferSlot::Flushed => {
                *self = BufferSlot::Filling {
                    base,
                    fill: 0,
                    synced: 0,
                }
            }
            other => illegal("open", other),
        }
    }

    /// `Filling`: `len` more bytes of complete records. Returns the new
    /// fill.
    pub(crate) fn append(&mut self, len: u64) -> u64 {
        match self {
            BufferSlot::Filling { fill, .. } => {
                *fill += len;
                *fill
            }
            other => illegal("append", *other),
        }
    }

    /// `Filling → Sealed`, or `Filling → Flushed` for a buffer that received
    /// nothing.
    pub(crate) fn seal(&mut self) -> Sealing {
        match *self {
            BufferSlot::Filling { base, fill: 0, .. } => {
                *self = BufferSlot::Flushed;
                Sealing::Empty { base }
            }
            BufferSlot::Filling { base, fill, synced } => {
                *self = BufferSlot::Sealed { base, fill, synced };
                Sealing::Sealed { base, fill }
            }
            other => illegal("seal", other),
        }
    }

    /// `Sealed → Flushing`: the flusher takes the buffer. Returns its
    /// `(base, fill)`.
    pub(crate) fn start_flush(&mut self) -> (u64, u64) {
        match *self {
            BufferSlot::Sealed { base, fill, synced } => {
                *self = BufferSlot::Flushing { base, fill, synced };
                (base, fill)
            }
            other => illegal("start_flush", other),
        }
    }

    /// `Flushing → Flushed`: the buffer's records are in the value log.
    pub(crate) fn finish_flush(&mut self) {
        match *self {
            BufferSlot::Flushing { .. } => *self = BufferSlot::Flushed,
            other => illegal("finish_flush", other),
        }
    }

    /// `Flushing → Sealed`: the write to the value log failed; the records
    /// stay in the buffer (served from it, replayed by recovery).
    pub(crate) fn abort_flush(&mut self) {
        match *self {
            BufferSlot::Flushing { base, fill, synced } => {
                *self = BufferSlot::Sealed { base, fill, synced }
            }
            other => illegal("abort_flush", other),
        }
    }

    /// Marks every complete record of an unflushed buffer as synced and
    /// returns the byte range `[synced, fill)` of the buffer that was not
    /// (`None` for a flushed buffer, whose records are in the value log).
    pub(crate) fn take_unsynced(&mut self) -> Option<Range<u64>> {
        match self {
            BufferSlot::Flushed => None,
            BufferSlot::Filling { fill, synced, .. }
            | BufferSlot::Sealed { fill, synced, .. }
            | BufferSlot::Flushing { fill, synced, .. } => {
                let unsynced = *synced..*fill;
                *synced = *fill;
                Some(unsynced)
            }
        }
    }
}

fn illegal(transition: &str, from: BufferSlot) -> ! {
    panic!("write-buffer slot: illegal transition {transition} from {from:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_goes_round_its_cycle() {
        let mut slot = BufferSlot::Flushed;
        assert!(slot.is_flushed() && slot.unflushed().is_none());
        slot.open(8192);
        assert_eq!(slot.filling_end(), Some(8192));
        assert_eq!(slot.append(100), 100);
        assert_eq!(slot.append(50), 150);
        assert_eq!(slot.unflushed(), Some(8192..8342));
        assert_eq!(
            slot.seal(),
            Sealing::Sealed {
                base: 8192,
                fill: 150
            }
        );
        assert!(slot.awaits_flush() && !slot.is_filling());
        assert_eq!(slot.start_flush(), (8192, 150));
        assert!(slot.awaits_flush());
        assert_eq!(slot.unflushed(), Some(8192..8342), "served until flushed");
        slot.finish_flush();
        assert_eq!(slot, BufferSlot::Flushed);
        slot.open(12288);
        assert_eq!(slot.filling_end(), Some(12288));
    }

    #[test]
    fn an_empty_buffer_seals_back_to_flushed() {
        let mut slot = BufferSlot::Flushed;
        slot.open(4096);
        assert_eq!(slot.seal(), Sealing::Empty { base: 4096 });
        assert_eq!(slot, BufferSlot::Flushed);
    }

    #[test]
    fn a_failed_flush_leaves_the_buffer_sealed() {
        let mut slot = BufferSlot::recovered_unflushed(0, 10);
        slot.start_flush();
        slot.abort_flush();
        assert_eq!(slot, BufferSlot::recovered_unflushed(0, 10));
    }

    #[test]
    fn unsynced_bytes_are_handed_out_once() {
        let mut slot = BufferSlot::Flushed;
        assert_eq!(slot.take_unsynced(), None);
        slot.open(0);
        slot.append(40);
        assert_eq!(slot.take_unsynced(), Some(0..40));
        slot.append(10);
        assert_eq!(slot.take_unsynced(), Some(40..50));
        slot.seal();
        assert_eq!(slot.take_unsynced(), Some(50..50));
    }

    #[test]
    #[should_panic(expected = "illegal transition open from Filling")]
    fn opening_a_filling_buffer_panics() {
        let mut slot = BufferSlot::Flushed;
        slot.open(0);
        slot.open(4096);
    }

    #[test]
    #[should_panic(expected = "illegal transition append from Sealed")]
    fn appending_to_a_sealed_buffer_panics() {
        let mut slot = BufferSlot::recovered_unflushed(0, 10);
        slot.append(1);
    }

    #[test]
    #[should_panic(expected = "illegal transition start_flush from Filling")]
    fn flushing_an_unsealed_buffer_panics() {
        let mut slot = BufferSlot::Flushed;
        slot.open(0);
        slot.start_flush();
    }

    #[test]
    #[should_panic(expected = "illegal transition finish_flush from Sealed")]
    fn finishing_a_flush_that_never_started_panics() {
        let mut slot = BufferSlot::recovered_unflushed(0, 10);
        slot.finish_flush();
    }

    #[test]
    #[should_panic(expected = "illegal transition seal from Flushed")]
    fn sealing_a_flushed_buffer_panics() {
        BufferSlot::Flushed.seal();
    }
}
