//! Differential tests of expiry: SET with EX, PX, EXAT, PXAT and KEEPTTL
//! (with NX, XX and GET), SETEX, PSETEX, GETEX, EXPIRE, PEXPIRE, EXPIREAT
//! and PEXPIREAT (with NX, XX, GT and LT), TTL, PTTL, EXPIRETIME,
//! PEXPIRETIME and PERSIST go to a real `redis-server` and to a compute
//! node, with normal, edge and wrong arguments, in RESP2 and RESP3, one at
//! a time, pipelined and inside MULTI/EXEC; so do the commands that keep,
//! clear or carry a key's time to live, and every command that can see a
//! key once its time has passed.
//!
//! Every reply is compared byte for byte, except a remaining time (TTL,
//! PTTL) and the expiry time of a key whose expiry was given relative to
//! the moment the command arrived (EXPIRETIME after EX): each server
//! measures those on its own clock at its own moment, so they are compared
//! as integers within [`SECONDS_TOLERANCE`] or [`MILLIS_TOLERANCE`]
//! (negative replies, -1 for no expiry and -2 for no key, exactly). An
//! expiry given as an absolute time (EXAT, PXAT, EXPIREAT, PEXPIREAT) is
//! the same number on both servers, and its EXPIRETIME and PEXPIRETIME are
//! compared byte for byte.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses part of it"
)]
mod diff;
#[allow(
    dead_code,
    reason = "shared test support; this test uses the storage node only"
)]
mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use diff::{ComputeNode, Connection, RedisServer, Reply, describe, encode, parse_reply, shape};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// How far apart the two servers' replies in seconds may be (TTL, and
/// EXPIRETIME of an expiry set with EX or EXPIRE). The servers get each
/// command within milliseconds of each other, but TTL rounds to the
/// nearest second (`(ttl + 500) / 1000` in Redis's `ttlGenericCommand`),
/// so one may answer 100 where the other answers 99.
const SECONDS_TOLERANCE: i64 = 1;
/// How far apart the two servers' replies in milliseconds may be (PTTL, and
/// PEXPIRETIME of an expiry set with PX or PEXPIRE): the time between the
/// moments the two servers handle the same command, which a loaded 2-core
/// machine (both servers, the storage node and the test on it) stretches
/// to tens of milliseconds.
const MILLIS_TOLERANCE: i64 = 250;
/// 2100-01-01T00:00:00Z in seconds. An EXPIRETIME at or after it can only
/// come from an absolute time these tests give (their relative times are
/// at most days), so such a reply is compared exactly even where the step
/// allows a tolerance.
const FAR_FUTURE_SECONDS: i64 = 4_102_444_800;
/// How long a short time to live is, in milliseconds.
const SHORT_TTL_MS: u64 = 50;
/// The short time to live of the key that two more commands change while
/// it lives (KEEPTTL, INCR), long enough for them to arrive before it ends
/// on a loaded machine.
const KEPT_TTL_MS: u64 = 1000;
/// Past a short time to live on the test's clock, how long the test waits
/// more before it expects SplitKV to have expired the key: the servers
/// read a clock of millisecond granularity at some moment of their
/// handling of the command.
const EXPIRY_MARGIN: Duration = Duration::from_millis(20);
/// Longest wait for Redis to report a short-lived key gone.
const EXPIRY_DEADLINE: Duration = Duration::from_secs(10);

/// The unit of a reply that is a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

/// A reply that is a time: its unit, and whether it is a moment (EXPIRETIME)
/// or a remaining time (TTL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Time {
    unit: Unit,
    moment: bool,
}

impl Time {
    /// The time a command of this name answers, if it answers one.
    fn of(command: &[u8]) -> Option<Time> {
        let name = command.to_ascii_lowercase();
        let (unit, moment) = match name.as_slice() {
            b"ttl" => (Unit::Seconds, false),
            b"pttl" => (Unit::Millis, false),
            b"expiretime" => (Unit::Seconds, true),
            b"pexpiretime" => (Unit::Millis, true),
            _ => return None,
        };
        Some(Time { unit, moment })
    }

    fn tolerance(self) -> i64 {
        match self.unit {
            Unit::Seconds => SECONDS_TOLERANCE,
            Unit::Millis => MILLIS_TOLERANCE,
        }
    }

    /// True if `got` is close enough to Redis's `want`: negative replies
    /// (no expiry, no key) and far-future moments exactly, others within
    /// the tolerance.
    fn agree(self, want: &Reply, got: &Reply) -> bool {
        let (Reply::Integer(want), Reply::Integer(got)) = (want, got) else {
            return false;
        };
        let far = match self.unit {
            Unit::Seconds => FAR_FUTURE_SECONDS,
            Unit::Millis => FAR_FUTURE_SECONDS * 1000,
        };
        if *want < 0 || *got < 0 || (self.moment && *want >= far) {
            return want == got;
        }
        want.abs_diff(*got) <= self.tolerance().unsigned_abs()
    }

    fn describe(self) -> String {
        let unit = match self.unit {
            Unit::Seconds => "s",
            Unit::Millis => "ms",
        };
        format!("a time, within {} {unit}", self.tolerance())
    }
}

/// How a step's replies are compared.
#[derive(Debug, Clone)]
enum Check {
    /// Byte for byte.
    Exact,
    /// By [`shape`]; the text says why the contents differ.
    Shape(&'static str),
    /// An integer that is a time ([`Time::agree`]); any other reply (an
    /// error) byte for byte.
    Time(Time),
    /// EXEC's array: the elements at the indexes listed are times, the
    /// others byte for byte; any other reply byte for byte.
    Exec(Vec<(usize, Time)>),
    /// An array whose order is each server's own (KEYS): the same
    /// elements, each byte for byte, in any order.
    Unordered,
}

/// One command of a stream and how its replies are compared.
#[derive(Debug, Clone)]
struct Step {
    args: Vec<Vec<u8>>,
    check: Check,
}

fn step(args: &[&[u8]], check: Check) -> Step {
    Step {
        args: args.iter().map(|a| a.to_vec()).collect(),
        check,
    }
}

/// A step compared byte for byte.
fn exact(args: &[&[u8]]) -> Step {
    step(args, Check::Exact)
}

/// A TTL, PTTL, EXPIRETIME or PEXPIRETIME of a key whose expiry was given
/// as a relative time, or whose remaining time is asked: compared within
/// the tolerance of its unit.
fn timed(args: &[&[u8]]) -> Step {
    let time = Time::of(args[0]).unwrap_or_else(|| {
        panic!(
            "{} does not answer a time",
            String::from_utf8_lossy(args[0])
        )
    });
    step(args, Check::Time(time))
}

fn unordered(args: &[&[u8]]) -> Step {
    step(args, Check::Unordered)
}

fn by_shape(args: &[&[u8]], why: &'static str) -> Step {
    step(args, Check::Shape(why))
}

fn hello(protocol: &str) -> Step {
    by_shape(
        &[b"HELLO", protocol.as_bytes()],
        "HELLO's version and id are each server's own",
    )
}

/// `body` as one transaction: MULTI, each command (its QUEUED compared),
/// EXEC (its array compared as [`Check::Exec`]).
fn transaction(body: &[Step]) -> Vec<Step> {
    let times: Vec<(usize, Time)> = body
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s.check {
            Check::Time(time) => Some((i, time)),
            _ => None,
        })
        .collect();
    let mut steps = vec![exact(cmd!("MULTI"))];
    steps.extend(body.iter().map(|s| Step {
        args: s.args.clone(),
        check: Check::Exact,
    }));
    steps.push(step(cmd!("EXEC"), Check::Exec(times)));
    steps
}

fn text(raw: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(&raw[..raw.len().min(2000)]))
}

/// An array reply's raw header (`*3\r\n`) and each element's raw bytes,
/// or `None` if the reply is not an array.
fn elements(raw: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    if !matches!(raw.first(), Some(b'*' | b'~')) || raw.starts_with(b"*-1") {
        return None;
    }
    let end = raw.windows(2).position(|w| w == b"\r\n")? + 2;
    let count: usize = std::str::from_utf8(&raw[1..end - 2]).ok()?.parse().ok()?;
    let mut at = end;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        let (_, used) = parse_reply(&raw[at..])?;
        items.push(&raw[at..at + used]);
        at += used;
    }
    Some((&raw[..end], items))
}

/// Whether SplitKV's reply `got` passes for Redis's `want` under `check`;
/// `Err` says how it does not.
fn agree(check: &Check, want: &[u8], got: &[u8]) -> Result<(), String> {
    if want == got {
        return Ok(());
    }
    let parse = |raw: &[u8]| parse_reply(raw).expect("a whole reply").0;
    match check {
        Check::Exact => Err("compared byte for byte".into()),
        Check::Shape(why) => {
            if shape(&parse(want)) == shape(&parse(got)) {
                Ok(())
            } else {
                Err(format!("compared by shape: {why}"))
            }
        }
        Check::Time(time) => {
            if time.agree(&parse(want), &parse(got)) {
                Ok(())
            } else {
                Err(format!("compared as {}", time.describe()))
            }
        }
        Check::Exec(times) => {
            let (Some((want_head, want_items)), Some((got_head, got_items))) =
                (elements(want), elements(got))
            else {
                return Err("EXEC's reply, compared byte for byte".into());
            };
            if want_head != got_head {
                return Err("EXEC's arrays differ in length".into());
            }
            for (i, (w, g)) in want_items.iter().zip(&got_items).enumerate() {
                match times.iter().find(|(at, _)| *at == i) {
                    Some((_, time)) if time.agree(&parse(w), &parse(g)) => {}
                    Some((_, time)) => {
                        return Err(format!(
                            "EXEC's element {i} (compared as {}): Redis {}, SplitKV {}",
                            time.describe(),
                            text(w),
                            text(g)
                        ));
                    }
                    None if w == g => {}
                    None => {
                        return Err(format!(
                            "EXEC's element {i} (byte for byte): Redis {}, SplitKV {}",
                            text(w),
                            text(g)
                        ));
                    }
                }
            }
            Ok(())
        }
        Check::Unordered => {
            let (Some((want_head, mut want_items)), Some((got_head, mut got_items))) =
                (elements(want), elements(got))
            else {
                return Err("an array in any order, but not both are arrays".into());
            };
            want_items.sort_unstable();
            got_items.sort_unstable();
            if want_head == got_head && want_items == got_items {
                Ok(())
            } else {
                Err("compared as arrays in any order".into())
            }
        }
    }
}

/// A connection to each server.
struct Side {
    redis: Connection,
    splitkv: Connection,
}

