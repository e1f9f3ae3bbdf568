//! The writes of a transaction while EXEC carries it out: kept here, seen
//! by the transaction's own reads, and sent to storage as one batch when
//! the transaction ends, so that after a crash either all of them are
//! there or none.

use std::collections::HashMap;

use bytes::Bytes;

use crate::{BatchOp, Engine};

/// A transaction's writes not yet sent (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Overlay {
    /// The writes in order: a value for a put, `None` for a delete.
    ops: Vec<(Bytes, Option<Bytes>)>,
    /// Each written key's newest state.
    latest: HashMap<Bytes, Option<Bytes>>,
    /// A FLUSHALL ran inside the transaction: every key not written since
    /// is gone.
    cleared: bool,
}

/// What the overlay knows of a key.
pub(super) enum Known {
    /// The transaction wrote it (or cleared it): this is its value, or
    /// `None` if it has none.
    Written(Option<Bytes>),
    /// The transaction did not touch it: ask the engine.
    Untouched,
}

impl Overlay {
    /// Records a put of `key`.
    pub(super) fn put(&mut self, key: Bytes, value: Bytes) {
        self.latest.insert(key.clone(), Some(value.clone()));
        self.ops.push((key, Some(value)));
    }

    /// Records a delete of `key`.
    pub(super) fn delete(&mut self, key: Bytes) {
        self.latest.insert(key.clone(), None);
        self.ops.push((key, None));
    }

    /// Records a FLUSHALL: the writes before it are void.
    pub(super) fn clear(&mut self) {
        self.ops.clear();
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

    /// True if `key` has a value, as the transaction sees it.
    pub(super) fn contains(&self, engine: &Engine, key: &[u8]) -> bool {
        match self.known(key) {
            Known::Written(value) => value.is_some(),
            Known::Untouched => engine.contains(key),
        }
    }

    /// The number of keys, as the transaction sees it.
    pub(super) fn len(&self, engine: &Engine) -> u64 {
        let written_live = self.latest.values().filter(|v| v.is_some()).count() as u64;
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

    /// The keys the transaction left with a value.
    pub(super) fn written_keys(&self) -> impl Iterator<Item = &Bytes> {
        self.latest
            .iter()
            .filter(|(_, value)| value.is_some())
            .map(|(key, _)| key)
    }

    /// True if a FLUSHALL ran inside the transaction.
    pub(super) fn cleared(&self) -> bool {
        self.cleared
    }

    /// The writes to send, in order, as one batch.
    pub(super) fn batch(&self) -> Vec<BatchOp<'_>> {
        self.ops
            .iter()
            .map(|(key, value)| match value {
                Some(value) => BatchOp::Put { key, value },
                None => BatchOp::Delete { key },
            })
            .collect()
    }
}
