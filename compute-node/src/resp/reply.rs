//! The one reply encoder, for both protocol versions: each reply is written
//! as the connection's protocol (RESP2, or RESP3 after `HELLO 3`) spells
//! it, as Redis 7 does. RESP3 types that RESP2 lacks are written the way
//! Redis writes them to a RESP2 client: a map as a flat array of keys and
//! values, a set as an array, a double, a big number or a verbatim string
//! as a bulk string, a boolean as the integer 1 or 0, null as the null bulk
//! (or the null array, where Redis sends that).

use std::fmt::Write as _;

use bytes::{BufMut, Bytes, BytesMut};

/// Values at least this long are sent from where they are held (the value
/// cache, a window) by [`Replies::bulk_shared`] instead of being copied into
/// the reply buffer.
pub const SHARED_VALUE_BYTES: usize = 1024;

/// The protocol version a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: the default, and after `HELLO 2`.
    Resp2,
    /// RESP3: after `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The version number HELLO names it by.
    pub fn number(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// A connection's waiting replies, encoded for its protocol: the parts
/// before the last shared value ([`Replies::bulk_shared`]), in order, then
/// `bytes`, the replies encoded since.
#[derive(Debug)]
pub struct Replies {
    /// The encoded bytes not yet written, after every part in `earlier`.
    /// A command's replies can be cut off here (`truncate` to a length
    /// taken before it) as long as it shares no value.
    pub bytes: BytesMut,
    /// The protocol replies are encoded for.
    pub protocol: Protocol,
    /// Encoded runs and shared values waiting before `bytes`.
    earlier: Vec<Bytes>,
    /// Bytes in `earlier`.
    earlier_bytes: usize,
}

impl Replies {
    /// An empty buffer of `capacity` bytes, encoding RESP2.
    pub fn new(capacity: usize) -> Self {
        Self {
            bytes: BytesMut::with_capacity(capacity),
            protocol: Protocol::Resp2,
            earlier: Vec::new(),
            earlier_bytes: 0,
        }
    }

    /// Bytes of every reply waiting.
    pub fn pending_bytes(&self) -> usize {
        self.earlier_bytes + self.bytes.len()
    }

    /// A bulk string whose bytes are sent from `value` itself (shared, not
    /// copied) when it is at least [`SHARED_VALUE_BYTES`] long. A reply
    /// shared so can no longer be cut off by truncating `bytes`.
    pub fn bulk_shared(&mut self, value: &Bytes) {
        if value.len() < SHARED_VALUE_BYTES {
            return self.bulk(value);
        }
        let _ = write!(self.bytes, "${}\r\n", value.len());
        self.earlier_bytes += self.bytes.len() + value.len();
        self.earlier.push(self.bytes.split().freeze());
        self.earlier.push(value.clone());
        self.bytes.put_slice(b"\r\n");
    }

    /// A bulk string shared as [`Replies::bulk_shared`] does, or null for
    /// `None`.
    pub fn bulk_shared_or_null(&mut self, value: Option<&Bytes>) {
        match value {
            Some(value) => self.bulk_shared(value),
            None => self.null(),
        }
    }

    /// Takes every waiting reply, in order, as the parts to write: none
    /// wait afterwards. Hand the emptied vector back with
    /// [`Replies::return_parts`] to reuse it.
    pub fn take_parts(&mut self) -> Vec<Bytes> {
        let mut parts = std::mem::take(&mut self.earlier);
        self.earlier_bytes = 0;
        if !self.bytes.is_empty() {
            parts.push(self.bytes.split().freeze());
        }
        parts
    }

    /// Takes back the vector [`Replies::take_parts`] gave, emptied, for the
    /// next shared values.
    pub fn return_parts(&mut self, mut parts: Vec<Bytes>) {
        parts.clear();
        if self.earlier.is_empty() {
            self.earlier = parts;
        }
    }

    /// Whether every waiting reply is in `bytes` (no value is shared).
    pub fn is_contiguous(&self) -> bool {
        self.earlier.is_empty()
    }

    /// `+text`
    pub fn simple(&mut self, text: &str) {
        self.bytes.put_u8(b'+');
        self.bytes.put_slice(text.as_bytes());
        self.bytes.put_slice(b"\r\n");
    }

    /// `-text` (the text starts with the error code, e.g. `ERR`). Line
    /// breaks in the text become spaces so the reply stays one line, as
    /// Redis's `addReplyError` does.
    pub fn error(&mut self, text: &str) {
        self.bytes.put_u8(b'-');
        for b in text.bytes() {
            self.bytes
                .put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
        self.bytes.put_slice(b"\r\n");
    }

    /// `:n`
    pub fn integer(&mut self, n: i64) {
        let _ = write!(self.bytes, ":{n}\r\n");
    }

    /// A bulk string `$len\r\nbytes`.
    pub fn bulk(&mut self, value: &[u8]) {
        self.bytes.reserve(value.len() + 16);
        let _ = write!(self.bytes, "${}\r\n", value.len());
        self.bytes.put_slice(value);
        self.bytes.put_slice(b"\r\n");
    }

    /// A bulk string, or null for `None`.
    pub fn bulk_or_null(&mut self, value: Option<&[u8]>) {
        match value {
            Some(value) => self.bulk(value),
            None => self.null(),
        }
    }

    /// Null: RESP2's null bulk `$-1`, RESP3's `_`.
    pub fn null(&mut self) {
        self.bytes.put_slice(match self.protocol {
            Protocol::Resp2 => b"$-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        });
    }

    /// Null where Redis sends RESP2's null array `*-1` (a failed EXEC):
    /// RESP3's `_`.
    pub fn null_array(&mut self) {
        self.bytes.put_slice(match self.protocol {
            Protocol::Resp2 => b"*-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        });
    }

    /// An array of `n` replies that follow.
    pub fn array(&mut self, n: usize) {
        let _ = write!(self.bytes, "*{n}\r\n");
    }

    /// A map of `n` key/value pairs that follow (keys and values
    /// alternating): `%n` in RESP3, an array of `2n` in RESP2.
    pub fn map(&mut self, n: usize) {
        let _ = match self.protocol {
            Protocol::Resp2 => write!(self.bytes, "*{}\r\n", 2 * n),
            Protocol::Resp3 => write!(self.bytes, "%{n}\r\n"),
        };
    }

    /// A set of `n` replies that follow: `~n` in RESP3, an array in RESP2.
    pub fn set(&mut self, n: usize) {
        let _ = match self.protocol {
            Protocol::Resp2 => write!(self.bytes, "*{n}\r\n"),
            Protocol::Resp3 => write!(self.bytes, "~{n}\r\n"),
        };
    }

    /// A double: `,d` in RESP3, a bulk string in RESP2; written as Redis
    /// 7.0 writes it (`inf`, `-inf`, else C's `%.17g`).
    pub fn double(&mut self, d: f64) {
        let text = format_double(d);
        match self.protocol {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => {
                let _ = write!(self.bytes, ",{text}\r\n");
            }
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    #[allow(
        dead_code,
        reason = "for replies of commands SplitKV does not have yet"
    )]
    pub fn boolean(&mut self, b: bool) {
        match self.protocol {
            Protocol::Resp2 => self.integer(i64::from(b)),
            Protocol::Resp3 => self.bytes.put_slice(if b { b"#t\r\n" } else { b"#f\r\n" }),
        }
    }

    /// A big number given as its decimal digits: `(digits` in RESP3, a bulk
    /// string in RESP2.
    #[allow(
        dead_code,
        reason = "for replies of commands SplitKV does not have yet"
    )]
    pub fn big_number(&mut self, digits: &str) {
        match self.protocol {
            Protocol::Resp2 => self.bulk(digits.as_bytes()),
            Protocol::Resp3 => {
                let _ = write!(self.bytes, "({digits}\r\n");
            }
        }
    }

    /// A verbatim string of format `txt` (INFO, CLIENT LIST): `=len\r\ntxt:…`
    /// in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, text: &[u8]) {
        match self.protocol {
            Protocol::Resp2 => self.bulk(text),
            Protocol::Resp3 => {
                self.bytes.reserve(text.len() + 20);
                let _ = write!(self.bytes, "={}\r\ntxt:", text.len() + 4);
                self.bytes.put_slice(text);
                self.bytes.put_slice(b"\r\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(encode: impl Fn(&mut Replies)) -> (Vec<u8>, Vec<u8>) {
        let mut two = Replies::new(64);
        encode(&mut two);
        let mut three = Replies::new(64);
        three.protocol = Protocol::Resp3;
        encode(&mut three);
        (two.bytes.to_vec(), three.bytes.to_vec())
    }

    #[test]
    fn shared_values_take_their_place_among_the_replies() {
        let mut out = Replies::new(64);
        let large = Bytes::from(vec![b'v'; SHARED_VALUE_BYTES]);
        out.simple("OK");
        out.bulk_shared(&large);
        out.bulk_shared(&Bytes::from_static(b"small"));
        out.bulk_shared_or_null(None);
        out.bulk_shared(&large);
        assert!(!out.is_contiguous());
        let mut expected = b"+OK\r\n".to_vec();
        for part in [
            &b"$1024\r\n"[..],
            &large,
            b"\r\n$5\r\nsmall\r\n$-1\r\n$1024\r\n",
            &large,
            b"\r\n",
        ] {
            expected.extend_from_slice(part);
        }
        assert_eq!(out.pending_bytes(), expected.len());
        let parts = out.take_parts();
        assert_eq!(parts.concat(), expected);
        assert!(
            parts.iter().any(|p| p.as_ptr() == large.as_ptr()),
            "the value is sent from where it is held"
        );
        assert_eq!(out.pending_bytes(), 0);
        assert!(out.is_contiguous());
    }

    #[test]
    fn plain_replies_are_the_same_in_both_versions() {
        let (two, three) = both(|r| {
            r.simple("OK");
            r.error("ERR bad\r\nthing");
            r.integer(-3);
            r.bulk(b"a\r\nb");
            r.array(2);
        });
        assert_eq!(two, three);
        assert_eq!(
            two,
            b"+OK\r\n-ERR bad  thing\r\n:-3\r\n$4\r\na\r\nb\r\n*2\r\n"
        );
    }

    #[test]
    fn resp3_types_fall_back_as_redis_writes_them_to_resp2() {
        let (two, three) = both(|r| {
            r.map(1);
            r.set(2);
            r.null();
            r.null_array();
            r.double(1.5);
            r.double(f64::INFINITY);
            r.boolean(true);
            r.big_number("12345678901234567890");
            r.verbatim(b"a:1");
        });
        assert_eq!(
            String::from_utf8_lossy(&two),
            "*2\r\n*2\r\n$-1\r\n*-1\r\n$3\r\n1.5\r\n$3\r\ninf\r\n:1\r\n\
             $20\r\n12345678901234567890\r\n$3\r\na:1\r\n"
        );
        assert_eq!(
            String::from_utf8_lossy(&three),
            "%1\r\n~2\r\n_\r\n_\r\n,1.5\r\n,inf\r\n#t\r\n(12345678901234567890\r\n\
             =7\r\ntxt:a:1\r\n"
        );
    }
}

/// An error reply as Redis words it (`ERR syntax error`, `NOAUTH ...`):
/// why a command or an argument is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorReply(String);

impl std::ops::Deref for ErrorReply {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for ErrorReply {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl From<&str> for ErrorReply {
    fn from(text: &str) -> Self {
        Self(text.to_string())
    }
}

/// `d` as Redis 7.0 prints a double reply: `inf`, `-inf`, `nan`, else C's
/// `%.17g` (so 1.1 is `1.1000000000000001`).
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d.is_nan() {
        return "nan".to_string();
    }
    let mut buf = [0u8; 64];
    // SAFETY: the format takes exactly one double, which is passed; the
    // buffer is valid for its length, which bounds what snprintf writes.
    let written =
        unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), d) };
    let len = usize::try_from(written).unwrap_or(0).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}
