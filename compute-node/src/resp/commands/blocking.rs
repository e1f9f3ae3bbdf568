//! The blocking pops: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX and BZMPOP. Each first tries as its non-blocking form does;
//! if no key has anything, the client queues on its keys (see
//! [`super::BlockedKeys`]) and waits, without holding the EXEC gate, until
//! a write wakes it (then it tries again), its timeout passes (it answers
//! null), it is killed, or its peer goes away (it leaves every queue).
//! Inside MULTI/EXEC a blocking pop never blocks: it answers as if its
//! timeout had passed, as in Redis.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::RespClient;
use super::collections::parse_mpop;
use super::lists::{End, Served};
use super::sorted_set_args::parse_score;
use crate::resp::reply::Replies;

/// What a blocked client waits to do.
#[derive(Debug, Clone)]
pub(super) enum BlockingOp {
    /// BLPOP, BRPOP (`count` None) and BLMPOP: pop from the first list.
    Pop {
        keys: Vec<Bytes>,
        end: End,
        count: Option<u64>,
    },
    /// BLMOVE and BRPOPLPUSH.
    Move {
        from: Bytes,
        to: Bytes,
        from_end: End,
        to_end: End,
    },
    /// BZPOPMIN, BZPOPMAX (`count` None) and BZMPOP.
    PopSorted {
        keys: Vec<Bytes>,
        max: bool,
        count: Option<u64>,
    },
}

impl BlockingOp {
    fn keys(&self) -> Vec<Bytes> {
        match self {
            BlockingOp::Pop { keys, .. } | BlockingOp::PopSorted { keys, .. } => keys.clone(),
            BlockingOp::Move { from, .. } => vec![from.clone()],
        }
    }

    /// The answer when the timeout passes: null for BLMOVE and
    /// BRPOPLPUSH, a null array for the others.
    fn timed_out(&self, out: &mut Replies) {
        match self {
            BlockingOp::Move { .. } => out.null(),
            _ => out.null_array(),
        }
    }
}

/// A blocking command's timeout in seconds, as Redis reads it: a number
/// (fractions allowed), at least 0; 0 waits for ever. In milliseconds.
pub(super) fn parse_timeout_ms(arg: &[u8]) -> Result<u64, &'static str> {
    let seconds = parse_score(arg).ok_or("ERR timeout is not a float or out of range")?;
    let ms = (seconds * 1000.0).ceil();
    if ms > i64::MAX as f64 {
        return Err("ERR timeout is out of range");
    }
    if ms < 0.0 {
        return Err("ERR timeout is negative");
    }
    Ok(ms as u64)
}

/// Resolves when the client's peer has closed its side of the
/// connection; pends for ever once the peer sends more (the commands it
/// pipelined behind the blocking one wait their turn).
async fn peer_gone(fd: Option<RawFd>) {
    let Some(stream) = fd.and_then(watch_stream) else {
        return std::future::pending().await;
    };
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte).await {
        Ok(0) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// A second handle on the socket `fd` (a duplicate descriptor, registered
/// with the runtime on its own), to watch it without taking its reader.
fn watch_stream(fd: RawFd) -> Option<tokio::net::TcpStream> {
    // SAFETY: `fd` is the client's socket, open while its connection task
    // runs (which is the caller); dup gives a new descriptor that the
    // returned stream owns and closes.
    let duplicate = unsafe { libc::dup(fd) };
    if duplicate < 0 {
        return None;
    }
    // SAFETY: `duplicate` is a fresh descriptor owned by nothing else.
    let std_stream =
        unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(duplicate) };
    std_stream.set_nonblocking(true).ok()?;
    tokio::net::TcpStream::from_std(std_stream).ok()
}

