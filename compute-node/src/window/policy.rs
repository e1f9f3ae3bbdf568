//! Where a partition's two read windows go: a state machine fed with reads
//! and fetch completions, free of I/O so that access patterns can be
//! simulated in tests.
//!
//! Windows are `window_bytes` long, placed at any offset, never past the
//! committed end. They tile the log from wherever the first one was placed:
//!
//! * A read inside a ready window is a hit. The window most reads land in is
//!   the *current* one; when most recent reads move to the other window, the
//!   walk has moved, and the tile beyond it in the same direction is
//!   prefetched into the window left behind. A lone window whose reads
//!   climb (or descend) steadily gets its neighbour prefetched the same way.
//!   So a forward walk and a region that moves backward are served from
//!   windows, with the next one loading while the current one is read.
//! * A read inside a loading window is told which fetch will bring it; the
//!   engine reads such a record on its own rather than wait.
//! * A read no window covers loads a window only when the reads that missed
//!   lately are close together: the last [`LOCALITY_MISSES`] of them fit in
//!   one window's span (a walk, or a hot region). Random reads over a log
//!   larger than a window practically never do, so they are read one by one
//!   and never set off a window fetch.
//! * Then a read next to the windows loads the adjacent tile, and any other
//!   read a new tile around it (anchored at the committed end when it is
//!   near it), but only into an empty window or in place of one that has
//!   gone cold (served nothing lately) and is not the current one: otherwise
//!   the record is read on its own, so reads spread over more than two
//!   windows do not evict windows that are still in use.
//! * Unless recent windows did not pay for themselves (served less than a
//!   quarter of their bytes): then misses are read one by one, with a window
//!   tried again now and then (less and less often while it keeps failing),
//!   so scattered reads do not pull whole windows.

use std::ops::Range;

/// Misses that must fit in one window's span before a miss loads a
/// window. With reads spread uniformly over a log of `n` windows, eight in a
/// row fit in one span about once in `(n / 2)^7` misses.
pub const LOCALITY_MISSES: usize = 8;
/// Reads remembered to find the current window.
const RECENT_READS: usize = 64;
/// Of those, how many must be in the other window for the walk to move.
/// High enough that reads spread evenly over both windows (a region that
/// straddles them) practically never look like a move: with even odds,
/// 56 of 64 happens once in about 10^10 reads.
const MOVE_THRESHOLD: usize = 56;
/// Steadily climbing (or descending) reads that reveal a lone window's walk.
const TREND_READS: usize = 8;
/// A window that served less than this share of its bytes (as hits)
/// before it was replaced was not worth fetching.
const USEFUL_SHARE_DENOMINATOR: u64 = 4;
/// After this many useless windows in a row, misses are read one by one...
const USELESS_LIMIT: u32 = 2;
/// ...except that after this many misses one window is tried again; each
/// useless try doubles the wait, up to `MAX_PROBE_EVERY`.
const PROBE_EVERY: u32 = 64;
const MAX_PROBE_EVERY: u32 = 1 << 16;
/// A window that has served no read among the last this-many reads is cold:
/// only a cold window is replaced by a guess.
const COLD_READS: u64 = 64;

/// What to do for a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Serve it from window `slot`, which is ready.
    Hit {
        /// The window.
        slot: usize,
    },
    /// A window on its way will hold it: wait for fetch `id`.
    Wait {
        /// The fetch to wait for.
        id: u64,
    },
    /// Read the record on its own.
    PointRead,
}

/// A window fetch to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The window slot it fills.
    pub slot: usize,
    /// Identifies the fetch in [`WindowPolicy::fetched`].
    pub id: u64,
    /// The log range to read (the storage node may return less, never past
    /// its committed end).
    pub range: Range<u64>,
}

/// Where one window is placed, and how much use it has been.
#[derive(Debug, Clone)]
struct Placement {
    id: u64,
    range: Range<u64>,
    ready: bool,
    /// Bytes served from this window.
    hit_bytes: u64,
    /// The read count at its last hit (or when it was placed).
    last_hit: u64,
}

/// The placement state of one partition's two windows.
#[derive(Debug, Clone)]
pub struct WindowPolicy {
    window_bytes: u64,
    committed_end: u64,
    slots: [Option<Placement>; 2],
    current: Option<usize>,
    recent: [u8; RECENT_READS],
    recent_len: usize,
    recent_at: usize,
    trend: [u64; TREND_READS],
    trend_len: usize,
    trend_checked: bool,
    next_id: u64,
    useless: u32,
    probe_countdown: u32,
    probe_every: u32,
    /// Reads seen so far.
    reads: u64,
    /// The latest misses no window covered, as record ranges (a ring).
    misses: [(u64, u64); LOCALITY_MISSES],
    misses_len: usize,
    misses_at: usize,
}

