//! The keyspace commands: DEL, UNLINK, FLUSHALL, FLUSHDB, EXISTS, TOUCH,
//! TYPE, RENAME, RENAMENX, COPY, SCAN, KEYS, RANDOMKEY. Each command's
//! writes go to storage as one unit (DEL of many keys, RENAME's put and
//! delete), and inside EXEC into the transaction's.

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::{KeyWrite, RespClient, fail, parse_i64};
use crate::datatypes::DataType;
use crate::resp::glob;
use crate::resp::reply::Replies;

/// SCAN's COUNT when none is given (Redis's).
const SCAN_DEFAULT_COUNT: usize = 10;

/// Index entries one SCAN call visits at most per key of its COUNT, so
/// that a walk through many tombstones still returns keys (Redis bounds
/// one call's work at ten buckets per key of COUNT).
const SCAN_ENTRIES_PER_COUNT: usize = 10;

/// Index entries one SCAN call visits at most, whatever its COUNT (COUNT
/// is a hint): this bounds what one call holds in memory.
const SCAN_MAX_ENTRIES_PER_CALL: usize = 1 << 16;

/// Index entries KEYS visits between two yields to other clients.
const KEYS_STEP_ENTRIES: usize = 4096;

/// Keys of a KEYS reply encoded between two checks of the reply buffer.
const KEYS_WRITE_CHUNK: usize = 1024;

/// A SCAN cursor as Redis 7.0 and 7.2 read it (`strtoul` in base 10): an
/// optional sign then decimal digits, up to the first NUL byte; a
/// negative number wraps around; no leading space; the empty string is 0;
/// anything else, or a value past `u64::MAX`, is `None`.
pub(super) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let text = arg.split(|&b| b == 0).next().unwrap_or_default();
    if text.is_empty() {
        return Some(0);
    }
    let (negative, digits) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

