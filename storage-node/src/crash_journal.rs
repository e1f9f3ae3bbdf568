//! The bookkeeping of a `kill -9` crash test, shared by every test that
//! kills a writer (or the store under it) and then checks what survived.
//!
//! Writers run *batches*: one put or delete, or several operations on
//! distinct keys written as one unit. Before a batch starts, its writer
//! records it as *begun*; once the store acknowledged it, as
//! *acknowledged*. A writer in another process reports both as lines on
//! its stdout ([`Event::line`]) and the test reads them back
//! ([`Event::parse`], [`SharedJournal::read_events`]); writers in the test's
//! own process record into the [`SharedJournal`] directly. Either way the
//! test ends up with a [`Journal`]: the latest acknowledged operation of
//! every key, and the batches begun and not acknowledged when the kill
//! landed.
//!
//! After the kill the test reads every key back and [`Journal::verify`]
//! classifies it:
//!
//! * *verified*: it reads as its latest acknowledged operation left it, or
//!   as the one batch under way on it at the kill left it (an operation
//!   that was not acknowledged may or may not have happened);
//! * *lost*: an acknowledged put is missing;
//! * *resurrected*: an acknowledged delete came back;
//! * *wrong*: anything else (another value, a read that failed).
//!
//! A batch under way at the kill must be all or nothing: either every one
//! of its keys reads as the batch wrote it, or none does (a key whose old
//! and new state look the same counts for both). A batch with keys of each
//! kind is *torn*. An acknowledged batch is wholly there, since each of its
//! keys is checked against it. A round passes ([`Outcome::passed`]) when at
//! least one batch was acknowledged and nothing was lost, wrong, resurrected
//! or torn; it broke no rule ([`Outcome::broke_no_rule`]) when nothing was
//! lost, wrong, resurrected or torn, acknowledged or not.
//!
//! The writers' keys, the batches they run ([`BatchSource`]) and the values
//! of their puts ([`value_of`]) are deterministic, so the reader needs
//! nothing but the journal to know what each key should hold.

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// One operation of a batch on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Puts the value [`value_of`]`(key, version, len)`.
    Put {
        /// Unique among the writes to the key.
        version: u64,
        /// Length of the value in bytes.
        len: usize,
    },
    /// Deletes the key.
    Delete,
}

impl Op {
    /// The value the key holds after this operation (`None` after a
    /// delete).
    pub fn value(self, key: &str) -> Option<Vec<u8>> {
        match self {
            Op::Put { version, len } => Some(value_of(key, version, len)),
            Op::Delete => None,
        }
    }

    fn render(self) -> String {
        match self {
            Op::Put { version, len } => format!("put:{version}:{len}"),
            Op::Delete => "del".into(),
        }
    }

    fn parse(text: &str) -> Option<Op> {
        if text == "del" {
            return Some(Op::Delete);
        }
        let (version, len) = text.strip_prefix("put:")?.split_once(':')?;
        Some(Op::Put {
            version: version.parse().ok()?,
            len: len.parse().ok()?,
        })
    }
}

/// The value of `len` bytes that version `version` of `key` puts: the same
/// for the same arguments, different (but for chance) for another key or
/// version of the same length.
pub fn value_of(key: &str, version: u64, len: usize) -> Vec<u8> {
    let mut state = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut value = Vec::with_capacity(len);
    while value.len() < len {
        let word = splitmix(&mut state).to_le_bytes();
        let take = (len - value.len()).min(word.len());
        value.extend_from_slice(&word[..take]);
    }
    value
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The keys of a test: writer `w` works on `keys_per_writer` keys of its
/// own, so no two writers ever race on a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpace {
    /// Number of writers.
    pub writers: usize,
    /// Keys of each writer.
    pub keys_per_writer: u64,
}

impl KeySpace {
    /// The name of key `index` of writer `writer` (no spaces, no `=`).
    pub fn key(writer: usize, index: u64) -> String {
        format!("w{writer}-k{index:04}")
    }

