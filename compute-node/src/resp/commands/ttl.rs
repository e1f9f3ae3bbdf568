//! The expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL,
//! EXPIRETIME, PEXPIRETIME, PERSIST, and the string commands that set an
//! expiry with a value (SETEX, PSETEX) or on a read (GETEX), answered as
//! Redis 7 answers them.
//!
//! The expiry time is part of a value's version (its key-log entry), so a
//! command that changes only the expiry writes the value again with the
//! new time, holding the key's stripe from the read to the write (see
//! [`super::KeyLocks`]); a time already past deletes the key, as Redis
//! does.

use bytes::Bytes;

use super::expiry_args::{
    ExpireFlags, ExpiryOption, OptionsOf, StringOptions, TimeUnit, expire_when, positive_expire_at,
};
use super::{KeyWrite, RespClient, fail, put_string_expiring};
use crate::datatypes::{WRONG_TYPE, string_of};
use crate::expiry;
use crate::resp::reply::Replies;

impl RespClient<'_> {
    /// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX | XX | GT |
    /// LT]: 1 if the expiry was set (or the key deleted, for a time
    /// already past), 0 if the key has no value or the condition failed.
    pub(super) async fn expire(
        &mut self,
        cmd: &[Bytes],
        unit: TimeUnit,
        absolute: bool,
        out: &mut Replies,
    ) {
        let flags = match ExpireFlags::parse(&cmd[3..]) {
            Ok(flags) => flags,
            Err(text) => return out.error(&text),
        };
        let now_ms = expiry::now_ms();
        let base_ms = if absolute { 0 } else { now_ms as i64 };
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
        let when = match expire_when(&cmd[2], unit, base_ms, &name) {
            Ok(when) => when,
            Err(text) => return out.error(&text),
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (value, current_ms) = match self.stored_entry(key).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return out.integer(0),
            Err(e) => return fail(out, &e),
        };
        if !flags.allow(current_ms, when) {
            return out.integer(0);
        }
        let write = if when <= now_ms as i64 {
            KeyWrite::delete(key.clone())
        } else {
            KeyWrite::put_expiring(key.clone(), value, when as u64)
        };
        match self.write(vec![write]).await {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// TTL / PTTL / EXPIRETIME / PEXPIRETIME key: -2 for no value, -1 for
    /// no expiry, else the time left (or the Unix time of expiry), seconds
    /// rounded to the nearest.
    pub(super) fn ttl(&self, cmd: &[Bytes], unit: TimeUnit, absolute: bool, out: &mut Replies) {
        let at = match self.expire_at_ms(&cmd[1]) {
            None => return out.integer(-2),
            Some(0) => return out.integer(-1),
            Some(at) => at,
        };
        let ms = if absolute {
            at
        } else {
            at.saturating_sub(expiry::now_ms())
        };
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        out.integer(match unit {
            TimeUnit::Milliseconds => ms,
            // Rounded half up, as Redis does (which for the largest time
            // gives one more second than fits in milliseconds).
            TimeUnit::Seconds => ((i128::from(ms) + 500) / 1000) as i64,
        });
    }

    /// PERSIST key: 1 if an expiry was removed, else 0.
    pub(super) async fn persist(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let value = match self.stored_entry(key).await {
            Ok(Some((value, at))) if at != 0 => value,
            Ok(_) => return out.integer(0),
            Err(e) => return fail(out, &e),
        };
        match self.write(vec![KeyWrite::put(key.clone(), value)]).await {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// SETEX / PSETEX key time value.
    pub(super) async fn setex(&mut self, cmd: &[Bytes], unit: TimeUnit, out: &mut Replies) {
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
        let at = match positive_expire_at(&cmd[2], unit, true, expiry::now_ms(), &name) {
            Ok(at) => at,
            Err(text) => return out.error(&text),
        };
        let write = put_string_expiring(cmd[1].clone(), cmd[3].clone(), at);
        match self.write(vec![write]).await {
            Ok(()) => out.simple("OK"),
            Err(e) => fail(out, &e),
        }
    }

    /// GETEX key [EX | PX | EXAT | PXAT time | PERSIST]: the value (or
    /// null), its expiry changed as asked.
    pub(super) async fn getex(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let options = match StringOptions::parse(&cmd[2..], OptionsOf::Getex) {
            Ok(options) => options,
            Err(text) => return out.error(text),
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (value, current_ms) = match self.stored_entry(key).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return out.null(),
            Err(e) => return fail(out, &e),
        };
        let Some(shown) = string_of(value.clone()) else {
            return out.error(WRONG_TYPE);
        };
        let now_ms = expiry::now_ms();
        let write = match &options.expiry {
            ExpiryOption::Unset | ExpiryOption::Keep => None,
            ExpiryOption::Persist if current_ms == 0 => None,
            ExpiryOption::Persist => Some(KeyWrite::put(key.clone(), value.clone())),
            timed => match timed.expire_at_ms(now_ms, "getex") {
                Err(text) => return out.error(&text),
                // An absolute time already past deletes the key.
                Ok(Some(at)) if at <= now_ms => Some(KeyWrite::delete(key.clone())),
                Ok(at) => Some(KeyWrite::put_expiring(
                    key.clone(),
                    value.clone(),
                    at.unwrap_or(0),
                )),
            },
        };
        if let Some(write) = write
            && let Err(e) = self.write(vec![write]).await
        {
            return fail(out, &e);
        }
        out.bulk(&shown);
    }
}