impl Side {
    /// Sends `steps` one at a time, comparing each pair of replies before
    /// the next command goes; `stream` names the stream in a failure.
    fn one_by_one(&mut self, stream: &str, steps: &[Step]) {
        for (i, s) in steps.iter().enumerate() {
            let request = encode_step(s);
            self.redis.send(&request);
            self.splitkv.send(&request);
            self.compare(stream, "one by one", i, s);
        }
    }

    /// Sends all of `steps` in one write to each server, then compares the
    /// replies in order.
    fn pipelined(&mut self, stream: &str, steps: &[Step]) {
        let request: Vec<u8> = steps.iter().flat_map(encode_step).collect();
        self.redis.send(&request);
        self.splitkv.send(&request);
        for (i, s) in steps.iter().enumerate() {
            self.compare(stream, "pipelined", i, s);
        }
    }

    /// [`Side::one_by_one`], then [`Side::pipelined`] (which starts from
    /// the state the first run left, the same on both servers).
    fn both_ways(&mut self, stream: &str, steps: &[Step]) {
        self.one_by_one(stream, steps);
        self.pipelined(stream, steps);
    }

    fn compare(&mut self, stream: &str, mode: &str, index: usize, s: &Step) {
        let (want, _) = self.redis.reply();
        let (got, _) = self.splitkv.reply();
        if let Err(how) = agree(&s.check, &want, &got) {
            panic!(
                "stream {stream:?} ({mode}), step {index}: `{}` ({how}): Redis answered {}, SplitKV {}",
                describe(&s.args),
                text(&want),
                text(&got),
            );
        }
    }

    /// One command to each server, not compared: the two replies.
    fn call(&mut self, args: &[&[u8]]) -> (Reply, Reply) {
        let request = encode(args);
        self.redis.send(&request);
        self.splitkv.send(&request);
        (self.redis.reply().1, self.splitkv.reply().1)
    }
}

fn encode_step(s: &Step) -> Vec<u8> {
    let args: Vec<&[u8]> = s.args.iter().map(Vec::as_slice).collect();
    encode(&args)
}

/// A `redis-server` and a compute node (with its storage node), and a
/// connection to each.
struct Servers {
    main: Side,
    redis_addr: SocketAddr,
    splitkv_addr: SocketAddr,
    _redis: RedisServer,
    _splitkv: ComputeNode,
}

impl Servers {
    fn start() -> Self {
        let redis = RedisServer::start(None);
        let splitkv = ComputeNode::start(None);
        let main = Side {
            redis: Connection::open(redis.addr),
            splitkv: Connection::open(splitkv.addr),
        };
        Self {
            main,
            redis_addr: redis.addr,
            splitkv_addr: splitkv.addr,
            _redis: redis,
            _splitkv: splitkv,
        }
    }

    /// Another connection to each server.
    fn connect(&self) -> Side {
        Side {
            redis: Connection::open(self.redis_addr),
            splitkv: Connection::open(self.splitkv_addr),
        }
    }
}

/// The Unix time now, in milliseconds, on the test's clock.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// SET with every expiry option, alone and with NX, XX and GET, and its
/// wrong arguments.
fn set_steps() -> Vec<Step> {
    let binary = b"a\r\nb\x00c\xff".to_vec();
    vec![
        exact(cmd!("DEL", "s", "s2", "s3", "nosuch", binary)),
        exact(cmd!("SET", "s", "v", "EX", "100")),
        timed(cmd!("TTL", "s")),
        timed(cmd!("PTTL", "s")),
        timed(cmd!("EXPIRETIME", "s")),
        timed(cmd!("PEXPIRETIME", "s")),
        exact(cmd!("GET", "s")),
        exact(cmd!("SET", "s", "v", "PX", "100000")),
        timed(cmd!("PTTL", "s")),
        timed(cmd!("TTL", "s")),
        exact(cmd!("SET", "s", "v", "EXAT", "4102444800")),
        exact(cmd!("EXPIRETIME", "s")),
        exact(cmd!("PEXPIRETIME", "s")),
        timed(cmd!("TTL", "s")),
        timed(cmd!("PTTL", "s")),
        exact(cmd!("SET", "s", "v", "PXAT", "4102444800123")),
        exact(cmd!("PEXPIRETIME", "s")),
        exact(cmd!("EXPIRETIME", "s")),
        // EXPIRETIME rounds to the nearest second, half up.
        exact(cmd!("SET", "s", "v", "PXAT", "4102444800500")),
        exact(cmd!("EXPIRETIME", "s")),
        exact(cmd!("SET", "s", "v", "PXAT", "4102444800499")),
        exact(cmd!("EXPIRETIME", "s")),
        exact(cmd!("SET", "s", "w", "KEEPTTL")),
        exact(cmd!("PEXPIRETIME", "s")),
        exact(cmd!("GET", "s")),
        exact(cmd!("SET", "s", "x")),
        exact(cmd!("TTL", "s")),
        exact(cmd!("PEXPIRETIME", "s")),
        exact(cmd!("SET", "s", "y", "KEEPTTL")),
        exact(cmd!("TTL", "s")),
        // With NX, XX and GET, in any order.
        exact(cmd!("SET", "s2", "a", "EX", "100", "NX")),
        timed(cmd!("TTL", "s2")),
        exact(cmd!("SET", "s2", "b", "EX", "200", "NX")),
        timed(cmd!("TTL", "s2")),
        exact(cmd!("GET", "s2")),
        exact(cmd!("SET", "s2", "c", "PX", "300000", "XX")),
        timed(cmd!("PTTL", "s2")),
        exact(cmd!("SET", "s3", "c", "PX", "300000", "XX")),
        exact(cmd!("EXISTS", "s3")),
        exact(cmd!("SET", "s2", "d", "EXAT", "4102444800", "XX", "GET")),
        exact(cmd!("EXPIRETIME", "s2")),
        exact(cmd!("SET", "s2", "e", "PXAT", "4102444801000", "GET", "NX")),
        exact(cmd!("PEXPIRETIME", "s2")),
        exact(cmd!("GET", "s2")),
        exact(cmd!("SET", "s2", "f", "KEEPTTL", "XX", "GET")),
        exact(cmd!("PEXPIRETIME", "s2")),
        exact(cmd!("SET", "s2", "g", "GET", "KEEPTTL", "NX")),
        exact(cmd!("GET", "s2")),
        exact(cmd!("SET", "s3", "h", "NX", "GET", "EXAT", "4102444800")),
        exact(cmd!("EXPIRETIME", "s3")),
        exact(cmd!("SET", "s3", "i", "XX", "PX", "100000", "GET")),
        timed(cmd!("PTTL", "s3")),
        exact(cmd!("SET", "s3", "j", "GET")),
        exact(cmd!("TTL", "s3")),
        exact(cmd!("SET", "s3", "k", "EX", "100", "GET", "GET")),
        timed(cmd!("TTL", "s3")),
        exact(cmd!("SET", "s3", "l", "EX", "100", "NX")),
        exact(cmd!("SET", "nosuch", "m", "EX", "100", "XX", "GET")),
        exact(cmd!("EXISTS", "nosuch")),
        exact(cmd!("SET", "nosuch", "m", "PXAT", "4102444800000", "GET")),
        exact(cmd!("PEXPIRETIME", "nosuch")),
        exact(cmd!("DEL", "nosuch")),
        exact(cmd!("SET", binary, binary, "EXAT", "4102444800", "GET")),
        exact(cmd!("EXPIRETIME", binary)),
        exact(cmd!("SET", binary, "", "KEEPTTL", "GET")),
        exact(cmd!("EXPIRETIME", binary)),
        exact(cmd!("GET", binary)),
        // Options in lower and mixed case.
        exact(cmd!("set", "s3", "n", "ex", "100")),
        timed(cmd!("ttl", "s3")),
        exact(cmd!("set", "s3", "o", "pxat", "4102444800000", "xx", "get")),
        exact(cmd!("pexpiretime", "s3")),
        exact(cmd!("SeT", "s3", "p", "ExAt", "4102444801", "Get")),
        exact(cmd!("ExpireTime", "s3")),
        exact(cmd!("set", "s3", "q", "px", "100000", "nx")),
        exact(cmd!("set", "s3", "q", "keepttl")),
        exact(cmd!("EXPIRETIME", "s3")),
        exact(cmd!("set", "s3", "r", "KeepTtl", "ex", "10")),
        // Zero and negative times.
        exact(cmd!("SET", "s", "v", "EX", "0")),
        exact(cmd!("SET", "s", "v", "PX", "0")),
        exact(cmd!("SET", "s", "v", "EXAT", "0")),
        exact(cmd!("SET", "s", "v", "PXAT", "0")),
        exact(cmd!("SET", "s", "v", "EX", "-1")),
        exact(cmd!("SET", "s", "v", "PX", "-1")),
        exact(cmd!("SET", "s", "v", "EXAT", "-1")),
        exact(cmd!("SET", "s", "v", "PXAT", "-100")),
        exact(cmd!("SET", "s", "v", "EX", "-9223372036854775808")),
        exact(cmd!("GET", "s")),
        // Times that are not integers.
        exact(cmd!("SET", "s", "v", "EX", "abc")),
        exact(cmd!("SET", "s", "v", "EX", "1.5")),
        exact(cmd!("SET", "s", "v", "EX", "")),
        exact(cmd!("SET", "s", "v", "EX", " 1")),
        exact(cmd!("SET", "s", "v", "EX", "1 ")),
        exact(cmd!("SET", "s", "v", "EX", "+1")),
        exact(cmd!("SET", "s", "v", "EX", "0x10")),
        exact(cmd!("SET", "s", "v", "EX", "1e3")),
        exact(cmd!("SET", "s", "v", "PX", "9223372036854775808")),
        exact(cmd!("SET", "s", "v", "EXAT", "-9223372036854775809")),
        exact(cmd!("SET", "s", "v", "PXAT", "abc")),
        // Times that overflow: seconds times 1000, or now plus the time.
        exact(cmd!("SET", "s", "v", "EX", "9223372036854775807")),
        exact(cmd!("SET", "s", "v", "EX", "9223372036854775")),
        exact(cmd!("SET", "s", "v", "EX", "9223372036854774")),
        exact(cmd!("SET", "s", "v", "PX", "9223372036854775807")),
        exact(cmd!("SET", "s", "v", "EXAT", "9223372036854775807")),
        exact(cmd!("SET", "s", "v", "EXAT", "9223372036854776")),
        exact(cmd!("GET", "s")),
        // The largest absolute times there are.
        exact(cmd!("SET", "s", "v", "EXAT", "9223372036854775")),
        exact(cmd!("EXPIRETIME", "s")),
        exact(cmd!("PEXPIRETIME", "s")),
        timed(cmd!("TTL", "s")),
        exact(cmd!("SET", "s", "v", "PXAT", "9223372036854775807")),
        exact(cmd!("PEXPIRETIME", "s")),
        exact(cmd!("EXPIRETIME", "s")),
        timed(cmd!("PTTL", "s")),
        // A wrong time is refused before the key is looked at, and before
        // GET answers.
        exact(cmd!("SET", "s", "v", "EX", "0", "NX")),
        exact(cmd!("SET", "nosuch", "v", "EX", "0", "XX")),
        exact(cmd!("SET", "s", "v", "EX", "0", "GET")),
        exact(cmd!("SET", "s", "v", "GET", "PX", "abc")),
        exact(cmd!("EXISTS", "nosuch")),
        // Missing times, and options that do not go together.
        exact(cmd!("SET", "s", "v", "EX")),
        exact(cmd!("SET", "s", "v", "PX")),
        exact(cmd!("SET", "s", "v", "EXAT")),
        exact(cmd!("SET", "s", "v", "PXAT")),
        exact(cmd!("SET", "s", "v", "EX", "10", "EX")),
        exact(cmd!("SET", "s", "v", "NX", "EX")),
        exact(cmd!("SET", "s", "v", "EX", "10", "PX", "10")),
        exact(cmd!("SET", "s", "v", "PX", "10", "EX", "10")),
        exact(cmd!("SET", "s", "v", "EX", "10", "EXAT", "4102444800")),
        exact(cmd!("SET", "s", "v", "PX", "10", "PXAT", "4102444800000")),
        exact(cmd!(
            "SET",
            "s",
            "v",
            "EXAT",
            "4102444800",
            "PXAT",
            "4102444800000"
        )),
        exact(cmd!("SET", "s", "v", "KEEPTTL", "EX", "10")),
        exact(cmd!("SET", "s", "v", "EX", "10", "KEEPTTL")),
        exact(cmd!("SET", "s", "v", "PXAT", "4102444800000", "KEEPTTL")),
        exact(cmd!("SET", "s", "v", "KEEPTTL", "PXAT", "4102444800000")),
        exact(cmd!("SET", "s", "v", "NX", "XX", "EX", "10")),
        exact(cmd!("SET", "s", "v", "EX", "10", "XX", "NX")),
        exact(cmd!("SET", "s", "v", "PERSIST")),
        exact(cmd!("SET", "s", "v", "EXPIRE", "10")),
        exact(cmd!("SET", "s", "v", "EX", "10", "FOO")),
        exact(cmd!("SET", "s", "v", "EX", "10", "20")),
        exact(cmd!("SET", "s", "v", "KEEPTTL", "10")),
        exact(cmd!("PEXPIRETIME", "s")),
        // The same option twice: the last time counts.
        exact(cmd!("SET", "s", "v", "EX", "10", "EX", "200")),
        timed(cmd!("TTL", "s")),
        exact(cmd!("SET", "s", "v", "PX", "100000", "px", "200000")),
        timed(cmd!("PTTL", "s")),
        exact(cmd!(
            "SET",
            "s",
            "v",
            "EXAT",
            "4102444800",
            "EXAT",
            "4102444900"
        )),
        exact(cmd!("EXPIRETIME", "s")),
        exact(cmd!("SET", "s", "v", "KEEPTTL", "KEEPTTL", "XX", "XX")),
        exact(cmd!("EXPIRETIME", "s")),
        // A time already past: the key is set and gone at once.
        exact(cmd!("SET", "s", "v", "EXAT", "1")),
        exact(cmd!("EXISTS", "s")),
        exact(cmd!("SET", "s", "v", "PXAT", "1", "GET")),
        exact(cmd!("GET", "s")),
        exact(cmd!("TTL", "s")),
        exact(cmd!("SET", "s", "v", "PXAT", "1000", "NX")),
        exact(cmd!("PTTL", "s")),
        exact(cmd!("DEL", "s", "s2", "s3", binary)),
    ]
}

