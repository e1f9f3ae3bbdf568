//! Coalesced writes: the writes of the callers (RESP clients, engine
//! callers, the active expiry) that share a partition travel to the storage
//! node together, one `write_many` frame and one acknowledgement for the
//! lot, instead of a request and an answer each. (The record reads of a
//! connection share its lanes' policy the same way, one `GetMany` a batch:
//! the read route, `reads`.)
//!
//! Each partition's connection is a *lane*, and each client writes through
//! its own partition's lane. A lane with nothing in flight sends a run at
//! once (an idle node adds no latency); a lane with a batch in flight
//! collects the runs that arrive meanwhile and sends them, up to a bound of
//! bytes a batch (at most [`MAX_BATCH_BYTES`]), when the acknowledgement
//! comes back. Under
//! load, the runs of a lane's clients wait one round trip and share it.
//!
//! Order: a lane sends its runs in the order they joined, each batch after
//! the previous one's acknowledgement, and a client's writes all go through
//! its one partition, so they take effect, and reach readers following the
//! key logs, in its order. Runs of different clients have no order between
//! them, as concurrent commands of different Redis clients have none.
//!
//! Bound: a client waits for the answers to its runs before it sends more
//! commands, so a lane holds at most one turn's worth of runs (a pipeline
//! read in one turn, at most 256 KiB beyond one command) per client of its
//! partition.
//!
//! [`Lanes`] is the policy alone, free of I/O; the write and read routes
//! send the batches it hands out (`writes`, `reads`).

use std::collections::VecDeque;

use parking_lot::Mutex;

/// Most bytes of the runs of one batch, whatever the frame limit allows. A
/// run larger than a batch's bound goes in a batch of its own.
pub const MAX_BATCH_BYTES: usize = 256 << 10;

/// One lane's state: whether a batch is in flight, and the runs waiting for
/// the next one with their sizes in bytes.
#[derive(Debug)]
struct Lane<T> {
    in_flight: bool,
    waiting: VecDeque<(T, usize)>,
}

impl<T> Default for Lane<T> {
    fn default() -> Self {
        Self {
            in_flight: false,
            waiting: VecDeque::new(),
        }
    }
}

/// Where a run went.
#[derive(Debug, PartialEq, Eq)]
pub enum Joined<T> {
    /// The lane was idle and is now in flight: the caller sends `batch`
    /// (the run alone) on it, then asks [`Lanes::next_batch`] for what
    /// collected meanwhile, until it answers `None`.
    Lead {
        /// The batch to send.
        batch: Vec<T>,
    },
    /// The run waits for one of the lane's next batches; whoever sends that
    /// batch answers it.
    Queued,
}

/// The lanes of every partition (see the module documentation).
#[derive(Debug)]
pub struct Lanes<T> {
    lanes: Box<[Mutex<Lane<T>>]>,
    max_batch_bytes: usize,
}

impl<T> Lanes<T> {
    /// `count` idle lanes (at least one) whose batches carry at most
    /// `max_batch_bytes` of runs (and at most [`MAX_BATCH_BYTES`]) unless
    /// a single run is larger.
    pub fn new(count: usize, max_batch_bytes: usize) -> Self {
        Self {
            lanes: (0..count.max(1)).map(|_| Mutex::default()).collect(),
            max_batch_bytes: max_batch_bytes.min(MAX_BATCH_BYTES),
        }
    }

    /// The bound of a batch's bytes.
    pub fn max_batch_bytes(&self) -> usize {
        self.max_batch_bytes
    }

    /// Places a run of `run_bytes` bytes in `lane` (taken modulo the lane
    /// count).
    pub fn join(&self, lane: usize, run: T, run_bytes: usize) -> Joined<T> {
        let mut state = self.lanes[lane % self.lanes.len()].lock();
        if state.in_flight {
            state.waiting.push_back((run, run_bytes));
            Joined::Queued
        } else {
            state.in_flight = true;
            Joined::Lead { batch: vec![run] }
        }
    }