    /// Every key of every writer.
    pub fn keys(self) -> impl Iterator<Item = String> {
        (0..self.writers)
            .flat_map(move |w| (0..self.keys_per_writer).map(move |k| KeySpace::key(w, k)))
    }
}

/// A batch's identity: its writer and its place in the writer's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchId {
    /// The writer that runs it.
    pub writer: usize,
    /// Counts the writer's batches from 0.
    pub seq: u64,
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.writer, self.seq)
    }
}

impl BatchId {
    fn parse(text: &str) -> Option<BatchId> {
        let (writer, seq) = text.split_once('.')?;
        Some(BatchId {
            writer: writer.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

/// Operations on distinct keys that the store applies as one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Which batch this is.
    pub id: BatchId,
    /// The operations, each on a key of its own.
    pub ops: Vec<(String, Op)>,
    /// A random number for the writer to choose where the batch goes
    /// (`route % partitions`), so that overwrites and deletes land on other
    /// partitions than the writes before them.
    pub route: u64,
}

/// What a writer reports about a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The batch is about to be written.
    Began(Batch),
    /// The store acknowledged the batch.
    Acknowledged(BatchId),
}

impl Event {
    /// The event as one line without its newline:
    /// `B <id> <route> <key>=<op> ... .` or `K <id> .`. Both end with `.`,
    /// so that a line cut short parses as nothing.
    pub fn line(&self) -> String {
        match self {
            Event::Began(batch) => {
                let mut line = format!("B {} {}", batch.id, batch.route);
                for (key, op) in &batch.ops {
                    line.push(' ');
                    line.push_str(key);
                    line.push('=');
                    line.push_str(&op.render());
                }
                line.push_str(" .");
                line
            }
            Event::Acknowledged(id) => format!("K {id} ."),
        }
    }

    /// Parses a line made by [`Event::line`]; `None` for anything else,
    /// such as the start of a line cut short by the kill.
    pub fn parse(line: &str) -> Option<Event> {
        let mut parts = line.split(' ');
        match parts.next()? {
            "B" => {
                let id = BatchId::parse(parts.next()?)?;
                let route = parts.next()?.parse().ok()?;
                let ops: Vec<&str> = parts.collect();
                let (&".", ops) = ops.split_last()? else {
                    return None;
                };
                let ops = ops
                    .iter()
                    .map(|part| {
                        let (key, op) = part.split_once('=')?;
                        Some((key.to_string(), Op::parse(op)?))
                    })
                    .collect::<Option<Vec<_>>>()?;
                if ops.is_empty() {
                    return None;
                }
                Some(Event::Began(Batch { id, ops, route }))
            }
            "K" => {
                let id = BatchId::parse(parts.next()?)?;
                (parts.next() == Some(".") && parts.next().is_none())
                    .then_some(Event::Acknowledged(id))
            }
            _ => None,
        }
    }
}

/// Where a writer records its events.
pub trait Recorder: Sync {
    /// Records `event`; when this returns, the event is recorded (for a
    /// writer in a child process: written out and flushed).
    fn record(&self, event: Event);
}

/// A [`Recorder`] that writes each event as one line to `out` and flushes
/// it, for a writer in a child process reporting to its parent.
pub struct LineRecorder<W> {
    out: Mutex<W>,
}

impl<W: Write + Send> LineRecorder<W> {
    /// Records to `out`.
    pub fn new(out: W) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }
}

impl<W: Write + Send> Recorder for LineRecorder<W> {
    fn record(&self, event: Event) {
        let mut line = event.line();
        line.push('\n');
        let mut out = self.out.lock();
        // A parent that stopped reading has nothing left to learn.
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

/// How a [`BatchSource`] chooses its batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    /// Percent of the batches that hold several operations (the others
    /// hold one).
    pub multi_percent: u32,
    /// How many operations a batch of several holds.
    pub multi_ops: Range<usize>,
    /// Percent of the operations that are deletes.
    pub delete_percent: u32,
    /// Whether batches of several operations hold deletes too.
    pub deletes_in_multi: bool,
    /// Value lengths of a single put, in bytes.
    pub single_value_bytes: Range<usize>,
    /// Value lengths of a put in a batch of several, in bytes.
    pub multi_value_bytes: Range<usize>,
    /// Percent of the puts whose value is empty.
    pub empty_percent: u32,
    /// Percent of the puts whose value is `large_value_bytes` long.
    pub large_percent: u32,
    /// Length of a large value, in bytes (larger than a write buffer, so
    /// that it takes the path of a record written on its own).
    pub large_value_bytes: usize,
}

/// The batches of one writer in one round: deterministic for its
/// arguments, with versions unique to the writer's keys across rounds.
pub struct BatchSource {
    writer: usize,
    keys_per_writer: u64,
    mix: Mix,
    rng: u64,
    next_seq: u64,
    next_version: u64,
}

impl BatchSource {
    /// The batches of `writer` in round `round`, drawn with `seed`. Versions
    /// are unique per writer for up to 2^32 operations a round.
    pub fn new(keys: KeySpace, writer: usize, round: u64, seed: u64, mix: Mix) -> Self {
        assert!(writer < keys.writers, "writer {writer} of {}", keys.writers);
        assert!(
            mix.multi_ops.start >= 2 && mix.multi_ops.end as u64 <= keys.keys_per_writer,
            "a batch of several holds at least two and at most all the writer's keys"
        );
        Self {
            writer,
            keys_per_writer: keys.keys_per_writer,
            mix,
            rng: seed ^ (writer as u64).wrapping_mul(0xA24B_AED4_963E_E407) ^ round << 40,
            next_seq: 0,
            next_version: round << 32,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        splitmix(&mut self.rng) % n.max(1)
    }

    fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < u64::from(percent)
    }

