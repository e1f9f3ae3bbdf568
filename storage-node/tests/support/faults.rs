//! Disks that wrap the real one ([`OsDisk`]) through the engine's `Disk`
//! trait: [`FaultDisk`] slows, pauses or fails chosen operations (or refuses
//! O_DIRECT as ramfs does); [`PowerCutDisk`] keeps every write in memory
//! until it is synced, so that cutting the power loses exactly what was not
//! synced.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use storage_node::aligned::AlignedBuf;
use storage_node::disk::FileLock;
use storage_node::{Disk, DiskFile, FileKind, IoEngineKind, Mapping, OsDisk};

/// An operation of a [`FaultDisk`] that a [`FaultPlan`] can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `DiskFile::write_at` on a direct file (the value log, the O_DIRECT
    /// probe).
    DirectWrite,
    /// `DiskFile::allocate`: preallocation of the value log, the key log's
    /// chunks and the write buffers.
    Allocate,
    /// `DiskFile::read_at`.
    Read,
    /// `DiskFile::sync_data` (fdatasync).
    SyncData,
    /// `Mapping::flush` (msync) of a write buffer or a key-log chunk.
    MappingFlush,
}

const OPS: usize = 5;

impl Op {
    fn index(self) -> usize {
        match self {
            Op::DirectWrite => 0,
            Op::Allocate => 1,
            Op::Read => 2,
            Op::SyncData => 3,
            Op::MappingFlush => 4,
        }
    }
}

/// Which files a fault applies to, or an operation count covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Files {
    /// Every file.
    All,
    /// Files opened as this kind.
    Kind(FileKind),
    /// Files of this name in any directory: `"buffer.0"`, `"MANIFEST"`.
    Named(&'static str),
    /// Files of this name in directories of that name: `("p001",
    /// "checkpoint.tmp")`.
    NamedIn(&'static str, &'static str),
    /// The value logs' segment files (`value-NNNNNNNN.seg`).
    ValueLog,
    /// The key logs' chunk files (`key-NNNNNNNN.log`).
    KeyLog,
}

impl Files {
    fn matches(&self, file: &FileCounts) -> bool {
        match *self {
            Files::All => true,
            Files::Kind(kind) => file.kind == kind,
            Files::Named(name) => file.name == name,
            Files::NamedIn(dir, name) => file.dir == dir && file.name == name,
            Files::ValueLog => file
                .name
                .to_str()
                .is_some_and(|n| n.starts_with("value-") && n.ends_with(".seg")),
            Files::KeyLog => file
                .name
                .to_str()
                .is_some_and(|n| n.starts_with("key-") && n.ends_with(".log")),
        }
    }
}

/// A failure to inject: every matching operation fails with `errno`.
#[derive(Debug, Clone, Copy)]
struct Fault {
    files: Files,
    errno: i32,
}

/// How many operations of each kind one opened file has done.
#[derive(Debug)]
struct FileCounts {
    name: OsString,
    /// The name of the directory the file is in.
    dir: OsString,
    kind: FileKind,
    succeeded: [AtomicUsize; OPS],
    failed: [AtomicUsize; OPS],
}

/// Which operations a [`FaultDisk`] disturbs, and what it has seen.
#[derive(Debug, Default)]
pub struct FaultPlan {
    /// Direct (value-log) writes that have started.
    pub direct_writes: AtomicUsize,
    /// Milliseconds every direct write sleeps before it starts.
    pub direct_write_delay_ms: AtomicUsize,
    /// Once this many direct writes have started, the next ones wait until
    /// [`FaultPlan::release_paused_writes`] (the flush hangs, or until the
    /// process is killed).
    pub pause_direct_writes_from: AtomicUsize,
    /// Opening a file with O_DIRECT fails with EINVAL, as on a file system
    /// without direct I/O (ramfs).
    pub refuse_direct_opens: AtomicBool,
    /// `Disk::try_lock` answers that another process holds the lock.
    pub refuse_locks: AtomicBool,
    /// `Disk::try_lock` answers that another process holds the lock this
    /// many more times (each answer counts one down), then takes it.
    pub refuse_locks_times: AtomicUsize,
    /// What `Disk::free_bytes` answers, if set (`u64::MAX`: the real
    /// figure).
    pub free_bytes: AtomicU64,
    /// The failure injected per operation, if any.
    faults: Mutex<[Option<Fault>; OPS]>,
    /// Every file opened through the disk, with its counts.
    files: Mutex<Vec<Arc<FileCounts>>>,
    /// Direct writes waiting on the pause.
    paused: Mutex<usize>,
    pause_changed: Condvar,
    /// Locks taken through the disk and not yet released.
    locks_held: Mutex<usize>,
    locks_changed: Condvar,
}