impl WindowPolicy {
    /// A policy for windows of `window_bytes`, over a log whose committed end
    /// is believed to be `committed_end`.
    pub fn new(window_bytes: u64, committed_end: u64) -> Self {
        Self {
            window_bytes,
            committed_end,
            slots: [None, None],
            current: None,
            recent: [0; RECENT_READS],
            recent_len: 0,
            recent_at: 0,
            trend: [0; TREND_READS],
            trend_len: 0,
            trend_checked: false,
            next_id: 1,
            useless: 0,
            probe_countdown: 0,
            probe_every: PROBE_EVERY,
            reads: 0,
            misses: [(0, 0); LOCALITY_MISSES],
            misses_len: 0,
            misses_at: 0,
        }
    }

    /// Raises the known committed end (from an acknowledgement or a fetch).
    pub fn note_committed_end(&mut self, end: u64) {
        self.committed_end = self.committed_end.max(end);
    }

    /// The log range window `slot` holds or will hold.
    #[cfg(test)]
    fn slot_range(&self, slot: usize) -> Option<Range<u64>> {
        self.slots[slot].as_ref().map(|s| s.range.clone())
    }

    /// Decides how to serve a read of the record at `[offset, offset + len)`
    /// and which fetch, if any, to start.
    pub fn on_read(&mut self, offset: u64, len: u64) -> (Decision, Option<Fetch>) {
        self.reads += 1;
        let record = offset..offset + len;
        if len > self.window_bytes / 2 || record.end > self.committed_end {
            return (Decision::PointRead, None);
        }
        if let Some(slot) = self.covering(&record) {
            let s = self.slots[slot].as_ref().expect("covering slot exists");
            if !s.ready {
                return (Decision::Wait { id: s.id }, None);
            }
            let reads = self.reads;
            let s = self.slots[slot].as_mut().expect("covering slot exists");
            s.hit_bytes += len;
            s.last_hit = reads;
            let prefetch = self.track(slot, offset);
            return (Decision::Hit { slot }, prefetch);
        }
        match self.place_miss(&record) {
            Some(fetch) => (Decision::Wait { id: fetch.id }, Some(fetch)),
            None => (Decision::PointRead, None),
        }
    }

    /// Records that fetch `id` completed with the bytes of `range` (perhaps
    /// shorter than asked) and the committed end the storage node reported.
    /// Returns the slot it fills, or `None` if the fetch is no longer wanted
    /// (its slot was reused meanwhile).
    pub fn fetched(&mut self, id: u64, range: Range<u64>, committed_end: u64) -> Option<usize> {
        self.note_committed_end(committed_end);
        let index = (0..2).find(|&i| self.slots[i].as_ref().is_some_and(|s| s.id == id))?;
        let slot = self.slots[index].as_mut()?;
        slot.range = range;
        slot.ready = true;
        Some(index)
    }

    /// Records that fetch `id` failed: its slot is emptied.
    pub fn failed(&mut self, id: u64) {
        for index in 0..2 {
            if self.slots[index].as_ref().is_some_and(|s| s.id == id) {
                self.slots[index] = None;
                if self.current == Some(index) {
                    self.current = None;
                }
            }
        }
    }

    fn covering(&self, record: &Range<u64>) -> Option<usize> {
        (0..2).find(|&i| {
            self.slots[i]
                .as_ref()
                .is_some_and(|s| s.range.start <= record.start && record.end <= s.range.end)
        })
    }