    /// Called by whoever sent `lane`'s batch once its acknowledgement came
    /// back: the runs that waited meanwhile, in the order they joined and
    /// up to the batch bound (one run at least), as the lane's next
    /// batch, which the caller sends; or `None`, and the lane is idle.
    pub fn next_batch(&self, lane: usize) -> Option<Vec<T>> {
        let mut state = self.lanes[lane % self.lanes.len()].lock();
        debug_assert!(state.in_flight, "next batch of an idle lane");
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        while let Some(&(_, run_bytes)) = state.waiting.front() {
            if !batch.is_empty() && batch_bytes + run_bytes > self.max_batch_bytes {
                break;
            }
            batch_bytes += run_bytes;
            if let Some((run, _)) = state.waiting.pop_front() {
                batch.push(run);
            }
        }
        if batch.is_empty() {
            state.in_flight = false;
            None
        } else {
            Some(batch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_lane_sends_a_run_at_once() {
        let lanes = Lanes::new(4, MAX_BATCH_BYTES);
        assert_eq!(lanes.join(1, 'a', 10), Joined::Lead { batch: vec!['a'] });
        assert_eq!(lanes.next_batch(1), None);
        // Idle again: the next run leads once more.
        assert_eq!(lanes.join(1, 'b', 10), Joined::Lead { batch: vec!['b'] });
    }

    #[test]
    fn runs_that_arrive_during_a_flight_share_the_next_batch_in_order() {
        let lanes = Lanes::new(4, MAX_BATCH_BYTES);
        assert!(matches!(lanes.join(0, 'a', 10), Joined::Lead { .. }));
        assert_eq!(lanes.join(0, 'b', 20), Joined::Queued);
        assert_eq!(lanes.join(0, 'c', 10), Joined::Queued);
        assert_eq!(lanes.next_batch(0), Some(vec!['b', 'c']));
        // The lane stays in flight with the batch just taken.
        assert_eq!(lanes.join(0, 'd', 10), Joined::Queued);
        assert_eq!(lanes.next_batch(0), Some(vec!['d']));
        assert_eq!(lanes.next_batch(0), None);
    }

    #[test]
    fn lanes_are_independent() {
        let lanes = Lanes::new(2, MAX_BATCH_BYTES);
        assert!(matches!(lanes.join(0, 'a', 1), Joined::Lead { .. }));
        assert!(matches!(lanes.join(1, 'b', 1), Joined::Lead { .. }));
        // Lane numbers wrap around the lane count.
        assert_eq!(lanes.join(2, 'c', 1), Joined::Queued);
        assert_eq!(lanes.next_batch(1), None);
        assert_eq!(lanes.next_batch(0), Some(vec!['c']));
    }

    #[test]
    fn a_batch_carries_at_most_max_batch_bytes_and_a_larger_run_goes_alone() {
        let lanes = Lanes::new(1, MAX_BATCH_BYTES);
        assert!(matches!(lanes.join(0, 'a', 1), Joined::Lead { .. }));
        assert_eq!(lanes.join(0, 'b', MAX_BATCH_BYTES / 2), Joined::Queued);
        assert_eq!(lanes.join(0, 'c', MAX_BATCH_BYTES / 2), Joined::Queued);
        assert_eq!(lanes.join(0, 'd', 1), Joined::Queued);
        assert_eq!(lanes.join(0, 'e', 2 * MAX_BATCH_BYTES), Joined::Queued);
        assert_eq!(lanes.join(0, 'f', 1), Joined::Queued);
        assert_eq!(lanes.next_batch(0), Some(vec!['b', 'c']));
        assert_eq!(lanes.next_batch(0), Some(vec!['d']));
        assert_eq!(lanes.next_batch(0), Some(vec!['e']));
        assert_eq!(lanes.next_batch(0), Some(vec!['f']));
        assert_eq!(lanes.next_batch(0), None);
    }

    #[test]
    fn a_smaller_bound_than_the_default_holds() {
        let lanes = Lanes::new(1, 100);
        assert_eq!(lanes.max_batch_bytes(), 100);
        assert!(matches!(lanes.join(0, 'a', 1), Joined::Lead { .. }));
        assert_eq!(lanes.join(0, 'b', 60), Joined::Queued);
        assert_eq!(lanes.join(0, 'c', 60), Joined::Queued);
        assert_eq!(lanes.next_batch(0), Some(vec!['b']));
        assert_eq!(lanes.next_batch(0), Some(vec!['c']));
        assert_eq!(
            Lanes::<char>::new(1, usize::MAX).max_batch_bytes(),
            MAX_BATCH_BYTES
        );
    }
}