/// SETEX and PSETEX.
fn setex_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DEL", "x1", "x2")),
        exact(cmd!("SETEX", "x1", "100", "v")),
        timed(cmd!("TTL", "x1")),
        timed(cmd!("PTTL", "x1")),
        timed(cmd!("EXPIRETIME", "x1")),
        exact(cmd!("GET", "x1")),
        exact(cmd!("SETEX", "x1", "200", "w")),
        timed(cmd!("TTL", "x1")),
        exact(cmd!("GET", "x1")),
        exact(cmd!("PSETEX", "x2", "100000", "v")),
        timed(cmd!("PTTL", "x2")),
        timed(cmd!("TTL", "x2")),
        timed(cmd!("PEXPIRETIME", "x2")),
        exact(cmd!("PSETEX", "x2", "200000", "")),
        timed(cmd!("PTTL", "x2")),
        exact(cmd!("GET", "x2")),
        exact(cmd!("SETEX", "x1", "0", "v")),
        exact(cmd!("SETEX", "x1", "-1", "v")),
        exact(cmd!("PSETEX", "x2", "0", "v")),
        exact(cmd!("PSETEX", "x2", "-5", "v")),
        exact(cmd!("SETEX", "x1", "abc", "v")),
        exact(cmd!("SETEX", "x1", "1.5", "v")),
        exact(cmd!("SETEX", "x1", "", "v")),
        exact(cmd!("PSETEX", "x2", " 5", "v")),
        exact(cmd!("SETEX", "x1", "9223372036854775807", "v")),
        exact(cmd!("SETEX", "x1", "9223372036854775", "v")),
        exact(cmd!("SETEX", "x1", "9223372036854775808", "v")),
        exact(cmd!("PSETEX", "x2", "9223372036854775807", "v")),
        exact(cmd!("PSETEX", "x2", "-9223372036854775808", "v")),
        exact(cmd!("SETEX", "nosuch", "0", "v")),
        exact(cmd!("EXISTS", "nosuch")),
        exact(cmd!("GET", "x1")),
        timed(cmd!("TTL", "x1")),
        exact(cmd!("SETEX")),
        exact(cmd!("SETEX", "x1")),
        exact(cmd!("SETEX", "x1", "10")),
        exact(cmd!("SETEX", "x1", "10", "v", "NX")),
        exact(cmd!("PSETEX", "x2", "10")),
        exact(cmd!("PSETEX", "x2", "10", "v", "x")),
        exact(cmd!("setex", "x1", "300", "lower")),
        timed(cmd!("ttl", "x1")),
        exact(cmd!("PsEtEx", "x2", "300000", "mixed")),
        timed(cmd!("pttl", "x2")),
        exact(cmd!("SET", "x1", "kept", "KEEPTTL")),
        timed(cmd!("TTL", "x1")),
        exact(cmd!("SET", "x1", "plain")),
        exact(cmd!("TTL", "x1")),
        exact(cmd!("DEL", "x1", "x2")),
    ]
}

/// GETEX with each option, and its wrong arguments.
fn getex_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DEL", "g", "g2", "nosuch")),
        exact(cmd!("SET", "g", "v")),
        exact(cmd!("GETEX", "g")),
        exact(cmd!("TTL", "g")),
        exact(cmd!("GETEX", "g", "EX", "100")),
        timed(cmd!("TTL", "g")),
        timed(cmd!("EXPIRETIME", "g")),
        exact(cmd!("GETEX", "g", "PX", "200000")),
        timed(cmd!("PTTL", "g")),
        exact(cmd!("GETEX", "g", "EXAT", "4102444800")),
        exact(cmd!("EXPIRETIME", "g")),
        exact(cmd!("GETEX", "g", "PXAT", "4102444800123")),
        exact(cmd!("PEXPIRETIME", "g")),
        exact(cmd!("GETEX", "g")),
        exact(cmd!("PEXPIRETIME", "g")),
        exact(cmd!("GETEX", "g", "PERSIST")),
        exact(cmd!("TTL", "g")),
        exact(cmd!("GETEX", "g", "PERSIST")),
        exact(cmd!("TTL", "g")),
        exact(cmd!("GET", "g")),
        // A missing key: nil, whatever the time (the key is looked up
        // before the time is read), but not whatever the options.
        exact(cmd!("GETEX", "nosuch")),
        exact(cmd!("GETEX", "nosuch", "EX", "100")),
        exact(cmd!("GETEX", "nosuch", "EX", "0")),
        exact(cmd!("GETEX", "nosuch", "PX", "abc")),
        exact(cmd!("GETEX", "nosuch", "PXAT", "-1")),
        exact(cmd!("GETEX", "nosuch", "EX", "9223372036854775807")),
        exact(cmd!("GETEX", "nosuch", "PERSIST")),
        exact(cmd!("GETEX", "nosuch", "FOO")),
        exact(cmd!("GETEX", "nosuch", "EX", "10", "PX", "10")),
        exact(cmd!("EXISTS", "nosuch")),
        // Wrong times on a key.
        exact(cmd!("GETEX", "g", "EX", "0")),
        exact(cmd!("GETEX", "g", "PX", "0")),
        exact(cmd!("GETEX", "g", "EXAT", "0")),
        exact(cmd!("GETEX", "g", "PXAT", "0")),
        exact(cmd!("GETEX", "g", "EX", "-1")),
        exact(cmd!("GETEX", "g", "PXAT", "-1")),
        exact(cmd!("GETEX", "g", "EX", "abc")),
        exact(cmd!("GETEX", "g", "PX", "1.5")),
        exact(cmd!("GETEX", "g", "EX", "9223372036854775808")),
        exact(cmd!("GETEX", "g", "EX", "9223372036854775807")),
        exact(cmd!("GETEX", "g", "EX", "9223372036854775")),
        exact(cmd!("GETEX", "g", "PX", "9223372036854775807")),
        exact(cmd!("GETEX", "g", "EXAT", "9223372036854775807")),
        exact(cmd!("TTL", "g")),
        // The largest absolute times.
        exact(cmd!("GETEX", "g", "EXAT", "9223372036854775")),
        exact(cmd!("EXPIRETIME", "g")),
        exact(cmd!("GETEX", "g", "PXAT", "9223372036854775807")),
        exact(cmd!("PEXPIRETIME", "g")),
        // Options that do not go together, missing times, unknown options.
        exact(cmd!("GETEX", "g", "PERSIST", "EX", "10")),
        exact(cmd!("GETEX", "g", "EX", "10", "PERSIST")),
        exact(cmd!("GETEX", "g", "EX", "10", "PX", "10")),
        exact(cmd!(
            "GETEX",
            "g",
            "EXAT",
            "4102444800",
            "PXAT",
            "4102444800000"
        )),
        exact(cmd!("GETEX", "g", "PX", "10", "EXAT", "4102444800")),
        exact(cmd!("GETEX", "g", "EX")),
        exact(cmd!("GETEX", "g", "PXAT")),
        exact(cmd!("GETEX", "g", "EX", "10", "EX")),
        exact(cmd!("GETEX", "g", "KEEPTTL")),
        exact(cmd!("GETEX", "g", "NX")),
        exact(cmd!("GETEX", "g", "XX")),
        exact(cmd!("GETEX", "g", "GET")),
        exact(cmd!("GETEX", "g", "FOO")),
        exact(cmd!("GETEX", "g", "PERSIST", "FOO")),
        exact(cmd!("GETEX", "g", "EX", "10", "20")),
        exact(cmd!("PEXPIRETIME", "g")),
        // The same option twice.
        exact(cmd!("GETEX", "g", "EX", "10", "EX", "200")),
        timed(cmd!("TTL", "g")),
        exact(cmd!("GETEX", "g", "PERSIST", "PERSIST")),
        exact(cmd!("TTL", "g")),
        // Lower and mixed case.
        exact(cmd!("getex", "g", "ex", "100")),
        timed(cmd!("ttl", "g")),
        exact(cmd!("getex", "g", "persist")),
        exact(cmd!("ttl", "g")),
        exact(cmd!("GeTeX", "g", "PxAt", "4102444800000")),
        exact(cmd!("PEXPIRETIME", "g")),
        // Arity.
        exact(cmd!("GETEX")),
        // A time already past: the value, then the key is gone.
        exact(cmd!("GETEX", "g", "EXAT", "1")),
        exact(cmd!("EXISTS", "g")),
        exact(cmd!("GET", "g")),
        exact(cmd!("TTL", "g")),
        exact(cmd!("SET", "g", "w")),
        exact(cmd!("GETEX", "g", "PXAT", "1")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("GETEX", "g")),
        // GETEX with no option keeps a time to live; a refused time leaves
        // it.
        exact(cmd!("SET", "g2", "v", "EX", "100")),
        exact(cmd!("GETEX", "g2")),
        timed(cmd!("TTL", "g2")),
        exact(cmd!("GETEX", "g2", "EX", "0")),
        timed(cmd!("TTL", "g2")),
        exact(cmd!("GETEX", "g2", "PERSIST")),
        exact(cmd!("TTL", "g2")),
        exact(cmd!("DEL", "g", "g2")),
    ]
}

/// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT with NX, XX, GT and LT.
fn expire_steps() -> Vec<Step> {
    vec![
        exact(cmd!("DEL", "e", "e2", "nosuch")),
        exact(cmd!("EXPIRE", "e", "100")),
        exact(cmd!("PEXPIRE", "e", "100000")),
        exact(cmd!("EXPIREAT", "e", "4102444800")),
        exact(cmd!("PEXPIREAT", "e", "4102444800000")),
        exact(cmd!("EXPIRE", "e", "-1")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("EXPIRE", "e", "100")),
        timed(cmd!("TTL", "e")),
        timed(cmd!("PTTL", "e")),
        timed(cmd!("EXPIRETIME", "e")),
        timed(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("PEXPIRE", "e", "200000")),
        timed(cmd!("PTTL", "e")),
        timed(cmd!("TTL", "e")),
        exact(cmd!("EXPIREAT", "e", "4102444800")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("PEXPIRETIME", "e")),
        timed(cmd!("TTL", "e")),
        exact(cmd!("PEXPIREAT", "e", "4102444800123")),
        exact(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("GET", "e")),
        // NX and XX.
        exact(cmd!("EXPIRE", "e", "100", "NX")),
        exact(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("EXPIRE", "e", "100", "XX")),
        timed(cmd!("TTL", "e")),
        exact(cmd!("PERSIST", "e")),
        exact(cmd!("EXPIRE", "e", "100", "XX")),
        exact(cmd!("TTL", "e")),
        exact(cmd!("EXPIRE", "e", "100", "NX")),
        timed(cmd!("TTL", "e")),
        exact(cmd!("PEXPIRE", "e", "300000", "XX")),
        timed(cmd!("PTTL", "e")),
        exact(cmd!("PEXPIRE", "e", "300000", "NX")),
        // GT and LT between absolute times; equal is neither.
        exact(cmd!("EXPIREAT", "e", "4102444800")),
        exact(cmd!("EXPIREAT", "e", "4102444801", "GT")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("EXPIREAT", "e", "4102444801", "GT")),
        exact(cmd!("EXPIREAT", "e", "4102444700", "GT")),
        exact(cmd!("EXPIREAT", "e", "4102444900", "LT")),
        exact(cmd!("EXPIREAT", "e", "4102444801", "LT")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("EXPIREAT", "e", "4102444700", "LT")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("PEXPIREAT", "e", "4102444700001", "GT")),
        exact(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("PEXPIREAT", "e", "4102444700001", "LT")),
        exact(cmd!("PEXPIREAT", "e", "4102444700000", "LT")),
        exact(cmd!("PEXPIRETIME", "e")),
        // A relative time against an absolute one in 2100.
        exact(cmd!("EXPIRE", "e", "100", "GT")),
        exact(cmd!("PEXPIRE", "e", "100000", "GT")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("EXPIRE", "e", "100", "LT")),
        timed(cmd!("TTL", "e")),
        // No time to live counts as an infinite one.
        exact(cmd!("PERSIST", "e")),
        exact(cmd!("EXPIRE", "e", "100", "GT")),
        exact(cmd!("EXPIREAT", "e", "9223372036854775", "GT")),
        exact(cmd!("TTL", "e")),
        exact(cmd!("EXPIRE", "e", "100", "LT")),
        timed(cmd!("TTL", "e")),
        exact(cmd!("PERSIST", "e")),
        exact(cmd!("PEXPIREAT", "e", "4102444800000", "LT")),
        exact(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("PERSIST", "e")),
        // XX with GT or LT, which go together.
        exact(cmd!("EXPIREAT", "e", "4102444800", "XX")),
        exact(cmd!("EXPIREAT", "e", "4102444800", "NX")),
        exact(cmd!("EXPIREAT", "e", "4102444900", "NX")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("EXPIREAT", "e", "4102444900", "XX", "GT")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("EXPIREAT", "e", "4102444800", "GT", "XX")),
        exact(cmd!("EXPIREAT", "e", "4102444800", "XX", "LT")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("EXPIRE", "e", "100", "XX", "GT")),
        exact(cmd!("EXPIRE", "e", "100", "LT", "XX")),
        timed(cmd!("TTL", "e")),
        // Repeated options.
        exact(cmd!("EXPIRE", "e", "100", "NX", "NX")),
        exact(cmd!("EXPIREAT", "e", "4102444800", "XX", "XX")),
        exact(cmd!("EXPIREAT", "e", "4102444801", "GT", "GT")),
        exact(cmd!("EXPIREAT", "e", "4102444700", "LT", "lt")),
        exact(cmd!("EXPIRETIME", "e")),
        // Lower and mixed case.
        exact(cmd!("expire", "e", "100", "nx")),
        exact(cmd!("pexpire", "e", "100000", "xx")),
        timed(cmd!("pttl", "e")),
        exact(cmd!("expireat", "e", "4102444800", "Gt")),
        exact(cmd!("pexpireat", "e", "4102444800001", "gT")),
        exact(cmd!("PExpireTime", "e")),
        exact(cmd!("ExPiReAt", "e", "4102444700", "lT")),
        exact(cmd!("expiretime", "e")),
        // Options that do not go together (NX's message wins over GT's).
        exact(cmd!("EXPIRE", "e", "100", "NX", "XX")),
        exact(cmd!("EXPIRE", "e", "100", "XX", "NX")),
        exact(cmd!("EXPIRE", "e", "100", "NX", "GT")),
        exact(cmd!("EXPIRE", "e", "100", "LT", "NX")),
        exact(cmd!("EXPIRE", "e", "100", "GT", "LT")),
        exact(cmd!("EXPIRE", "e", "100", "LT", "GT")),
        exact(cmd!("EXPIRE", "e", "100", "NX", "GT", "LT")),
        exact(cmd!("PEXPIRE", "e", "100", "XX", "GT", "LT")),
        exact(cmd!("EXPIREAT", "e", "4102444800", "nx", "xx")),
        exact(cmd!("PEXPIREAT", "e", "4102444800000", "gt", "lt")),
        exact(cmd!("EXPIRE", "nosuch", "100", "NX", "XX")),
        // Unknown options are refused before the time is read.
        exact(cmd!("EXPIRE", "e", "100", "FOO")),
        exact(cmd!("EXPIRE", "e", "100", "NX", "FOO")),
        exact(cmd!("EXPIRE", "e", "abc", "FOO")),
        exact(cmd!("EXPIRE", "e", "100", "200")),
        exact(cmd!("EXPIRE", "e", "100", "")),
        exact(cmd!("PEXPIREAT", "e", "100", "KEEPTTL")),
        exact(cmd!("EXPIRE", "nosuch", "100", "FOO")),
        // Times that are not integers, checked before the key is looked up.
        exact(cmd!("EXPIRE", "e", "abc")),
        exact(cmd!("EXPIRE", "e", "abc", "NX")),
        exact(cmd!("EXPIRE", "e", "1.5")),
        exact(cmd!("EXPIRE", "e", "")),
        exact(cmd!("EXPIRE", "e", " 1")),
        exact(cmd!("PEXPIRE", "e", "+1")),
        exact(cmd!("EXPIREAT", "e", "0x10")),
        exact(cmd!("PEXPIREAT", "e", "1e3")),
        exact(cmd!("EXPIRE", "nosuch", "abc")),
        // Overflow.
        exact(cmd!("EXPIRE", "e", "9223372036854775807")),
        exact(cmd!("EXPIRE", "e", "-9223372036854775808")),
        exact(cmd!("EXPIRE", "e", "9223372036854775")),
        exact(cmd!("EXPIRE", "e", "9223372036854775808")),
        exact(cmd!("PEXPIRE", "e", "9223372036854775807")),
        exact(cmd!("EXPIREAT", "e", "9223372036854775807")),
        exact(cmd!("EXPIREAT", "e", "9223372036854776")),
        exact(cmd!("EXPIREAT", "e", "-9223372036854775808")),
        exact(cmd!("EXPIREAT", "e", "-9223372036854776")),
        exact(cmd!("EXPIRE", "nosuch", "9223372036854775807")),
        exact(cmd!("EXPIRETIME", "e")),
        // The largest times there are.
        exact(cmd!("EXPIREAT", "e", "9223372036854775")),
        exact(cmd!("EXPIRETIME", "e")),
        exact(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("PEXPIREAT", "e", "9223372036854775807")),
        exact(cmd!("PEXPIRETIME", "e")),
        exact(cmd!("EXPIRETIME", "e")),
        timed(cmd!("TTL", "e")),
        timed(cmd!("PTTL", "e")),
        exact(cmd!("PEXPIREAT", "e", "9223372036854775807", "GT")),
        exact(cmd!("EXPIREAT", "e", "9223372036854775", "LT")),
        exact(cmd!("PEXPIRETIME", "e")),
        // Arity.
        exact(cmd!("EXPIRE")),
        exact(cmd!("EXPIRE", "e")),
        exact(cmd!("PEXPIRE", "e")),
        exact(cmd!("EXPIREAT", "e")),
        exact(cmd!("PEXPIREAT")),
        // A time already past deletes the key (and answers 1).
        exact(cmd!("EXPIRE", "e", "-1")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("GET", "e")),
        exact(cmd!("TTL", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("EXPIRE", "e", "0")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("PEXPIRE", "e", "0")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("PEXPIRE", "e", "-9223372036854775808")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("PEXPIRE", "e", "-100")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("EXPIREAT", "e", "1")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("PEXPIREAT", "e", "0")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("EXPIREAT", "e", "-5")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("PEXPIREAT", "e", "-9223372036854775808")),
        exact(cmd!("EXISTS", "e")),
        // ... unless NX, XX, GT or LT says no first.
        exact(cmd!("SET", "e", "v", "EX", "100")),
        exact(cmd!("EXPIRE", "e", "-1", "NX")),
        exact(cmd!("EXPIRE", "e", "-1", "GT")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("EXPIRE", "e", "-1", "LT")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("EXPIRE", "e", "-1", "XX")),
        exact(cmd!("EXPIRE", "e", "-1", "GT")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("EXPIRE", "e", "-1", "NX")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e", "v")),
        exact(cmd!("PEXPIREAT", "e", "1", "LT")),
        exact(cmd!("EXISTS", "e")),
        exact(cmd!("SET", "e2", "v", "EX", "100")),
        exact(cmd!("EXPIREAT", "e2", "1", "XX")),
        exact(cmd!("EXISTS", "e2")),
        exact(cmd!("DBSIZE")),
        exact(cmd!("DEL", "e", "e2")),
    ]
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME and PERSIST on missing keys, keys
/// without a time to live and keys with one.
fn ttl_steps() -> Vec<Step> {
    let binary = b"t\r\n\x00\xff".to_vec();
    vec![
        exact(cmd!("DEL", "t", "t2", binary)),
        exact(cmd!("TTL", "t")),
        exact(cmd!("PTTL", "t")),
        exact(cmd!("EXPIRETIME", "t")),
        exact(cmd!("PEXPIRETIME", "t")),
        exact(cmd!("PERSIST", "t")),
        exact(cmd!("EXISTS", "t")),
        exact(cmd!("SET", "t", "v")),
        exact(cmd!("TTL", "t")),
        exact(cmd!("PTTL", "t")),
        exact(cmd!("EXPIRETIME", "t")),
        exact(cmd!("PEXPIRETIME", "t")),
        exact(cmd!("PERSIST", "t")),
        exact(cmd!("ttl", "t")),
        exact(cmd!("pTtL", "t")),
        exact(cmd!("expiretime", "t")),
        exact(cmd!("PexpireTime", "t")),
        exact(cmd!("persist", "t")),
        exact(cmd!("SET", "t", "v", "EXAT", "4102444800")),
        exact(cmd!("EXPIRETIME", "t")),
        exact(cmd!("PEXPIRETIME", "t")),
        timed(cmd!("TTL", "t")),
        timed(cmd!("PTTL", "t")),
        exact(cmd!("PERSIST", "t")),
        exact(cmd!("PERSIST", "t")),
        exact(cmd!("TTL", "t")),
        exact(cmd!("PEXPIRETIME", "t")),
        exact(cmd!("GET", "t")),
        exact(cmd!("SET", "t", "v", "PXAT", "4102444800999")),
        exact(cmd!("EXPIRETIME", "t")),
        exact(cmd!("PEXPIRETIME", "t")),
        exact(cmd!("PeRsIsT", "t")),
        exact(cmd!("SET", binary, "v", "EXAT", "4102444800")),
        exact(cmd!("EXPIRETIME", binary)),
        timed(cmd!("TTL", binary)),
        exact(cmd!("PERSIST", binary)),
        exact(cmd!("TTL", binary)),
        exact(cmd!("TTL")),
        exact(cmd!("TTL", "t", "t2")),
        exact(cmd!("PTTL")),
        exact(cmd!("PTTL", "t", "t2")),
        exact(cmd!("EXPIRETIME")),
        exact(cmd!("EXPIRETIME", "t", "t2")),
        exact(cmd!("PEXPIRETIME")),
        exact(cmd!("PEXPIRETIME", "t", "t2")),
        exact(cmd!("PERSIST")),
        exact(cmd!("PERSIST", "t", "t2")),
        exact(cmd!("DEL", "t", "t2", binary)),
    ]
}

/// Which commands keep a key's time to live, which clear it and which
/// carry it to another key.
fn bookkeeping_steps() -> Vec<Step> {
    let mut steps = vec![
        exact(cmd!("DEL", "b", "b2", "b3", "bn", "c1", "c2", "c3")),
        exact(cmd!("SET", "b", "5", "EXAT", "4102444800")),
    ];
    // Commands that change the value in place keep the time to live.
    for keeps in [
        cmd!("INCR", "b"),
        cmd!("DECR", "b"),
        cmd!("INCRBY", "b", "10"),
        cmd!("DECRBY", "b", "3"),
        cmd!("INCRBYFLOAT", "b", "1.5"),
        cmd!("APPEND", "b", "x"),
        cmd!("SETRANGE", "b", "0", "9"),
        cmd!("SETRANGE", "b", "0", ""),
        cmd!("INCR", "b"),
        cmd!("SETNX", "b", "z"),
        cmd!("MSETNX", "b", "z", "b2", "z"),
        cmd!("SET", "b", "v", "NX"),
        cmd!("SET", "b", "7", "KEEPTTL"),
        cmd!("INCR", "b"),
        cmd!("SET", "b", "w", "GET", "KEEPTTL"),
        cmd!("SET", "b", "x", "XX", "KEEPTTL"),
        cmd!("GETEX", "b"),
        cmd!("GET", "b"),
        cmd!("STRLEN", "b"),
        cmd!("EXPIRE", "b", "100", "NX"),
    ] {
        steps.push(exact(keeps));
        steps.push(exact(cmd!("EXPIRETIME", "b")));
    }
    steps.extend([
        exact(cmd!("EXISTS", "b2")),
        // Commands that replace the value clear it.
        exact(cmd!("SET", "b", "w")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "w", "EXAT", "4102444800")),
        exact(cmd!("GETSET", "b", "x")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "w", "EXAT", "4102444800")),
        exact(cmd!("SET", "b", "y", "GET")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "w", "EXAT", "4102444800")),
        exact(cmd!("SET", "b", "y", "XX")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "w", "EXAT", "4102444800")),
        exact(cmd!("SET", "b2", "w", "PXAT", "4102444800123")),
        exact(cmd!("MSET", "b", "z", "b3", "z")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("PEXPIRETIME", "b2")),
        exact(cmd!("MSET", "b2", "q", "b2", "r")),
        exact(cmd!("TTL", "b2")),
        exact(cmd!("GET", "b2")),
        // Deleting and setting again leaves no time to live.
        exact(cmd!("SET", "b", "w", "EX", "100")),
        exact(cmd!("DEL", "b")),
        exact(cmd!("SET", "b", "w")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "w", "EX", "100")),
        exact(cmd!("GETDEL", "b")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("APPEND", "b", "x")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "w", "EX", "100")),
        exact(cmd!("UNLINK", "b")),
        exact(cmd!("INCR", "b")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "1", "EX", "100")),
        exact(cmd!("INCR", "b")),
        timed(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "z", "NX")),
        timed(cmd!("TTL", "b")),
        exact(cmd!("GET", "b")),
        // RENAME and RENAMENX carry the time to live (or its lack) to the
        // new name, replacing the old key's.
        exact(cmd!("DEL", "b", "b2", "b3")),
        exact(cmd!("SET", "b", "w", "EXAT", "4102444800")),
        exact(cmd!("RENAME", "b", "b3")),
        exact(cmd!("EXPIRETIME", "b3")),
        exact(cmd!("TTL", "b")),
        exact(cmd!("SET", "b", "plain")),
        exact(cmd!("RENAME", "b", "b3")),
        exact(cmd!("TTL", "b3")),
        exact(cmd!("SET", "b", "w", "EXAT", "4102444801")),
        exact(cmd!("RENAME", "b", "b3")),
        exact(cmd!("EXPIRETIME", "b3")),
        exact(cmd!("RENAME", "b3", "b3")),
        exact(cmd!("EXPIRETIME", "b3")),
        exact(cmd!("SET", "b", "w", "PXAT", "4102444800123")),
        exact(cmd!("RENAMENX", "b", "b3")),
        exact(cmd!("PEXPIRETIME", "b")),
        exact(cmd!("EXPIRETIME", "b3")),
        exact(cmd!("RENAMENX", "b", "bn")),
        exact(cmd!("PEXPIRETIME", "bn")),
        exact(cmd!("EXISTS", "b")),
        exact(cmd!("SET", "b", "w", "EX", "100")),
        exact(cmd!("RENAME", "b", "b2")),
        timed(cmd!("TTL", "b2")),
        timed(cmd!("EXPIRETIME", "b2")),
        // COPY gives the copy the source's time to live (or none).
        exact(cmd!("SET", "c1", "v", "PXAT", "4102444800123")),
        exact(cmd!("COPY", "c1", "c2")),
        exact(cmd!("PEXPIRETIME", "c2")),
        exact(cmd!("PEXPIRETIME", "c1")),
        exact(cmd!("SET", "c3", "plain")),
        exact(cmd!("COPY", "c3", "c2")),
        exact(cmd!("PEXPIRETIME", "c2")),
        exact(cmd!("COPY", "c3", "c2", "REPLACE")),
        exact(cmd!("TTL", "c2")),
        exact(cmd!("COPY", "c1", "c2", "REPLACE")),
        exact(cmd!("PEXPIRETIME", "c2")),
        exact(cmd!("PERSIST", "c2")),
        exact(cmd!("TTL", "c2")),
        exact(cmd!("PEXPIRETIME", "c1")),
        exact(cmd!("EXPIREAT", "c2", "4102444900")),
        exact(cmd!("PEXPIRETIME", "c1")),
        exact(cmd!("EXPIRETIME", "c2")),
        exact(cmd!("SET", "c1", "v", "PX", "100000")),
        exact(cmd!("COPY", "c1", "c3", "REPLACE")),
        timed(cmd!("PTTL", "c3")),
        timed(cmd!("PEXPIRETIME", "c3")),
        // PERSIST answers 1 only when it removed a time to live.
        exact(cmd!("PERSIST", "c3")),
        exact(cmd!("PERSIST", "c3")),
        exact(cmd!("PERSIST", "nosuch")),
        exact(cmd!("TTL", "c3")),
        exact(cmd!("GET", "c3")),
        exact(cmd!("DEL", "b", "b2", "b3", "bn", "c1", "c2", "c3")),
    ]);
    steps
}

