//! The lock that keeps a second process out of a data directory, and the
//! wait for a holder's lock to be let go.
//!
//! The lock is an advisory lock on the directory's LOCK file (taken through
//! [`Disk::try_lock`]), held by an open descriptor: the kernel releases it
//! when the holder dies. A process killed with `kill -9` can keep it a
//! little longer (its io_uring workers hold its files after it is reaped),
//! and while it is being torn down `/proc` may still show it running, so a
//! node that finds the lock held waits for it in every case, up to the
//! bound it is given, with one log line. Only a lock still held at the
//! bound is refused with [`StorageError::Locked`], which names the holder
//! (the holder writes its pid and start time into the file) and says
//! whether it still runs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::disk::{Disk, FileKind, FileLock};
use crate::error::{Result, StorageError};

/// The lock file's name in a data directory.
pub(crate) const LOCK: &str = "LOCK";

/// The default longest wait for a held lock, in milliseconds
/// ([`crate::StorageConfig::lock_wait_ms`]): far past the time a killed
/// node takes to let its lock go, short enough that a second node started
/// on a directory in use says so soon.
pub const DEFAULT_LOCK_WAIT_MS: u64 = 10_000;

/// Pause between two tries while the lock is held.
const RETRY_MS: u64 = 10;

/// Bytes of the holder record: fixed, so that a shorter record written over
/// a longer one leaves nothing of it (the file is never truncated).
const HOLDER_RECORD_BYTES: usize = 48;

/// Exclusive ownership of a data directory by this process, released when
/// dropped or when the process dies.
#[derive(Debug)]
pub struct DirLock {
    _lock: FileLock,
}

impl DirLock {
    /// Takes the lock of `dir` through `disk` and records this process as
    /// its holder. While another process holds it, tries again until
    /// `wait_ms` has passed, whether or not the holder seems to run (a
    /// process killed a moment ago may still show in `/proc` while it is
    /// torn down); fails with [`StorageError::Locked`] if the lock is still
    /// held then.
    pub fn acquire(disk: &dyn Disk, dir: &Path, wait_ms: u64) -> Result<Self> {
        let path = dir.join(LOCK);
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut waiting_logged = false;
        loop {
            match disk.try_lock(&path) {
                Ok(lock) => {
                    record_holder(disk, &path)?;
                    if waiting_logged {
                        tracing::info!(dir = %dir.display(), "took the data directory's lock");
                    }
                    return Ok(Self { _lock: lock });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let holder = read_holder(disk, &path);
                    if Instant::now() >= deadline {
                        return Err(StorageError::Locked {
                            dir: dir.to_path_buf(),
                            holder_pid: holder.map(|h| h.pid),
                            holder_running: holder.is_none_or(|h| h.is_running()),
                            waited_ms: wait_ms,
                        });
                    }
                    if !waiting_logged {
                        tracing::info!(
                            dir = %dir.display(),
                            holder_pid = holder.map(|h| h.pid),
                            holder_running = holder.map(|h| h.is_running()),
                            "the data directory's lock is held by another process; \
                             waiting up to {wait_ms} ms for it to be released"
                        );
                        waiting_logged = true;
                    }
                    std::thread::sleep(Duration::from_millis(RETRY_MS));
                }
                Err(e) => return Err(StorageError::io(format!("locking {}", path.display()), e)),
            }
        }
    }
}

/// Writes this process's holder record into the lock file.
fn record_holder(disk: &dyn Disk, path: &Path) -> Result<()> {
    let record = Holder::this_process().map_or_else(String::new, |h| h.encode());
    let mut bytes = [b' '; HOLDER_RECORD_BYTES];
    bytes[HOLDER_RECORD_BYTES - 1] = b'\n';
    bytes[..record.len()].copy_from_slice(record.as_bytes());
    disk.open(path, FileKind::Plain, false)
        .and_then(|file| file.write_at(&bytes, 0))
        .map_err(|e| StorageError::io(format!("writing {}", path.display()), e))
}

/// The holder record in the lock file, if there is a readable one.
fn read_holder(disk: &dyn Disk, path: &Path) -> Option<Holder> {
    let file = disk.open(path, FileKind::Plain, false).ok()?;
    let mut bytes = [0u8; HOLDER_RECORD_BYTES];
    let n = file.read_at(&mut bytes, 0).ok()?;
    Holder::decode(std::str::from_utf8(&bytes[..n]).ok()?)
}

/// A process, told apart from a later one that reuses its pid (or the same
/// pid in another pid namespace, as a restarted container's first process)
/// by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holder {
    pid: u32,
    /// Start time, in clock ticks after boot (`/proc/PID/stat` field 22).
    start_ticks: u64,
}

impl Holder {
    /// This process, or `None` where `/proc` cannot tell its start time.
    fn this_process() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            pid,
            start_ticks: process_start_ticks(pid)?,
        })
    }

    /// Whether the process still runs. A zombie counts as ended; where
    /// `/proc` cannot be read at all, a holder counts as running, so that
    /// the node never waits on a guess.
    fn is_running(&self) -> bool {
        if !Path::new("/proc/self/stat").exists() {
            return true;
        }
        process_start_ticks(self.pid) == Some(self.start_ticks)
    }

    fn encode(&self) -> String {
        format!("pid {} start {}", self.pid, self.start_ticks)
    }

    fn decode(text: &str) -> Option<Self> {
        let mut words = text.split_ascii_whitespace();
        let (Some("pid"), Some(pid), Some("start"), Some(start)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return None;
        };
        Some(Self {
            pid: pid.parse().ok()?,
            start_ticks: start.parse().ok()?,
        })
    }
}

/// The start time of process `pid` in clock ticks after boot, or `None` if
/// it does not run (no such process, or a zombie).
fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_ticks(&stat)
}

/// The start time in a `/proc/PID/stat` line, `None` for a zombie or dead
/// process. The command name (field 2) may hold spaces and parentheses, so
/// the fields are counted from its closing parenthesis.
fn parse_start_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace();
    // Field 3 is the state; field 22 the start time.
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_field_22_counted_past_the_name() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        assert_eq!(parse_start_ticks(stat), Some(987_654));
        let zombie = "4242 (gone) Z 1 4242 4242 0 -1 4194560 100 0 0 0 \
                      1 2 0 0 20 0 1 0 987654 0 0 0";
        assert_eq!(parse_start_ticks(zombie), None);
        assert_eq!(parse_start_ticks("garbage"), None);
    }

    #[test]
    fn a_holder_record_round_trips_and_junk_is_no_holder() {
        let holder = Holder {
            pid: 17,
            start_ticks: 123_456,
        };
        assert_eq!(Holder::decode(&holder.encode()), Some(holder));
        assert_eq!(Holder::decode(""), None);
        assert_eq!(Holder::decode("pid x start 1"), None);
        assert!(holder.encode().len() < HOLDER_RECORD_BYTES);
    }

    #[test]
    fn this_process_runs_and_an_ended_one_does_not() {
        let me = Holder::this_process().expect("/proc tells this process's start");
        assert!(me.is_running());
        let reused = Holder {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(
            !reused.is_running(),
            "same pid, other start: another process"
        );
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        let child_holder = Holder {
            pid,
            start_ticks: process_start_ticks(pid).unwrap_or(0),
        };
        child.wait().expect("reap");
        assert!(!child_holder.is_running(), "a reaped process has ended");
    }
}