    fn in_range(&mut self, range: &Range<usize>) -> usize {
        range.start + self.below((range.end - range.start) as u64) as usize
    }

    fn value_len(&mut self, multi: bool) -> usize {
        if self.percent(self.mix.large_percent) {
            return self.mix.large_value_bytes;
        }
        if self.percent(self.mix.empty_percent) {
            return 0;
        }
        let range = if multi {
            self.mix.multi_value_bytes.clone()
        } else {
            self.mix.single_value_bytes.clone()
        };
        self.in_range(&range)
    }

    /// The writer's next batch.
    pub fn next_batch(&mut self) -> Batch {
        let multi = self.percent(self.mix.multi_percent);
        let count = if multi {
            let range = self.mix.multi_ops.clone();
            self.in_range(&range)
        } else {
            1
        };
        let mut ops: Vec<(String, Op)> = Vec::with_capacity(count);
        while ops.len() < count {
            let key = KeySpace::key(self.writer, self.below(self.keys_per_writer));
            if ops.iter().any(|(k, _)| *k == key) {
                continue;
            }
            self.next_version += 1;
            let delete =
                (!multi || self.mix.deletes_in_multi) && self.percent(self.mix.delete_percent);
            let op = if delete {
                Op::Delete
            } else {
                Op::Put {
                    version: self.next_version,
                    len: self.value_len(multi),
                }
            };
            ops.push((key, op));
        }
        let id = BatchId {
            writer: self.writer,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let route = splitmix(&mut self.rng);
        Batch { id, ops, route }
    }
}

/// Runs one writer: records each batch as begun, hands it to `write`, and
/// records it as acknowledged once `write` returns `Ok`. Stops when `stop`
/// (if any) is set, or with the error of the first write that fails.
pub fn run_writer<E>(
    source: &mut BatchSource,
    recorder: &dyn Recorder,
    stop: Option<&AtomicBool>,
    mut write: impl FnMut(&Batch) -> Result<(), E>,
) -> Result<(), E> {
    while !stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
        let batch = source.next_batch();
        recorder.record(Event::Began(batch.clone()));
        write(&batch)?;
        recorder.record(Event::Acknowledged(batch.id));
    }
    Ok(())
}

/// What the test knows of the writes: the latest acknowledged operation
/// of each key, and the batches under way.
#[derive(Debug, Default)]
pub struct Journal {
    /// Latest acknowledged (or, after [`Journal::verify`], found applied)
    /// operation per key; a key without one was never written.
    acknowledged: HashMap<String, Op>,
    /// Batches begun and not acknowledged.
    open: HashMap<BatchId, Batch>,
    /// Batches acknowledged since the round began.
    acknowledged_batches: u64,
    /// Operations acknowledged since the round began.
    acknowledged_ops: u64,
    /// Acknowledgements of batches that had not begun (a broken writer).
    unknown_acknowledgements: u64,
}

impl Journal {
    /// Starts a round: what was acknowledged before stays, the round's
    /// counts start from zero.
    pub fn begin_round(&mut self) {
        self.open.clear();
        self.acknowledged_batches = 0;
        self.acknowledged_ops = 0;
        self.unknown_acknowledgements = 0;
    }