/// What COMMAND INFO says of the expiry commands.
fn command_info_steps() -> Vec<Step> {
    let names = [
        "setex",
        "psetex",
        "getex",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "ttl",
        "pttl",
        "expiretime",
        "pexpiretime",
        "persist",
    ];
    let mut steps: Vec<Step> = names
        .iter()
        .map(|name| exact(&[b"COMMAND", b"INFO", name.as_bytes()]))
        .collect();
    steps.push(exact(cmd!("COMMAND", "INFO", "TTL", "getex", "PExpireAt")));
    steps
}

fn every_step() -> Vec<Step> {
    let mut steps = command_info_steps();
    steps.extend(set_steps());
    steps.extend(setex_steps());
    steps.extend(getex_steps());
    steps.extend(expire_steps());
    steps.extend(ttl_steps());
    steps.extend(bookkeeping_steps());
    steps
}

#[test]
fn expiry_commands_answer_as_redis_does_in_resp2() {
    let mut servers = Servers::start();
    servers.main.both_ways("RESP2", &every_step());
}

#[test]
fn expiry_commands_answer_as_redis_does_in_resp3() {
    let mut servers = Servers::start();
    servers.main.one_by_one("HELLO", &[hello("3")]);
    servers.main.both_ways("RESP3", &every_step());
}

