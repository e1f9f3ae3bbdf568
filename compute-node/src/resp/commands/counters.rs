//! The counter commands: INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, parsed,
//! checked and printed as Redis 7 does (integers as Redis's `string2ll`
//! reads them; floats in C's `long double`, as Redis computes them). Each
//! reads and writes its key under the key's stripe (see [`super::KeyLocks`]),
//! so concurrent increments are never lost.

use std::ffi::c_int;

use bytes::Bytes;

use super::{RespClient, fail, parse_i64, put_string_expiring};
use crate::resp::reply::Replies;

/// The longest text INCRBYFLOAT prints or reads (Redis's
/// `MAX_LONG_DOUBLE_CHARS`).
const LONG_DOUBLE_CHARS: usize = 5 * 1024;

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

unsafe extern "C" {
    /// csrc/long_double.c: 0 with the printed sum in `out`, 1 if either
    /// text is not a number, 2 if the sum is NaN or infinite, 3 if it does
    /// not fit `out_cap` bytes.
    fn splitkv_incr_by_float(
        current: *const u8,
        current_len: usize,
        has_current: c_int,
        incr: *const u8,
        incr_len: usize,
        out: *mut u8,
        out_cap: usize,
        out_len: *mut usize,
    ) -> c_int;
}

/// Why INCRBYFLOAT refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FloatRefusal {
    NotAFloat,
    NanOrInfinity,
}

impl FloatRefusal {
    pub(super) fn text(self) -> &'static str {
        match self {
            FloatRefusal::NotAFloat => "ERR value is not a valid float",
            FloatRefusal::NanOrInfinity => "ERR increment would produce NaN or Infinity",
        }
    }
}

/// `current` (absent: 0) plus `incr`, as Redis's INCRBYFLOAT computes and
/// prints it.
pub(super) fn add_float(current: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, FloatRefusal> {
    let mut out = vec![0u8; LONG_DOUBLE_CHARS];
    let mut len = 0usize;
    let (current_ptr, current_len) =
        current.map_or((std::ptr::null(), 0), |c| (c.as_ptr(), c.len()));
    // SAFETY: every pointer is valid for the length passed with it; the C
    // function writes at most `out.len()` bytes into `out` and one usize
    // into `len`, and keeps none of the pointers.
    let code = unsafe {
        splitkv_incr_by_float(
            current_ptr,
            current_len,
            c_int::from(current.is_some()),
            incr.as_ptr(),
            incr.len(),
            out.as_mut_ptr(),
            out.len(),
            &mut len,
        )
    };
    match code {
        0 => {
            out.truncate(len.min(LONG_DOUBLE_CHARS));
            Ok(out)
        }
        2 => Err(FloatRefusal::NanOrInfinity),
        // A sum too long to print cannot come from two numbers Redis reads
        // either; Redis answers it as a value it cannot use.
        _ => Err(FloatRefusal::NotAFloat),
    }
}

/// `value + by`, or Redis's overflow error.
fn add_integer(value: i64, by: i64) -> Result<i64, &'static str> {
    value
        .checked_add(by)
        .ok_or("ERR increment or decrement would overflow")
}

