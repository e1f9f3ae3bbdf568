//! RESP2 request parsing, free of I/O: bytes in, whole commands out.
//!
//! Accepts what Redis accepts from clients: multibulk requests
//! (`*<n>\r\n$<len>\r\n<bytes>\r\n...`) and inline commands (`PING\r\n`).
//! Every length is checked against its limit as soon as its header line is
//! complete, before anything is reserved for it (as Redis's
//! `processMultibulkBuffer` does), so a client cannot make the server
//! allocate more than the limits allow.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

/// Longest header or inline line accepted.
const MAX_LINE_BYTES: usize = 64 << 10;

/// Limits on what one command may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Most arguments in one command.
    pub max_args: usize,
    /// Longest argument (a value plus headroom).
    pub max_arg_bytes: usize,
    /// Most bytes of arguments in one command, all together: a command is
    /// held whole before it runs, so this bounds what one client's command
    /// can make the server hold.
    pub max_command_bytes: usize,
}

/// The client sent something that is not RESP; the connection cannot stay
/// in step and is closed after the error reply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// A length that is not a number, or a missing `$`.
    #[error("Protocol error: {0}")]
    Malformed(&'static str),
    /// A command with more arguments than allowed.
    #[error("Protocol error: invalid multibulk length")]
    TooManyArgs,
    /// An argument longer than allowed.
    #[error("Protocol error: invalid bulk length")]
    ArgTooLong,
    /// A command whose arguments together are longer than allowed.
    #[error("Protocol error: command too large")]
    CommandTooLong,
    /// A header or inline line without an end.
    #[error("Protocol error: too big inline request")]
    LineTooLong,
    /// An inline command whose quotes do not close.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

/// Where the parser is inside a multibulk request that has not fully
/// arrived.
#[derive(Debug, Default)]
struct Partial {
    expected: usize,
    args: Vec<Bytes>,
    /// Bytes of the arguments whose headers have been read.
    bytes: usize,
    /// Length of the argument whose header has been read.
    pending_len: Option<usize>,
}

/// Most argument vectors a parser keeps for reuse ([`RequestParser::recycle`]):
/// enough for a pipeline of 64 commands; with [`MAX_SPARE_ARGS`], at most
/// 32 KiB per client.
const MAX_SPARE_ARG_VECS: usize = 64;

/// Largest argument vector (in arguments) kept for reuse: a command with
/// many arguments does not keep its vector's room.
const MAX_SPARE_ARGS: usize = 16;

/// Splits a connection's input into commands.
#[derive(Debug)]
pub struct RequestParser {
    limits: ParseLimits,
    partial: Option<Partial>,
    /// Emptied argument vectors handed back, reused for the next commands.
    spare: Vec<Vec<Bytes>>,
}

impl RequestParser {
    /// A parser with these limits.
    pub fn new(limits: ParseLimits) -> Self {
        Self {
            limits,
            partial: None,
            spare: Vec::new(),
        }
    }

    /// Hands back a command's arguments once it has run: the vector is
    /// emptied (releasing its arguments' bytes) and reused for a later
    /// command, so that a client's commands cost no allocation for their
    /// argument lists. At most [`MAX_SPARE_ARG_VECS`] are kept.
    pub fn recycle(&mut self, mut args: Vec<Bytes>) {
        if self.spare.len() < MAX_SPARE_ARG_VECS && args.capacity() <= MAX_SPARE_ARGS {
            args.clear();
            self.spare.push(args);
        }
    }

    /// Changes the limits from the next header on (for example once a
    /// client has authenticated).
    pub fn set_limits(&mut self, limits: ParseLimits) {
        self.limits = limits;
    }

    /// Bytes `buf` must still receive before the next command can complete,
    /// at least; used to reserve room for a large argument once its length
    /// is known (and checked).
    pub fn wanted(&self) -> usize {
        match &self.partial {
            Some(Partial {
                pending_len: Some(len),
                ..
            }) => len + 2,
            _ => 0,
        }
    }

    /// Takes the next whole command out of `buf`: `Ok(None)` if more bytes
    /// are needed. Arguments are split off `buf` without copying.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        if self.partial.is_none() {
            if buf.is_empty() {
                return Ok(None);
            }
            if buf[0] != b'*' {
                return self.inline(buf);
            }
            let Some(line) = take_line(buf)? else {
                return Ok(None);
            };
            let count = parse_len(&line[1..])
                .ok_or(ProtocolError::Malformed("invalid multibulk length"))?;
            if count > self.limits.max_args as i64 {
                return Err(ProtocolError::TooManyArgs);
            }
            if count <= 0 {
                return Ok(Some(Vec::new()));
            }
            let expected = count as usize;
            let args = match self.spare.pop() {
                Some(mut args) => {
                    args.reserve(expected.min(1024));
                    args
                }
                None => Vec::with_capacity(expected.min(1024)),
            };
            self.partial = Some(Partial {
                expected,
                args,
                bytes: 0,
                pending_len: None,
            });
        }
        let partial = self.partial.as_mut().expect("set above");
        while partial.args.len() < partial.expected {
            let len = match partial.pending_len {
                Some(len) => len,
                None => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    if line.first() != Some(&b'$') {
                        return Err(ProtocolError::Malformed("expected '$'"));
                    }
                    let len = parse_len(&line[1..])
                        .ok_or(ProtocolError::Malformed("invalid bulk length"))?;
                    if len < 0 {
                        return Err(ProtocolError::Malformed("invalid bulk length"));
                    }
                    if len as usize > self.limits.max_arg_bytes {
                        return Err(ProtocolError::ArgTooLong);
                    }
                    partial.bytes += len as usize;
                    if partial.bytes > self.limits.max_command_bytes {
                        return Err(ProtocolError::CommandTooLong);
                    }
                    partial.pending_len = Some(len as usize);
                    len as usize
                }
            };
            if buf.len() < len + 2 {
                return Ok(None);
            }
            if &buf[len..len + 2] != b"\r\n" {
                return Err(ProtocolError::Malformed(
                    "bulk string not terminated by CRLF",
                ));
            }
            let arg = buf.split_to(len).freeze();
            buf.advance(2);
            partial.args.push(arg);
            partial.pending_len = None;
        }
        Ok(self.partial.take().map(|p| p.args))
    }

    /// An inline command: one line, arguments separated by spaces.
    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let Some(line) = take_line(buf)? else {
            return Ok(None);
        };
        let args = split_inline(&line).ok_or(ProtocolError::UnbalancedQuotes)?;
        if args.len() > self.limits.max_args {
            return Err(ProtocolError::TooManyArgs);
        }
        Ok(Some(args))
    }
}