    /// Notes a hit in `slot`; returns a prefetch when the walk moved.
    fn track(&mut self, slot: usize, offset: u64) -> Option<Fetch> {
        self.recent[self.recent_at] = slot as u8;
        self.recent_at = (self.recent_at + 1) % RECENT_READS;
        self.recent_len = (self.recent_len + 1).min(RECENT_READS);
        let Some(current) = self.current else {
            self.current = Some(slot);
            self.reset_trend();
            return None;
        };
        if slot != current {
            let in_slot = self.recent[..self.recent_len]
                .iter()
                .filter(|&&s| s as usize == slot)
                .count();
            if in_slot < MOVE_THRESHOLD {
                return None;
            }
            // The walk moved from `current` into `slot`: continue past it.
            let from = self.slots[current].as_ref().map(|s| s.range.start)?;
            let to = self.slots[slot].as_ref().map(|s| s.range.clone())?;
            self.current = Some(slot);
            self.reset_trend();
            let beyond = if to.start >= from {
                self.tile_above(&to)
            } else {
                self.tile_below(&to)
            };
            return beyond.map(|range| self.start_fetch(current, range));
        }
        if self.slots[1 - slot].is_some() || self.trend_checked {
            return None;
        }
        // A lone window: watch for a steady walk to prefetch its neighbour.
        self.trend[self.trend_len] = offset;
        self.trend_len += 1;
        if self.trend_len < TREND_READS {
            return None;
        }
        self.trend_checked = true;
        let window = self.slots[slot].as_ref()?.range.clone();
        let rising = self.trend.windows(2).all(|w| w[0] < w[1]);
        let falling = self.trend.windows(2).all(|w| w[0] > w[1]);
        let range = if rising {
            self.tile_above(&window)
        } else if falling {
            self.tile_below(&window)
        } else {
            None
        }?;
        Some(self.start_fetch(1 - slot, range))
    }

    /// True if window `slot` has served no read for a while (or is empty).
    fn is_cold(&self, slot: usize) -> bool {
        self.slots[slot]
            .as_ref()
            .is_none_or(|s| self.reads.saturating_sub(s.last_hit) > COLD_READS)
    }

    fn reset_trend(&mut self) {
        self.trend_len = 0;
        self.trend_checked = false;
    }

    /// The tile after `window`, if any committed bytes are there.
    fn tile_above(&self, window: &Range<u64>) -> Option<Range<u64>> {
        let start = window.end;
        (start < self.committed_end)
            .then(|| start..(start + self.window_bytes).min(self.committed_end))
    }

    /// The tile before `window`, if it is not at the start of the log.
    fn tile_below(&self, window: &Range<u64>) -> Option<Range<u64>> {
        let end = window.start;
        (end > 0).then(|| end.saturating_sub(self.window_bytes)..end)
    }

