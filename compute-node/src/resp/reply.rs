//! RESP2 reply encoding into a connection's output buffer.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

/// `+text\r\n`
pub fn simple(out: &mut BytesMut, text: &str) {
    out.put_u8(b'+');
    out.put_slice(text.as_bytes());
    out.put_slice(b"\r\n");
}

/// `-text\r\n` (the text starts with the error code, e.g. `ERR`). Line
/// breaks in the text are replaced so the reply stays one line.
pub fn error(out: &mut BytesMut, text: &str) {
    out.put_u8(b'-');
    for b in text.bytes() {
        out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.put_slice(b"\r\n");
}

/// `:n\r\n`
pub fn integer(out: &mut BytesMut, n: i64) {
    let _ = write!(out, ":{n}\r\n");
}

/// `$len\r\nbytes\r\n`, or the nil bulk `$-1\r\n`.
pub fn bulk(out: &mut BytesMut, value: Option<&[u8]>) {
    match value {
        Some(bytes) => {
            out.reserve(bytes.len() + 16);
            let _ = write!(out, "${}\r\n", bytes.len());
            out.put_slice(bytes);
            out.put_slice(b"\r\n");
        }
        None => out.put_slice(b"$-1\r\n"),
    }
}

/// `*n\r\n`, followed by `n` replies.
pub fn array(out: &mut BytesMut, n: usize) {
    let _ = write!(out, "*{n}\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_encoded_as_resp2() {
        let mut out = BytesMut::new();
        simple(&mut out, "OK");
        error(&mut out, "ERR bad\r\nthing");
        integer(&mut out, -3);
        bulk(&mut out, Some(b"a\r\nb"));
        bulk(&mut out, None);
        array(&mut out, 2);
        assert_eq!(
            &out[..],
            &b"+OK\r\n-ERR bad  thing\r\n:-3\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n"[..]
        );
    }
}