/// Splits an inline command into arguments as Redis's `sdssplitargs`
/// does: separated by blanks; "double quotes" with `\n \r \t \b \a \\ \"`
/// and `\xHH` escapes; 'single quotes' with `\'`. `None` if a quote does
/// not close, or is not followed by a blank.
fn split_inline(line: &[u8]) -> Option<Vec<Bytes>> {
    let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && blank(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let mut arg = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    match *line.get(i)? {
                        b'\\'
                            if i + 3 < line.len()
                                && line[i + 1] == b'x'
                                && line[i + 2].is_ascii_hexdigit()
                                && line[i + 3].is_ascii_hexdigit() =>
                        {
                            let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                            arg.push(u8::from_str_radix(hex, 16).ok()?);
                            i += 4;
                        }
                        b'\\' if i + 1 < line.len() => {
                            arg.push(match line[i + 1] {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 0x08,
                                b'a' => 0x07,
                                other => other,
                            });
                            i += 2;
                        }
                        b'"' => {
                            i += 1;
                            break;
                        }
                        other => {
                            arg.push(other);
                            i += 1;
                        }
                    }
                }
                if i < line.len() && !blank(line[i]) {
                    return None;
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    match *line.get(i)? {
                        b'\\' if line.get(i + 1) == Some(&b'\'') => {
                            arg.push(b'\'');
                            i += 2;
                        }
                        b'\'' => {
                            i += 1;
                            break;
                        }
                        other => {
                            arg.push(other);
                            i += 1;
                        }
                    }
                }
                if i < line.len() && !blank(line[i]) {
                    return None;
                }
            }
            _ => {
                while i < line.len() && !blank(line[i]) {
                    arg.push(line[i]);
                    i += 1;
                }
            }
        }
        args.push(Bytes::from(arg));
    }
}

/// Takes one line ending in `\n` (with an optional `\r`) out of `buf`.
fn take_line(buf: &mut BytesMut) -> Result<Option<BytesMut>, ProtocolError> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(end) => {
            let mut line = buf.split_to(end + 1);
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.truncate(end - 1);
            }
            Ok(Some(line))
        }
        None if buf.len() > MAX_LINE_BYTES => Err(ProtocolError::LineTooLong),
        None => Ok(None),
    }
}