    fn start_fetch(&mut self, slot: usize, range: Range<u64>) -> Fetch {
        if let Some(old) = &self.slots[slot] {
            // Judge the window being replaced: one that served less than
            // its share of bytes (which includes one replaced before it
            // arrived, having served nothing) counts as useless.
            let size = old.range.end - old.range.start;
            if old.hit_bytes * USEFUL_SHARE_DENOMINATOR < size {
                self.useless += 1;
                if self.useless > USELESS_LIMIT {
                    self.probe_every = (self.probe_every * 2).min(MAX_PROBE_EVERY);
                }
            } else {
                self.useless = 0;
                self.probe_every = PROBE_EVERY;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.slots[slot] = Some(Placement {
            id,
            range: range.clone(),
            ready: false,
            hit_bytes: 0,
            last_hit: self.reads,
        });
        if self.current == Some(slot) {
            self.current = None;
        }
        Fetch { slot, id, range }
    }

    /// Remembers a miss; true if the latest misses fit in one window's
    /// span (then they are forgotten: the next window needs new evidence).
    fn misses_are_close(&mut self, record: &Range<u64>) -> bool {
        self.misses[self.misses_at] = (record.start, record.end);
        self.misses_at = (self.misses_at + 1) % LOCALITY_MISSES;
        self.misses_len = (self.misses_len + 1).min(LOCALITY_MISSES);
        if self.misses_len < LOCALITY_MISSES {
            return false;
        }
        let low = self.misses.iter().map(|m| m.0).min().unwrap_or(0);
        let high = self.misses.iter().map(|m| m.1).max().unwrap_or(0);
        let close = high - low <= self.window_bytes;
        if close {
            self.misses_len = 0;
        }
        close
    }

    /// Where to load a window for a read no window covers, if anywhere.
    fn place_miss(&mut self, record: &Range<u64>) -> Option<Fetch> {
        // Scattered misses: read on their own.
        if !self.misses_are_close(record) {
            return None;
        }
        // Windows have not been paying for themselves: read on its own,
        // trying a window again now and then.
        if self.useless >= USELESS_LIMIT {
            if self.probe_countdown > 0 {
                self.probe_countdown -= 1;
                return None;
            }
            self.probe_countdown = self.probe_every;
        }
        let present: Vec<Range<u64>> = self
            .slots
            .iter()
            .flatten()
            .map(|s| s.range.clone())
            .collect();
        let empty = (0..2).find(|&i| self.slots[i].is_none());
        let lowest = present.iter().map(|r| r.start).min();
        let highest = present.iter().map(|r| r.end).max();
        if let (Some(low), Some(high)) = (lowest, highest) {
            let below = record.start + self.window_bytes >= low && record.end <= low;
            let above = record.start >= high && record.end <= high + self.window_bytes;
            let tile = if below {
                self.tile_below(&(low..low))
            } else if above {
                self.tile_above(&(high..high))
            } else {
                None
            };
            if let Some(range) = tile.filter(|r| r.start <= record.start && record.end <= r.end) {
                // Load the neighbour, but never in place of the window the
                // walk is in.
                let slot = match empty {
                    Some(slot) => slot,
                    None => {
                        let far = (0..2).find(|&i| {
                            self.slots[i].as_ref().is_some_and(|s| {
                                if below {
                                    s.range.start != low
                                } else {
                                    s.range.end != high
                                }
                            })
                        })?;
                        if self.current == Some(far) || !self.is_cold(far) {
                            return None;
                        }
                        far
                    }
                };
                return Some(self.start_fetch(slot, range));
            }
        }
        // A read away from the windows: a new window, but only in place of
        // one that has gone cold (a window still in use is worth more than
        // a guess).
        let range = self.around(record);
        let slot = match empty {
            Some(slot) => slot,
            None => {
                let victim = match self.current {
                    Some(current) => 1 - current,
                    None => 0,
                };
                if !self.is_cold(victim) {
                    return None;
                }
                victim
            }
        };
        Some(self.start_fetch(slot, range))
    }

    /// A new tile holding `record`. Near the end of the log (within an
    /// eighth of a window more than a window, where the newest data is) it
    /// ends at the committed end, or starts at the record if that is a
    /// little lower; elsewhere it is centred on the record (and moved inside
    /// the log if it would stick out).
    fn around(&self, record: &Range<u64>) -> Range<u64> {
        let end_anchor = self.committed_end.saturating_sub(self.window_bytes);
        let near_end = record.start + self.window_bytes / 8 >= end_anchor;
        let start = if near_end {
            record.start.min(end_anchor)
        } else {
            record
                .start
                .saturating_sub(self.window_bytes / 2)
                .min(end_anchor)
        };
        start..(start + self.window_bytes).min(self.committed_end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = 10 << 20;
    const RECORD: u64 = 4124;

    /// Runs `reads` through a policy whose fetches complete at once (or
    /// after `latency` further reads), and returns (hits, misses, fetched
    /// bytes).
    fn simulate(reads: &[u64], committed_end: u64, latency: usize) -> (u64, u64, u64) {
        simulate_with(reads, committed_end, latency, true)
    }

    /// Like `simulate`; with `waits == false` a read of a loading window
    /// does not wait for it but reads its record alone (as the engine
    /// does), with `waits == true` it waits for the window.
    fn simulate_with(
        reads: &[u64],
        committed_end: u64,
        latency: usize,
        waits: bool,
    ) -> (u64, u64, u64) {
        let mut policy = WindowPolicy::new(W, committed_end);
        let mut pending: Vec<(usize, Fetch)> = Vec::new();
        let (mut hits, mut misses, mut fetched) = (0, 0, 0);
        for (i, &offset) in reads.iter().enumerate() {
            pending.retain(|(due, f)| {
                if *due <= i {
                    policy.fetched(f.id, f.range.clone(), committed_end);
                    false
                } else {
                    true
                }
            });
            let (decision, fetch) = policy.on_read(offset, RECORD);
            if let Some(f) = fetch {
                fetched += f.range.end - f.range.start;
                pending.push((i + latency, f));
            }
            match decision {
                Decision::Hit { slot } => {
                    let range = policy.slot_range(slot).expect("hit slot");
                    assert!(range.start <= offset && offset + RECORD <= range.end);
                    hits += 1;
                }
                Decision::Wait { id, .. } => {
                    // The reader waits: complete that fetch now.
                    misses += 1;
                    if !waits {
                        continue;
                    }
                    if let Some(pos) = pending.iter().position(|(_, f)| f.id == id) {
                        let (_, f) = pending.remove(pos);
                        policy.fetched(f.id, f.range.clone(), committed_end);
                    }
                }
                Decision::PointRead => misses += 1,
            }
        }
        (hits, misses, fetched)
    }

    /// Record offsets of `keys` consecutive 4124-byte records, with the
    /// storage node's padding at 1 MiB buffer boundaries.
    fn layout(keys: u64) -> Vec<u64> {
        let mut offsets = Vec::new();
        let mut at = 0u64;
        for _ in 0..keys {
            let buffer_end = (at / (1 << 20) + 1) * (1 << 20);
            if at + RECORD > buffer_end {
                at = buffer_end;
            }
            offsets.push(at);
            at += RECORD;
        }
        offsets
    }

    fn shuffle(values: &mut [u64], seed: u64) {
        let mut state = seed | 1;
        for i in (1..values.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            values.swap(i, (state % (i as u64 + 1)) as usize);
        }
    }

    #[test]
    fn a_forward_walk_is_served_from_windows_with_prefetch() {
        let offsets = layout(16384);
        let end = offsets.last().expect("records") + RECORD;
        let (hits, misses, fetched) = simulate(&offsets, end, 200);
        let ratio = hits as f64 / (hits + misses) as f64;
        assert!(ratio > 0.999, "hit ratio {ratio} ({misses} misses)");
        assert!(
            fetched < end + 2 * W,
            "each byte fetched about once: {fetched} of {end}"
        );
    }

    #[test]
    fn a_hot_region_moving_backward_is_served_from_windows() {
        let offsets = layout(16384);
        let end = offsets.last().expect("records") + RECORD;
        let per_region = (W / RECORD) as usize;
        let reads = hot_reads(&offsets, per_region, None);
        assert_hot_reads_served(&reads, end);
    }

    /// Asserts that `reads` of a log ending at `end` hit the windows more
    /// than 99 % of the time and fetch each byte about once, whatever the
    /// fetch latency.
    fn assert_hot_reads_served(reads: &[u64], end: u64) {
        for latency in [0, 50, 500] {
            let (hits, misses, fetched) = simulate(reads, end, latency);
            let ratio = hits as f64 / (hits + misses) as f64;
            assert!(
                ratio > 0.99,
                "latency {latency}: hit ratio {ratio} ({misses} misses)"
            );
            assert!(
                fetched < end + 3 * W,
                "latency {latency}: fetched {fetched} of {end}"
            );
        }
    }

    /// The hot read's order over `offsets`: regions of `per_region` records
    /// from the newest back, each shuffled, with `first` of the newest
    /// region moved to the front.
    fn hot_reads(offsets: &[u64], per_region: usize, first: Option<u64>) -> Vec<u64> {
        let mut reads = Vec::new();
        let mut top = offsets.len();
        let mut seed = 7;
        while top > 0 {
            let bottom = top.saturating_sub(per_region);
            let mut region: Vec<u64> = offsets[bottom..top].to_vec();
            shuffle(&mut region, seed);
            seed += 1;
            if top == offsets.len()
                && let Some(first) = first
                && let Some(pos) = region.iter().position(|&o| o == first)
            {
                region.swap(0, pos);
            }
            reads.extend(region);
            top = bottom;
        }
        reads
    }

    #[test]
    fn a_hot_read_starting_at_the_bottom_of_its_region_is_served() {
        let offsets = layout(16384);
        let end = offsets.last().expect("records") + RECORD;
        let per_region = (W / RECORD) as usize;
        // The newest region's lowest record lies just below the last
        // window's worth of the log.
        let lowest = offsets[offsets.len() - per_region];
        assert!(lowest < end - W);
        let reads = hot_reads(&offsets, per_region, Some(lowest));
        assert_hot_reads_served(&reads, end);
    }

    #[test]
    fn a_region_straddling_two_windows_does_not_thrash() {
        let offsets = layout(16384);
        let end = offsets.last().expect("records") + RECORD;
        let per_region = (W / RECORD) as usize;
        // Regions offset by half a window from any tiling.
        let shift = per_region / 2;
        let mut reads = hot_reads(&offsets[..offsets.len() - shift], per_region, None);
        reads.extend(hot_reads(&offsets[offsets.len() - shift..], shift, None));
        reads.rotate_right(shift);
        let (hits, misses, fetched) = simulate(&reads, end, 200);
        let ratio = hits as f64 / (hits + misses) as f64;
        assert!(fetched < 2 * end, "fetched {fetched} for a log of {end}");
        assert!(ratio > 0.98, "hit ratio {ratio} ({misses} misses)");
    }

    #[test]
    fn random_reads_over_more_than_two_windows_do_not_thrash() {
        // Uniform reads over 2.5 windows of records, each fetch arriving
        // only after 20 more reads: misses must not each pull a window.
        let offsets = layout((5 * W / 2) / RECORD);
        let end = offsets.last().expect("records") + RECORD;
        let mut reads: Vec<u64> = (0..50_000u64)
            .map(|i| offsets[(mix(i) % offsets.len() as u64) as usize])
            .collect();
        shuffle(&mut reads, 11);
        for waits in [true, false] {
            let (_, _, fetched) = simulate_with(&reads, end, 20, waits);
            assert!(
                fetched < 40 * W,
                "waits {waits}: fetched {} windows for 50000 reads of a 2.5-window log",
                fetched / W
            );
        }
    }

    fn mix(mut x: u64) -> u64 {
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    #[test]
    fn scattered_reads_stop_pulling_whole_windows() {
        let end = 1u64 << 34;
        let mut reads: Vec<u64> = (0..2000u64)
            .map(|i| (i * 7_919_993_003) % (end - RECORD))
            .collect();
        shuffle(&mut reads, 3);
        let (_, misses, fetched) = simulate(&reads, end, 0);
        assert_eq!(misses, 2000);
        assert!(
            fetched < 100 * W,
            "fetched {} windows for 2000 scattered reads",
            fetched / W
        );
    }

    /// Reads at `offset` until the misses are close enough to load a
    /// window; asserts that the earlier ones are read on their own.
    fn read_until_placed(policy: &mut WindowPolicy, offset: u64) -> (Decision, Option<Fetch>) {
        for _ in 1..LOCALITY_MISSES {
            assert_eq!(policy.on_read(offset, RECORD), (Decision::PointRead, None));
        }
        policy.on_read(offset, RECORD)
    }

    #[test]
    fn walks_are_served_when_loading_windows_are_not_waited_for() {
        // As the engine reads: a record of a loading window is read on its
        // own. With fetches that take 50 reads, only the first window's
        // loading costs misses; the later ones are prefetched in time.
        let offsets = layout(16384);
        let end = offsets.last().expect("records") + RECORD;
        let per_region = (W / RECORD) as usize;
        let walks = [
            ("forward", offsets.clone()),
            ("hot", hot_reads(&offsets, per_region, None)),
        ];
        for (name, reads) in walks {
            let (hits, misses, fetched) = simulate_with(&reads, end, 50, false);
            assert!(
                misses <= (LOCALITY_MISSES + 2 * 50 + 32) as u64,
                "{name}: {misses} misses of {} reads ({hits} hits)",
                reads.len()
            );
            assert!(fetched < end + 3 * W, "{name}: fetched {fetched} of {end}");
        }
    }

    #[test]
    fn random_reads_over_a_large_log_never_fetch_a_window() {
        let offsets = layout(64 * W / RECORD);
        let end = offsets.last().expect("records") + RECORD;
        let reads: Vec<u64> = (0..100_000u64)
            .map(|i| offsets[(mix(i) % offsets.len() as u64) as usize])
            .collect();
        let (hits, misses, fetched) = simulate(&reads, end, 20);
        assert_eq!((hits, misses, fetched), (0, 100_000, 0));
    }

    #[test]
    fn windows_never_pass_the_committed_end() {
        let mut policy = WindowPolicy::new(W, 3 * W / 2);
        let (decision, fetch) = read_until_placed(&mut policy, W);
        let fetch = fetch.expect("a first read loads a window");
        assert!(matches!(decision, Decision::Wait { .. }));
        assert!(fetch.range.end <= 3 * W / 2, "{:?}", fetch.range);
        assert_eq!(fetch.range.end - fetch.range.start, W);
        let (decision, fetch) = policy.on_read(3 * W / 2, RECORD);
        assert_eq!(decision, Decision::PointRead, "past the committed end");
        assert!(fetch.is_none());
    }

    #[test]
    fn a_lost_fetch_empties_its_window() {
        let mut policy = WindowPolicy::new(W, 10 * W);
        let (_, fetch) = read_until_placed(&mut policy, 0);
        let fetch = fetch.expect("fetch");
        policy.failed(fetch.id);
        let (decision, again) = read_until_placed(&mut policy, 0);
        assert!(matches!(decision, Decision::Wait { .. }));
        assert!(again.is_some(), "the window is fetched again");
    }
}
