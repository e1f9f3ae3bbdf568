//! Reading expiry arguments as Redis 7 reads them: SET's and GETEX's
//! options (`parseExtendedStringArgumentsOrReply`), their positive times
//! (`getExpireMillisecondsOrReply`), and EXPIRE's signed times and NX / XX /
//! GT / LT flags (`expireGenericCommand`), with Redis's errors.

use bytes::Bytes;

use super::parse_i64;
use crate::resp::reply::ErrorReply;

pub(super) const SYNTAX_ERROR: &str = "ERR syntax error";
pub(super) const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// The unit of a time argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimeUnit {
    Seconds,
    Milliseconds,
}

/// Redis's answer to a time that is out of range for `command`.
pub(super) fn invalid_expire_time(command: &str) -> ErrorReply {
    format!("ERR invalid expire time in '{command}' command").into()
}

/// What SET or GETEX is to do with the key's expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ExpiryOption {
    /// No option: SET clears the expiry, GETEX leaves it.
    Unset,
    /// KEEPTTL (SET): keep the key's expiry.
    Keep,
    /// PERSIST (GETEX): remove the expiry.
    Persist,
    /// EX, PX, EXAT or PXAT with its argument.
    Timed {
        unit: TimeUnit,
        /// EX and PX count from now; EXAT and PXAT are Unix times.
        relative: bool,
        arg: Bytes,
    },
}

impl ExpiryOption {
    /// The absolute expiry time (Unix milliseconds) a timed option names,
    /// checked as Redis checks it; `None` for the other options.
    pub(super) fn expire_at_ms(
        &self,
        now_ms: u64,
        command: &str,
    ) -> Result<Option<u64>, ErrorReply> {
        match self {
            ExpiryOption::Timed {
                unit,
                relative,
                arg,
            } => positive_expire_at(arg, *unit, *relative, now_ms, command).map(Some),
            _ => Ok(None),
        }
    }
}

/// Which command's options are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OptionsOf {
    Set,
    Getex,
}

/// SET's or GETEX's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StringOptions {
    pub(super) nx: bool,
    pub(super) xx: bool,
    pub(super) get: bool,
    pub(super) expiry: ExpiryOption,
}

impl StringOptions {
    /// The options after `SET key value` or `GETEX key`, or Redis's syntax
    /// error. Each option may repeat; NX and XX exclude each other, as do
    /// the expiry options (a timed option may repeat, and its last
    /// argument counts).
    pub(super) fn parse(args: &[Bytes], of: OptionsOf) -> Result<Self, &'static str> {
        let set = of == OptionsOf::Set;
        let mut options = StringOptions {
            nx: false,
            xx: false,
            get: false,
            expiry: ExpiryOption::Unset,
        };
        let mut timed: Option<&'static str> = None;
        let mut i = 0;
        while i < args.len() {
            let opt = args[i].to_ascii_uppercase();
            let next = args.get(i + 1);
            let untimed = timed.is_none();
            match (&opt[..], &options.expiry) {
                (b"NX", _) if set && !options.xx => options.nx = true,
                (b"XX", _) if set && !options.nx => options.xx = true,
                (b"GET", _) if set => options.get = true,
                (b"KEEPTTL", ExpiryOption::Unset | ExpiryOption::Keep) if set && untimed => {
                    options.expiry = ExpiryOption::Keep;
                }
                (b"PERSIST", ExpiryOption::Unset | ExpiryOption::Persist) if !set && untimed => {
                    options.expiry = ExpiryOption::Persist;
                }
                (
                    b"EX" | b"PX" | b"EXAT" | b"PXAT",
                    ExpiryOption::Unset | ExpiryOption::Timed { .. },
                ) => {
                    let (name, unit, relative) = match &opt[..] {
                        b"EX" => ("EX", TimeUnit::Seconds, true),
                        b"PX" => ("PX", TimeUnit::Milliseconds, true),
                        b"EXAT" => ("EXAT", TimeUnit::Seconds, false),
                        _ => ("PXAT", TimeUnit::Milliseconds, false),
                    };
                    let Some(arg) = next.filter(|_| timed.is_none_or(|same| same == name)) else {
                        return Err(SYNTAX_ERROR);
                    };
                    timed = Some(name);
                    options.expiry = ExpiryOption::Timed {
                        unit,
                        relative,
                        arg: arg.clone(),
                    };
                    i += 1;
                }
                _ => return Err(SYNTAX_ERROR),
            }
            i += 1;
        }
        Ok(options)
    }
}

