//! How the sorted-set commands read their arguments: scores as Redis's
//! `getDoubleFromObject` reads them, score ranges as `zslParseRange`,
//! lexical ranges as `zslParseLexRangeItem`, each with Redis's error.

use std::ffi::c_char;

use bytes::Bytes;

use crate::datatypes::zset::Entry;

/// A score that does not parse.
pub(super) const NOT_A_FLOAT: &str = "ERR value is not a valid float";
/// A score range bound that does not parse.
pub(super) const BAD_SCORE_RANGE: &str = "ERR min or max is not a float";
/// A lexical range bound that does not parse.
pub(super) const BAD_LEX_RANGE: &str = "ERR min or max not valid string range item";

/// C's `strtod` over `text` up to its first NUL byte: the value and how
/// many bytes it read.
fn strtod(text: &[u8]) -> (f64, usize) {
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let mut owned = Vec::with_capacity(text.len() + 1);
    owned.extend_from_slice(text);
    owned.push(0);
    let mut end: *mut c_char = std::ptr::null_mut();
    // SAFETY: `owned` is NUL-terminated and outlives the call; strtod
    // stores into `end` a pointer into it.
    let value = unsafe { libc::strtod(owned.as_ptr().cast(), &mut end) };
    // SAFETY: strtod's end pointer points into `owned`, at or after its
    // start.
    let read = unsafe { end.cast::<u8>().offset_from(owned.as_ptr()) };
    (value, usize::try_from(read).unwrap_or(0))
}

/// A score as Redis reads one (ZADD, ZINCRBY, WEIGHTS): the whole
/// argument a number, no leading space, not NaN, not out of range.
pub(super) fn parse_score(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || arg[0].is_ascii_whitespace() {
        return None;
    }
    let (value, read) = strtod(arg);
    if read != arg.len() || value.is_nan() {
        return None;
    }
    if (value.is_infinite() || value == 0.0) && read > 0 && overflowed(arg) {
        return None;
    }
    Some(value)
}

/// True if `strtod` reported a range error reading `arg` (a finite
/// number too large, or too small to be anything but 0).
fn overflowed(arg: &[u8]) -> bool {
    let lower = arg.to_ascii_lowercase();
    let spelled_infinity = lower.windows(3).any(|w| w == b"inf");
    if spelled_infinity {
        return false;
    }
    let (value, _) = strtod(arg);
    if value.is_infinite() {
        return true;
    }
    // A zero from digits that are not all zero underflowed.
    value == 0.0
        && arg
            .iter()
            .take_while(|b| !matches!(b, b'e' | b'E'))
            .any(|b| (b'1'..=b'9').contains(b))
}

/// One end of a score range: its value and whether it is excluded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ScoreBound {
    pub(super) value: f64,
    pub(super) exclusive: bool,
}

impl ScoreBound {
    /// A bound as `zslParseRange` reads it: `(` for exclusive, then a
    /// number that fills the rest (up to a NUL byte) and is not NaN.
    pub(super) fn parse(arg: &[u8]) -> Option<Self> {
        let (exclusive, text) = match arg.first() {
            Some(b'(') => (true, &arg[1..]),
            _ => (false, arg),
        };
        let text = text.split(|&b| b == 0).next().unwrap_or_default();
        let (value, read) = strtod(text);
        if read != text.len() || value.is_nan() {
            return None;
        }
        Some(Self { value, exclusive })
    }

    fn below(&self, score: f64) -> bool {
        if self.exclusive {
            self.value < score
        } else {
            self.value <= score
        }
    }

    fn above(&self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

/// A score range, both ends given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ScoreRange {
    pub(super) min: ScoreBound,
    pub(super) max: ScoreBound,
}

impl ScoreRange {
    /// Reads `min` and `max`, or Redis's error.
    pub(super) fn parse(min: &[u8], max: &[u8]) -> Result<Self, &'static str> {
        match (ScoreBound::parse(min), ScoreBound::parse(max)) {
            (Some(min), Some(max)) => Ok(Self { min, max }),
            _ => Err(BAD_SCORE_RANGE),
        }
    }

    /// True if `score` is inside.
    pub(super) fn contains(&self, score: f64) -> bool {
        self.min.below(score) && self.max.above(score)
    }
}

/// One end of a lexical range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[member`.
    Inclusive(Bytes),
    /// `(member`.
    Exclusive(Bytes),
}