    /// Takes `event` into account.
    pub fn record(&mut self, event: Event) {
        match event {
            Event::Began(batch) => {
                self.open.insert(batch.id, batch);
            }
            Event::Acknowledged(id) => match self.open.remove(&id) {
                Some(batch) => {
                    self.acknowledged_batches += 1;
                    self.acknowledged_ops += batch.ops.len() as u64;
                    for (key, op) in batch.ops {
                        self.acknowledged.insert(key, op);
                    }
                }
                None => self.unknown_acknowledgements += 1,
            },
        }
    }

    /// Checks every key of `keys` with `read` (the key's value, `None` if
    /// it is missing or deleted, or the reader's error `E` if the read
    /// failed, which counts as wrong), counts what it found, and settles
    /// the journal on it: an open batch found applied counts as
    /// acknowledged from now on, and no batch is open any more.
    pub fn verify<E: fmt::Display>(
        &mut self,
        keys: impl IntoIterator<Item = String>,
        mut read: impl FnMut(&str) -> Result<Option<Vec<u8>>, E>,
    ) -> Outcome {
        let mut outcome = Outcome {
            acknowledged_batches: self.acknowledged_batches,
            acknowledged_ops: self.acknowledged_ops,
            open_batches: self.open.len(),
            open_ops: self.open.values().map(|b| b.ops.len()).sum(),
            open_multi_batches: self.open.values().filter(|b| b.ops.len() > 1).count(),
            unknown_acknowledgements: self.unknown_acknowledgements,
            ..Outcome::default()
        };
        if self.unknown_acknowledgements > 0 {
            outcome.failures.push(format!(
                "{} acknowledgements of batches that never began",
                self.unknown_acknowledgements
            ));
        }
        let mut open_op: HashMap<&str, (BatchId, Op)> = HashMap::new();
        for batch in self.open.values() {
            for (key, op) in &batch.ops {
                open_op.insert(key, (batch.id, *op));
            }
        }
        // Per open batch: keys that show it applied, keys that show it not
        // applied (a key can show both).
        let mut shows: HashMap<BatchId, (Vec<String>, Vec<String>)> = HashMap::new();
        let mut settled = Vec::new();
        for key in keys {
            let acked = self.acknowledged.get(&key).copied();
            let open = open_op.get(key.as_str()).copied();
            let actual = match read(&key) {
                Ok(actual) => actual,
                Err(e) => {
                    outcome.wrong += 1;
                    outcome.failures.push(format!("reading {key} failed: {e}"));
                    continue;
                }
            };
            let expected = acked.and_then(|op| op.value(&key));
            let as_acked = actual == expected;
            let as_open = open.is_some_and(|(_, op)| actual == op.value(&key));
            if let Some((id, _)) = open {
                let entry = shows.entry(id).or_default();
                if as_open {
                    entry.0.push(key.clone());
                }
                if as_acked {
                    entry.1.push(key.clone());
                }
            }
            if as_acked {
                outcome.verified += 1;
            } else if let Some((_, op)) = open.filter(|_| as_open) {
                outcome.verified += 1;
                settled.push((key, op));
            } else {
                match (&expected, &actual) {
                    (Some(_), None) => outcome.lost += 1,
                    (None, Some(_)) if acked == Some(Op::Delete) => outcome.resurrected += 1,
                    _ => outcome.wrong += 1,
                }
                outcome.failures.push(format!(
                    "key {key}: acknowledged {acked:?}, under way {:?}, reads {:?} bytes",
                    open.map(|(_, op)| op),
                    actual.as_ref().map(Vec::len)
                ));
            }
        }
        for (id, (applied, not_applied)) in &shows {
            let only_applied: Vec<&String> = applied
                .iter()
                .filter(|k| !not_applied.contains(k))
                .collect();
            let only_not: Vec<&String> = not_applied
                .iter()
                .filter(|k| !applied.contains(k))
                .collect();
            match (only_applied.is_empty(), only_not.is_empty()) {
                (false, false) => {
                    outcome.torn_batches += 1;
                    outcome.failures.push(format!(
                        "batch {id} applied in part: {only_applied:?} show it, {only_not:?} do not"
                    ));
                }
                (false, true) => outcome.open_applied += 1,
                (true, false) => outcome.open_not_applied += 1,
                (true, true) => {}
            }
        }
        for (key, op) in settled {
            self.acknowledged.insert(key, op);
        }
        self.open.clear();
        outcome
    }
}

/// A [`Journal`] shared by the writers (or the reader of their lines) and
/// the test, which can wait for the first event of a round.
#[derive(Debug, Default)]
pub struct SharedJournal {
    journal: Mutex<Journal>,
    recorded: Condvar,
}

impl SharedJournal {
    /// Shares `journal`.
    pub fn new(journal: Journal) -> Self {
        Self {
            journal: Mutex::new(journal),
            recorded: Condvar::new(),
        }
    }