impl RespClient<'_> {
    /// DEL / UNLINK key...: the number of keys that existed (a key named
    /// twice counts once), all deleted as one unit.
    pub(super) async fn del(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let mut keys: Vec<&Bytes> = Vec::new();
        for key in &cmd[1..] {
            if self.key_exists(key) && !keys.contains(&key) {
                keys.push(key);
            }
        }
        let removed = keys.len() as i64;
        let deletes = keys.into_iter().cloned().map(KeyWrite::delete).collect();
        if removed > 0
            && let Err(e) = self.write(deletes).await
        {
            return fail(out, &e);
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
            Err(e) => fail(out, &e),
        }
    }

    /// EXISTS / TOUCH key...: how many of the keys exist (a key named
    /// twice counts twice).
    pub(super) fn exists(&self, cmd: &[Bytes], out: &mut Replies) {
        let count = cmd[1..].iter().filter(|k| self.key_exists(k)).count();
        out.integer(count as i64);
    }

    /// TYPE key: `string`, `hash`, `list`, `set`, `zset`, or `none`.
    pub(super) async fn key_type(&self, cmd: &[Bytes], out: &mut Replies) {
        match self.stored_entry(&cmd[1]).await {
            Ok(Some((stored, _))) => out.simple(DataType::of(&stored).name()),
            Ok(None) => out.simple("none"),
            Err(e) => fail(out, &e),
        }
    }

    /// RENAME / RENAMENX: the value (and its expiry) is put under `to` and
    /// `from` deleted, as one unit.
    pub(super) async fn rename(&mut self, cmd: &[Bytes], only_new: bool, out: &mut Replies) {
        let (from, to) = (&cmd[1], &cmd[2]);
        let (value, expire_at_ms) = match self.stored_entry(from).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return out.error("ERR no such key"),
            Err(e) => return fail(out, &e),
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
        let ops = vec![
            KeyWrite::put_expiring(to.clone(), value, expire_at_ms),
            KeyWrite::delete(from.clone()),
        ];
        if let Err(e) = self.write(ops).await {
            return fail(out, &e);
        }
        if only_new {
            out.integer(1);
        } else {
            out.simple("OK");
        }
    }

    /// COPY source destination [DB 0] [REPLACE]: the copy keeps the
    /// source's expiry.
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
        let (value, expire_at_ms) = match self.stored_entry(from).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return out.integer(0),
            Err(e) => return fail(out, &e),
        };
        if !replace && self.key_exists(to) {
            return out.integer(0);
        }
        let write = KeyWrite::put_expiring(to.clone(), value, expire_at_ms);
        match self.write(vec![write]).await {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: one step of
    /// the index walk, answered `[next cursor, [keys...]]`. Checked as
    /// Redis checks it: the cursor, then each option in turn. With TYPE,
    /// the keys the step found are read to keep those of that type (a
    /// type no key can have keeps none; the walk still goes on).
    pub(super) async fn scan(&self, cmd: &[Bytes], out: &mut Replies) {
        let Some(cursor) = parse_cursor(&cmd[1]) else {
            return out.error("ERR invalid cursor");
        };
        let mut count = SCAN_DEFAULT_COUNT;
        let mut pattern: Option<&[u8]> = None;
        let mut wanted_type: Option<&[u8]> = None;
        let mut j = 2;
        while j < cmd.len() {
            let (option, value) = (&cmd[j], cmd.get(j + 1));
            match value {
                Some(value) if option.eq_ignore_ascii_case(b"count") => match parse_i64(value) {
                    None => return out.error("ERR value is not an integer or out of range"),
                    Some(n) if n < 1 => return out.error("ERR syntax error"),
                    Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
                },
                Some(value) if option.eq_ignore_ascii_case(b"match") => {
                    pattern = (&value[..] != b"*").then_some(&value[..]);
                }
                Some(value) if option.eq_ignore_ascii_case(b"type") => {
                    wanted_type = Some(&value[..]);
                }
                _ => return out.error("ERR syntax error"),
            }
            j += 2;
        }
        let mut keys = Vec::new();
        let next = if self.engine.is_empty() {
            // No key can be present for the rest of the walk: it is over.
            0
        } else {
            self.scan_step(cursor, count, |key| {
                if pattern.is_none_or(|p| glob::matches(p, key, false)) {
                    keys.push(key.to_vec());
                }
            })
        };
        if let Some(wanted) = wanted_type {
            let mut kept = Vec::with_capacity(keys.len());
            for key in keys {
                match self.stored_entry(&key).await {
                    Ok(Some((stored, _)))
                        if wanted.eq_ignore_ascii_case(DataType::of(&stored).name().as_bytes()) =>
                    {
                        kept.push(key);
                    }
                    Ok(_) => {}
                    Err(e) => return fail(out, &e),
                }
            }
            keys = kept;
        }
        out.array(2);
        out.bulk(next.to_string().as_bytes());
        out.array(keys.len());
        for key in &keys {
            out.bulk(key);
        }
    }

    /// One SCAN call's walk from `cursor`: until `count` live keys are
    /// passed to `f`, [`SCAN_ENTRIES_PER_COUNT`] × `count` index entries
    /// (tombstones included) are visited, or the walk ends; returns the
    /// cursor to go on from.
    fn scan_step(&self, mut cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        let most_entries = count
            .saturating_mul(SCAN_ENTRIES_PER_COUNT)
            .min(SCAN_MAX_ENTRIES_PER_CALL);
        let (mut live, mut visited) = (0, 0);
        loop {
            let budget = count
                .saturating_sub(live)
                .min(most_entries - visited)
                .max(1);
            cursor = self.engine.scan_keys(cursor, budget, |key| {
                live += 1;
                f(key);
            });
            visited += budget;
            if cursor == 0 || live >= count || visited >= most_entries {
                return cursor;
            }
        }
    }

    /// KEYS pattern: every key matching the pattern, each once (in byte
    /// order). The index is walked in steps, letting other clients run in
    /// between, so a key present for the whole command is in the reply; the
    /// reply is written out as it is encoded once [`FLUSH_BYTES`] wait.
    pub(super) async fn keys<W: AsyncWrite + Unpin>(
        &mut self,
        cmd: &[Bytes],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<()> {
        let pattern = &cmd[1][..];
        let all = pattern == b"*";
        let mut found = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = self.engine.scan_keys(cursor, KEYS_STEP_ENTRIES, |key| {
                if all || glob::matches(pattern, key, false) {
                    found.push(key.to_vec());
                }
            });
            if cursor == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        if let Some(overlay) = &self.overlay {
            // Inside EXEC: as the transaction's writes left the keyspace.
            found.retain(|key| self.key_exists(key));
            found.extend(
                overlay
                    .written_keys()
                    .filter(|key| all || glob::matches(pattern, key, false))
                    .map(|key| key.to_vec()),
            );
        }
        // A shard compacted during the walk is walked again.
        found.sort_unstable();
        found.dedup();
        out.array(found.len());
        for chunk in found.chunks(KEYS_WRITE_CHUNK) {
            for key in chunk {
                out.bulk(key);
            }
            self.write_early(out, writer).await?;
        }
        Ok(())
    }

    /// RANDOMKEY: a key picked at random, or null when there is none.
    pub(super) fn random_key(&self, out: &mut Replies) {
        out.bulk_or_null(self.engine.random_key().as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursors_are_read_as_strtoul_reads_them() {
        let cases: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"", Some(0)),
            (b"17", Some(17)),
            (b"007", Some(7)),
            (b"+5", Some(5)),
            (b"-0", Some(0)),
            (b"-1", Some(u64::MAX)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b"5\x00junk", Some(5)),
            (b" 5", None),
            (b"5 ", None),
            (b"+", None),
            (b"-", None),
            (b"0x10", None),
            (b"abc", None),
            (b"1.5", None),
        ];
        for &(text, want) in cases {
            assert_eq!(
                parse_cursor(text),
                want,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
