//! Transactions: MULTI, EXEC, DISCARD, WATCH. EXEC carries the queued
//! commands out while no other client's command runs (it holds the gate
//! exclusively); their writes collect in an overlay that their reads see,
//! and go to storage as one batch at the end.

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::overlay::Overlay;
use super::{Flow, MAX_WATCHED_KEYS, RespClient, Transaction, fail, rejection};
use crate::EngineError;
use crate::resp::reply::Replies;

impl RespClient<'_> {
    /// MULTI: starts queuing.
    pub(super) fn multi(&mut self, out: &mut Replies) {
        if self.multi.is_some() {
            out.error("ERR MULTI calls can not be nested");
        } else {
            self.multi = Some(Transaction::default());
            out.simple("OK");
        }
    }

    /// DISCARD: drops the queued commands and the watched keys.
    pub(super) fn discard(&mut self, out: &mut Replies) {
        if self.multi.take().is_some() {
            self.watched.clear();
            out.simple("OK");
        } else {
            out.error("ERR DISCARD without MULTI");
        }
    }

    /// WATCH key...: remembers each key's version for EXEC to compare.
    pub(super) fn watch(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if self.multi.is_some() {
            out.error("ERR WATCH inside MULTI is not allowed");
        } else if self.watched.len() + cmd.len() - 1 > MAX_WATCHED_KEYS {
            out.error("ERR too many watched keys");
        } else {
            for key in &cmd[1..] {
                if !self.watched.iter().any(|(k, _)| k == key) {
                    self.watched.push((key.clone(), self.version_of(key)));
                }
            }
            out.simple("OK");
        }
    }

    /// What the index holds for `key`, as WATCH compares it: a change to
    /// the key changes it, and so does its value expiring (but not the
    /// removal of a value that had expired already).
    pub(super) fn version_of(&self, key: &[u8]) -> Option<KeyVersion> {
        let location = self.engine.location(key)?;
        Some(
            if crate::expiry::is_visible(&location, crate::expiry::now_ms()) {
                KeyVersion::Live(location.seq)
            } else {
                // A tombstone at a version's own seq is how its expiry is
                // logged: expired and removed compare equal.
                KeyVersion::Gone(location.seq)
            },
        )
    }

    /// EXEC: the queued commands' replies as one array, or the null array
    /// if a watched key changed, or EXECABORT.
    pub(super) async fn exec<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        let Some(transaction) = self.multi.take() else {
            out.error("ERR EXEC without MULTI");
            return Ok(Flow::Continue);
        };
        let watched = std::mem::take(&mut self.watched);
        if transaction.aborted {
            out.error("EXECABORT Transaction discarded because of previous errors.");
            return Ok(Flow::Continue);
        }
        let shared = self.shared;
        let _exclusive = shared.exec_gate.write().await;
        if watched
            .iter()
            .any(|(key, version)| self.version_of(key) != *version)
        {
            out.null_array();
            return Ok(Flow::Continue);
        }
        let queued = transaction.queued;
        let mark = out.bytes.len();
        out.array(queued.len());
        let mut flow = Flow::Continue;
        self.overlay = Some(Overlay::default());
        for cmd in &queued {
            let entry = match rejection(cmd) {
                Ok(entry) => entry,
                Err(text) => {
                    out.error(&text);
                    continue;
                }
            };
            match Box::pin(self.execute(entry, cmd, out, writer)).await {
                Ok(Flow::Close) => flow = Flow::Close,
                Ok(Flow::Continue) => {}
                Err(e) => {
                    self.overlay = None;
                    return Err(e);
                }
            }
        }
        let overlay = self.overlay.take().unwrap_or_default();
        if let Err(e) = self.commit(&overlay).await {
            // None of the transaction's writes took effect (or, after a
            // lost answer, all did): its replies would not be true, so EXEC
            // answers with the error alone.
            out.bytes.truncate(mark);
            fail(out, &e);
        }
        Ok(flow)
    }

    /// Sends a transaction's writes to storage: one batch through the
    /// client's partition (all or none after a crash). A FLUSHALL inside
    /// the transaction is sent first, as a clear of its own, so a crash
    /// between the two can leave the clear without the writes after it.
    async fn commit(&self, overlay: &Overlay) -> Result<(), EngineError> {
        if overlay.cleared() {
            self.engine.clear_all_async(self.partition).await?;
        }
        let batch = overlay.batch();
        if batch.is_empty() {
            return Ok(());
        }
        let woken = self.shared.blocked.keys_to_wake(&batch);
        self.engine.write_async(self.partition, batch).await?;
        // Clients blocked on the keys the transaction pushed to try again
        // now that it is over, as Redis serves them after EXEC.
        self.shared.blocked.written(&woken);
        Ok(())
    }
}

/// A watched key's state (see [`RespClient::version_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyVersion {
    /// A value, written at this sequence number, that has not expired.
    Live(u64),
    /// No value since this sequence number (deleted, or expired).
    Gone(u64),
}
