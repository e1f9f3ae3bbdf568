//! The hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL,
//! HLEN, HEXISTS, HKEYS, HVALS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HRANDFIELD
//! and HSCAN, answered as Redis 7 answers them. A command that changes a
//! hash holds its key's stripe from the read to the acknowledged write
//! (see [`super::KeyLocks`]) and writes the hash back as one put.

use bytes::Bytes;

use super::collections::{ScanOptions, empty_scan, random_picks};
use super::counters::{FloatRefusal, add_float};
use super::expiry_args::NOT_AN_INTEGER;
use super::{RespClient, arity_error, fail, parse_i64};
use crate::datatypes::Hash;
use crate::resp::reply::{Protocol, Replies};

/// HRANDFIELD's count when it is out of the range Redis reads.
const COUNT_OUT_OF_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

impl RespClient<'_> {
    /// Reads the hash at `cmd[1]`: `Err(())` once an error is answered.
    async fn read_hash(&self, cmd: &[Bytes], out: &mut Replies) -> Result<Option<Hash>, ()> {
        match self.load::<Hash>(&cmd[1]).await {
            Ok(found) => Ok(found.map(|(hash, _)| hash)),
            Err(e) => {
                fail(out, &e);
                Err(())
            }
        }
    }

    /// HSET key field value [field value ...] (the number of new fields)
    /// and HMSET (OK).
    pub(super) async fn hset(&mut self, cmd: &[Bytes], reply_ok: bool, out: &mut Replies) {
        if cmd.len() % 2 == 1 {
            let name = if reply_ok { "hmset" } else { "hset" };
            return out.error(&arity_error(name));
        }
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (mut hash, expire_at_ms) = match self.load::<Hash>(key).await {
            Ok(found) => found.unwrap_or_default(),
            Err(e) => return fail(out, &e),
        };
        let mut added = 0;
        for pair in cmd[2..].chunks(2) {
            added += i64::from(hash.set(pair[0].clone(), pair[1].clone()));
        }
        hash.settle(&self.encoding_limits());
        match self.store(key, &hash, expire_at_ms).await {
            Ok(()) if reply_ok => out.simple("OK"),
            Ok(()) => out.integer(added),
            Err(e) => fail(out, &e),
        }
    }

    /// HSETNX key field value: 1 if the field was set, 0 if it existed.
    pub(super) async fn hsetnx(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (mut hash, expire_at_ms) = match self.load::<Hash>(key).await {
            Ok(found) => found.unwrap_or_default(),
            Err(e) => return fail(out, &e),
        };
        if hash.get(&cmd[2]).is_some() {
            return out.integer(0);
        }
        hash.set(cmd[2].clone(), cmd[3].clone());
        hash.settle(&self.encoding_limits());
        match self.store(key, &hash, expire_at_ms).await {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// HGET key field.
    pub(super) async fn hget(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            out.bulk_or_null(hash.as_ref().and_then(|h| h.get(&cmd[2])).map(|v| &v[..]));
        }
    }

    /// HMGET key field...: a value or null per field.
    pub(super) async fn hmget(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            out.array(cmd.len() - 2);
            for field in &cmd[2..] {
                out.bulk_or_null(hash.as_ref().and_then(|h| h.get(field)).map(|v| &v[..]));
            }
        }
    }

    /// HGETALL key: fields and values (a map in RESP3).
    pub(super) async fn hgetall(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            let hash = hash.unwrap_or_default();
            out.map(hash.len());
            for (field, value) in hash.iter() {
                out.bulk(field);
                out.bulk(value);
            }
        }
    }

    /// HKEYS key (`values` false) and HVALS key (`values` true).
    pub(super) async fn hkeys(&self, cmd: &[Bytes], values: bool, out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            let hash = hash.unwrap_or_default();
            out.array(hash.len());
            for (field, value) in hash.iter() {
                out.bulk(if values { value } else { field });
            }
        }
    }

    /// HLEN key.
    pub(super) async fn hlen(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            out.integer(hash.map_or(0, |h| h.len()) as i64);
        }
    }

    /// HEXISTS key field: 1 or 0.
    pub(super) async fn hexists(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            out.integer(i64::from(hash.is_some_and(|h| h.get(&cmd[2]).is_some())));
        }
    }

    /// HSTRLEN key field: the value's length, 0 if absent.
    pub(super) async fn hstrlen(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(hash) = self.read_hash(cmd, out).await {
            let len = hash.and_then(|h| h.get(&cmd[2]).map(Bytes::len));
            out.integer(len.unwrap_or(0) as i64);
        }
    }

    /// HINCRBY key field increment.
    pub(super) async fn hincrby(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let Some(by) = parse_i64(&cmd[3]) else {
            return out.error(NOT_AN_INTEGER);
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (mut hash, expire_at_ms) = match self.load::<Hash>(key).await {
            Ok(found) => found.unwrap_or_default(),
            Err(e) => return fail(out, &e),
        };
        let current = match hash.get(&cmd[2]).map(|v| parse_i64(v)) {
            None => 0,
            Some(Some(current)) => current,
            Some(None) => return out.error("ERR hash value is not an integer"),
        };
        let Some(sum) = current.checked_add(by) else {
            return out.error("ERR increment or decrement would overflow");
        };
        hash.set(cmd[2].clone(), Bytes::from(sum.to_string()));
        hash.settle(&self.encoding_limits());
        match self.store(key, &hash, expire_at_ms).await {
            Ok(()) => out.integer(sum),
            Err(e) => fail(out, &e),
        }
    }

    /// HINCRBYFLOAT key field increment: the new value as Redis prints it.
    pub(super) async fn hincrbyfloat(&mut self, cmd: &[Bytes], out: &mut Replies) {
        match add_float(None, &cmd[3]) {
            Ok(_) => {}
            Err(FloatRefusal::NanOrInfinity) => return out.error("ERR value is NaN or Infinity"),
            Err(refusal) => return out.error(refusal.text()),
        }
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (mut hash, expire_at_ms) = match self.load::<Hash>(key).await {
            Ok(found) => found.unwrap_or_default(),
            Err(e) => return fail(out, &e),
        };
        let sum = match add_float(hash.get(&cmd[2]).map(|v| &v[..]), &cmd[3]) {
            Ok(sum) => Bytes::from(sum),
            Err(FloatRefusal::NotAFloat) => return out.error("ERR hash value is not a float"),
            Err(refusal) => return out.error(refusal.text()),
        };
        hash.set(cmd[2].clone(), sum.clone());
        hash.settle(&self.encoding_limits());
        match self.store(key, &hash, expire_at_ms).await {
            Ok(()) => out.bulk(&sum),
            Err(e) => fail(out, &e),
        }
    }

    /// HRANDFIELD key [count [WITHVALUES]].
    pub(super) async fn hrandfield(&self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() == 2 {
            if let Ok(hash) = self.read_hash(cmd, out).await {
                let hash = hash.unwrap_or_default();
                let picked = (!hash.is_empty())
                    .then(|| hash.get_index(fastrand::usize(..hash.len())))
                    .flatten();
                out.bulk_or_null(picked.map(|(field, _)| &field[..]));
            }
            return;
        }
        let count = match parse_i64(&cmd[2]) {
            None => return out.error(NOT_AN_INTEGER),
            Some(i64::MIN) => return out.error(COUNT_OUT_OF_RANGE),
            Some(count) => count,
        };
        let with_values = match cmd.get(3) {
            None => false,
            Some(word) if cmd.len() == 4 && word.eq_ignore_ascii_case(b"withvalues") => true,
            Some(_) => return out.error("ERR syntax error"),
        };
        if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
            return out.error("ERR value is out of range");
        }
        let Ok(hash) = self.read_hash(cmd, out).await else {
            return;
        };
        let hash = hash.unwrap_or_default();
        let picks = random_picks(hash.len(), count);
        let pairs_flat = with_values && out.protocol == Protocol::Resp2;
        out.array(if pairs_flat {
            picks.len() * 2
        } else {
            picks.len()
        });
        for index in picks {
            let Some((field, value)) = hash.get_index(index) else {
                continue;
            };
            if with_values && !pairs_flat {
                out.array(2);
            }
            out.bulk(field);
            if with_values {
                out.bulk(value);
            }
        }
    }

    /// HSCAN key cursor [MATCH pattern] [COUNT count]: the whole hash in
    /// one reply, cursor 0.
    pub(super) async fn hscan(&self, cmd: &[Bytes], out: &mut Replies) {
        if !Self::scan_cursor_ok(cmd, out) {
            return;
        }
        let Ok(hash) = self.read_hash(cmd, out).await else {
            return;
        };
        let Some(hash) = hash else {
            return empty_scan(out);
        };
        let options = match ScanOptions::parse(&cmd[3..]) {
            Ok(options) => options,
            Err(text) => return out.error(text),
        };
        let kept: Vec<_> = hash.iter().filter(|(f, _)| options.keeps(f)).collect();
        out.array(2);
        out.bulk(b"0");
        out.array(kept.len() * 2);
        for (field, value) in kept {
            out.bulk(field);
            out.bulk(value);
        }
    }
}