/// A time argument that must be positive (SET's, SETEX's, PSETEX's and
/// GETEX's) as an absolute Unix time in milliseconds: not an integer, not
/// positive, or past the largest time once converted and added to now, it
/// gets Redis's error.
pub(super) fn positive_expire_at(
    arg: &[u8],
    unit: TimeUnit,
    relative: bool,
    now_ms: u64,
    command: &str,
) -> Result<u64, ErrorReply> {
    let given = parse_i64(arg).ok_or_else(|| ErrorReply::from(NOT_AN_INTEGER))?;
    let invalid = || invalid_expire_time(command);
    if given <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        TimeUnit::Seconds => given.checked_mul(1000).ok_or_else(invalid)?,
        TimeUnit::Milliseconds => given,
    };
    let at = if relative {
        ms.checked_add(i64::try_from(now_ms).map_err(|_| invalid())?)
            .ok_or_else(invalid)?
    } else {
        ms
    };
    Ok(at as u64)
}

/// EXPIRE's, PEXPIRE's, EXPIREAT's and PEXPIREAT's time as an absolute
/// Unix time in milliseconds, which may lie in the past (even before 1970,
/// as a negative number): the key is then deleted. `base_ms` is now for
/// the relative forms and 0 for the absolute ones.
pub(super) fn expire_when(
    arg: &[u8],
    unit: TimeUnit,
    base_ms: i64,
    command: &str,
) -> Result<i64, ErrorReply> {
    let given = parse_i64(arg).ok_or_else(|| ErrorReply::from(NOT_AN_INTEGER))?;
    let invalid = || invalid_expire_time(command);
    let ms = match unit {
        TimeUnit::Seconds => given.checked_mul(1000).ok_or_else(invalid)?,
        TimeUnit::Milliseconds => given,
    };
    ms.checked_add(base_ms).ok_or_else(invalid)
}

/// EXPIRE's condition flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ExpireFlags {
    pub(super) nx: bool,
    pub(super) xx: bool,
    pub(super) gt: bool,
    pub(super) lt: bool,
}

impl ExpireFlags {
    /// The flags after `EXPIRE key time`, or Redis's error.
    pub(super) fn parse(args: &[Bytes]) -> Result<Self, ErrorReply> {
        let mut flags = ExpireFlags::default();
        for arg in args {
            match &arg.to_ascii_uppercase()[..] {
                b"NX" => flags.nx = true,
                b"XX" => flags.xx = true,
                b"GT" => flags.gt = true,
                b"LT" => flags.lt = true,
                _ => {
                    return Err(
                        format!("ERR Unsupported option {}", String::from_utf8_lossy(arg)).into(),
                    );
                }
            }
        }
        if flags.nx && (flags.xx || flags.gt || flags.lt) {
            return Err(
                "ERR NX and XX, GT or LT options at the same time are not compatible".into(),
            );
        }
        if flags.gt && flags.lt {
            return Err("ERR GT and LT options at the same time are not compatible".into());
        }
        Ok(flags)
    }