impl LexBound {
    fn parse(arg: &Bytes) -> Option<Self> {
        match arg.first() {
            Some(b'+') if arg.len() == 1 => Some(LexBound::Max),
            Some(b'-') if arg.len() == 1 => Some(LexBound::Min),
            Some(b'[') => Some(LexBound::Inclusive(arg.slice(1..))),
            Some(b'(') => Some(LexBound::Exclusive(arg.slice(1..))),
            _ => None,
        }
    }
}

/// A lexical range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LexRange {
    pub(super) min: LexBound,
    pub(super) max: LexBound,
}

impl LexRange {
    /// Reads `min` and `max`, or Redis's error.
    pub(super) fn parse(min: &Bytes, max: &Bytes) -> Result<Self, &'static str> {
        match (LexBound::parse(min), LexBound::parse(max)) {
            (Some(min), Some(max)) => Ok(Self { min, max }),
            _ => Err(BAD_LEX_RANGE),
        }
    }

    /// True if `member` is inside.
    pub(super) fn contains(&self, member: &[u8]) -> bool {
        let above_min = match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(m) => member >= &m[..],
            LexBound::Exclusive(m) => member > &m[..],
        };
        let below_max = match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(m) => member <= &m[..],
            LexBound::Exclusive(m) => member < &m[..],
        };
        above_min && below_max
    }
}

/// What a ZRANGE-family command selects.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Selection {
    /// Ranks from `start` to `end`, inclusive (negative from the end).
    Rank { start: i64, end: i64 },
    /// Scores in a range.
    Score(ScoreRange),
    /// Members in a lexical range.
    Lex(LexRange),
}

/// The entries `selection` picks from `entries` (lowest score first), in
/// reply order: `rev` walks from the highest; `offset` and `limit` (LIMIT;
/// a negative offset selects nothing, a negative limit everything) apply
/// to score and lexical ranges.
pub(super) fn select<'e>(
    entries: &[&'e Entry],
    selection: &Selection,
    rev: bool,
    offset: i64,
    limit: i64,
) -> Vec<&'e Entry> {
    let len = entries.len() as i64;
    match selection {
        Selection::Rank { start, end } => {
            let start = if *start < 0 {
                len.saturating_add(*start)
            } else {
                *start
            }
            .max(0);
            let end = if *end < 0 {
                len.saturating_add(*end)
            } else {
                *end
            };
            if start > end || start >= len {
                return Vec::new();
            }
            let end = end.min(len - 1);
            let (start, end) = (start as usize, end as usize);
            if rev {
                let n = entries.len();
                (start..=end).map(|rank| entries[n - 1 - rank]).collect()
            } else {
                entries[start..=end].to_vec()
            }
        }
        Selection::Score(_) | Selection::Lex(_) => {
            if offset < 0 {
                return Vec::new();
            }
            let inside = |e: &&&Entry| match selection {
                Selection::Score(range) => range.contains(e.score),
                Selection::Lex(range) => range.contains(&e.member),
                Selection::Rank { .. } => false,
            };
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let offset = usize::try_from(offset).unwrap_or(usize::MAX);
            let picked: Box<dyn Iterator<Item = &&Entry>> = if rev {
                Box::new(entries.iter().rev().filter(inside))
            } else {
                Box::new(entries.iter().filter(inside))
            };
            picked.skip(offset).take(limit).copied().collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_read_as_redis_reads_them() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"1e3"), Some(1000.0));
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        for bad in [&b""[..], b" 1", b"1 ", b"abc", b"nan", b"1e400", b"1\x002"] {
            assert_eq!(parse_score(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ranges_are_read_as_redis_reads_them() {
        let range = ScoreRange::parse(b"(1", b"+inf").unwrap();
        assert!(!range.contains(1.0) && range.contains(1.5) && range.contains(f64::INFINITY));
        assert_eq!(ScoreRange::parse(b"x", b"1"), Err(BAD_SCORE_RANGE));
        assert!(ScoreRange::parse(b"", b"1").is_ok());
        let lex = LexRange::parse(&Bytes::from_static(b"[b"), &Bytes::from_static(b"(d")).unwrap();
        assert!(lex.contains(b"b") && lex.contains(b"c") && !lex.contains(b"d"));
        assert_eq!(
            LexRange::parse(&Bytes::from_static(b"b"), &Bytes::from_static(b"+")),
            Err(BAD_LEX_RANGE)
        );
    }
}