impl FaultPlan {
    /// A plan that disturbs nothing (yet).
    pub fn new() -> Arc<Self> {
        let plan = Self::default();
        plan.pause_direct_writes_from
            .store(usize::MAX, Ordering::SeqCst);
        plan.free_bytes.store(u64::MAX, Ordering::SeqCst);
        Arc::new(plan)
    }

    /// From now on, every `op` on `files` fails with `errno` (replacing what
    /// was injected for `op` before).
    pub fn fail_now(&self, op: Op, files: Files, errno: i32) {
        self.faults.lock().expect("faults lock")[op.index()] = Some(Fault { files, errno });
    }

    /// From now on, `op` no longer fails.
    pub fn stop_failing(&self, op: Op) {
        self.faults.lock().expect("faults lock")[op.index()] = None;
    }

    /// Fails direct writes to every file from now on with `errno`.
    pub fn fail_direct_writes_now(&self, errno: i32) {
        self.fail_now(Op::DirectWrite, Files::All, errno);
    }

    /// `op`s on `files` that have succeeded so far.
    pub fn succeeded(&self, op: Op, files: Files) -> usize {
        self.count(files, |f| &f.succeeded[op.index()])
    }

    /// `op`s on `files` that have been failed so far.
    pub fn failed(&self, op: Op, files: Files) -> usize {
        self.count(files, |f| &f.failed[op.index()])
    }

    fn count(&self, files: Files, counter: impl Fn(&FileCounts) -> &AtomicUsize) -> usize {
        self.files
            .lock()
            .expect("files lock")
            .iter()
            .filter(|f| files.matches(f))
            .map(|f| counter(f).load(Ordering::SeqCst))
            .sum()
    }

    /// Pauses every direct write that starts from now on.
    pub fn pause_direct_writes_now(&self) {
        let now = self.direct_writes.load(Ordering::SeqCst);
        self.pause_direct_writes_from.store(now, Ordering::SeqCst);
    }

    /// Waits until at least `n` direct writes are paused.
    pub fn wait_until_paused(&self, n: usize) {
        let paused = self.paused.lock().expect("pause lock");
        drop(
            self.pause_changed
                .wait_while(paused, |paused| *paused < n)
                .expect("pause lock"),
        );
    }

    /// Lets every paused direct write go on, and pauses no more.
    pub fn release_paused_writes(&self) {
        let _paused = self.paused.lock().expect("pause lock");
        self.pause_direct_writes_from
            .store(usize::MAX, Ordering::SeqCst);
        self.pause_changed.notify_all();
    }

    /// Waits until every lock taken through the disk has been released:
    /// after this, the engine that took the data directory's lock is gone
    /// and the directory can be opened again.
    pub fn wait_until_unlocked(&self) {
        let held = self.locks_held.lock().expect("locks lock");
        drop(
            self.locks_changed
                .wait_while(held, |held| *held > 0)
                .expect("locks lock"),
        );
    }

    fn lock_taken(&self) {
        *self.locks_held.lock().expect("locks lock") += 1;
    }

    fn lock_released(&self) {
        *self.locks_held.lock().expect("locks lock") -= 1;
        self.locks_changed.notify_all();
    }

