//! What every collection command shares: reading a key as one collection
//! type (WRONGTYPE for another), writing it back as one put that keeps the
//! key's expiry (or a delete once it is empty), and SCAN-style cursors
//! over a collection's elements.

use bytes::Bytes;

use super::keyspace::parse_cursor;
use super::{CommandError, KeyWrite, RespClient, fail, parse_i64};
use crate::EngineError;
use crate::datatypes::{Collection, DataType, EncodingLimits};
use crate::resp::glob;
use crate::resp::reply::Replies;

/// The reply to a SCAN-family command on a key that does not exist.
pub(super) fn empty_scan(out: &mut Replies) {
    out.array(2);
    out.bulk(b"0");
    out.array(0);
}

/// The write that stores `collection` under `key`, keeping `expire_at_ms`
/// (absolute Unix milliseconds, 0 for never), or deletes the key when the
/// collection is empty.
pub(super) fn store_write<C: Collection>(
    key: &Bytes,
    collection: &C,
    expire_at_ms: u64,
) -> KeyWrite {
    if collection.is_empty() {
        KeyWrite::delete(key.clone())
    } else {
        KeyWrite::put_expiring(key.clone(), collection.encode(), expire_at_ms)
    }
}

/// LMPOP, BLMPOP, ZMPOP and BZMPOP's arguments from `numkeys` at
/// `numkeys_at`: the keys, which of `words` came after them (false for
/// the first), and COUNT if given.
pub(super) fn parse_mpop(
    cmd: &[Bytes],
    numkeys_at: usize,
    words: (&[u8], &[u8]),
) -> Result<(Vec<Bytes>, bool, Option<u64>), &'static str> {
    let numkeys = match parse_i64(&cmd[numkeys_at]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err("ERR numkeys should be greater than 0"),
    };
    let where_at = (numkeys_at as u64 + 1).saturating_add(numkeys);
    if where_at >= cmd.len() as u64 {
        return Err("ERR syntax error");
    }
    let where_at = where_at as usize;
    let second = if cmd[where_at].eq_ignore_ascii_case(words.0) {
        false
    } else if cmd[where_at].eq_ignore_ascii_case(words.1) {
        true
    } else {
        return Err("ERR syntax error");
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < cmd.len() {
        match cmd.get(j + 1) {
            Some(value) if count.is_none() && cmd[j].eq_ignore_ascii_case(b"count") => {
                match parse_i64(value) {
                    Some(n) if n >= 1 => count = Some(n as u64),
                    _ => return Err("ERR count should be greater than 0"),
                }
            }
            _ => return Err("ERR syntax error"),
        }
        j += 2;
    }
    Ok((cmd[numkeys_at + 1..where_at].to_vec(), second, count))
}

/// The positions HRANDFIELD, SRANDMEMBER and ZRANDMEMBER answer for
/// `count` over `len` elements, as Redis chooses them: a negative count
/// may repeat positions; a count at least `len` is every position in
/// order; else `count` distinct positions.
pub(super) fn random_picks(len: usize, count: i64) -> Vec<usize> {
    if len == 0 || count == 0 {
        return Vec::new();
    }
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        return (0..n).map(|_| fastrand::usize(..len)).collect();
    }
    let n = count as u64;
    if n >= len as u64 {
        return (0..len).collect();
    }
    let mut all: Vec<usize> = (0..len).collect();
    fastrand::shuffle(&mut all);
    all.truncate(n as usize);
    all
}

const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";

/// A count argument as Redis's `getPositiveLongFromObjectOrReply` reads
/// it without a message of its own.
pub(super) fn positive_count(arg: &[u8]) -> Result<u64, &'static str> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(MUST_BE_POSITIVE),
    }
}

/// HSCAN, SSCAN and ZSCAN's options after the cursor: MATCH and COUNT
/// (COUNT is a hint these commands do not need: a collection is answered
/// whole, with cursor 0).
pub(super) struct ScanOptions<'c> {
    pattern: Option<&'c [u8]>,
}

