//! The sorted-set commands: ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD,
//! ZCOUNT, ZLEXCOUNT, the ZRANGE family and ZRANGESTORE, ZRANK, ZREVRANK,
//! ZREMRANGEBY*, ZPOPMIN, ZPOPMAX, ZMPOP, ZUNION, ZINTER, ZDIFF and their
//! STORE forms, ZINTERCARD, ZRANDMEMBER and ZSCAN, answered as Redis 7
//! answers them. A command that changes sorted sets holds their keys'
//! stripes from the read to the acknowledged write and writes every set it
//! changes in one unit.

use bytes::Bytes;

use super::collections::{ScanOptions, empty_scan, parse_mpop, positive_count, random_picks};
use super::expiry_args::NOT_AN_INTEGER;
use super::lists::Served;
use super::sorted_set_args::{LexRange, NOT_A_FLOAT, ScoreRange, Selection, parse_score, select};
use super::{CommandError, RespClient, fail, parse_i64};
use crate::datatypes::zset::Entry;
use crate::datatypes::{DataType, Set, SortedSet};
use crate::resp::reply::{Protocol, Replies};

/// ZADD's options.
#[derive(Debug, Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What one ZADD pair did.
enum AddOutcome {
    Added,
    Updated,
    Unchanged,
    Skipped,
}

/// Applies one ZADD pair as Redis's `zsetAdd` does; `Err` if INCR made
/// NaN. The score the member has afterwards comes back with the outcome.
fn add_one(
    set: &mut SortedSet,
    member: &Bytes,
    score: f64,
    flags: AddFlags,
) -> Result<(AddOutcome, f64), ()> {
    match set.score(member) {
        Some(current) => {
            if flags.nx {
                return Ok((AddOutcome::Skipped, current));
            }
            let score = if flags.incr { score + current } else { score };
            if score.is_nan() {
                return Err(());
            }
            if (flags.lt && score >= current) || (flags.gt && score <= current) {
                return Ok((AddOutcome::Skipped, current));
            }
            if score != current {
                set.insert(member.clone(), score);
                return Ok((AddOutcome::Updated, score));
            }
            Ok((AddOutcome::Unchanged, score))
        }
        None if flags.xx => Ok((AddOutcome::Skipped, 0.0)),
        None => {
            set.insert(member.clone(), score);
            Ok((AddOutcome::Added, score))
        }
    }
}

/// Writes `entries` as a range reply: members, with scores when asked
/// (pairs nested in RESP3).
fn reply_entries(out: &mut Replies, entries: &[&Entry], with_scores: bool) {
    let nested = with_scores && out.protocol == Protocol::Resp3;
    out.array(if with_scores && !nested {
        entries.len() * 2
    } else {
        entries.len()
    });
    for entry in entries {
        if nested {
            out.array(2);
        }
        out.bulk(&entry.member);
        if with_scores {
            out.double(entry.score);
        }
    }
}

/// ZUNION, ZINTER and ZDIFF's combinations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ZsetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: f64, value: f64, how: Aggregate) -> f64 {
    match how {
        Aggregate::Sum => {
            let sum = target + value;
            if sum.is_nan() { 0.0 } else { sum }
        }
        Aggregate::Min => {
            if value < target {
                value
            } else {
                target
            }
        }
        Aggregate::Max => {
            if value > target {
                value
            } else {
                target
            }
        }
    }
}

/// A ZUNION-family source: a sorted set, or a set whose members score 1.
enum Source {
    Missing,
    Sorted(SortedSet),
    Plain(Set),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Sorted(s) => s.len(),
            Source::Plain(s) => s.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Sorted(s) => s.score(member),
            Source::Plain(s) => s.contains(member).then_some(1.0),
        }
    }

    fn entries(&self) -> Vec<(Bytes, f64)> {
        match self {
            Source::Missing => Vec::new(),
            Source::Sorted(s) => s.iter().map(|e| (e.member.clone(), e.score)).collect(),
            Source::Plain(s) => s.iter().map(|m| (m.clone(), 1.0)).collect(),
        }
    }
}