impl RespClient<'_> {
    /// INCR, DECR (`by` given) and INCRBY (`by` read from the third
    /// argument): the key's integer value plus `by`, written back and
    /// answered.
    pub(super) async fn incr_by(&mut self, cmd: &[Bytes], by: Option<i64>, out: &mut Replies) {
        let by = match by {
            Some(by) => by,
            None => match parse_i64(&cmd[2]) {
                Some(by) => by,
                None => return out.error(NOT_AN_INTEGER),
            },
        };
        self.add_to_integer(&cmd[1], by, out).await;
    }

    /// DECRBY key decrement.
    pub(super) async fn decr_by(&mut self, cmd: &[Bytes], out: &mut Replies) {
        match parse_i64(&cmd[2]) {
            None => out.error(NOT_AN_INTEGER),
            Some(i64::MIN) => out.error("ERR decrement would overflow"),
            Some(by) => self.add_to_integer(&cmd[1], -by, out).await,
        }
    }

    async fn add_to_integer(&mut self, key: &Bytes, by: i64, out: &mut Replies) {
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (current, expire_at_ms) = match self.entry(key).await {
            Ok(Some((current, at))) => (Some(current), at),
            Ok(None) => (None, 0),
            Err(e) => return fail(out, &e),
        };
        let value = match current.as_deref().map(parse_i64) {
            None => 0,
            Some(Some(value)) => value,
            Some(None) => return out.error(NOT_AN_INTEGER),
        };
        let sum = match add_integer(value, by) {
            Ok(sum) => sum,
            Err(text) => return out.error(text),
        };
        let written = Bytes::from(sum.to_string());
        let write = put_string_expiring(key.clone(), written, expire_at_ms);
        match self.write(vec![write]).await {
            Ok(()) => out.integer(sum),
            Err(e) => fail(out, &e),
        }
    }

    /// INCRBYFLOAT key increment: answered with the new value as Redis
    /// prints it (fixed point, 17 decimals at most, no trailing zeros).
    pub(super) async fn incr_by_float(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let (current, expire_at_ms) = match self.entry(key).await {
            Ok(Some((current, at))) => (Some(current), at),
            Ok(None) => (None, 0),
            Err(e) => return fail(out, &e),
        };
        let sum = match add_float(current.as_deref(), &cmd[2]) {
            Ok(sum) => Bytes::from(sum),
            Err(refusal) => return out.error(refusal.text()),
        };
        let write = put_string_expiring(key.clone(), sum.clone(), expire_at_ms);
        match self.write(vec![write]).await {
            Ok(()) => out.bulk(&sum),
            Err(e) => fail(out, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(current: Option<&str>, incr: &str) -> Result<String, FloatRefusal> {
        add_float(current.map(str::as_bytes), incr.as_bytes())
            .map(|sum| String::from_utf8(sum).expect("printed as text"))
    }

    #[test]
    fn floats_are_printed_as_redis_prints_them() {
        assert_eq!(float(None, "0.1"), Ok("0.1".into()));
        assert_eq!(float(Some("10.5"), "0.1"), Ok("10.6".into()));
        assert_eq!(float(Some("5.0e3"), "2.0e2"), Ok("5200".into()));
        assert_eq!(float(Some("1"), "-1"), Ok("0".into()));
        assert_eq!(float(None, "-0.000000000000000001"), Ok("0".into()));
        assert_eq!(float(None, "0x10"), Ok("16".into()));
        assert_eq!(float(None, "+1"), Ok("1".into()));
        assert_eq!(float(Some("3"), "1e-17"), Ok("3.00000000000000001".into()));
    }

    #[test]
    fn what_is_not_a_float_is_refused() {
        for bad in ["", " 1", "1 ", "abc", "nan", "1e", "1\u{0}", "1e-99999"] {
            assert_eq!(float(None, bad), Err(FloatRefusal::NotAFloat), "{bad:?}");
        }
        assert_eq!(float(Some("x"), "1"), Err(FloatRefusal::NotAFloat));
        assert_eq!(float(None, "inf"), Err(FloatRefusal::NanOrInfinity));
        assert_eq!(float(Some("inf"), "-inf"), Err(FloatRefusal::NanOrInfinity));
        assert_eq!(
            float(Some("1e4932"), "1e4932"),
            Err(FloatRefusal::NanOrInfinity)
        );
    }

    #[test]
    fn integer_sums_overflow_as_redis_says() {
        assert_eq!(add_integer(i64::MAX - 1, 1), Ok(i64::MAX));
        assert!(add_integer(i64::MAX, 1).is_err());
        assert!(add_integer(i64::MIN, -1).is_err());
        assert_eq!(add_integer(i64::MIN, i64::MAX), Ok(-1));
    }
}