impl<'c> ScanOptions<'c> {
    /// Reads the options as Redis does (`ERR syntax error` for anything
    /// else, COUNT below 1 included).
    pub(super) fn parse(args: &'c [Bytes]) -> Result<Self, &'static str> {
        let mut pattern = None;
        let mut j = 0;
        while j < args.len() {
            match args.get(j + 1) {
                Some(value) if args[j].eq_ignore_ascii_case(b"count") => match parse_i64(value) {
                    None => return Err("ERR value is not an integer or out of range"),
                    Some(n) if n < 1 => return Err("ERR syntax error"),
                    Some(_) => {}
                },
                Some(value) if args[j].eq_ignore_ascii_case(b"match") => {
                    pattern = (&value[..] != b"*").then_some(&value[..]);
                }
                _ => return Err("ERR syntax error"),
            }
            j += 2;
        }
        Ok(Self { pattern })
    }

    /// True if `element` passes MATCH.
    pub(super) fn keeps(&self, element: &[u8]) -> bool {
        self.pattern
            .is_none_or(|p| glob::matches(p, element, false))
    }
}

impl RespClient<'_> {
    /// The collection of type `C` at `key` and its expiry, as this client
    /// sees it: `None` if the key has no value,
    /// [`CommandError::WrongType`] if it holds another type.
    pub(super) async fn load<C: Collection>(
        &self,
        key: &[u8],
    ) -> Result<Option<(C, u64)>, CommandError> {
        let Some((stored, expire_at_ms)) = self.stored_entry(key).await? else {
            return Ok(None);
        };
        if DataType::of(&stored) != C::TYPE {
            return Err(CommandError::WrongType);
        }
        Ok(Some((C::decode(stored)?, expire_at_ms)))
    }

    /// Stores `collection` under `key` as one unit, keeping its expiry
    /// (or deletes the key if the collection is empty).
    pub(super) async fn store<C: Collection>(
        &mut self,
        key: &Bytes,
        collection: &C,
        expire_at_ms: u64,
    ) -> Result<(), EngineError> {
        self.write(vec![store_write(key, collection, expire_at_ms)])
            .await
    }

    /// HDEL, SREM and ZREM key name...: removes the named elements of the
    /// `C` at `cmd[1]` and answers how many were there (the key goes with
    /// its last element).
    pub(super) async fn remove_named<C: Collection + Default>(
        &mut self,
        cmd: &[Bytes],
        out: &mut Replies,
    ) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (mut collection, expire_at_ms) = match self.load::<C>(key).await {
            Ok(Some(found)) => found,
            Ok(None) => return out.integer(0),
            Err(e) => return fail(out, &e),
        };
        let removed = cmd[2..]
            .iter()
            .filter(|name| collection.remove_named(name))
            .count();
        if removed == 0 {
            return out.integer(0);
        }
        match self.store(key, &collection, expire_at_ms).await {
            Ok(()) => out.integer(removed as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// The STORE forms' end: `result` replaces whatever `destination` held
    /// (without expiry; the key is deleted if `result` is empty), and its
    /// size is answered.
    pub(super) async fn store_result<C: Collection>(
        &mut self,
        destination: &Bytes,
        result: &C,
        out: &mut Replies,
    ) {
        let write = if result.is_empty() {
            if !self.key_exists(destination) {
                return out.integer(0);
            }
            KeyWrite::delete(destination.clone())
        } else {
            store_write(destination, result, 0)
        };
        match self.write(vec![write]).await {
            Ok(()) => out.integer(result.len() as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// The thresholds at which collections leave their compact encodings.
    pub(super) fn encoding_limits(&self) -> EncodingLimits {
        *self.shared.encoding_limits.read()
    }

    /// Checks a SCAN-family command's cursor (`cmd[2]`) as Redis does,
    /// before the key is looked up.
    pub(super) fn scan_cursor_ok(cmd: &[Bytes], out: &mut Replies) -> bool {
        if parse_cursor(&cmd[2]).is_none() {
            out.error("ERR invalid cursor");
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_picks_follow_redis_s_cases() {
        assert!(random_picks(0, 5).is_empty());
        assert!(random_picks(5, 0).is_empty());
        assert_eq!(random_picks(3, 3), vec![0, 1, 2]);
        assert_eq!(random_picks(3, 10), vec![0, 1, 2]);
        let repeated = random_picks(2, -7);
        assert_eq!(repeated.len(), 7);
        assert!(repeated.iter().all(|&i| i < 2));
        let mut distinct = random_picks(100, 10);
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 10);
    }

    #[test]
    fn counts_are_read_as_redis_reads_them() {
        assert_eq!(positive_count(b"3"), Ok(3));
        assert_eq!(positive_count(b"-1"), Err(MUST_BE_POSITIVE));
        assert_eq!(positive_count(b"x"), Err(MUST_BE_POSITIVE));
    }
}