/// The combination of `sources` (each with its weight), as Redis's
/// `zunionInterDiffGenericCommand` makes it.
fn combine(op: ZsetOp, sources: &[(Source, f64)], how: Aggregate) -> SortedSet {
    let mut result = SortedSet::default();
    let weighted = |score: f64, weight: f64| {
        let value = score * weight;
        if value.is_nan() { 0.0 } else { value }
    };
    match op {
        ZsetOp::Inter => {
            let mut order: Vec<&(Source, f64)> = sources.iter().collect();
            order.sort_by_key(|(s, _)| s.len());
            let Some(((first, first_weight), others)) = order.split_first() else {
                return result;
            };
            'members: for (member, score) in first.entries() {
                let mut total = weighted(score, *first_weight);
                for (other, weight) in others {
                    match other.score(&member) {
                        Some(value) => total = aggregate(total, value * weight, how),
                        None => continue 'members,
                    }
                }
                result.insert(member, total);
            }
        }
        ZsetOp::Union => {
            let mut order: Vec<&(Source, f64)> = sources.iter().collect();
            order.sort_by_key(|(s, _)| s.len());
            for (source, weight) in order {
                for (member, score) in source.entries() {
                    let value = weighted(score, *weight);
                    let total = match result.score(&member) {
                        Some(existing) => aggregate(existing, value, how),
                        None => value,
                    };
                    result.insert(member, total);
                }
            }
        }
        ZsetOp::Diff => {
            let Some(((first, _), others)) = sources.split_first() else {
                return result;
            };
            for (member, score) in first.entries() {
                if others.iter().all(|(s, _)| s.score(&member).is_none()) {
                    result.insert(member, score);
                }
            }
        }
    }
    result
}