    /// Blocks while direct write number `n` is to be paused.
    fn pause_if_asked(&self, n: usize) {
        if n < self.pause_direct_writes_from.load(Ordering::SeqCst) {
            return;
        }
        let mut paused = self.paused.lock().expect("pause lock");
        *paused += 1;
        self.pause_changed.notify_all();
        paused = self
            .pause_changed
            .wait_while(paused, |_| {
                n >= self.pause_direct_writes_from.load(Ordering::SeqCst)
            })
            .expect("pause lock");
        *paused -= 1;
    }

    /// Runs `op` on `file` unless a fault is injected for it, and counts the
    /// outcome.
    fn run<T>(
        &self,
        op: Op,
        file: &FileCounts,
        inner: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        let fault = self.faults.lock().expect("faults lock")[op.index()];
        let result = match fault {
            Some(fault) if fault.files.matches(file) => {
                Err(io::Error::from_raw_os_error(fault.errno))
            }
            _ => inner(),
        };
        let counter = match &result {
            Ok(_) => &file.succeeded[op.index()],
            Err(_) => &file.failed[op.index()],
        };
        counter.fetch_add(1, Ordering::SeqCst);
        result
    }

    fn register(&self, path: &Path, kind: FileKind) -> Arc<FileCounts> {
        let counts = Arc::new(FileCounts {
            name: path.file_name().map(OsString::from).unwrap_or_default(),
            dir: path
                .parent()
                .and_then(Path::file_name)
                .map(OsString::from)
                .unwrap_or_default(),
            kind,
            succeeded: Default::default(),
            failed: Default::default(),
        });
        self.files
            .lock()
            .expect("files lock")
            .push(Arc::clone(&counts));
        counts
    }
}

/// Implements the `Disk` methods other than `open` and `try_lock` by
/// passing them to the wrapped disk in field `$inner`.
macro_rules! delegate_disk {
    ($inner:ident) => {
        fn create_dir_all(&self, path: &::std::path::Path) -> ::std::io::Result<()> {
            self.$inner.create_dir_all(path)
        }
        fn sync_dir(&self, path: &::std::path::Path) -> ::std::io::Result<()> {
            self.$inner.sync_dir(path)
        }
        fn rename(
            &self,
            from: &::std::path::Path,
            to: &::std::path::Path,
        ) -> ::std::io::Result<()> {
            self.$inner.rename(from, to)
        }
        fn remove_file(&self, path: &::std::path::Path) -> ::std::io::Result<()> {
            self.$inner.remove_file(path)
        }
        fn exists(&self, path: &::std::path::Path) -> ::std::io::Result<bool> {
            self.$inner.exists(path)
        }
        fn list_dir(
            &self,
            path: &::std::path::Path,
        ) -> ::std::io::Result<::std::vec::Vec<::std::ffi::OsString>> {
            self.$inner.list_dir(path)
        }
        fn io_engine(&self) -> ::storage_node::IoEngineKind {
            self.$inner.io_engine()
        }
    };
}

/// The real disk with faults injected according to a [`FaultPlan`].
pub struct FaultDisk {
    inner: OsDisk,
    plan: Arc<FaultPlan>,
}

impl FaultDisk {
    /// The real disk (io_uring unless refused), disturbed as `plan` says.
    pub fn new(plan: Arc<FaultPlan>) -> Arc<Self> {
        Arc::new(Self {
            inner: OsDisk::new(IoEngineKind::Uring),
            plan,
        })
    }
}

impl Disk for FaultDisk {
    fn open(&self, path: &Path, kind: FileKind, create: bool) -> io::Result<Arc<dyn DiskFile>> {
        if kind == FileKind::Direct && self.plan.refuse_direct_opens.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let inner = self.inner.open(path, kind, create)?;
        Ok(Arc::new(FaultFile {
            inner,
            kind,
            counts: self.plan.register(path, kind),
            plan: Arc::clone(&self.plan),
        }))
    }

