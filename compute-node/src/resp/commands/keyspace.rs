//! The keyspace commands: DEL, UNLINK, EXISTS, TOUCH, TYPE, RENAME,
//! RENAMENX, COPY.

use bytes::Bytes;

use super::{RespClient, engine_error, parse_i64};
use crate::resp::reply::Replies;

impl RespClient<'_> {
    /// DEL / UNLINK key...: the number of keys that existed.
    pub(super) async fn del(&self, cmd: &[Bytes], out: &mut Replies) {
        let mut removed = 0;
        for key in &cmd[1..] {
            if !self.engine.contains(key) {
                continue;
            }
            match self.engine.delete_async(self.partition, key).await {
                Ok(true) => removed += 1,
                Ok(false) => {}
                Err(e) => return engine_error(out, &e),
            }
        }
        out.integer(removed);
    }

    /// EXISTS / TOUCH key...: how many of the keys exist (a key named
    /// twice counts twice).
    pub(super) fn exists(&self, cmd: &[Bytes], out: &mut Replies) {
        let count = cmd[1..].iter().filter(|k| self.engine.contains(k)).count();
        out.integer(count as i64);
    }

    /// TYPE key: every value is a string.
    pub(super) fn key_type(&self, cmd: &[Bytes], out: &mut Replies) {
        out.simple(if self.engine.contains(&cmd[1]) {
            "string"
        } else {
            "none"
        });
    }

    /// RENAME / RENAMENX: the value is written under `to`, then `from` is
    /// deleted (a crash between the two leaves both keys, never neither).
    pub(super) async fn rename(&self, from: &[u8], to: &[u8], only_new: bool, out: &mut Replies) {
        let value = match self.engine.get_async(from).await {
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
        if only_new && self.engine.contains(to) {
            return out.integer(0);
        }
        if let Err(e) = self
            .engine
            .put_many_async(self.partition, &[(to, &value[..])])
            .await
        {
            return engine_error(out, &e);
        }
        if let Err(e) = self.engine.delete_async(self.partition, from).await {
            return engine_error(out, &e);
        }
        if only_new {
            out.integer(1);
        } else {
            out.simple("OK");
        }
    }

    /// COPY source destination [DB 0] [REPLACE].
    pub(super) async fn copy(&self, cmd: &[Bytes], out: &mut Replies) {
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
        let (from, to) = (&cmd[1][..], &cmd[2][..]);
        if from == to {
            return out.error("ERR source and destination objects are the same");
        }
        let value = match self.engine.get_async(from).await {
            Ok(Some(value)) => value,
            Ok(None) => return out.integer(0),
            Err(e) => return engine_error(out, &e),
        };
        if !replace && self.engine.contains(to) {
            return out.integer(0);
        }
        match self
            .engine
            .put_many_async(self.partition, &[(to, &value[..])])
            .await
        {
            Ok(()) => out.integer(1),
            Err(e) => engine_error(out, &e),
        }
    }
}
