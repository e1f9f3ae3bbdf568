//! The disk's write backend, which carries O_DIRECT writes to the value
//! log: one io_uring owned by a ring thread, or plain `pwrite` where
//! io_uring is refused.
//!
//! Callers block until their write completes. Each write costs its caller
//! a `write` to the ring thread's eventfd; the ring thread then submits every
//! request queued by then with one `io_uring_enter`, so when many callers
//! (one flusher per partition, large writes) wait at once the ring sees a
//! deep queue and the submissions, not the wake-ups, are batched.
//!
//! The queue of requests handed to the ring thread holds at most
//! [`MAX_QUEUED_WRITES`]; a caller that finds it full blocks until the ring
//! thread has taken some.
//!
//! The tests that exercise the ring itself require that io_uring is really
//! in use and fail when the backend had to fall back to pwrite. On a machine
//! known to refuse io_uring, `SPLITKV_EXPECT_IO_URING=0` makes them accept
//! the fallback (and say so) instead.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use io_uring::{IoUring, opcode, types};

/// Which write backend performs O_DIRECT writes: the value of
/// `--io-engine`, the name a client and the stats are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoEngineKind {
    /// io_uring (the default).
    #[default]
    Uring,
    /// Blocking `pwrite`, for kernels or sandboxes that refuse io_uring.
    Psync,
}

impl fmt::Display for IoEngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoEngineKind::Uring => "uring",
            IoEngineKind::Psync => "psync",
        })
    }
}

/// A name that is not an [`IoEngineKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown I/O engine {0:?}: expected uring or psync")]
pub struct UnknownIoEngine(pub String);

impl std::str::FromStr for IoEngineKind {
    type Err = UnknownIoEngine;

    fn from_str(s: &str) -> Result<Self, UnknownIoEngine> {
        match s {
            "uring" | "io_uring" => Ok(Self::Uring),
            "psync" => Ok(Self::Psync),
            other => Err(UnknownIoEngine(other.to_string())),
        }
    }
}

/// The write backend actually in use.
pub(crate) enum WriteBackend {
    Uring(UringBackend),
    Psync,
}

impl WriteBackend {
    /// Starts the requested backend, falling back to pwrite (with one warning)
    /// when io_uring cannot be used here.
    pub(crate) fn start(requested: IoEngineKind) -> Self {
        match requested {
            IoEngineKind::Psync => WriteBackend::Psync,
            IoEngineKind::Uring => match UringBackend::start() {
                Ok(ring) => WriteBackend::Uring(ring),
                Err(e) => {
                    tracing::warn!(
                        "io_uring is not available ({e}); O_DIRECT writes will use pwrite \
                         (--io-engine psync). In a container, allow io_uring_setup, \
                         io_uring_enter and io_uring_register in the seccomp profile"
                    );
                    WriteBackend::Psync
                }
            },
        }
    }

    pub(crate) fn kind(&self) -> IoEngineKind {
        match self {
            WriteBackend::Uring(_) => IoEngineKind::Uring,
            WriteBackend::Psync => IoEngineKind::Psync,
        }
    }

    /// Writes all of `buf` at `offset` of `fd` and waits for completion.
    pub(crate) fn write_at(&self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
        match self {
            WriteBackend::Uring(ring) => ring.write_at(fd, buf, offset),
            WriteBackend::Psync => pwrite_all(fd, buf, offset),
        }
    }
}