/// Redis's arity of each command these tests send (negative: at least
/// that many arguments, the name counted).
const ARITIES: &[(&str, i64)] = &[
    ("get", 2),
    ("set", -3),
    ("del", -2),
    ("unlink", -2),
    ("exists", -2),
    ("mset", -3),
    ("msetnx", -3),
    ("setnx", 3),
    ("getset", 3),
    ("getdel", 2),
    ("strlen", 2),
    ("append", 3),
    ("setrange", 4),
    ("incr", 2),
    ("decr", 2),
    ("incrby", 3),
    ("decrby", 3),
    ("incrbyfloat", 3),
    ("rename", 3),
    ("renamenx", 3),
    ("copy", -3),
    ("dbsize", 1),
    ("command", -2),
    ("setex", 4),
    ("psetex", 4),
    ("getex", -2),
    ("expire", -3),
    ("pexpire", -3),
    ("expireat", -3),
    ("pexpireat", -3),
    ("ttl", 2),
    ("pttl", 2),
    ("expiretime", 2),
    ("pexpiretime", 2),
    ("persist", 2),
];

/// True if Redis queues `s` inside MULTI: its command has an arity Redis
/// accepts (a wrong one would abort the whole EXEC).
fn queues(s: &Step) -> bool {
    let name = String::from_utf8_lossy(&s.args[0]).to_ascii_lowercase();
    let (_, arity) = ARITIES
        .iter()
        .find(|(known, _)| *known == name)
        .unwrap_or_else(|| panic!("no arity listed for {name}"));
    let argc = s.args.len() as i64;
    if *arity < 0 {
        argc >= -arity
    } else {
        argc == *arity
    }
}

/// Every step of `steps` that has a valid arity and is compared exactly or
/// as a time queued in transactions of 16 (each QUEUED compared, then
/// EXEC's array, its times within the tolerance); the other steps are sent
/// outside MULTI.
fn in_transactions(steps: &[Step]) -> Vec<Step> {
    let (queued, refused): (Vec<&Step>, Vec<&Step>) = steps
        .iter()
        .partition(|s| matches!(s.check, Check::Exact | Check::Time(_)) && queues(s));
    assert!(!refused.is_empty() && queued.len() > 100);
    let mut out: Vec<Step> = refused.into_iter().cloned().collect();
    for chunk in queued.chunks(16) {
        let body: Vec<Step> = chunk.iter().map(|&s| s.clone()).collect();
        out.extend(transaction(&body));
    }
    out
}

#[test]
fn expiry_commands_inside_exec_answer_as_redis_does() {
    let mut servers = Servers::start();
    let steps = in_transactions(&every_step());
    servers.main.both_ways("RESP2 transactions", &steps);
    servers.main.one_by_one("HELLO", &[hello("3")]);
    servers.main.both_ways("RESP3 transactions", &steps);
}

/// A transaction that sets, reads and changes times to live, with errors
/// among its commands.
fn transaction_steps() -> Vec<Step> {
    let mut steps = vec![exact(cmd!("DEL", "m", "m2", "m3"))];
    steps.extend(transaction(&[
        exact(cmd!("SET", "m", "v", "EX", "100")),
        timed(cmd!("TTL", "m")),
        timed(cmd!("PTTL", "m")),
        timed(cmd!("EXPIRETIME", "m")),
        exact(cmd!("SET", "m2", "v", "PXAT", "4102444800123")),
        exact(cmd!("PEXPIRETIME", "m2")),
        exact(cmd!("EXPIRE", "m", "200")),
        timed(cmd!("TTL", "m")),
        exact(cmd!("EXPIREAT", "m2", "4102444900", "GT")),
        exact(cmd!("EXPIRETIME", "m2")),
        exact(cmd!("EXPIREAT", "m2", "4102444800", "GT")),
        exact(cmd!("PERSIST", "m")),
        exact(cmd!("TTL", "m")),
        exact(cmd!("PERSIST", "m")),
        exact(cmd!("GETEX", "m", "PX", "300000")),
        timed(cmd!("PTTL", "m")),
        exact(cmd!("SET", "m", "v", "EX", "0")),
        exact(cmd!("EXPIRE", "m", "10", "NX", "XX")),
        exact(cmd!("GETEX", "m", "PERSIST", "EX", "1")),
        timed(cmd!("PTTL", "m")),
        exact(cmd!("INCR", "m")),
        exact(cmd!("SET", "m3", "1", "EXAT", "4102444800")),
        exact(cmd!("INCRBY", "m3", "5")),
        exact(cmd!("EXPIRETIME", "m3")),
        exact(cmd!("RENAME", "m3", "m4")),
        exact(cmd!("EXPIRETIME", "m4")),
        exact(cmd!("EXPIRE", "m2", "-1")),
        exact(cmd!("EXISTS", "m2")),
        exact(cmd!("TTL", "m2")),
        exact(cmd!("SET", "m2", "v", "PXAT", "1")),
        exact(cmd!("GET", "m2")),
    ]));
    steps.extend([
        timed(cmd!("PTTL", "m")),
        exact(cmd!("EXISTS", "m2")),
        exact(cmd!("EXPIRETIME", "m4")),
        exact(cmd!("DBSIZE")),
        // A command Redis refuses to queue (wrong arity) aborts EXEC, and
        // nothing in it happens.
        exact(cmd!("MULTI")),
        exact(cmd!("EXPIRE", "m4", "-1")),
        exact(cmd!("TTL")),
        exact(cmd!("EXEC")),
        exact(cmd!("EXPIRETIME", "m4")),
        exact(cmd!("DEL", "m", "m2", "m3", "m4")),
    ]);
    steps
}

#[test]
fn a_transaction_sees_its_own_expiry_changes() {
    let mut servers = Servers::start();
    servers.main.both_ways("RESP2", &transaction_steps());
    servers.main.one_by_one("HELLO", &[hello("3")]);
    servers.main.both_ways("RESP3", &transaction_steps());
}

#[test]
fn changing_a_watched_keys_expiry_aborts_the_transaction() {
    let mut servers = Servers::start();
    let mut other = servers.connect();
    let watched = |servers: &mut Servers, other: &mut Side, name: &str, change: &[&[u8]]| {
        servers.main.one_by_one(name, &[exact(cmd!("WATCH", "w"))]);
        other.one_by_one(name, &[exact(change)]);
        servers.main.one_by_one(
            name,
            &[
                exact(cmd!("MULTI")),
                exact(cmd!("GET", "w")),
                exact(cmd!("EXEC")),
            ],
        );
    };
    for protocol in ["2", "3"] {
        servers.main.one_by_one("HELLO", &[hello(protocol)]);
        other.one_by_one("HELLO", &[hello(protocol)]);
        servers
            .main
            .one_by_one("setup", &[exact(cmd!("SET", "w", "v"))]);
        // Commands that change the expiry touch the key ...
        watched(
            &mut servers,
            &mut other,
            "EXPIRE",
            cmd!("EXPIRE", "w", "100"),
        );
        watched(&mut servers, &mut other, "PERSIST 1", cmd!("PERSIST", "w"));
        watched(
            &mut servers,
            &mut other,
            "PEXPIREAT",
            cmd!("PEXPIREAT", "w", "4102444800000"),
        );
        watched(
            &mut servers,
            &mut other,
            "GETEX EX",
            cmd!("GETEX", "w", "EX", "100"),
        );
        watched(
            &mut servers,
            &mut other,
            "GETEX PERSIST 1",
            cmd!("GETEX", "w", "PERSIST"),
        );
        // ... those that change nothing do not ...
        watched(&mut servers, &mut other, "PERSIST 0", cmd!("PERSIST", "w"));
        watched(
            &mut servers,
            &mut other,
            "GETEX PERSIST 0",
            cmd!("GETEX", "w", "PERSIST"),
        );
        watched(
            &mut servers,
            &mut other,
            "EXPIRE GT 0",
            cmd!("EXPIRE", "w", "100", "GT"),
        );
        watched(
            &mut servers,
            &mut other,
            "EXPIRE XX 0",
            cmd!("EXPIRE", "w", "100", "XX"),
        );
        watched(&mut servers, &mut other, "TTL", cmd!("TTL", "w"));
        watched(&mut servers, &mut other, "GETEX", cmd!("GETEX", "w"));
        watched(
            &mut servers,
            &mut other,
            "EXPIRE bad",
            cmd!("EXPIRE", "w", "0", "NX", "XX"),
        );
        // ... and one that deletes the key does.
        watched(
            &mut servers,
            &mut other,
            "EXPIRE -1",
            cmd!("EXPIRE", "w", "-1"),
        );
        servers
            .main
            .one_by_one("after", &[exact(cmd!("EXISTS", "w"))]);
    }
}

/// A full SCAN walk on one connection: every key, as a set.
fn scan_all(conn: &mut Connection) -> BTreeSet<Vec<u8>> {
    let mut cursor = b"0".to_vec();
    let mut seen = BTreeSet::new();
    for _ in 0..10_000 {
        conn.send(&encode(&[b"SCAN", &cursor]));
        let reply = conn.reply().1;
        let Reply::Array(Some(parts)) = reply else {
            panic!("SCAN answered {reply:?}");
        };
        let [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] = &parts[..] else {
            panic!("SCAN answered {parts:?}");
        };
        for key in keys {
            let Reply::Bulk(Some(key)) = key else {
                panic!("SCAN gave the key {key:?}");
            };
            seen.insert(key.clone());
        }
        if next == b"0" {
            return seen;
        }
        cursor = next.clone();
    }
    panic!("SCAN does not end");
}

