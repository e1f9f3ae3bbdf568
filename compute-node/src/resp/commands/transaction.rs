//! Transactions: MULTI, EXEC, DISCARD, WATCH.

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::{Flow, MAX_WATCHED_KEYS, RespClient, Transaction, engine_error, rejection};
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

    /// The index's sequence number for `key` (its newest put or delete),
    /// `None` if the index has no entry: a change to the key changes it.
    pub(super) fn version_of(&self, key: &[u8]) -> Option<u64> {
        self.engine
            .inner
            .index
            .get(key)
            .map(|location| location.seq)
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
        // A transaction of SETs and MSETs goes to storage as one unit.
        let all_sets = !queued.is_empty()
            && queued.iter().all(|cmd| {
                (cmd[0].eq_ignore_ascii_case(b"set") && cmd.len() == 3)
                    || (cmd[0].eq_ignore_ascii_case(b"mset") && cmd.len() % 2 == 1)
            });
        out.array(queued.len());
        if all_sets {
            let items: Vec<(&[u8], &[u8])> = queued
                .iter()
                .flat_map(|cmd| cmd[1..].chunks(2).map(|kv| (&kv[0][..], &kv[1][..])))
                .collect();
            match self.engine.put_many_async(self.partition, &items).await {
                Ok(()) => (0..queued.len()).for_each(|_| out.simple("OK")),
                Err(e) => (0..queued.len()).for_each(|_| engine_error(out, &e)),
            }
            return Ok(Flow::Continue);
        }
        let mut flow = Flow::Continue;
        self.in_exec = true;
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
                    self.in_exec = false;
                    return Err(e);
                }
            }
        }
        self.in_exec = false;
        Ok(flow)
    }
}