fn parse_len(digits: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(digits).ok()?;
    let value: i64 = text.parse().ok()?;
    (value <= i64::from(i32::MAX)).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser() -> RequestParser {
        RequestParser::new(ParseLimits {
            max_args: 100,
            max_arg_bytes: 1000,
            max_command_bytes: 1500,
        })
    }

    #[test]
    fn a_recycled_argument_vector_holds_the_next_command() {
        let mut p = parser();
        let mut buf =
            BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n"[..]);
        let first = p.next(&mut buf).expect("parses").expect("whole");
        let allocation = first.as_ptr();
        p.recycle(first);
        let second = p.next(&mut buf).expect("parses").expect("whole");
        assert_eq!(second, vec![Bytes::from("DEL"), Bytes::from("b")]);
        assert_eq!(
            second.as_ptr(),
            allocation,
            "the recycled vector was reused"
        );
        // A vector with room for many arguments is not kept.
        p.recycle(Vec::with_capacity(MAX_SPARE_ARGS + 1));
        assert!(p.spare.is_empty());
    }

    fn all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = parser();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(cmd) = p.next(&mut buf)? {
            out.push(cmd.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline_commands_parse() {
        let cmds = all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\nPING\r\n*1\r\n$4\r\nPING\r\n")
            .expect("parses");
        assert_eq!(cmds.len(), 3);
        assert_eq!(cmds[0], vec![b"SET".to_vec(), b"k".to_vec(), Vec::new()]);
        assert_eq!(cmds[1], vec![b"PING".to_vec()]);
        assert_eq!(cmds[2], vec![b"PING".to_vec()]);
    }

    #[test]
    fn inline_quotes_and_escapes_split_as_redis_splits_them() {
        let cmds =
            all(b"SET \"a b\" 'c d'\r\nECHO \"x\\ny\\x41\\\"\" 'it\\'s'\r\n").expect("parses");
        assert_eq!(
            cmds[0],
            vec![b"SET".to_vec(), b"a b".to_vec(), b"c d".to_vec()]
        );
        assert_eq!(
            cmds[1],
            vec![b"ECHO".to_vec(), b"x\nyA\"".to_vec(), b"it's".to_vec()]
        );
        assert_eq!(
            all(b"ECHO \"open\r\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(
            all(b"ECHO \"a\"b\r\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(all(b"ECHO 'a\r\n"), Err(ProtocolError::UnbalancedQuotes));
    }

    #[test]
    fn binary_arguments_with_crlf_inside_survive() {
        let cmds = all(b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n").expect("parses");
        assert_eq!(cmds[0][1], b"a\r\nb".to_vec());
    }

    #[test]
    fn commands_complete_across_any_split() {
        let input =
            b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\n*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n";
        for split in 1..input.len() {
            let mut p = parser();
            let mut buf = BytesMut::new();
            let mut cmds = Vec::new();
            for chunk in [&input[..split], &input[split..]] {
                buf.extend_from_slice(chunk);
                while let Some(cmd) = p.next(&mut buf).expect("parses") {
                    cmds.push(cmd);
                }
            }
            assert_eq!(cmds.len(), 2, "split at {split}");
            assert_eq!(&cmds[1][1][..], b"hello");
        }
    }

    #[test]
    fn oversized_lengths_are_refused_from_the_header() {
        let mut p = parser();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$99999999\r\n"[..]);
        assert_eq!(p.next(&mut buf), Err(ProtocolError::ArgTooLong));
        assert_eq!(p.wanted(), 0);
        assert_eq!(all(b"*1000000\r\n"), Err(ProtocolError::TooManyArgs));
    }

    #[test]
    fn a_command_too_large_in_total_is_refused_from_the_headers() {
        // Each argument is within its limit; together they are not.
        let mut p = parser();
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$900\r\n"[..]);
        buf.extend_from_slice(&[b'k'; 900]);
        buf.extend_from_slice(b"\r\n$900\r\n");
        assert_eq!(p.next(&mut buf), Err(ProtocolError::CommandTooLong));
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(all(b"*x\r\n").is_err());
        assert!(all(b"*1\r\n+PING\r\n").is_err());
        assert!(all(b"*1\r\n$-5\r\n").is_err());
        assert!(all(b"*1\r\n$4\r\nPINGxx").is_err());
        assert!(all(&vec![b'a'; MAX_LINE_BYTES + 1]).is_err());
    }

    #[test]
    fn a_known_length_reports_what_is_wanted() {
        let mut p = parser();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$500\r\nabc"[..]);
        assert_eq!(p.next(&mut buf), Ok(None));
        assert_eq!(p.wanted(), 502);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_input_never_panics(input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = all(&input);
        }
    }
}