fn shown(keys: &BTreeSet<Vec<u8>>) -> Vec<String> {
    keys.iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// Waits until Redis reports each of `keys` gone (PTTL -2, asked on a
/// connection of its own so that the compared streams stay the same) and
/// until `splitkv_deadline` has passed on the test's clock.
fn wait_until_expired(redis: SocketAddr, keys: &[&[u8]], splitkv_deadline: Instant) {
    let mut probe = Connection::open(redis);
    let deadline = Instant::now() + EXPIRY_DEADLINE;
    for key in keys {
        loop {
            probe.send(&encode(&[b"PTTL", key]));
            match probe.reply().1 {
                Reply::Integer(-2) => break,
                Reply::Integer(_) => {}
                other => panic!("Redis answered PTTL with {other:?}"),
            }
            assert!(
                Instant::now() < deadline,
                "Redis still has {:?} after {EXPIRY_DEADLINE:?}",
                String::from_utf8_lossy(key)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    if let Some(left) = splitkv_deadline.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

/// The keys the expiry test sets with a short time to live, each its own
/// way.
const SHORT_LIVED: &[&[u8]] = &[
    b"px",
    b"psetex",
    b"pexpire",
    b"getex",
    b"pxat",
    b"pexpireat",
    b"kept",
];

/// Sets keys that live on (one without a time to live, one with a long
/// one), keys with a short time to live set every way there is, and keys
/// given a time already past; returns the moment by which every short
/// time to live has passed on SplitKV too (each reply came after the
/// server read its clock for the command, so a key's end is no later than
/// the last reply plus its time to live).
fn set_short_lived(side: &mut Side, stream: &str) -> Instant {
    let short = SHORT_TTL_MS.to_string();
    let kept = KEPT_TTL_MS.to_string();
    let at = (now_ms() + SHORT_TTL_MS as i64).to_string();
    let steps = [
        exact(cmd!("FLUSHALL")),
        // Changed twice while it lives, so it lives longer than the rest.
        exact(cmd!("SET", "kept", "1", "PX", kept)),
        exact(cmd!("SET", "kept", "2", "KEEPTTL")),
        exact(cmd!("INCR", "kept")),
        exact(cmd!("SET", "alive", "v")),
        exact(cmd!("SET", "long", "v", "EX", "1000")),
        exact(cmd!("SET", "px", "v", "PX", short)),
        exact(cmd!("PSETEX", "psetex", short, "v")),
        exact(cmd!("SET", "pexpire", "v")),
        exact(cmd!("PEXPIRE", "pexpire", short)),
        exact(cmd!("SET", "getex", "v")),
        exact(cmd!("GETEX", "getex", "PX", short)),
        exact(cmd!("SET", "pxat", "v", "PXAT", at)),
        exact(cmd!("SET", "pexpireat", "v")),
        exact(cmd!("PEXPIREAT", "pexpireat", at)),
        // Times already past: gone at once, with no wait.
        exact(cmd!("SET", "past1", "v")),
        exact(cmd!("PEXPIREAT", "past1", "1")),
        exact(cmd!("SET", "past2", "v")),
        exact(cmd!("EXPIRE", "past2", "-1")),
        exact(cmd!("SET", "past3", "v")),
        exact(cmd!("GETEX", "past3", "PXAT", "1")),
        exact(cmd!("SET", "past4", "v")),
        exact(cmd!("EXPIREAT", "past4", "1000")),
        exact(cmd!("EXISTS", "past1", "past2", "past3", "past4")),
        exact(cmd!("GET", "past1")),
        exact(cmd!("TTL", "past2")),
        exact(cmd!("TYPE", "past3")),
        exact(cmd!("STRLEN", "past4")),
        // No DBSIZE here: Redis's active expiry may or may not have
        // reclaimed a short-lived key by now if the setup was slow.
    ];
    side.one_by_one(stream, &steps);
    Instant::now() + Duration::from_millis(SHORT_TTL_MS.max(KEPT_TTL_MS)) + EXPIRY_MARGIN
}

/// Keys whose time to live has passed are gone for every command at once.
fn expired_keys_are_invisible(protocol: &str) {
    let mut servers = Servers::start();
    let stream = format!("RESP{protocol}");
    let stream = stream.as_str();
    servers.main.one_by_one("HELLO", &[hello(protocol)]);
    let deadline = set_short_lived(&mut servers.main, stream);
    wait_until_expired(servers.redis_addr, SHORT_LIVED, deadline);

    // Listing commands first, before any command names a gone key.
    servers
        .main
        .one_by_one(stream, &[unordered(cmd!("KEYS", "*"))]);
    let survivors: BTreeSet<Vec<u8>> = [b"alive".to_vec(), b"long".to_vec()].into();
    let scanned_redis = scan_all(&mut servers.main.redis);
    let scanned_splitkv = scan_all(&mut servers.main.splitkv);
    assert_eq!(
        shown(&scanned_redis),
        shown(&survivors),
        "{stream}: the keys Redis's SCAN walk returned"
    );
    assert_eq!(
        shown(&scanned_splitkv),
        shown(&scanned_redis),
        "{stream}: the keys SplitKV's SCAN walk returned (Redis's on the right)"
    );
    for _ in 0..20 {
        let (want, got) = servers.main.call(cmd!("RANDOMKEY"));
        for (server, reply) in [("Redis", &want), ("SplitKV", &got)] {
            let named = match reply {
                Reply::Bulk(Some(key)) => survivors.contains(key),
                _ => false,
            };
            assert!(
                named,
                "{stream}: `RANDOMKEY`: {server} answered {reply:?}, not one of {:?}",
                shown(&survivors)
            );
        }
    }
    // Redis's DBSIZE counts a key past its time until something looks at
    // it; the PTTL probes and the SCAN walk above have looked at each.
    let mut steps = vec![exact(cmd!("DBSIZE"))];
    for &key in SHORT_LIVED {
        steps.extend([
            exact(cmd!("GET", key)),
            exact(cmd!("EXISTS", key)),
            exact(cmd!("TYPE", key)),
            exact(cmd!("STRLEN", key)),
            exact(cmd!("TTL", key)),
            exact(cmd!("PTTL", key)),
            exact(cmd!("EXPIRETIME", key)),
            exact(cmd!("PEXPIRETIME", key)),
            exact(cmd!("GETRANGE", key, "0", "-1")),
            exact(cmd!("MGET", key, "alive", key)),
        ]);
    }
    steps.extend([
        exact(cmd!("EXISTS", "px", "alive", "psetex", "long", "kept")),
        exact(cmd!("TOUCH", "px", "alive", "getex")),
        exact(cmd!("GET", "alive")),
        exact(cmd!("TTL", "alive")),
        timed(cmd!("TTL", "long")),
        exact(cmd!("DBSIZE")),
        // Writes see no key either.
        exact(cmd!("PERSIST", "px")),
        exact(cmd!("EXPIRE", "psetex", "100")),
        exact(cmd!("GETEX", "pexpire", "PERSIST")),
        exact(cmd!("SET", "getex", "new", "XX")),
        exact(cmd!("SET", "pxat", "new", "NX", "GET")),
        exact(cmd!("TTL", "pxat")),
        exact(cmd!("INCR", "kept")),
        exact(cmd!("TTL", "kept")),
        exact(cmd!("APPEND", "pexpireat", "x")),
        exact(cmd!("GETDEL", "px")),
        exact(cmd!("DEL", "psetex")),
        exact(cmd!("SETNX", "psetex", "new")),
        exact(cmd!("RENAME", "getex", "x")),
        exact(cmd!("COPY", "pexpire", "x")),
        exact(cmd!("MSETNX", "pexpire", "a", "getex", "b")),
        exact(cmd!(
            "MGET",
            "pxat",
            "kept",
            "pexpireat",
            "psetex",
            "pexpire",
            "getex"
        )),
        exact(cmd!("DBSIZE")),
        unordered(cmd!("KEYS", "*")),
    ]);
    servers.main.one_by_one(stream, &steps);

    // Everything gone: the listing commands answer the empty keyspace.
    let deadline = {
        let short = SHORT_TTL_MS.to_string();
        servers.main.one_by_one(
            stream,
            &[
                exact(cmd!("FLUSHALL")),
                exact(cmd!("SET", "px", "v", "PX", short)),
                exact(cmd!("PSETEX", "psetex", short, "v")),
            ],
        );
        Instant::now() + Duration::from_millis(SHORT_TTL_MS) + EXPIRY_MARGIN
    };
    wait_until_expired(servers.redis_addr, &[b"px", b"psetex"], deadline);
    servers.main.one_by_one(
        stream,
        &[
            exact(cmd!("KEYS", "*")),
            exact(cmd!("SCAN", "0")),
            exact(cmd!("RANDOMKEY")),
            exact(cmd!("DBSIZE")),
            exact(cmd!("EXISTS", "px", "psetex")),
            exact(cmd!("MGET", "px", "psetex")),
        ],
    );
}

#[test]
fn expired_keys_are_invisible_at_once_in_resp2() {
    expired_keys_are_invisible("2");
}

#[test]
fn expired_keys_are_invisible_at_once_in_resp3() {
    expired_keys_are_invisible("3");
}

// Random streams.

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"a".to_vec()),
        Just(b"b".to_vec()),
        Just(b"c".to_vec()),
        Just(b"k\x00\r\n".to_vec()),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"1".to_vec()),
        Just(b"-5".to_vec()),
        Just(b"v".to_vec()),
        Just(Vec::new()),
    ]
}

fn word(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// An option name in upper or lower case.
fn option(name: &'static str) -> impl Strategy<Value = Vec<u8>> {
    any::<bool>().prop_map(move |lower| {
        if lower {
            name.to_ascii_lowercase().into_bytes()
        } else {
            name.as_bytes().to_vec()
        }
    })
}

/// Absolute times in 2100, a few apart and a few the same, so that GT and
/// LT meet equal, earlier and later times.
fn at_seconds() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(word("4102444800")),
        Just(word("4102444801")),
        Just(word("4102444900")),
    ]
}

fn at_millis() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(word("4102444800000")),
        Just(word("4102444800001")),
        Just(word("4102444800999")),
        Just(word("4102444900000")),
    ]
}

/// Relative times far enough apart and long enough that no key expires
/// during the test.
fn in_seconds() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(word("1000")), Just(word("50000"))]
}

fn in_millis() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(word("1000000")), Just(word("50000000"))]
}

