//! The keyspace commands: DEL, UNLINK, FLUSHALL, FLUSHDB, EXISTS, TOUCH,
//! TYPE, RENAME, RENAMENX, COPY. Each command's writes go to storage as one
//! unit (DEL of many keys, RENAME's put and delete), and inside EXEC into
//! the transaction's.

use bytes::Bytes;

use super::{RespClient, engine_error, parse_i64};
use crate::resp::reply::Replies;

impl RespClient<'_> {
    /// DEL / UNLINK key...: the number of keys that existed (a key named
    /// twice counts once), all deleted as one unit.
    pub(super) async fn del(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let mut deletes: Vec<(Bytes, Option<Bytes>)> = Vec::new();
        for key in &cmd[1..] {
            if self.key_exists(key) && !deletes.iter().any(|(k, _)| k == key) {
                deletes.push((key.clone(), None));
            }
        }
        let removed = deletes.len() as i64;
        if removed > 0
            && let Err(e) = self.write(deletes).await
        {
            return engine_error(out, &e);
        }
        out.integer(removed);
    }

    /// FLUSHALL / FLUSHDB [ASYNC | SYNC]: every key is deleted, durably,
    /// before the reply (ASYNC too: the clear is one entry per partition,
    /// not one per key, so there is nothing to leave for later).
    pub(super) async fn flush(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let mode_ok = match cmd.len() {
            1 => true,
            2 => cmd[1].eq_ignore_ascii_case(b"async") || cmd[1].eq_ignore_ascii_case(b"sync"),
            _ => false,
        };
        if !mode_ok {
            return out.error("ERR syntax error");
        }
        if let Some(overlay) = &mut self.overlay {
            overlay.clear();
            return out.simple("OK");
        }
        match self.engine.clear_all_async(self.partition).await {
            Ok(()) => out.simple("OK"),
            Err(e) => engine_error(out, &e),
        }
    }

    /// EXISTS / TOUCH key...: how many of the keys exist (a key named
    /// twice counts twice).
    pub(super) fn exists(&self, cmd: &[Bytes], out: &mut Replies) {
        let count = cmd[1..].iter().filter(|k| self.key_exists(k)).count();
        out.integer(count as i64);
    }

    /// TYPE key: every value is a string.
    pub(super) fn key_type(&self, cmd: &[Bytes], out: &mut Replies) {
        out.simple(if self.key_exists(&cmd[1]) {
            "string"
        } else {
            "none"
        });
    }

    /// RENAME / RENAMENX: the value is put under `to` and `from` deleted,
    /// as one unit.
    pub(super) async fn rename(&mut self, cmd: &[Bytes], only_new: bool, out: &mut Replies) {
        let (from, to) = (&cmd[1], &cmd[2]);
        let value = match self.value(from).await {
            Ok(Some(value)) => value,
            Ok(None) => return out.error("ERR no such key"),
            Err(e) => return engine_error(out, &e),
        };
        if from == to {
            return if only_new {
                out.integer(0)
            } else {
                out.simple("OK")
            };
        }
        if only_new && self.key_exists(to) {
            return out.integer(0);
        }
        let ops = vec![(to.clone(), Some(value)), (from.clone(), None)];
        if let Err(e) = self.write(ops).await {
            return engine_error(out, &e);
        }
        if only_new {
            out.integer(1);
        } else {
            out.simple("OK");
        }
    }

    /// COPY source destination [DB 0] [REPLACE].
    pub(super) async fn copy(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let mut replace = false;
        let mut j = 3;
        while j < cmd.len() {
            if cmd[j].eq_ignore_ascii_case(b"replace") {
                replace = true;
                j += 1;
            } else if cmd[j].eq_ignore_ascii_case(b"db") && j + 1 < cmd.len() {
                match parse_i64(&cmd[j + 1]) {
                    Some(0) => {}
                    Some(_) => return out.error("ERR DB index is out of range"),
                    None => return out.error("ERR value is not an integer or out of range"),
                }
                j += 2;
            } else {
                return out.error("ERR syntax error");
            }
        }
        let (from, to) = (&cmd[1], &cmd[2]);
        if from == to {
            return out.error("ERR source and destination objects are the same");
        }
        let value = match self.value(from).await {
            Ok(Some(value)) => value,
            Ok(None) => return out.integer(0),
            Err(e) => return engine_error(out, &e),
        };
        if !replace && self.key_exists(to) {
            return out.integer(0);
        }
        match self.write(vec![(to.clone(), Some(value))]).await {
            Ok(()) => out.integer(1),
            Err(e) => engine_error(out, &e),
        }
    }
}
