//! The set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD,
//! SPOP, SRANDMEMBER, SMOVE, SINTER, SUNION, SDIFF and their STORE forms,
//! SINTERCARD and SSCAN, answered as Redis 7 answers them. A command that
//! changes sets holds their keys' stripes from the read to the
//! acknowledged write and writes every set it changes in one unit.

use bytes::Bytes;

use super::collections::{ScanOptions, empty_scan, positive_count, random_picks, store_write};
use super::expiry_args::NOT_AN_INTEGER;
use super::{RespClient, fail, parse_i64};
use crate::datatypes::{EncodingLimits, Set};
use crate::resp::reply::Replies;

/// Which combination SINTER, SUNION and SDIFF make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SetOp {
    /// Members in every set.
    Inter,
    /// Members in any set.
    Union,
    /// Members of the first set in none of the others.
    Diff,
}

/// The sets' combination, as a new set built member by member as Redis
/// builds it (an intset while it can be one), in the order Redis answers.
fn combine(op: SetOp, sets: &[Option<Set>], limits: &EncodingLimits) -> Set {
    let mut result = Set::default();
    match op {
        SetOp::Inter => {
            if sets.iter().any(Option::is_none) {
                return result;
            }
            let mut present: Vec<&Set> = sets.iter().flatten().collect();
            present.sort_by_key(|s| s.len());
            if let Some((smallest, others)) = present.split_first() {
                for member in smallest.iter() {
                    if others.iter().all(|s| s.contains(member)) {
                        result.add(member.clone(), limits);
                    }
                }
            }
        }
        SetOp::Union => {
            for set in sets.iter().flatten() {
                for member in set.iter() {
                    result.add(member.clone(), limits);
                }
            }
        }
        SetOp::Diff => {
            let Some(Some(first)) = sets.first() else {
                return result;
            };
            for member in first.iter() {
                if !sets[1..].iter().flatten().any(|s| s.contains(member)) {
                    result.add(member.clone(), limits);
                }
            }
        }
    }
    result
}

fn reply_set(out: &mut Replies, set: &Set) {
    out.set(set.len());
    for member in set.iter() {
        out.bulk(member);
    }
}