    /// Records every event line of `input` until it ends (when the writer
    /// process is gone) or fails; lines that are not events are ignored.
    pub fn read_events(&self, input: impl BufRead) {
        for line in input.lines() {
            let Ok(line) = line else { break };
            if let Some(event) = Event::parse(&line) {
                self.record(event);
            }
        }
    }

    /// Waits until the round has an event (a batch begun or acknowledged),
    /// at most `timeout`; true if it has.
    pub fn wait_for_first_event(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut journal = self.journal.lock();
        while journal.open.is_empty() && journal.acknowledged_batches == 0 {
            if self.recorded.wait_until(&mut journal, deadline).timed_out() {
                break;
            }
        }
        !journal.open.is_empty() || journal.acknowledged_batches > 0
    }

    /// The journal, for the test to verify once the writers are gone.
    pub fn into_inner(self) -> Journal {
        self.journal.into_inner()
    }
}

impl Recorder for SharedJournal {
    fn record(&self, event: Event) {
        self.journal.lock().record(event);
        self.recorded.notify_all();
    }
}

/// What [`Journal::verify`] found in one round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Batches acknowledged in the round.
    pub acknowledged_batches: u64,
    /// Operations in those batches.
    pub acknowledged_ops: u64,
    /// Batches under way at the kill.
    pub open_batches: usize,
    /// Operations in those batches.
    pub open_ops: usize,
    /// Batches of several operations under way at the kill.
    pub open_multi_batches: usize,
    /// Batches under way at the kill found wholly applied.
    pub open_applied: usize,
    /// Batches under way at the kill found not applied at all.
    pub open_not_applied: usize,
    /// Keys that read as the rules allow.
    pub verified: u64,
    /// Acknowledged puts missing.
    pub lost: u64,
    /// Acknowledged deletes undone.
    pub resurrected: u64,
    /// Keys with any other value, or whose read failed.
    pub wrong: u64,
    /// Batches under way at the kill found applied in part.
    pub torn_batches: u64,
    /// Acknowledgements of batches that never began.
    pub unknown_acknowledgements: u64,
    /// One line per failure, for the test's report.
    pub failures: Vec<String>,
}

impl Outcome {
    /// True if the round acknowledged a batch and broke no rule.
    pub fn passed(&self) -> bool {
        self.acknowledged_batches > 0 && self.broke_no_rule()
    }