/// SET's expiry option, if any: relative, absolute, KEEPTTL, or a refused
/// zero time.
fn set_expiry() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        2 => Just(Vec::new()),
        1 => (option("EX"), in_seconds()).prop_map(|(o, t)| vec![o, t]),
        1 => (option("PX"), in_millis()).prop_map(|(o, t)| vec![o, t]),
        2 => (option("EXAT"), at_seconds()).prop_map(|(o, t)| vec![o, t]),
        2 => (option("PXAT"), at_millis()).prop_map(|(o, t)| vec![o, t]),
        2 => option("KEEPTTL").prop_map(|o| vec![o]),
        1 => (option("EX"), Just(word("0"))).prop_map(|(o, t)| vec![o, t]),
    ]
}

/// SET with an expiry option and maybe NX or XX and GET, in random order.
fn set_command() -> impl Strategy<Value = Step> {
    let condition = prop_oneof![
        2 => Just(None),
        1 => option("NX").prop_map(Some),
        1 => option("XX").prop_map(Some),
    ];
    (key(), value(), set_expiry(), condition, any::<bool>())
        .prop_flat_map(|(k, v, expiry, condition, get)| {
            let mut groups = Vec::new();
            if !expiry.is_empty() {
                groups.push(expiry);
            }
            if let Some(c) = condition {
                groups.push(vec![c]);
            }
            if get {
                groups.push(vec![word("GET")]);
            }
            (Just(k), Just(v), Just(groups).prop_shuffle())
        })
        .prop_map(|(k, v, groups)| {
            let mut parts = vec![word("SET"), k, v];
            parts.extend(groups.into_iter().flatten());
            args(parts)
        })
}

/// NX, XX, GT or LT for an absolute time (any of them, XX with GT or LT,
/// or none).
fn absolute_condition() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        Just(Vec::new()),
        option("NX").prop_map(|o| vec![o]),
        option("XX").prop_map(|o| vec![o]),
        option("GT").prop_map(|o| vec![o]),
        option("LT").prop_map(|o| vec![o]),
        (option("XX"), option("GT")).prop_map(|(a, b)| vec![a, b]),
        (option("LT"), option("XX")).prop_map(|(a, b)| vec![a, b]),
    ]
}

/// NX or XX for a positive relative time: GT and LT would compare two
/// relative times whose order depends on the millisecond each command
/// arrived in, which differs between the servers.
fn relative_condition() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        Just(Vec::new()),
        option("NX").prop_map(|o| vec![o]),
        option("XX").prop_map(|o| vec![o]),
    ]
}

fn args(parts: Vec<Vec<u8>>) -> Step {
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let time = Time::of(&parts[0]);
    step(&refs, time.map_or(Check::Exact, Check::Time))
}

fn with(mut parts: Vec<Vec<u8>>, more: Vec<Vec<u8>>) -> Step {
    parts.extend(more);
    args(parts)
}

/// One command that is not a transaction's edge.
fn command() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => set_command(),
        1 => (key(), in_seconds(), value())
            .prop_map(|(k, t, v)| args(vec![word("SETEX"), k, t, v])),
        1 => (key(), in_millis(), value())
            .prop_map(|(k, t, v)| args(vec![word("PSETEX"), k, t, v])),
        2 => (key(), prop_oneof![
            Just(Vec::new()),
            (option("EX"), in_seconds()).prop_map(|(o, t)| vec![o, t]),
            (option("PX"), in_millis()).prop_map(|(o, t)| vec![o, t]),
            (option("EXAT"), at_seconds()).prop_map(|(o, t)| vec![o, t]),
            (option("PXAT"), at_millis()).prop_map(|(o, t)| vec![o, t]),
            option("PERSIST").prop_map(|o| vec![o]),
        ]).prop_map(|(k, o)| with(vec![word("GETEX"), k], o)),
        2 => (key(), in_seconds(), relative_condition())
            .prop_map(|(k, t, c)| with(vec![word("EXPIRE"), k, t], c)),
        1 => (key(), in_millis(), relative_condition())
            .prop_map(|(k, t, c)| with(vec![word("PEXPIRE"), k, t], c)),
        1 => (key(), prop_oneof![Just(word("-1")), Just(word("0"))], absolute_condition())
            .prop_map(|(k, t, c)| with(vec![word("EXPIRE"), k, t], c)),
        3 => (key(), at_seconds(), absolute_condition())
            .prop_map(|(k, t, c)| with(vec![word("EXPIREAT"), k, t], c)),
        3 => (key(), at_millis(), absolute_condition())
            .prop_map(|(k, t, c)| with(vec![word("PEXPIREAT"), k, t], c)),
        2 => key().prop_map(|k| args(vec![word("PERSIST"), k])),
        2 => key().prop_map(|k| args(vec![word("INCR"), k])),
        1 => key().prop_map(|k| args(vec![word("APPEND"), k, word("0")])),
        2 => key().prop_map(|k| args(vec![word("GET"), k])),
        1 => (key(), key()).prop_map(|(a, b)| args(vec![word("EXISTS"), a, b])),
        1 => key().prop_map(|k| args(vec![word("DEL"), k])),
        1 => (key(), key()).prop_map(|(a, b)| args(vec![word("RENAME"), a, b])),
        1 => (key(), key()).prop_map(|(a, b)| args(vec![word("COPY"), a, b, word("REPLACE")])),
        1 => (key(), key()).prop_map(|(a, b)| args(vec![word("GETSET"), a, b])),
        3 => key().prop_map(|k| args(vec![word("TTL"), k])),
        2 => key().prop_map(|k| args(vec![word("PTTL"), k])),
        3 => key().prop_map(|k| args(vec![word("EXPIRETIME"), k])),
        3 => key().prop_map(|k| args(vec![word("PEXPIRETIME"), k])),
        1 => Just(args(vec![word("DBSIZE")])),
        1 => Just(args(vec![word("MGET"), word("a"), word("b"), word("c")])),
    ]
}

/// A command, or a transaction of a few commands ended by EXEC or DISCARD.
fn unit() -> impl Strategy<Value = Vec<Step>> {
    prop_oneof![
        4 => command().prop_map(|c| vec![c]),
        1 => (proptest::collection::vec(command(), 0..6), any::<bool>()).prop_map(|(body, exec)| {
            if exec {
                transaction(&body)
            } else {
                let mut steps = vec![exact(cmd!("MULTI"))];
                steps.extend(body.into_iter().map(|s| Step { check: Check::Exact, ..s }));
                steps.push(exact(cmd!("DISCARD")));
                steps
            }
        }),
    ]
}

#[test]
fn random_expiry_streams_answer_as_redis_does() {
    let servers = std::cell::RefCell::new(Servers::start());
    let steps_compared = std::cell::Cell::new(0usize);
    // Each case goes on from the state the previous ones left (the same on
    // both servers); a failure is reported as found, not shrunk.
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        max_shrink_iters: 0,
        ..Config::default()
    });
    let stream = (
        proptest::collection::vec(unit(), 1..12),
        any::<bool>(),
        any::<bool>(),
    );
    let case = std::cell::Cell::new(0usize);
    runner
        .run(&stream, |(units, pipelined, resp3)| {
            let mut servers = servers.borrow_mut();
            let name = format!("random case {}", case.get());
            case.set(case.get() + 1);
            servers
                .main
                .one_by_one(&name, &[hello(if resp3 { "3" } else { "2" })]);
            let steps: Vec<Step> = units.into_iter().flatten().collect();
            steps_compared.set(steps_compared.get() + steps.len());
            if pipelined {
                servers.main.pipelined(&name, &steps);
            } else {
                servers.main.one_by_one(&name, &steps);
            }
            Ok(())
        })
        .expect("every reply the same as Redis's");
    assert!(
        steps_compared.get() >= 256,
        "{} steps",
        steps_compared.get()
    );
    eprintln!("{} commands compared", steps_compared.get());
}

/// The comparators themselves: a time within its tolerance passes, one
/// past it, a different negative reply or a different far-future moment
/// does not, and EXEC's and KEYS' arrays are compared as documented.
#[test]
fn the_comparators_allow_their_tolerance_and_no_more() {
    let int = |n: i64| format!(":{n}\r\n").into_bytes();
    let pttl = Check::Time(Time::of(b"PTTL").expect("a time"));
    let ttl = Check::Time(Time::of(b"ttl").expect("a time"));
    let pexpiretime = Check::Time(Time::of(b"PEXPIRETIME").expect("a time"));
    assert!(agree(&pttl, &int(100_000), &int(100_000 - MILLIS_TOLERANCE)).is_ok());
    assert!(agree(&pttl, &int(100_000), &int(100_001 + MILLIS_TOLERANCE)).is_err());
    assert!(agree(&ttl, &int(100), &int(99)).is_ok());
    assert!(agree(&ttl, &int(100), &int(98)).is_err());
    assert!(agree(&ttl, &int(-1), &int(0)).is_err());
    assert!(agree(&ttl, &int(-2), &int(-1)).is_err());
    assert!(agree(&ttl, &int(1), &int(-1)).is_err());
    assert!(agree(&ttl, b"-ERR x\r\n", b"-ERR y\r\n").is_err());
    let far = FAR_FUTURE_SECONDS * 1000;
    assert!(agree(&pexpiretime, &int(far + 5), &int(far + 5)).is_ok());
    assert!(agree(&pexpiretime, &int(far + 5), &int(far + 6)).is_err());
    assert!(agree(&pexpiretime, &int(far - 5), &int(far - 6)).is_ok());
    assert!(agree(&Check::Exact, &int(1), &int(2)).is_err());
    let exec = Check::Exec(vec![(1, Time::of(b"PTTL").expect("a time"))]);
    assert!(agree(&exec, b"*2\r\n:1\r\n:5000\r\n", b"*2\r\n:1\r\n:4999\r\n").is_ok());
    assert!(agree(&exec, b"*2\r\n:1\r\n:5000\r\n", b"*2\r\n:0\r\n:5000\r\n").is_err());
    assert!(agree(&exec, b"*2\r\n:1\r\n:5000\r\n", b"*1\r\n:1\r\n").is_err());
    assert!(agree(&exec, b"*-1\r\n", b"*2\r\n:1\r\n:5000\r\n").is_err());
    let keys = Check::Unordered;
    assert!(
        agree(
            &keys,
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            b"*2\r\n$1\r\nb\r\n$1\r\na\r\n"
        )
        .is_ok()
    );
    assert!(
        agree(
            &keys,
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            b"*2\r\n$1\r\na\r\n$1\r\na\r\n"
        )
        .is_err()
    );
    assert!(agree(&keys, b"*1\r\n$1\r\na\r\n", b"~1\r\n$1\r\na\r\n").is_err());
}