impl RespClient<'_> {
    /// Reads the set at `key`: `Err(())` once an error is answered.
    async fn read_set(&self, key: &[u8], out: &mut Replies) -> Result<Option<(Set, u64)>, ()> {
        self.load::<Set>(key).await.map_err(|e| fail(out, &e))
    }

    /// Reads the sets at `keys` (`None` for a missing key), checking every
    /// key's type as Redis does: `Err(())` once an error is answered.
    async fn read_sets(&self, keys: &[Bytes], out: &mut Replies) -> Result<Vec<Option<Set>>, ()> {
        let mut sets = Vec::with_capacity(keys.len());
        for key in keys {
            sets.push(self.read_set(key, out).await?.map(|(set, _)| set));
        }
        Ok(sets)
    }

    /// SADD key member...: how many members were new.
    pub(super) async fn sadd(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_set(key, out).await else {
            return;
        };
        let (mut set, expire_at_ms) = found.unwrap_or_default();
        let limits = self.encoding_limits();
        let added = cmd[2..]
            .iter()
            .filter(|m| set.add((*m).clone(), &limits))
            .count();
        if added == 0 {
            return out.integer(0);
        }
        match self.store(key, &set, expire_at_ms).await {
            Ok(()) => out.integer(added as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// SMEMBERS key (a set in RESP3).
    pub(super) async fn smembers(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_set(&cmd[1], out).await {
            reply_set(out, &found.map(|(s, _)| s).unwrap_or_default());
        }
    }

    /// SISMEMBER key member: 1 or 0.
    pub(super) async fn sismember(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_set(&cmd[1], out).await {
            out.integer(i64::from(found.is_some_and(|(s, _)| s.contains(&cmd[2]))));
        }
    }

    /// SMISMEMBER key member...: 1 or 0 per member.
    pub(super) async fn smismember(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_set(&cmd[1], out).await {
            let set = found.map(|(s, _)| s);
            out.array(cmd.len() - 2);
            for member in &cmd[2..] {
                out.integer(i64::from(set.as_ref().is_some_and(|s| s.contains(member))));
            }
        }
    }

    /// SCARD key.
    pub(super) async fn scard(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_set(&cmd[1], out).await {
            out.integer(found.map_or(0, |(s, _)| s.len()) as i64);
        }
    }

    /// SPOP key [count]: random members, removed.
    pub(super) async fn spop(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() > 3 {
            return out.error("ERR syntax error");
        }
        let count = match cmd.get(2).map(|c| positive_count(c)) {
            None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(text)) => return out.error(text),
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_set(key, out).await else {
            return;
        };
        let Some((mut set, expire_at_ms)) = found else {
            return match count {
                None => out.null(),
                Some(_) => out.set(0),
            };
        };
        let popped: Vec<Bytes> = match count {
            Some(0) => return out.set(0),
            Some(n) if n >= set.len() as u64 => {
                let all = set.iter().cloned().collect();
                set = Set::default();
                all
            }
            n => (0..n.unwrap_or(1))
                .filter_map(|_| set.remove_index(fastrand::usize(..set.len())))
                .collect(),
        };
        if let Err(e) = self.store(key, &set, expire_at_ms).await {
            return fail(out, &e);
        }
        match count {
            None => out.bulk_or_null(popped.first().map(|m| &m[..])),
            Some(_) => {
                out.set(popped.len());
                for member in &popped {
                    out.bulk(member);
                }
            }
        }
    }

    /// SRANDMEMBER key [count].
    pub(super) async fn srandmember(&self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() > 3 {
            return out.error("ERR syntax error");
        }
        let count = match cmd.get(2).map(|c| parse_i64(c)) {
            None => None,
            Some(None) => return out.error(NOT_AN_INTEGER),
            Some(Some(i64::MIN)) => {
                return out.error(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                );
            }
            Some(Some(n)) => Some(n),
        };
        let Ok(found) = self.read_set(&cmd[1], out).await else {
            return;
        };
        let set = found.map(|(s, _)| s).unwrap_or_default();
        let Some(count) = count else {
            let picked = (!set.is_empty())
                .then(|| set.get_index(fastrand::usize(..set.len())))
                .flatten();
            return out.bulk_or_null(picked.map(|m| &m[..]));
        };
        let picks = random_picks(set.len(), count);
        out.array(picks.len());
        for index in picks {
            if let Some(member) = set.get_index(index) {
                out.bulk(member);
            }
        }
    }

    /// SMOVE source destination member: 1 if moved, else 0.
    pub(super) async fn smove(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (from, to, member) = (&cmd[1], &cmd[2], &cmd[3]);
        let _stripes = self.lock_keys(&cmd[1..3]).await;
        let Ok(source) = self.read_set(from, out).await else {
            return;
        };
        let Some((mut source, source_expiry)) = source else {
            return out.integer(0);
        };
        let Ok(destination) = self.read_set(to, out).await else {
            return;
        };
        if from == to {
            return out.integer(i64::from(source.contains(member)));
        }
        if !source.remove(member) {
            return out.integer(0);
        }
        let (mut destination, destination_expiry) = destination.unwrap_or_default();
        destination.add(member.clone(), &self.encoding_limits());
        let writes = vec![
            store_write(from, &source, source_expiry),
            store_write(to, &destination, destination_expiry),
        ];
        match self.write(writes).await {
            Ok(()) => out.integer(1),
            Err(e) => fail(out, &e),
        }
    }

    /// SINTER, SUNION, SDIFF key...: the combination (a set in RESP3).
    pub(super) async fn set_combine(&self, cmd: &[Bytes], op: SetOp, out: &mut Replies) {
        let Ok(sets) = self.read_sets(&cmd[1..], out).await else {
            return;
        };
        reply_set(out, &combine(op, &sets, &self.encoding_limits()));
    }

    /// SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key...: the
    /// combination stored at `destination` (replacing whatever it held,
    /// without expiry; deleted if empty), answered with its size.
    pub(super) async fn set_combine_store(&mut self, cmd: &[Bytes], op: SetOp, out: &mut Replies) {
        let _stripes = self.lock_keys(&cmd[1..]).await;
        let Ok(sets) = self.read_sets(&cmd[2..], out).await else {
            return;
        };
        let result = combine(op, &sets, &self.encoding_limits());
        self.store_result(&cmd[1], &result, out).await;
    }

    /// SINTERCARD numkeys key... [LIMIT limit].
    pub(super) async fn sintercard(&self, cmd: &[Bytes], out: &mut Replies) {
        let numkeys = match parse_i64(&cmd[1]) {
            Some(n) if n >= 1 => n as u64,
            _ => return out.error("ERR numkeys should be greater than 0"),
        };
        if numkeys > (cmd.len() - 2) as u64 {
            return out.error("ERR Number of keys can't be greater than number of args");
        }
        let keys_end = 2 + numkeys as usize;
        let mut limit = 0u64;
        let mut j = keys_end;
        while j < cmd.len() {
            match cmd.get(j + 1) {
                Some(value) if cmd[j].eq_ignore_ascii_case(b"limit") => match parse_i64(value) {
                    Some(n) if n >= 0 => limit = n as u64,
                    _ => return out.error("ERR LIMIT can't be negative"),
                },
                _ => return out.error("ERR syntax error"),
            }
            j += 2;
        }
        let Ok(sets) = self.read_sets(&cmd[2..keys_end], out).await else {
            return;
        };
        let count = combine(SetOp::Inter, &sets, &self.encoding_limits()).len() as u64;
        out.integer(if limit == 0 { count } else { count.min(limit) } as i64);
    }

    /// SSCAN key cursor [MATCH pattern] [COUNT count]: the whole set in one
    /// reply, cursor 0.
    pub(super) async fn sscan(&self, cmd: &[Bytes], out: &mut Replies) {
        if !Self::scan_cursor_ok(cmd, out) {
            return;
        }
        let Ok(found) = self.read_set(&cmd[1], out).await else {
            return;
        };
        let Some((set, _)) = found else {
            return empty_scan(out);
        };
        let options = match ScanOptions::parse(&cmd[3..]) {
            Ok(options) => options,
            Err(text) => return out.error(text),
        };
        let kept: Vec<&Bytes> = set.iter().filter(|m| options.keeps(m)).collect();
        out.array(2);
        out.bulk(b"0");
        out.array(kept.len());
        for member in kept {
            out.bulk(member);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(members: &[&str]) -> Option<Set> {
        let mut set = Set::default();
        for m in members {
            set.add(
                Bytes::copy_from_slice(m.as_bytes()),
                &EncodingLimits::default(),
            );
        }
        Some(set)
    }

    fn members(set: &Set) -> Vec<String> {
        set.iter()
            .map(|m| String::from_utf8_lossy(m).into_owned())
            .collect()
    }

    #[test]
    fn combinations_are_redis_s() {
        let sets = [set(&["3", "1", "2"]), set(&["2", "3", "4"])];
        let limits = EncodingLimits::default();
        assert_eq!(members(&combine(SetOp::Inter, &sets, &limits)), ["2", "3"]);
        assert_eq!(
            members(&combine(SetOp::Union, &sets, &limits)),
            ["1", "2", "3", "4"]
        );
        assert_eq!(members(&combine(SetOp::Diff, &sets, &limits)), ["1"]);
        let with_missing = [set(&["a"]), None];
        assert!(combine(SetOp::Inter, &with_missing, &limits).is_empty());
        assert_eq!(
            members(&combine(SetOp::Diff, &with_missing, &limits)),
            ["a"]
        );
        assert!(combine(SetOp::Diff, &[None, set(&["a"])], &limits).is_empty());
    }
}
