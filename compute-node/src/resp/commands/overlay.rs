//! The writes of a transaction while EXEC carries it out: kept here, seen
//! by the transaction's own reads, and sent to storage as one batch when
//! the transaction ends, so that after a crash either all of them are
//! there or none.

use std::collections::HashMap;

use bytes::Bytes;

use super::KeyWrite;
use crate::{Engine, expiry};

/// A transaction's writes not yet sent (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Overlay {
    /// The writes in order.
    writes: Vec<KeyWrite>,
    /// Each written key's newest state: its value and expiry time, or
    /// `None` if deleted.
    latest: HashMap<Bytes, Option<(Bytes, u64)>>,
    /// A FLUSHALL ran inside the transaction: every key not written since
    /// is gone.
    cleared: bool,
}

/// What the overlay knows of a key.
pub(super) enum Known {
    /// The transaction wrote it (or cleared it): this is its value and
    /// expiry time (absolute Unix milliseconds, 0 for never), or `None` if
    /// it has none. An expiry time may have passed since.
    Written(Option<(Bytes, u64)>),
    /// The transaction did not touch it: ask the engine.
    Untouched,
}

impl Overlay {
    /// Records a write.
    pub(super) fn write(&mut self, write: KeyWrite) {
        let (key, latest) = match &write {
            KeyWrite::Put {
                key,
                value,
                expire_at_ms,
            } => (key, Some((value.clone(), *expire_at_ms))),
            KeyWrite::Delete { key } | KeyWrite::Expire { key, .. } => (key, None),
        };
        self.latest.insert(key.clone(), latest);
        self.writes.push(write);
    }

    /// Records a FLUSHALL: the writes before it are void.
    pub(super) fn clear(&mut self) {
        self.writes.clear();
        self.latest.clear();
        self.cleared = true;
    }

    /// What the transaction made of `key`.
    pub(super) fn known(&self, key: &[u8]) -> Known {
        match self.latest.get(key) {
            Some(value) => Known::Written(value.clone()),
            None if self.cleared => Known::Written(None),
            None => Known::Untouched,
        }
    }

    /// The number of keys, as the transaction sees it.
    pub(super) fn len(&self, engine: &Engine) -> u64 {
        let written_live = self
            .latest
            .values()
            .filter(|v| v.as_ref().is_some_and(|&(_, at)| live(at)))
            .count() as u64;
        if self.cleared {
            return written_live;
        }
        let written_before = self
            .latest
            .keys()
            .filter(|key| engine.contains(key))
            .count() as u64;
        (engine.len() + written_live).saturating_sub(written_before)
    }

    /// The keys the transaction left with a value that has not expired.
    pub(super) fn written_keys(&self) -> impl Iterator<Item = &Bytes> {
        self.latest
            .iter()
            .filter(|(_, value)| value.as_ref().is_some_and(|&(_, at)| live(at)))
            .map(|(key, _)| key)
    }

    /// True if a FLUSHALL ran inside the transaction.
    pub(super) fn cleared(&self) -> bool {
        self.cleared
    }

    /// The writes to send, in order, as one batch.
    pub(super) fn batch(&self) -> Vec<KeyWrite> {
        self.writes.clone()
    }
}

/// True if a value expiring at `expire_at_ms` has not expired now.
fn live(expire_at_ms: u64) -> bool {
    !expiry::time_has_passed(expire_at_ms, expiry::now_ms())
}
