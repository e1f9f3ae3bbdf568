//! The string commands: GET, SET (with its expiry options, NX, XX and
//! GET), MGET, MSET, SETNX,
//! GETSET, GETDEL, MSETNX, STRLEN, APPEND, GETRANGE / SUBSTR, SETRANGE and
//! LCS, answered as Redis 7 answers them. Every command that reads a key
//! and writes it back holds the key's stripe meanwhile (see
//! [`super::KeyLocks`]); inside EXEC each reads the transaction's writes.

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::expiry_args::{ExpiryOption, NOT_AN_INTEGER, OptionsOf, SYNTAX_ERROR, StringOptions};
use super::{
    GET_RUN_KEYS, KeyWrite, RespClient, arity_error, fail, parse_i64, put_string,
    put_string_expiring,
};
use crate::datatypes::{WRONG_TYPE, string_of};
use crate::expiry;
use crate::resp::reply::Replies;

const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// GETRANGE's slice of `value` from `start` to `end` (both inclusive,
/// negative from the end), as Redis computes it.
fn range_of(value: &[u8], start: i64, end: i64) -> &[u8] {
    let len = value.len() as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return &[];
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    if start > end {
        return &[];
    }
    &value[start as usize..=end as usize]
}

/// LCS's options.
#[derive(Debug, Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

impl LcsOptions {
    fn parse(args: &[Bytes]) -> Result<Self, &'static str> {
        let mut options = LcsOptions::default();
        let mut i = 0;
        while i < args.len() {
            let opt = args[i].to_ascii_uppercase();
            match &opt[..] {
                b"IDX" => options.idx = true,
                b"LEN" => options.len = true,
                b"WITHMATCHLEN" => options.with_match_len = true,
                b"MINMATCHLEN" if i + 1 < args.len() => {
                    let min = parse_i64(&args[i + 1]).ok_or(NOT_AN_INTEGER)?;
                    options.min_match_len = min.max(0) as u64;
                    i += 1;
                }
                _ => return Err(SYNTAX_ERROR),
            }
            i += 1;
        }
        if options.len && options.idx {
            return Err("ERR If you want both the length and indexes, please just use IDX.");
        }
        Ok(options)
    }
}

/// One run of matching bytes: its range in each string (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Match {
    a: (usize, usize),
    b: (usize, usize),
}

impl Match {
    fn len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }
}

/// The longest common subsequence of `a` and `b`, and its matching runs
/// from the end backwards, found as Redis finds them (the same table and
/// the same walk back through it, so ties resolve alike).
fn lcs(a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
    let width = b.len() + 1;
    let mut table = vec![0u32; (a.len() + 1) * width];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let total = table[a.len() * width + b.len()] as usize;
    let mut common = vec![0u8; total];
    let mut matches = Vec::new();
    let mut current: Option<Match> = None;
    let (mut i, mut j, mut left) = (a.len(), b.len(), total);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[left - 1] = a[i - 1];
            match &mut current {
                None => {
                    current = Some(Match {
                        a: (i - 1, i - 1),
                        b: (j - 1, j - 1),
                    });
                }
                Some(run) if run.a.0 == i && run.b.0 == j => {
                    run.a.0 -= 1;
                    run.b.0 -= 1;
                }
                Some(_) => emit = true,
            }
            if current.is_some_and(|run| run.a.0 == 0 || run.b.0 == 0) {
                emit = true;
            }
            left -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * width + j] > table[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if current.is_some() {
                emit = true;
            }
        }
        if emit && let Some(run) = current.take() {
            matches.push(run);
        }
    }
    (common, matches)
}