    fn try_lock(&self, path: &Path) -> io::Result<FileLock> {
        let refused_once = self
            .plan
            .refuse_locks_times
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if refused_once || self.plan.refuse_locks.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "held by another process (injected)",
            ));
        }
        let lock = self.inner.try_lock(path)?;
        self.plan.lock_taken();
        Ok(FileLock::new(CountedLock {
            lock: Some(lock),
            plan: Arc::clone(&self.plan),
        }))
    }

    fn free_bytes(&self, path: &Path) -> io::Result<u64> {
        match self.plan.free_bytes.load(Ordering::SeqCst) {
            u64::MAX => self.inner.free_bytes(path),
            set => Ok(set),
        }
    }

    delegate_disk!(inner);
}

/// A lock of the real disk that tells the plan once it is released.
struct CountedLock {
    lock: Option<FileLock>,
    plan: Arc<FaultPlan>,
}

impl Drop for CountedLock {
    fn drop(&mut self) {
        drop(self.lock.take());
        self.plan.lock_released();
    }
}

struct FaultFile {
    inner: Arc<dyn DiskFile>,
    kind: FileKind,
    counts: Arc<FileCounts>,
    plan: Arc<FaultPlan>,
}

impl DiskFile for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.plan
            .run(Op::Read, &self.counts, || self.inner.read_at(buf, offset))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.kind != FileKind::Direct {
            return self.inner.write_at(buf, offset);
        }
        let n = self.plan.direct_writes.fetch_add(1, Ordering::SeqCst);
        let delay = self.plan.direct_write_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay as u64));
        }
        self.plan.pause_if_asked(n);
        self.plan.run(Op::DirectWrite, &self.counts, || {
            self.inner.write_at(buf, offset)
        })
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.plan.run(Op::Allocate, &self.counts, || {
            self.inner.allocate(offset, len)
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.plan
            .run(Op::SyncData, &self.counts, || self.inner.sync_data())
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }

    fn map(&self, offset: u64, len: usize) -> io::Result<Box<dyn Mapping>> {
        Ok(Box::new(FaultMapping {
            inner: self.inner.map(offset, len)?,
            counts: Arc::clone(&self.counts),
            plan: Arc::clone(&self.plan),
        }))
    }
}

/// A real mapping whose `flush` (msync) a plan can fail.
struct FaultMapping {
    inner: Box<dyn Mapping>,
    counts: Arc<FileCounts>,
    plan: Arc<FaultPlan>,
}

impl Mapping for FaultMapping {
    fn as_ptr(&self) -> *mut u8 {
        self.inner.as_ptr()
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn flush(&self, offset: usize, len: usize) -> io::Result<()> {
        self.plan.run(Op::MappingFlush, &self.counts, || {
            self.inner.flush(offset, len)
        })
    }
}

/// A disk on which nothing is durable until synced: writes are held in
/// memory, mappings are private copies, and only `sync_data` (for writes)
/// and `Mapping::flush` (for mappings) carry bytes to the real files.
/// After [`PowerCutDisk::cut`], nothing reaches the files any more, as if
/// the machine had lost power at that instant.
pub struct PowerCutDisk {
    inner: OsDisk,
    cut: Arc<AtomicBool>,
}

impl PowerCutDisk {
    /// The real disk (pwrite for O_DIRECT), with the power still on.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: OsDisk::new(IoEngineKind::Psync),
            cut: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Cuts the power: from now on nothing more becomes durable.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }
}

impl Disk for PowerCutDisk {
    fn open(&self, path: &Path, kind: FileKind, create: bool) -> io::Result<Arc<dyn DiskFile>> {
        // Mapped and plain files are reopened without O_DIRECT; the value log
        // keeps it, so synced bytes really go to the device.
        let inner = self.inner.open(path, kind, create)?;
        Ok(Arc::new(PowerCutFile {
            inner,
            cut: Arc::clone(&self.cut),
            pending: Mutex::new(BTreeMap::new()),
        }))
    }

    fn try_lock(&self, path: &Path) -> io::Result<FileLock> {
        self.inner.try_lock(path)
    }