    /// True if a key whose expiry is `current_ms` (0: none) may get `when`
    /// (both absolute Unix milliseconds), as Redis decides: a key without
    /// an expiry counts as expiring never, so GT always fails on it.
    pub(super) fn allow(&self, current_ms: u64, when: i64) -> bool {
        let current = (current_ms != 0).then_some(current_ms as i64);
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|current| when <= current) {
            return false;
        }
        if self.lt && current.is_some_and(|current| when >= current) {
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<Bytes> {
        list.iter().map(|a| Bytes::from(a.to_string())).collect()
    }

    #[test]
    fn set_options_are_read_as_redis_reads_them() {
        let ok = |list: &[&str]| StringOptions::parse(&args(list), OptionsOf::Set).expect("ok");
        assert!(ok(&["nx", "GET"]).nx && ok(&["nx", "GET"]).get);
        assert!(ok(&["XX", "xx"]).xx);
        assert_eq!(ok(&["KEEPTTL", "keepttl"]).expiry, ExpiryOption::Keep);
        assert_eq!(
            ok(&["ex", "1", "EX", "2"]).expiry,
            ExpiryOption::Timed {
                unit: TimeUnit::Seconds,
                relative: true,
                arg: Bytes::from_static(b"2"),
            }
        );
        for bad in [
            &["NX", "XX"][..],
            &["XX", "NX"],
            &["EX"],
            &["EX", "1", "PX", "1"],
            &["KEEPTTL", "EX", "1"],
            &["EX", "1", "KEEPTTL"],
            &["PERSIST"],
            &["FOO"],
        ] {
            assert_eq!(
                StringOptions::parse(&args(bad), OptionsOf::Set).err(),
                Some(SYNTAX_ERROR),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn getex_options_are_read_as_redis_reads_them() {
        let parse = |list: &[&str]| StringOptions::parse(&args(list), OptionsOf::Getex);
        assert_eq!(
            parse(&["persist", "PERSIST"]).map(|o| o.expiry),
            Ok(ExpiryOption::Persist)
        );
        assert!(matches!(
            parse(&["PXAT", "5"]).map(|o| o.expiry),
            Ok(ExpiryOption::Timed {
                relative: false,
                ..
            })
        ));
        for bad in [
            &["NX"][..],
            &["GET"],
            &["KEEPTTL"],
            &["PERSIST", "EX", "1"],
            &["EX", "1", "PERSIST"],
            &["PX", "1", "EX", "1"],
        ] {
            assert_eq!(parse(bad).err(), Some(SYNTAX_ERROR), "{bad:?}");
        }
    }

    #[test]
    fn positive_times_overflow_as_redis_says() {
        let now = 1_700_000_000_000;
        let at = |arg: &str, unit, relative| {
            positive_expire_at(arg.as_bytes(), unit, relative, now, "set")
        };
        assert_eq!(at("10", TimeUnit::Seconds, true), Ok(now + 10_000));
        assert_eq!(at("1", TimeUnit::Milliseconds, false), Ok(1));
        assert_eq!(
            at("9223372036854775", TimeUnit::Seconds, false),
            Ok(9_223_372_036_854_775_000)
        );
        let invalid = Err(invalid_expire_time("set"));
        assert_eq!(at("0", TimeUnit::Seconds, true), invalid);
        assert_eq!(at("-5", TimeUnit::Milliseconds, false), invalid);
        assert_eq!(at("9223372036854775", TimeUnit::Seconds, true), invalid);
        assert_eq!(
            at("9223372036854775807", TimeUnit::Milliseconds, true),
            invalid
        );
        assert_eq!(at("9223372036854776", TimeUnit::Seconds, false), invalid);
        assert_eq!(
            at("1.5", TimeUnit::Seconds, true),
            Err(NOT_AN_INTEGER.into())
        );
    }

    #[test]
    fn expire_flags_decide_as_redis_does() {
        let parse = |list: &[&str]| ExpireFlags::parse(&args(list));
        assert_eq!(
            parse(&["nx", "xx"]).err().as_deref(),
            Some("ERR NX and XX, GT or LT options at the same time are not compatible")
        );
        assert_eq!(
            parse(&["gt", "lt"]).err().as_deref(),
            Some("ERR GT and LT options at the same time are not compatible")
        );
        assert_eq!(
            parse(&["foo"]).err().as_deref(),
            Some("ERR Unsupported option foo")
        );
        let gt = parse(&["GT"]).expect("ok");
        assert!(!gt.allow(0, 5), "GT fails on a key without an expiry");
        assert!(gt.allow(4, 5) && !gt.allow(5, 5));
        let lt = parse(&["LT"]).expect("ok");
        assert!(lt.allow(0, 5) && lt.allow(6, 5) && !lt.allow(5, 5));
        assert!(!parse(&["XX"]).expect("ok").allow(0, 5));
        assert!(!parse(&["NX"]).expect("ok").allow(3, 5));
        assert_eq!(
            expire_when(b"-9223372036854775808", TimeUnit::Seconds, 0, "expire"),
            Err(invalid_expire_time("expire"))
        );
        assert_eq!(
            expire_when(
                b"-9223372036854775808",
                TimeUnit::Milliseconds,
                0,
                "pexpire"
            ),
            Ok(i64::MIN)
        );
        assert_eq!(
            expire_when(b"9223372036854775807", TimeUnit::Milliseconds, 1, "pexpire"),
            Err(invalid_expire_time("pexpire"))
        );
    }
}