impl RespClient<'_> {
    /// SET key value [NX | XX] [GET] [EX | PX | EXAT | PXAT time |
    /// KEEPTTL]: a plain SET clears the key's expiry, KEEPTTL keeps it.
    pub(super) async fn set(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() == 3 {
            if let Some(overlay) = &mut self.overlay {
                overlay.write(put_string(cmd[1].clone(), cmd[2].clone()));
                out.simple("OK");
            } else {
                self.set_run(std::iter::once(cmd), out).await;
            }
            return;
        }
        let options = match StringOptions::parse(&cmd[3..], OptionsOf::Set) {
            Ok(options) => options,
            Err(text) => return out.error(text),
        };
        let timed = match options.expiry.expire_at_ms(expiry::now_ms(), "set") {
            Ok(timed) => timed,
            Err(text) => return out.error(&text),
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let reads_old = options.get || options.expiry == ExpiryOption::Keep;
        // The old value whatever its type (KEEPTTL keeps a collection's
        // expiry too); GET needs it to be a string.
        let old = if reads_old {
            match self.stored_entry(key).await {
                Ok(old) => Some(old),
                Err(e) => return fail(out, &e),
            }
        } else {
            None
        };
        let old_string = match &old {
            Some(Some((stored, _))) => match string_of(stored.clone()) {
                Some(value) => Some(value),
                None if options.get => return out.error(WRONG_TYPE),
                None => None,
            },
            _ => None,
        };
        let found = match &old {
            Some(old) => old.is_some(),
            None => self.key_exists(key),
        };
        if (options.nx && found) || (options.xx && !found) {
            return match options.get {
                true => out.bulk_or_null(old_string.as_deref()),
                false => out.null(),
            };
        }
        let expire_at_ms = match (timed, &old) {
            (Some(at), _) => at,
            (None, Some(Some((_, kept)))) if options.expiry == ExpiryOption::Keep => *kept,
            _ => 0,
        };
        let write = put_string_expiring(key.clone(), cmd[2].clone(), expire_at_ms);
        match self.write(vec![write]).await {
            Ok(()) if options.get => out.bulk_or_null(old_string.as_deref()),
            Ok(()) => out.simple("OK"),
            Err(e) => fail(out, &e),
        }
    }

    /// SETNX key value: 1 if it was set, 0 if the key had a value.
    pub(super) async fn setnx(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        if self.key_exists(key) {
            return out.integer(0);
        }
        match self
            .write(vec![put_string(key.clone(), cmd[2].clone())])
            .await
        {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// GETSET key value: the old value (or null), the new one set.
    pub(super) async fn getset(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let old = match self.value(key).await {
            Ok(old) => old,
            Err(e) => return fail(out, &e),
        };
        match self
            .write(vec![put_string(key.clone(), cmd[2].clone())])
            .await
        {
            Ok(()) => out.bulk_or_null(old.as_deref()),
            Err(e) => fail(out, &e),
        }
    }

    /// GETDEL key: the value (or null), and the key deleted.
    pub(super) async fn getdel(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let old = match self.value(key).await {
            Ok(Some(old)) => old,
            Ok(None) => return out.null(),
            Err(e) => return fail(out, &e),
        };
        match self.write(vec![KeyWrite::delete(key.clone())]).await {
            Ok(()) => out.bulk(&old),
            Err(e) => fail(out, &e),
        }
    }

    /// MSETNX key value [key value ...]: all set as one unit (1) if none
    /// of the keys has a value, else none (0).
    pub(super) async fn msetnx(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len().is_multiple_of(2) {
            return out.error(&arity_error("msetnx"));
        }
        let keys: Vec<Bytes> = cmd[1..].iter().step_by(2).cloned().collect();
        let _stripes = self.lock_keys(&keys).await;
        if keys.iter().any(|key| self.key_exists(key)) {
            return out.integer(0);
        }
        let puts = cmd[1..]
            .chunks(2)
            .map(|kv| put_string(kv[0].clone(), kv[1].clone()))
            .collect();
        match self.write(puts).await {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// STRLEN key: the value's length in bytes, 0 for no value.
    pub(super) async fn strlen(&mut self, cmd: &[Bytes], out: &mut Replies) {
        match self.value(&cmd[1]).await {
            Ok(value) => out.integer(value.map_or(0, |v| v.len()) as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// APPEND key value: the length after appending (the expiry stays).
    pub(super) async fn append(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let mut expire_at_ms = 0;
        let new = match self.entry(key).await {
            Ok(None) => cmd[2].clone(),
            Ok(Some((old, at))) => {
                expire_at_ms = at;
                if old.len() as u128 + cmd[2].len() as u128 > self.max_value_bytes() as u128 {
                    return out.error(TOO_LONG);
                }
                let mut new = Vec::with_capacity(old.len() + cmd[2].len());
                new.extend_from_slice(&old);
                new.extend_from_slice(&cmd[2]);
                Bytes::from(new)
            }
            Err(e) => return fail(out, &e),
        };
        let len = new.len() as i64;
        match self
            .write(vec![put_string_expiring(key.clone(), new, expire_at_ms)])
            .await
        {
            Ok(()) => out.integer(len),
            Err(e) => fail(out, &e),
        }
    }

    /// GETRANGE (and SUBSTR) key start end.
    pub(super) async fn getrange(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (Some(start), Some(end)) = (parse_i64(&cmd[2]), parse_i64(&cmd[3])) else {
            return out.error(NOT_AN_INTEGER);
        };
        match self.value(&cmd[1]).await {
            Ok(value) => out.bulk(range_of(value.as_deref().unwrap_or_default(), start, end)),
            Err(e) => fail(out, &e),
        }
    }

    /// SETRANGE key offset value: the length after writing `value` at
    /// `offset` (zero bytes filling any gap; the expiry stays).
    pub(super) async fn setrange(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let piece = &cmd[3];
        let offset = match parse_i64(&cmd[2]) {
            None => return out.error(NOT_AN_INTEGER),
            Some(offset) if offset < 0 => return out.error("ERR offset is out of range"),
            Some(offset) => offset as u64,
        };
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (old, expire_at_ms) = match self.entry(key).await {
            Ok(Some((old, at))) => (Some(old), at),
            Ok(None) => (None, 0),
            Err(e) => return fail(out, &e),
        };
        if piece.is_empty() {
            return out.integer(old.map_or(0, |v| v.len()) as i64);
        }
        if u128::from(offset) + piece.len() as u128 > self.max_value_bytes() as u128 {
            return out.error(TOO_LONG);
        }
        let offset = offset as usize;
        let old = old.unwrap_or_default();
        let mut new = old.to_vec();
        if new.len() < offset + piece.len() {
            new.resize(offset + piece.len(), 0);
        }
        new[offset..offset + piece.len()].copy_from_slice(piece);
        let len = new.len() as i64;
        let write = put_string_expiring(key.clone(), Bytes::from(new), expire_at_ms);
        match self.write(vec![write]).await {
            Ok(()) => out.integer(len),
            Err(e) => fail(out, &e),
        }
    }

    /// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN].
    pub(super) async fn lcs(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (a, b) = match (self.value(&cmd[1]).await, self.value(&cmd[2]).await) {
            (Ok(a), Ok(b)) => (a.unwrap_or_default(), b.unwrap_or_default()),
            (Err(e), _) | (_, Err(e)) => return fail(out, &e),
        };
        let options = match LcsOptions::parse(&cmd[3..]) {
            Ok(options) => options,
            Err(text) => return out.error(text),
        };
        let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
        if cells * 4 > self.max_value_bytes() as u128 {
            return out.error(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            );
        }
        let (common, matches) = lcs(&a, &b);
        if options.idx {
            let shown: Vec<&Match> = matches
                .iter()
                .filter(|m| options.min_match_len == 0 || m.len() as u64 >= options.min_match_len)
                .collect();
            out.map(2);
            out.bulk(b"matches");
            out.array(shown.len());
            for m in shown {
                out.array(2 + usize::from(options.with_match_len));
                for (from, to) in [m.a, m.b] {
                    out.array(2);
                    out.integer(from as i64);
                    out.integer(to as i64);
                }
                if options.with_match_len {
                    out.integer(m.len() as i64);
                }
            }
            out.bulk(b"len");
            out.integer(common.len() as i64);
        } else if options.len {
            out.integer(common.len() as i64);
        } else {
            out.bulk(&common);
        }
    }

    /// MGET key...: keys are resolved in runs and their replies written as
    /// they come, so a long MGET is not held whole in memory; a key that
    /// fails gets an error element in its place.
    pub(super) async fn mget<W: AsyncWrite + Unpin>(
        &mut self,
        cmd: &[Bytes],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<()> {
        out.array(cmd.len() - 1);
        for keys in cmd[1..].chunks(GET_RUN_KEYS) {
            let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            self.get_run(&keys, true, out).await;
            self.write_early(out, writer).await?;
        }
        Ok(())
    }

    /// MSET key value [key value ...], as one unit in storage.
    pub(super) async fn mset(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len().is_multiple_of(2) {
            return out.error(&arity_error("mset"));
        }
        let puts = cmd[1..]
            .chunks(2)
            .map(|kv| put_string(kv[0].clone(), kv[1].clone()))
            .collect();
        match self.write(puts).await {
            Ok(()) => out.simple("OK"),
            Err(e) => fail(out, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_redis() {
        assert_eq!(range_of(b"This is a string", 0, 3), b"This");
        assert_eq!(range_of(b"This is a string", -3, -1), b"ing");
        assert_eq!(range_of(b"This is a string", 0, -1), b"This is a string");
        assert_eq!(range_of(b"This is a string", 10, 100), b"string");
        assert_eq!(range_of(b"abc", -1, -2), b"");
        assert_eq!(range_of(b"abc", 2, 1), b"");
        assert_eq!(range_of(b"", 0, -1), b"");
        assert_eq!(range_of(b"abc", -100, 0), b"a");
    }

    #[test]
    fn lcs_finds_redis_s_matches() {
        let (common, matches) = lcs(b"ohmytext", b"mynewtext");
        assert_eq!(common, b"mytext");
        assert_eq!(
            matches,
            vec![
                Match {
                    a: (4, 7),
                    b: (5, 8)
                },
                Match {
                    a: (2, 3),
                    b: (0, 1)
                },
            ]
        );
        assert_eq!(lcs(b"", b"abc").0, b"");
    }
}