    fn free_bytes(&self, path: &Path) -> io::Result<u64> {
        self.inner.free_bytes(path)
    }

    delegate_disk!(inner);
}

struct PowerCutFile {
    inner: Arc<dyn DiskFile>,
    cut: Arc<AtomicBool>,
    /// Writes not yet synced, by offset, in the order they were made.
    pending: Mutex<BTreeMap<u64, Vec<Vec<u8>>>>,
}

impl DiskFile for PowerCutFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut n = self.inner.read_at(buf, offset)?;
        let pending = self.pending.lock().expect("pending lock");
        for (&at, writes) in pending.iter() {
            for data in writes {
                let (lo, hi) = (
                    at.max(offset),
                    (at + data.len() as u64).min(offset + buf.len() as u64),
                );
                if lo < hi {
                    buf[(lo - offset) as usize..(hi - offset) as usize]
                        .copy_from_slice(&data[(lo - at) as usize..(hi - at) as usize]);
                    n = n.max((hi - offset) as usize);
                }
            }
        }
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.cut.load(Ordering::SeqCst) {
            let mut pending = self.pending.lock().expect("pending lock");
            pending.entry(offset).or_default().push(buf.to_vec());
        }
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.allocate(offset, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        if self.cut.load(Ordering::SeqCst) {
            return Ok(());
        }
        let pending = std::mem::take(&mut *self.pending.lock().expect("pending lock"));
        for (offset, writes) in pending {
            for data in writes {
                // The value log is O_DIRECT: hand it an aligned copy.
                let mut aligned = AlignedBuf::zeroed(data.len());
                aligned.copy_from_slice(&data);
                self.inner.write_at(&aligned, offset)?;
            }
        }
        self.inner.sync_data()
    }

    fn len_bytes(&self) -> io::Result<u64> {
        let pending = self.pending.lock().expect("pending lock");
        let pending_end = pending
            .iter()
            .flat_map(|(&at, writes)| writes.iter().map(move |d| at + d.len() as u64))
            .max()
            .unwrap_or(0);
        Ok(self.inner.len_bytes()?.max(pending_end))
    }

    fn map(&self, offset: u64, len: usize) -> io::Result<Box<dyn Mapping>> {
        let mut image = vec![0u8; len];
        let n = self.inner.read_at(&mut image, offset)?;
        image[n..].fill(0);
        let len = image.len();
        let ptr = Box::into_raw(image.into_boxed_slice()).cast::<u8>();
        Ok(Box::new(PowerCutMapping {
            ptr,
            len,
            file: Arc::clone(&self.inner),
            offset,
            cut: Arc::clone(&self.cut),
        }))
    }
}

/// A private in-memory image of a file range; `flush` copies a range of it
/// into the real file and syncs, unless the power is cut.
struct PowerCutMapping {
    /// Owned heap image (from `Box<[u8]>`), written through raw pointers
    /// like a real mapping.
    ptr: *mut u8,
    len: usize,
    file: Arc<dyn DiskFile>,
    offset: u64,
    cut: Arc<AtomicBool>,
}

// SAFETY: the image is plain heap memory; the engine coordinates access to
// it exactly as it does for a real mapping.
unsafe impl Send for PowerCutMapping {}
// SAFETY: as above.
unsafe impl Sync for PowerCutMapping {}

impl Drop for PowerCutMapping {
    fn drop(&mut self) {
        // SAFETY: ptr and len come from Box::into_raw of a boxed slice.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

impl Mapping for PowerCutMapping {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    fn len(&self) -> usize {
        self.len
    }

    fn flush(&self, offset: usize, len: usize) -> io::Result<()> {
        if self.cut.load(Ordering::SeqCst) {
            return Ok(());
        }
        let end = (offset + len).min(self.len);
        // SAFETY: in bounds; the engine only flushes ranges it has finished
        // writing.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.ptr.add(offset), end - offset) }.to_vec();
        self.file.write_at(&bytes, self.offset + offset as u64)?;
        self.file.sync_data()
    }
}