    /// True if nothing acknowledged was lost or undone, no key read wrong,
    /// no batch was torn and no acknowledgement came for a batch that never
    /// began, whether or not any batch was acknowledged.
    pub fn broke_no_rule(&self) -> bool {
        self.lost == 0
            && self.resurrected == 0
            && self.wrong == 0
            && self.torn_batches == 0
            && self.unknown_acknowledgements == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix() -> Mix {
        Mix {
            multi_percent: 50,
            multi_ops: 2..5,
            delete_percent: 20,
            deletes_in_multi: true,
            single_value_bytes: 1..100,
            multi_value_bytes: 1..100,
            empty_percent: 5,
            large_percent: 1,
            large_value_bytes: 1000,
        }
    }

    const KEYS: KeySpace = KeySpace {
        writers: 2,
        keys_per_writer: 8,
    };

    #[test]
    fn events_survive_their_lines() {
        let mut source = BatchSource::new(KEYS, 1, 3, 7, mix());
        for _ in 0..100 {
            let batch = source.next_batch();
            let began = Event::Began(batch.clone());
            assert_eq!(Event::parse(&began.line()), Some(began.clone()));
            let acked = Event::Acknowledged(batch.id);
            assert_eq!(Event::parse(&acked.line()), Some(acked.clone()));
            for line in [began.line(), acked.line()] {
                for end in 0..line.len() {
                    assert_eq!(Event::parse(&line[..end]), None, "a cut line is no event");
                }
            }
        }
        assert_eq!(Event::parse("B 1.2 3 ."), None, "a batch has an operation");
        assert_eq!(Event::parse("K 1.2 . extra"), None);
    }

    #[test]
    fn batches_hold_distinct_keys_and_unique_versions() {
        let mut versions = std::collections::HashSet::new();
        for round in 0..3 {
            let mut source = BatchSource::new(KEYS, 0, round, 11, mix());
            for seq in 0..200 {
                let batch = source.next_batch();
                assert_eq!(batch.id, BatchId { writer: 0, seq });
                let mut keys: Vec<&String> = batch.ops.iter().map(|(k, _)| k).collect();
                keys.sort();
                keys.dedup();
                assert_eq!(keys.len(), batch.ops.len());
                for (_, op) in &batch.ops {
                    if let Op::Put { version, .. } = op {
                        assert!(versions.insert(*version), "version {version} twice");
                    }
                }
            }
        }
    }

    fn put(version: u64, len: usize) -> Op {
        Op::Put { version, len }
    }

    fn batch(seq: u64, ops: &[(&str, Op)]) -> Batch {
        Batch {
            id: BatchId { writer: 0, seq },
            ops: ops.iter().map(|(k, op)| (k.to_string(), *op)).collect(),
            route: 0,
        }
    }

    /// A journal with `a`, `b` and `c` acknowledged at versions 1, 2, 3 and
    /// a batch under way that puts `a` and `b` at versions 10, 11 and
    /// deletes `c`.
    fn journal_with_open_batch() -> Journal {
        let mut journal = Journal::default();
        journal.record(Event::Began(batch(
            0,
            &[("a", put(1, 10)), ("b", put(2, 10)), ("c", put(3, 10))],
        )));
        journal.record(Event::Acknowledged(BatchId { writer: 0, seq: 0 }));
        journal.record(Event::Began(batch(
            1,
            &[("a", put(10, 10)), ("b", put(11, 10)), ("c", Op::Delete)],
        )));
        journal
    }

    fn store(pairs: &[(&str, Op)]) -> HashMap<String, Option<Vec<u8>>> {
        pairs
            .iter()
            .map(|(k, op)| (k.to_string(), op.value(k)))
            .collect()
    }

    fn verify(journal: &mut Journal, store: &HashMap<String, Option<Vec<u8>>>) -> Outcome {
        let keys = ["a", "b", "c", "d"].map(String::from);
        journal.verify(keys, |key| {
            Ok::<_, std::convert::Infallible>(store.get(key).cloned().flatten())
        })
    }

    #[test]
    fn an_open_batch_may_be_wholly_there_or_wholly_absent() {
        let mut journal = journal_with_open_batch();
        let before = store(&[("a", put(1, 10)), ("b", put(2, 10)), ("c", put(3, 10))]);
        let outcome = verify(&mut journal, &before);
        assert!(outcome.passed(), "{outcome:?}");
        assert_eq!((outcome.verified, outcome.open_not_applied), (4, 1));

        let mut journal = journal_with_open_batch();
        let after = store(&[("a", put(10, 10)), ("b", put(11, 10))]);
        let outcome = verify(&mut journal, &after);
        assert!(outcome.passed(), "{outcome:?}");
        assert_eq!((outcome.verified, outcome.open_applied), (4, 1));
        // Settled: the applied batch is what the next round starts from.
        journal.begin_round();
        journal.record(Event::Began(batch(2, &[("d", put(20, 1))])));
        journal.record(Event::Acknowledged(BatchId { writer: 0, seq: 2 }));
        let mut next = after.clone();
        next.insert("d".into(), put(20, 1).value("d"));
        assert!(verify(&mut journal, &next).passed());
    }

    #[test]
    fn a_batch_applied_in_part_is_torn() {
        let mut journal = journal_with_open_batch();
        let torn = store(&[("a", put(10, 10)), ("b", put(2, 10)), ("c", put(3, 10))]);
        let outcome = verify(&mut journal, &torn);
        assert_eq!(outcome.torn_batches, 1, "{outcome:?}");
        assert_eq!(outcome.verified, 4, "each key alone reads as allowed");
        assert!(!outcome.passed());
    }

    #[test]
    fn lost_resurrected_and_wrong_keys_are_told_apart() {
        let mut journal = Journal::default();
        journal.record(Event::Began(batch(
            0,
            &[("a", put(1, 10)), ("b", Op::Delete), ("c", put(3, 10))],
        )));
        journal.record(Event::Acknowledged(BatchId { writer: 0, seq: 0 }));
        let broken = store(&[("b", put(7, 10)), ("c", put(4, 10)), ("d", put(5, 1))]);
        let outcome = verify(&mut journal, &broken);
        assert_eq!(
            (outcome.lost, outcome.resurrected, outcome.wrong),
            (1, 1, 2),
            "{outcome:?}"
        );
        assert!(!outcome.passed());
    }

    /// What a reader's error is, as a test's reader reports it.
    #[derive(Debug, thiserror::Error)]
    #[error("the store did not answer for {0}")]
    struct NoAnswer(String);

    #[test]
    fn a_read_that_fails_counts_as_wrong_with_its_error() {
        let mut journal = journal_with_open_batch();
        let before = store(&[("a", put(1, 10)), ("b", put(2, 10)), ("c", put(3, 10))]);
        let keys = ["a", "b", "c", "d"].map(String::from);
        let outcome = journal.verify(keys, |key| match key {
            "b" => Err(NoAnswer(key.to_string())),
            _ => Ok(before.get(key).cloned().flatten()),
        });
        assert_eq!((outcome.verified, outcome.wrong), (3, 1), "{outcome:?}");
        assert!(
            outcome
                .failures
                .iter()
                .any(|f| f.contains("reading b failed: the store did not answer for b")),
            "{outcome:?}"
        );
        assert!(!outcome.passed());
    }

    #[test]
    fn a_round_without_an_acknowledgement_fails_though_it_broke_no_rule() {
        let mut journal = Journal::default();
        journal.record(Event::Began(batch(0, &[("a", put(1, 10))])));
        let outcome = verify(&mut journal, &store(&[]));
        assert_eq!(outcome.verified, 4);
        assert!(outcome.broke_no_rule(), "{outcome:?}");
        assert!(!outcome.passed());
    }

    #[test]
    fn an_acknowledgement_of_no_batch_fails_the_round() {
        let mut journal = journal_with_open_batch();
        journal.record(Event::Acknowledged(BatchId { writer: 5, seq: 0 }));
        let before = store(&[("a", put(1, 10)), ("b", put(2, 10)), ("c", put(3, 10))]);
        let outcome = verify(&mut journal, &before);
        assert_eq!(outcome.unknown_acknowledgements, 1);
        assert!(!outcome.passed());
    }
}