impl RespClient<'_> {
    /// Reads the sorted set at `key`: `Err(())` once an error is answered.
    async fn read_zset(
        &self,
        key: &[u8],
        out: &mut Replies,
    ) -> Result<Option<(SortedSet, u64)>, ()> {
        self.load::<SortedSet>(key).await.map_err(|e| fail(out, &e))
    }

    /// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member
    /// ...], and ZINCRBY key increment member (`zincrby`).
    pub(super) async fn zadd(&mut self, cmd: &[Bytes], zincrby: bool, out: &mut Replies) {
        let mut flags = AddFlags {
            incr: zincrby,
            ..AddFlags::default()
        };
        let mut at = 2;
        if !zincrby {
            while at < cmd.len() {
                let opt = &cmd[at];
                if opt.eq_ignore_ascii_case(b"nx") {
                    flags.nx = true;
                } else if opt.eq_ignore_ascii_case(b"xx") {
                    flags.xx = true;
                } else if opt.eq_ignore_ascii_case(b"ch") {
                    flags.ch = true;
                } else if opt.eq_ignore_ascii_case(b"incr") {
                    flags.incr = true;
                } else if opt.eq_ignore_ascii_case(b"gt") {
                    flags.gt = true;
                } else if opt.eq_ignore_ascii_case(b"lt") {
                    flags.lt = true;
                } else {
                    break;
                }
                at += 1;
            }
        }
        let pairs = &cmd[at..];
        if pairs.is_empty() || pairs.len() % 2 == 1 {
            return out.error("ERR syntax error");
        }
        if flags.nx && flags.xx {
            return out.error("ERR XX and NX options at the same time are not compatible");
        }
        if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
            return out.error("ERR GT, LT, and/or NX options at the same time are not compatible");
        }
        if flags.incr && pairs.len() > 2 {
            return out.error("ERR INCR option supports a single increment-element pair");
        }
        let mut scores = Vec::with_capacity(pairs.len() / 2);
        for pair in pairs.chunks(2) {
            match parse_score(&pair[0]) {
                Some(score) => scores.push(score),
                None => return out.error(NOT_A_FLOAT),
            }
        }
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_zset(key, out).await else {
            return;
        };
        if found.is_none() && flags.xx {
            return if flags.incr {
                out.null()
            } else {
                out.integer(0)
            };
        }
        let (mut set, expire_at_ms) = found.unwrap_or_default();
        let (mut added, mut updated, mut processed) = (0, 0, 0);
        let mut last_score = 0.0;
        for (pair, score) in pairs.chunks(2).zip(scores) {
            match add_one(&mut set, &pair[1], score, flags) {
                Err(()) => return out.error("ERR resulting score is not a number (NaN)"),
                Ok((outcome, score)) => {
                    last_score = score;
                    match outcome {
                        AddOutcome::Added => added += 1,
                        AddOutcome::Updated => updated += 1,
                        AddOutcome::Unchanged => {}
                        AddOutcome::Skipped => continue,
                    }
                    processed += 1;
                }
            }
        }
        if added + updated > 0 {
            set.settle(&self.encoding_limits());
            if let Err(e) = self.store(key, &set, expire_at_ms).await {
                return fail(out, &e);
            }
        }
        if flags.incr {
            if processed > 0 {
                out.double(last_score);
            } else {
                out.null();
            }
        } else {
            out.integer(if flags.ch { added + updated } else { added });
        }
    }

    /// ZSCORE key member.
    pub(super) async fn zscore(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_zset(&cmd[1], out).await {
            match found.and_then(|(s, _)| s.score(&cmd[2])) {
                Some(score) => out.double(score),
                None => out.null(),
            }
        }
    }

    /// ZMSCORE key member...
    pub(super) async fn zmscore(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_zset(&cmd[1], out).await {
            let set = found.map(|(s, _)| s);
            out.array(cmd.len() - 2);
            for member in &cmd[2..] {
                match set.as_ref().and_then(|s| s.score(member)) {
                    Some(score) => out.double(score),
                    None => out.null(),
                }
            }
        }
    }

    /// ZCARD key.
    pub(super) async fn zcard(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_zset(&cmd[1], out).await {
            out.integer(found.map_or(0, |(s, _)| s.len()) as i64);
        }
    }

    /// ZCOUNT key min max (`lex` false) and ZLEXCOUNT key min max.
    pub(super) async fn zcount(&self, cmd: &[Bytes], lex: bool, out: &mut Replies) {
        let selection = if lex {
            LexRange::parse(&cmd[2], &cmd[3]).map(Selection::Lex)
        } else {
            ScoreRange::parse(&cmd[2], &cmd[3]).map(Selection::Score)
        };
        let selection = match selection {
            Ok(selection) => selection,
            Err(text) => return out.error(text),
        };
        if let Ok(found) = self.read_zset(&cmd[1], out).await {
            let set = found.map(|(s, _)| s).unwrap_or_default();
            let entries: Vec<&Entry> = set.iter().collect();
            out.integer(select(&entries, &selection, false, 0, -1).len() as i64);
        }
    }

    /// ZRANK key member (`rev` false) and ZREVRANK key member.
    pub(super) async fn zrank(&self, cmd: &[Bytes], rev: bool, out: &mut Replies) {
        if let Ok(found) = self.read_zset(&cmd[1], out).await {
            let rank = found.and_then(|(s, _)| {
                let rank = s.rank(&cmd[2])?;
                Some(if rev { s.len() - 1 - rank } else { rank })
            });
            match rank {
                Some(rank) => out.integer(rank as i64),
                None => out.null(),
            }
        }
    }

    /// The ZRANGE family. `first` is the argument index of the source key;
    /// `fixed` is the range type and direction the command's name gives
    /// (ZRANGEBYSCORE, ZREVRANGE…), `None` for ZRANGE and ZRANGESTORE,
    /// which read BYSCORE, BYLEX and REV; with `store`, the result goes to
    /// `cmd[1]` and its size is answered.
    pub(super) async fn zrange(
        &mut self,
        cmd: &[Bytes],
        first: usize,
        fixed: Option<(RangeKind, bool)>,
        store: bool,
        out: &mut Replies,
    ) {
        let (mut kind, mut rev) = fixed.unwrap_or((RangeKind::Auto, false));
        let mut with_scores = false;
        let (mut offset, mut limit) = (0i64, -1i64);
        let mut j = first + 3;
        while j < cmd.len() {
            let opt = &cmd[j];
            let left = cmd.len() - j - 1;
            if !store && opt.eq_ignore_ascii_case(b"withscores") {
                with_scores = true;
            } else if opt.eq_ignore_ascii_case(b"limit") && left >= 2 {
                match (parse_i64(&cmd[j + 1]), parse_i64(&cmd[j + 2])) {
                    (Some(o), Some(l)) => (offset, limit) = (o, l),
                    _ => return out.error(NOT_AN_INTEGER),
                }
                j += 2;
            } else if fixed.is_none() && !rev && opt.eq_ignore_ascii_case(b"rev") {
                rev = true;
            } else if kind == RangeKind::Auto && opt.eq_ignore_ascii_case(b"bylex") {
                kind = RangeKind::Lex;
            } else if kind == RangeKind::Auto && opt.eq_ignore_ascii_case(b"byscore") {
                kind = RangeKind::Score;
            } else {
                return out.error("ERR syntax error");
            }
            j += 1;
        }
        if kind == RangeKind::Auto {
            kind = RangeKind::Rank;
        }
        if limit != -1 && kind == RangeKind::Rank {
            return out.error(
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            );
        }
        if with_scores && kind == RangeKind::Lex {
            return out
                .error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        }
        let (mut min, mut max) = (&cmd[first + 1], &cmd[first + 2]);
        if rev && kind != RangeKind::Rank {
            std::mem::swap(&mut min, &mut max);
        }
        let selection = match kind {
            RangeKind::Score => ScoreRange::parse(min, max).map(Selection::Score),
            RangeKind::Lex => LexRange::parse(min, max).map(Selection::Lex),
            _ => match (parse_i64(min), parse_i64(max)) {
                (Some(start), Some(end)) => Ok(Selection::Rank { start, end }),
                _ => Err(NOT_AN_INTEGER),
            },
        };
        let selection = match selection {
            Ok(selection) => selection,
            Err(text) => return out.error(text),
        };
        let _stripes = match store {
            true => self.lock_keys(&cmd[1..3]).await,
            false => None,
        };
        let Ok(found) = self.read_zset(&cmd[first], out).await else {
            return;
        };
        let set = found.map(|(s, _)| s).unwrap_or_default();
        let entries: Vec<&Entry> = set.iter().collect();
        let picked = select(&entries, &selection, rev, offset, limit);
        if !store {
            return reply_entries(out, &picked, with_scores);
        }
        let mut result = SortedSet::default();
        for entry in &picked {
            result.insert(entry.member.clone(), entry.score);
        }
        result.settle(&self.encoding_limits());
        self.store_result(&cmd[1], &result, out).await;
    }

    /// ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX key min max.
    pub(super) async fn zremrange(&mut self, cmd: &[Bytes], kind: RangeKind, out: &mut Replies) {
        let selection = match kind {
            RangeKind::Score => ScoreRange::parse(&cmd[2], &cmd[3]).map(Selection::Score),
            RangeKind::Lex => LexRange::parse(&cmd[2], &cmd[3]).map(Selection::Lex),
            _ => match (parse_i64(&cmd[2]), parse_i64(&cmd[3])) {
                (Some(start), Some(end)) => Ok(Selection::Rank { start, end }),
                _ => Err(NOT_AN_INTEGER),
            },
        };
        let selection = match selection {
            Ok(selection) => selection,
            Err(text) => return out.error(text),
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_zset(key, out).await else {
            return;
        };
        let Some((mut set, expire_at_ms)) = found else {
            return out.integer(0);
        };
        let doomed: Vec<Bytes> = {
            let entries: Vec<&Entry> = set.iter().collect();
            select(&entries, &selection, false, 0, -1)
                .into_iter()
                .map(|e| e.member.clone())
                .collect()
        };
        if doomed.is_empty() {
            return out.integer(0);
        }
        for member in &doomed {
            set.remove(member);
        }
        match self.store(key, &set, expire_at_ms).await {
            Ok(()) => out.integer(doomed.len() as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// ZPOPMIN, ZPOPMAX key [count].
    pub(super) async fn zpop(&mut self, cmd: &[Bytes], max: bool, out: &mut Replies) {
        if cmd.len() > 3 {
            return out.error("ERR syntax error");
        }
        let count = match cmd.get(2).map(|c| positive_count(c)) {
            None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(text)) => return out.error(text),
        };
        let nested = out.protocol == Protocol::Resp3 && count.is_some();
        if self
            .pop_from(&cmd[1..2], max, count, nested, false, out)
            .await
            == Served::Nothing
        {
            out.array(0);
        }
    }

    /// Pops from the first sorted set of `keys` that exists, as Redis's
    /// `genericZpopCommand`: `count` members (None: one, flat reply),
    /// pairs `nested` or flat, with the key first when `emit_key` (ZMPOP,
    /// BZPOPMIN and BZMPOP); answers nothing if no key holds a sorted set.
    pub(super) async fn pop_from(
        &mut self,
        keys: &[Bytes],
        max: bool,
        count: Option<u64>,
        nested: bool,
        emit_key: bool,
        out: &mut Replies,
    ) -> Served {
        let _stripes = self.lock_keys(keys).await;
        let mut found = None;
        for key in keys {
            let Ok(set) = self.read_zset(key, out).await else {
                return Served::Failed;
            };
            if let Some(set) = set {
                found = Some((key, set));
                break;
            }
        }
        let Some((key, (mut set, expire_at_ms))) = found else {
            return Served::Nothing;
        };
        if count == Some(0) {
            out.array(0);
            return Served::Yes;
        }
        let n = count.unwrap_or(1).min(set.len() as u64) as usize;
        let popped: Vec<Entry> = {
            let ends: Vec<Entry> = if max {
                set.iter().rev().take(n).cloned().collect()
            } else {
                set.iter().take(n).cloned().collect()
            };
            for entry in &ends {
                set.remove(&entry.member);
            }
            ends
        };
        if let Err(e) = self.store(key, &set, expire_at_ms).await {
            fail(out, &e);
            return Served::Failed;
        }
        match (nested, emit_key) {
            (false, false) => out.array(popped.len() * 2),
            (true, false) => out.array(popped.len()),
            (false, true) => {
                out.array(popped.len() * 2 + 1);
                out.bulk(key);
            }
            (true, true) => {
                out.array(2);
                out.bulk(key);
                out.array(popped.len());
            }
        }
        for entry in &popped {
            if nested {
                out.array(2);
            }
            out.bulk(&entry.member);
            out.double(entry.score);
        }
        Served::Yes
    }

    /// ZMPOP numkeys key... MIN|MAX [COUNT count].
    pub(super) async fn zmpop(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (keys, max, count) = match parse_mpop(cmd, 1, (b"min", b"max")) {
            Ok(parsed) => parsed,
            Err(text) => return out.error(text),
        };
        let count = Some(count.unwrap_or(1));
        if self.pop_from(&keys, max, count, true, true, out).await == Served::Nothing {
            out.null_array();
        }
    }

    /// ZUNION, ZINTER, ZDIFF numkeys key... [WEIGHTS weight...] [AGGREGATE
    /// SUM|MIN|MAX] [WITHSCORES]; their STORE forms (`store`: destination
    /// first); ZINTERCARD numkeys key... [LIMIT limit] (`cardinality`).
    pub(super) async fn zcombine(
        &mut self,
        cmd: &[Bytes],
        op: ZsetOp,
        store: bool,
        cardinality: bool,
        out: &mut Replies,
    ) {
        let numkeys_at = if store { 2 } else { 1 };
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
        let numkeys = match parse_i64(&cmd[numkeys_at]) {
            None => return out.error(NOT_AN_INTEGER),
            Some(n) if n < 1 => {
                return out.error(&format!(
                    "ERR at least 1 input key is needed for '{name}' command"
                ));
            }
            Some(n) => n as u64,
        };
        if numkeys > (cmd.len() - numkeys_at - 1) as u64 {
            return out.error("ERR syntax error");
        }
        let keys_end = numkeys_at + 1 + numkeys as usize;
        let mut sources = Vec::with_capacity(numkeys as usize);
        for key in &cmd[numkeys_at + 1..keys_end] {
            let source = match self.stored_entry(key).await {
                Err(e) => return fail(out, &e),
                Ok(None) => Source::Missing,
                Ok(Some((stored, _))) => match DataType::of(&stored) {
                    DataType::SortedSet => match SortedSet::decode(stored) {
                        Ok(set) => Source::Sorted(set),
                        Err(e) => return fail(out, &CommandError::from(e)),
                    },
                    DataType::Set => match Set::decode(stored) {
                        Ok(set) => Source::Plain(set),
                        Err(e) => return fail(out, &CommandError::from(e)),
                    },
                    _ => return fail(out, &CommandError::WrongType),
                },
            };
            sources.push((source, 1.0));
        }
        let (mut how, mut with_scores, mut limit) = (Aggregate::Sum, false, 0u64);
        let mut j = keys_end;
        while j < cmd.len() {
            let remaining = cmd.len() - j;
            let opt = &cmd[j];
            if op != ZsetOp::Diff
                && !cardinality
                && remaining > sources.len()
                && opt.eq_ignore_ascii_case(b"weights")
            {
                for (k, source) in sources.iter_mut().enumerate() {
                    match parse_score(&cmd[j + 1 + k]) {
                        Some(weight) => source.1 = weight,
                        None => return out.error("ERR weight value is not a float"),
                    }
                }
                j += 1 + sources.len();
            } else if op != ZsetOp::Diff
                && !cardinality
                && remaining >= 2
                && opt.eq_ignore_ascii_case(b"aggregate")
            {
                let word = &cmd[j + 1];
                how = if word.eq_ignore_ascii_case(b"sum") {
                    Aggregate::Sum
                } else if word.eq_ignore_ascii_case(b"min") {
                    Aggregate::Min
                } else if word.eq_ignore_ascii_case(b"max") {
                    Aggregate::Max
                } else {
                    return out.error("ERR syntax error");
                };
                j += 2;
            } else if !store && !cardinality && opt.eq_ignore_ascii_case(b"withscores") {
                with_scores = true;
                j += 1;
            } else if cardinality && remaining >= 2 && opt.eq_ignore_ascii_case(b"limit") {
                match parse_i64(&cmd[j + 1]) {
                    Some(n) if n >= 0 => limit = n as u64,
                    _ => return out.error("ERR LIMIT can't be negative"),
                }
                j += 2;
            } else {
                return out.error("ERR syntax error");
            }
        }
        let _stripes = match store {
            true => self.lock_keys(&cmd[1..2]).await,
            false => None,
        };
        let mut result = combine(op, &sources, how);
        if cardinality {
            let count = result.len() as u64;
            return out.integer(if limit == 0 { count } else { count.min(limit) } as i64);
        }
        if store {
            result.settle(&self.encoding_limits());
            return self.store_result(&cmd[1], &result, out).await;
        }
        let entries: Vec<&Entry> = result.iter().collect();
        reply_entries(out, &entries, with_scores);
    }

    /// ZRANDMEMBER key [count [WITHSCORES]].
    pub(super) async fn zrandmember(&self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() == 2 {
            if let Ok(found) = self.read_zset(&cmd[1], out).await {
                let set = found.map(|(s, _)| s).unwrap_or_default();
                let picked = (!set.is_empty())
                    .then(|| set.iter().nth(fastrand::usize(..set.len())))
                    .flatten();
                out.bulk_or_null(picked.map(|e| &e.member[..]));
            }
            return;
        }
        let Some(count) = parse_i64(&cmd[2]) else {
            return out.error(NOT_AN_INTEGER);
        };
        let with_scores = match cmd.get(3) {
            None => false,
            Some(word) if cmd.len() == 4 && word.eq_ignore_ascii_case(b"withscores") => true,
            Some(_) => return out.error("ERR syntax error"),
        };
        if with_scores && !(i64::MIN / 2..=i64::MAX / 2).contains(&count) {
            return out.error("ERR value is out of range");
        }
        let Ok(found) = self.read_zset(&cmd[1], out).await else {
            return;
        };
        let set = found.map(|(s, _)| s).unwrap_or_default();
        let entries: Vec<&Entry> = set.iter().collect();
        // A count that takes the whole set answers it highest first, the
        // order Redis's iteration over a sorted set takes.
        let whole = count > 0 && count as u64 >= entries.len() as u64;
        let picked: Vec<&Entry> = random_picks(entries.len(), count)
            .into_iter()
            .map(|i| entries[if whole { entries.len() - 1 - i } else { i }])
            .collect();
        reply_entries(out, &picked, with_scores);
    }

    /// ZSCAN key cursor [MATCH pattern] [COUNT count]: the whole set in
    /// one reply, cursor 0.
    pub(super) async fn zscan(&self, cmd: &[Bytes], out: &mut Replies) {
        if !Self::scan_cursor_ok(cmd, out) {
            return;
        }
        let Ok(found) = self.read_zset(&cmd[1], out).await else {
            return;
        };
        let Some((set, _)) = found else {
            return empty_scan(out);
        };
        let options = match ScanOptions::parse(&cmd[3..]) {
            Ok(options) => options,
            Err(text) => return out.error(text),
        };
        let kept: Vec<&Entry> = set.iter().filter(|e| options.keeps(&e.member)).collect();
        out.array(2);
        out.bulk(b"0");
        out.array(kept.len() * 2);
        for entry in kept {
            out.bulk(&entry.member);
            let text = crate::resp::reply::format_double(entry.score);
            out.bulk(text.as_bytes());
        }
    }
}

/// What a ZRANGE-family command's range is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RangeKind {
    /// Not yet known (ZRANGE before its options are read).
    Auto,
    /// Ranks.
    Rank,
    /// Scores.
    Score,
    /// Member bytes (all scores equal).
    Lex,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zset(pairs: &[(&str, f64)]) -> SortedSet {
        let mut set = SortedSet::default();
        for (m, s) in pairs {
            set.insert(Bytes::copy_from_slice(m.as_bytes()), *s);
        }
        set
    }

    fn pairs(set: &SortedSet) -> Vec<(String, f64)> {
        set.iter()
            .map(|e| (String::from_utf8_lossy(&e.member).into_owned(), e.score))
            .collect()
    }

    #[test]
    fn zadd_flags_follow_redis() {
        let mut set = zset(&[("a", 1.0)]);
        let gt = AddFlags {
            gt: true,
            ..AddFlags::default()
        };
        let a = Bytes::from_static(b"a");
        assert!(matches!(
            add_one(&mut set, &a, 0.5, gt),
            Ok((AddOutcome::Skipped, _))
        ));
        assert!(matches!(
            add_one(&mut set, &a, 2.0, gt),
            Ok((AddOutcome::Updated, _))
        ));
        let incr = AddFlags {
            incr: true,
            ..AddFlags::default()
        };
        assert!(
            matches!(add_one(&mut set, &a, 1.0, incr), Ok((AddOutcome::Updated, s)) if s == 3.0)
        );
        let mut inf = zset(&[("a", f64::INFINITY)]);
        assert!(add_one(&mut inf, &a, f64::NEG_INFINITY, incr).is_err());
    }

    #[test]
    fn combinations_weigh_and_aggregate() {
        let sources = [
            (Source::Sorted(zset(&[("a", 1.0), ("b", 2.0)])), 2.0),
            (Source::Sorted(zset(&[("b", 3.0), ("c", 4.0)])), 1.0),
        ];
        assert_eq!(
            pairs(&combine(ZsetOp::Union, &sources, Aggregate::Sum)),
            vec![("a".into(), 2.0), ("c".into(), 4.0), ("b".into(), 7.0)]
        );
        assert_eq!(
            pairs(&combine(ZsetOp::Inter, &sources, Aggregate::Max)),
            vec![("b".into(), 4.0)]
        );
        assert_eq!(
            pairs(&combine(ZsetOp::Diff, &sources, Aggregate::Sum)),
            vec![("a".into(), 1.0)]
        );
    }
}