fn pwrite_all(fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let rest = &buf[done..];
        let at = libc::off_t::try_from(offset + done as u64)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
        // SAFETY: `rest` is a valid readable slice for its length.
        let n = unsafe { libc::pwrite(fd, rest.as_ptr().cast(), rest.len(), at) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwrite wrote nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// A write handed to the ring thread. The caller blocks on `done` until the
/// kernel has finished with the memory behind `ptr`, which keeps it valid.
struct WriteRequest {
    fd: RawFd,
    ptr: *const u8,
    len: usize,
    offset: u64,
    done: mpsc::SyncSender<io::Result<()>>,
}

// SAFETY: the pointer is only dereferenced by the kernel while the sending
// thread is blocked waiting for the completion, so the memory stays valid.
unsafe impl Send for WriteRequest {}

/// The io_uring write backend: a ring owned by its thread, to which
/// callers hand their writes and wait for them to complete.
pub(crate) struct UringBackend {
    requests: Option<Sender<WriteRequest>>,
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

const RING_ENTRIES: u32 = 64;

/// Write requests handed to the ring thread and not yet taken by it, at
/// most. A caller that finds the queue full blocks in `send` until the ring
/// thread takes requests (each time it wakes it takes every queued one).
pub(crate) const MAX_QUEUED_WRITES: usize = 64;
const WAKE_TOKEN: u64 = u64::MAX;

impl UringBackend {
    fn start() -> io::Result<Self> {
        let mut ring = IoUring::new(RING_ENTRIES)?;
        probe_ring(&mut ring)?;
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: eventfd returned a fresh descriptor that we now own.
        let wake = unsafe { OwnedFd::from_raw_fd(raw) };
        let (tx, rx) = crossbeam_channel::bounded(MAX_QUEUED_WRITES);
        let ring_wake = wake.try_clone()?;
        let thread = std::thread::Builder::new()
            .name("io-uring".into())
            .spawn(move || RingThread::new(ring, rx, ring_wake).run())?;
        Ok(Self {
            requests: Some(tx),
            wake,
            thread: Some(thread),
        })
    }

    fn write_at(&self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let request = WriteRequest {
            fd,
            ptr: buf.as_ptr(),
            len: buf.len(),
            offset,
            done: done_tx,
        };
        let Some(requests) = &self.requests else {
            return Err(io::Error::other("the io_uring backend is shut down"));
        };
        requests
            .send(request)
            .map_err(|_| io::Error::other("io_uring thread has stopped"))?;
        signal(self.wake.as_raw_fd())?;
        done_rx
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("io_uring thread has stopped")))
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        self.requests = None;
        let _ = signal(self.wake.as_raw_fd());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn signal(fd: RawFd) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid u64 to an eventfd.
    let n = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    if n == 8 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Submits one no-op and waits for it, so that a sandbox that allows
/// `io_uring_setup` but refuses `io_uring_enter` is caught at start.
fn probe_ring(ring: &mut IoUring) -> io::Result<()> {
    let nop = opcode::Nop::new().build().user_data(0);
    // SAFETY: a no-op references no memory.
    unsafe {
        ring.submission()
            .push(&nop)
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    ring.submit_and_wait(1)?;
    match ring.completion().next() {
        Some(cqe) if cqe.result() >= 0 => Ok(()),
        Some(cqe) => Err(io::Error::from_raw_os_error(-cqe.result())),
        None => Err(io::Error::other("io_uring returned no completion")),
    }
}

struct InFlight {
    request: WriteRequest,
    written: usize,
}

struct RingThread {
    ring: IoUring,
    requests: Receiver<WriteRequest>,
    wake: OwnedFd,
    wake_buf: Box<u64>,
    wake_armed: bool,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    closing: bool,
    /// Completions drained from the ring, reused across rounds.
    completions: Vec<(u64, i32)>,
}

impl RingThread {
    fn new(ring: IoUring, requests: Receiver<WriteRequest>, wake: OwnedFd) -> Self {
        Self {
            ring,
            requests,
            wake,
            wake_buf: Box::new(0),
            wake_armed: false,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            closing: false,
            completions: Vec::new(),
        }
    }

    fn run(mut self) {
        self.arm_wake();
        loop {
            if self.closing && self.in_flight == 0 && !self.wake_armed {
                return;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => {
                    self.fail_all(&e);
                    return;
                }
            }
            let mut completions = std::mem::take(&mut self.completions);
            completions.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data(), cqe.result())),
            );
            for (token, result) in completions.drain(..) {
                if token == WAKE_TOKEN {
                    self.wake_armed = false;
                    self.take_requests();
                    if !self.closing {
                        self.arm_wake();
                    }
                } else {
                    self.complete(token as usize, result);
                }
            }
            self.completions = completions;
        }
    }

    fn arm_wake(&mut self) {
        let read = opcode::Read::new(
            types::Fd(self.wake.as_raw_fd()),
            (&mut *self.wake_buf as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(WAKE_TOKEN);
        self.push(&read);
        self.wake_armed = true;
    }

    fn take_requests(&mut self) {
        loop {
            match self.requests.try_recv() {
                Ok(request) => self.start(request),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.closing = true;
                    return;
                }
            }
        }
    }

    fn start(&mut self, request: WriteRequest) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = Some(InFlight {
            request,
            written: 0,
        });
        self.in_flight += 1;
        self.submit_slot(slot);
    }

    fn submit_slot(&mut self, slot: usize) {
        let Some(op) = &self.slots[slot] else { return };
        let rest = op.request.len - op.written;
        let len = u32::try_from(rest).unwrap_or(!4095);
        // SAFETY: the pointer stays valid until the requester receives its
        // completion (it blocks on it), and `written < len`.
        let ptr = unsafe { op.request.ptr.add(op.written) };
        let write = opcode::Write::new(types::Fd(op.request.fd), ptr, len)
            .offset(op.request.offset + op.written as u64)
            .build()
            .user_data(slot as u64);
        self.push(&write);
    }

    fn push(&mut self, entry: &io_uring::squeue::Entry) {
        loop {
            // SAFETY: every entry references memory that outlives its
            // completion (see WriteRequest and wake_buf).
            let pushed = unsafe { self.ring.submission().push(entry).is_ok() };
            if pushed {
                return;
            }
            // Queue full: hand what is queued to the kernel and retry.
            if let Err(e) = self.ring.submit()
                && e.kind() != io::ErrorKind::Interrupted
                && e.raw_os_error() != Some(libc::EBUSY)
            {
                tracing::error!("io_uring submit failed: {e}");
            }
        }
    }

    fn complete(&mut self, slot: usize, result: i32) {
        let Some(mut op) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let outcome = if result < 0 {
            Some(Err(io::Error::from_raw_os_error(-result)))
        } else if result == 0 {
            Some(Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "io_uring write wrote nothing",
            )))
        } else {
            op.written += result as usize;
            if op.written >= op.request.len {
                Some(Ok(()))
            } else {
                None
            }
        };
        match outcome {
            Some(result) => {
                let _ = op.request.done.send(result);
                self.in_flight -= 1;
                self.free.push(slot);
            }
            None => {
                self.slots[slot] = Some(op);
                self.submit_slot(slot);
            }
        }
    }

    fn fail_all(&mut self, err: &io::Error) {
        tracing::error!("io_uring failed: {err}; pending writes fail");
        for op in self.slots.iter_mut().filter_map(Option::take) {
            let _ = op
                .request
                .done
                .send(Err(io::Error::new(err.kind(), err.to_string())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use std::sync::{Arc, Barrier};

    /// Whether io_uring must be in use here: unless
    /// `SPLITKV_EXPECT_IO_URING=0` says this machine refuses it.
    fn io_uring_expected() -> bool {
        std::env::var("SPLITKV_EXPECT_IO_URING").map_or(true, |v| v != "0")
    }

    /// Starts the engine for `kind` and checks that it is the engine asked
    /// for: a silent fallback to pwrite fails the test where io_uring is
    /// expected.
    fn start_checked(kind: IoEngineKind) -> WriteBackend {
        let engine = WriteBackend::start(kind);
        if kind == IoEngineKind::Uring && !io_uring_expected() {
            if engine.kind() != kind {
                eprintln!("io_uring is refused here; testing the pwrite fallback instead");
            }
            return engine;
        }
        assert_eq!(
            engine.kind(),
            kind,
            "asked for {kind} and got {}: io_uring is refused on this machine, so this test \
             would not test it (set SPLITKV_EXPECT_IO_URING=0 where that is expected)",
            engine.kind()
        );
        engine
    }

    /// Writes `blocks` distinct 512-byte blocks from each of `writers`
    /// threads at once and checks that each landed where it was written.
    fn concurrent_writers(engine: &Arc<WriteBackend>, writers: usize, blocks: usize) {
        let file = Arc::new(tempfile::tempfile().expect("tempfile"));
        let start = Arc::new(Barrier::new(writers));
        let threads: Vec<_> = (0..writers)
            .map(|t| {
                let engine = Arc::clone(engine);
                let file = Arc::clone(&file);
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..blocks {
                        let block = vec![t as u8; 512];
                        let offset = ((t * blocks + i) * 512) as u64;
                        engine
                            .write_at(file.as_raw_fd(), &block, offset)
                            .expect("write");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("writer thread");
        }
        let mut back = vec![0u8; writers * blocks * 512];
        file.read_exact_at(&mut back, 0).expect("read");
        for (t, region) in back.chunks(512 * blocks).enumerate() {
            assert!(region.iter().all(|&b| b == t as u8), "thread {t} region");
        }
    }

    #[test]
    fn engine_names_parse() {
        assert_eq!("uring".parse::<IoEngineKind>(), Ok(IoEngineKind::Uring));
        assert_eq!("psync".parse::<IoEngineKind>(), Ok(IoEngineKind::Psync));
        assert!("aio".parse::<IoEngineKind>().is_err());
    }

    #[test]
    fn both_engines_write_what_they_are_given() {
        for kind in [IoEngineKind::Uring, IoEngineKind::Psync] {
            let engine = start_checked(kind);
            let file = tempfile::tempfile().expect("tempfile");
            let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
            engine
                .write_at(file.as_raw_fd(), &data, 100)
                .expect("write");
            let mut back = vec![0u8; data.len()];
            file.read_exact_at(&mut back, 100).expect("read");
            assert_eq!(back, data, "engine {kind}");
        }
    }

    #[test]
    fn uring_reports_errors_per_request() {
        let engine = Arc::new(start_checked(IoEngineKind::Uring));
        let err = engine
            .write_at(-1, b"abc", 0)
            .expect_err("bad fd must fail");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        // The failure was this request's alone: the ring goes on serving.
        concurrent_writers(&engine, 2, 4);
    }

    #[test]
    fn uring_carries_concurrent_writers() {
        let engine = Arc::new(start_checked(IoEngineKind::Uring));
        concurrent_writers(&engine, 8, 50);
    }

    #[test]
    fn uring_carries_more_writers_than_its_queue_holds() {
        let engine = Arc::new(start_checked(IoEngineKind::Uring));
        if let WriteBackend::Uring(uring) = &*engine {
            let requests = uring.requests.as_ref().expect("running");
            assert_eq!(requests.capacity(), Some(MAX_QUEUED_WRITES));
        }
        concurrent_writers(&engine, 3 * MAX_QUEUED_WRITES, 4);
    }
}