impl RespClient<'_> {
    async fn try_blocking(&mut self, op: &BlockingOp, out: &mut Replies) -> Served {
        match op {
            BlockingOp::Pop { keys, end, count } => {
                self.pop_first_list(keys, *end, *count, out).await
            }
            BlockingOp::Move {
                from,
                to,
                from_end,
                to_end,
            } => self.move_element(from, to, *from_end, *to_end, out).await,
            BlockingOp::PopSorted { keys, max, count } => {
                self.pop_from(keys, *max, *count, count.is_some(), true, out)
                    .await
            }
        }
    }

    /// Carries out `op`, blocking up to `timeout_ms` (0: for ever) while
    /// none of its keys has anything.
    pub(super) async fn blocking(&mut self, op: BlockingOp, timeout_ms: u64, out: &mut Replies) {
        if self.try_blocking(&op, out).await != Served::Nothing {
            return;
        }
        if self.overlay.is_some() || self.multi.is_some() {
            return op.timed_out(out);
        }
        let shared = self.shared;
        let Some(waiter) = shared.blocked.block(&op.keys()) else {
            return out.error("ERR too many blocked clients");
        };
        let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
        loop {
            // Other clients' EXECs go on while this one waits.
            self.gate = None;
            let until_deadline = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = waiter.woken() => {}
                () = until_deadline => {
                    self.gate = Some(shared.exec_gate.read().await);
                    return op.timed_out(out);
                }
                () = self.me.killed.notified() => {
                    // The connection's loop closes it on seeing this.
                    self.me.killed.notify_one();
                    return op.timed_out(out);
                }
                () = peer_gone(self.peer_fd) => return op.timed_out(out),
            }
            self.gate = Some(shared.exec_gate.read().await);
            if self.try_blocking(&op, out).await != Served::Nothing {
                return;
            }
        }
    }

    /// BLPOP and BRPOP key... timeout.
    pub(super) async fn blpop(&mut self, cmd: &[Bytes], end: End, out: &mut Replies) {
        let timeout_ms = match parse_timeout_ms(&cmd[cmd.len() - 1]) {
            Ok(ms) => ms,
            Err(text) => return out.error(text),
        };
        let keys = cmd[1..cmd.len() - 1].to_vec();
        let op = BlockingOp::Pop {
            keys,
            end,
            count: None,
        };
        self.blocking(op, timeout_ms, out).await;
    }

    /// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout, and
    /// BRPOPLPUSH source destination timeout (`ends` given).
    pub(super) async fn blmove(
        &mut self,
        cmd: &[Bytes],
        ends: Option<(End, End)>,
        out: &mut Replies,
    ) {
        let (from_end, to_end) = match ends {
            Some(ends) => ends,
            None => match (End::parse(&cmd[3]), End::parse(&cmd[4])) {
                (Some(from), Some(to)) => (from, to),
                _ => return out.error("ERR syntax error"),
            },
        };
        let timeout_ms = match parse_timeout_ms(&cmd[cmd.len() - 1]) {
            Ok(ms) => ms,
            Err(text) => return out.error(text),
        };
        let op = BlockingOp::Move {
            from: cmd[1].clone(),
            to: cmd[2].clone(),
            from_end,
            to_end,
        };
        self.blocking(op, timeout_ms, out).await;
    }

    /// BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT count].
    pub(super) async fn blmpop(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (keys, right, count) = match parse_mpop(cmd, 2, (b"left", b"right")) {
            Ok(parsed) => parsed,
            Err(text) => return out.error(text),
        };
        let timeout_ms = match parse_timeout_ms(&cmd[1]) {
            Ok(ms) => ms,
            Err(text) => return out.error(text),
        };
        let end = if right { End::Right } else { End::Left };
        let op = BlockingOp::Pop {
            keys,
            end,
            count: Some(count.unwrap_or(1)),
        };
        self.blocking(op, timeout_ms, out).await;
    }

    /// BZPOPMIN and BZPOPMAX key... timeout.
    pub(super) async fn bzpop(&mut self, cmd: &[Bytes], max: bool, out: &mut Replies) {
        let timeout_ms = match parse_timeout_ms(&cmd[cmd.len() - 1]) {
            Ok(ms) => ms,
            Err(text) => return out.error(text),
        };
        let op = BlockingOp::PopSorted {
            keys: cmd[1..cmd.len() - 1].to_vec(),
            max,
            count: None,
        };
        self.blocking(op, timeout_ms, out).await;
    }

    /// BZMPOP timeout numkeys key... MIN|MAX [COUNT count].
    pub(super) async fn bzmpop(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (keys, max, count) = match parse_mpop(cmd, 2, (b"min", b"max")) {
            Ok(parsed) => parsed,
            Err(text) => return out.error(text),
        };
        let timeout_ms = match parse_timeout_ms(&cmd[1]) {
            Ok(ms) => ms,
            Err(text) => return out.error(text),
        };
        let op = BlockingOp::PopSorted {
            keys,
            max,
            count: Some(count.unwrap_or(1)),
        };
        self.blocking(op, timeout_ms, out).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_read_as_redis_reads_them() {
        assert_eq!(parse_timeout_ms(b"0"), Ok(0));
        assert_eq!(parse_timeout_ms(b"0.0015"), Ok(2));
        assert_eq!(parse_timeout_ms(b"2"), Ok(2000));
        assert_eq!(parse_timeout_ms(b"-1"), Err("ERR timeout is negative"));
        assert_eq!(
            parse_timeout_ms(b"x"),
            Err("ERR timeout is not a float or out of range")
        );
        assert_eq!(
            parse_timeout_ms(b"1e300"),
            Err("ERR timeout is out of range")
        );
    }
}
