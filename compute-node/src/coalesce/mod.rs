//! Coalesced requests: the writes of the callers that share a partition,
//! and the record reads of the callers that share a connection, each
//! travel to the storage node together while an earlier request of their
//! lane is in flight ([`lanes`] is the policy, free of I/O; the write route
//! (`writes`) and the read route (`reads`) send the batches it hands out).

pub mod lanes;

use std::sync::Arc;

pub(crate) use lanes::{Joined, Lanes};
use splitkv_common::client::ClientError;
use tokio::sync::oneshot;

use crate::error::{EngineError, Result};

/// The outcome each of a caller's queued requests was answered with, in
/// order; one whose lane task went away (the engine is shutting down) is
/// [`ClientError::ShutDown`].
pub(crate) async fn answers<T>(answers: Vec<oneshot::Receiver<Result<T>>>) -> Vec<Result<T>> {
    let mut outcomes = Vec::with_capacity(answers.len());
    for answer in answers {
        outcomes.push(
            answer
                .await
                .unwrap_or(Err(EngineError::Storage(ClientError::ShutDown))),
        );
    }
    outcomes
}

/// A leader's hold on its lane, dropped once its batch is answered or when
/// the leader goes away first (its future dropped): either way the runs
/// that collected behind it are then sent on a task of their own (by
/// `hand_on`), so no lane stays in flight for good.
pub(crate) struct Lead<'a, S> {
    pub(crate) route: &'a Arc<S>,
    pub(crate) lane: usize,
    pub(crate) hand_on: fn(&Arc<S>, usize),
}

impl<S> Drop for Lead<'_, S> {
    fn drop(&mut self) {
        (self.hand_on)(self.route, self.lane);
    }
}
