//! The one narrow interface through which the storage engine touches the
//! disk: directories (create, list, look up, sync), files (open, rename,
//! remove, lock), positional reads and writes, preallocation, syncs and
//! memory mappings. [`OsDisk`] is the real implementation; tests wrap it to
//! slow, pause or fail operations, or to drop everything not yet synced.

use std::ffi::OsString;
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::aligned::DIRECT_ALIGN;
use crate::uring::{IoEngineKind, WriteBackend};

/// How a file is accessed, which decides how it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Opened with O_DIRECT (the value log): every read and write must use
    /// offsets, lengths and memory addresses aligned to
    /// [`DIRECT_ALIGN`]. Writes go through the
    /// disk's I/O engine (io_uring or pwrite).
    Direct,
    /// Accessed through memory mappings (write buffers, key log).
    Mapped,
    /// Small files read and written with ordinary buffered I/O (manifest,
    /// epoch).
    Plain,
}

/// A directory of files: the engine's view of the file system.
pub trait Disk: Send + Sync + 'static {
    /// Opens the file at `path`; with `create`, creates it if it is missing.
    fn open(&self, path: &Path, kind: FileKind, create: bool) -> io::Result<Arc<dyn DiskFile>>;
    /// Creates a directory and its parents if they are missing.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (created or renamed files) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Whether a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// The names of the entries of the directory at `path`, in no particular
    /// order; fails with [`io::ErrorKind::NotFound`] if it does not exist.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<OsString>>;
    /// Takes an exclusive lock on the file at `path` (created if missing)
    /// that keeps out every other process taking the same lock, without
    /// waiting: fails with [`io::ErrorKind::WouldBlock`] while another holds
    /// it. The lock is held until the returned [`FileLock`] is dropped or
    /// the process dies.
    fn try_lock(&self, path: &Path) -> io::Result<FileLock>;
    /// Bytes an unprivileged writer may still allocate on the file system
    /// holding `path` (statvfs: available blocks times their size).
    fn free_bytes(&self, path: &Path) -> io::Result<u64>;
    /// The engine that carries O_DIRECT writes.
    fn io_engine(&self) -> IoEngineKind;
}

/// An exclusive lock taken by [`Disk::try_lock`], released when dropped.
pub struct FileLock {
    _held: Box<dyn Send + Sync>,
}

impl FileLock {
    /// A lock that lasts as long as `held` (for the real disk, the open
    /// file that carries the `flock`).
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

impl fmt::Debug for FileLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FileLock")
    }
}

/// One open file.
pub trait DiskFile: Send + Sync {
    /// Reads into `buf` from `offset`; returns the bytes read, fewer than
    /// `buf.len()` only at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Reads like [`DiskFile::read_at`], but through the page cache where a
    /// direct file has one besides its direct access, so that bytes read
    /// recently come from memory. Only for ranges whose writes have
    /// completed and that are never written again (the value log's blocks:
    /// each sealed buffer and each large record starts on an aligned
    /// offset), so a cached page is never stale. The default reads like
    /// `read_at`.
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.read_at(buf, offset)
    }
    /// Reads like [`DiskFile::read_cached_at`] only if every byte asked for
    /// is in the page cache already, without waiting for the device:
    /// `Ok(None)` when some would have to come from it (the caller then
    /// reads with `read_cached_at` where it may wait). For the same ranges
    /// as `read_cached_at`. On the real disk a miss also starts moving the
    /// missing bytes into the page cache, so the `read_cached_at` that
    /// follows waits less. The default never reads (always `Ok(None)`).
    fn read_cached_nowait_at(&self, buf: &mut [u8], offset: u64) -> io::Result<Option<usize>> {
        let _ = (buf, offset);
        Ok(None)
    }
    /// Writes all of `buf` at `offset`. Returns once the write has completed
    /// (for a direct file: the bytes went from `buf` to the device without
    /// passing through the page cache, but the device may still hold them
    /// in a volatile cache: they are durable after [`DiskFile::sync_data`]).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Reserves disk space for `[offset, offset + len)`, extending the file
    /// if needed, so that later stores into a mapping of that range cannot
    /// fail for want of space.
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Makes the file's written data (and the metadata needed to read it)
    /// durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length in bytes.
    fn len_bytes(&self) -> io::Result<u64>;
    /// Maps `[offset, offset + len)` of the file shared and writable. The
    /// range must have been allocated.
    fn map(&self, offset: u64, len: usize) -> io::Result<Box<dyn Mapping>>;
}

/// A shared, writable mapping of part of a file.
///
/// Stores through [`Mapping::as_ptr`] reach the page cache at once, so they
/// survive the death of the process; [`Mapping::flush`] makes them durable.
pub trait Mapping: Send + Sync {
    /// Start of the mapping. Valid for [`Mapping::len`] bytes for as long as
    /// the mapping lives.
    fn as_ptr(&self) -> *mut u8;
    /// Length of the mapping in bytes.
    fn len(&self) -> usize;
    /// Returns true for an empty mapping.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Writes `[offset, offset + len)` of the mapping to the disk and waits
    /// (msync with MS_SYNC).
    fn flush(&self, offset: usize, len: usize) -> io::Result<()>;
}

/// The real file system, with O_DIRECT writes carried by io_uring or pwrite.
pub struct OsDisk {
    backend: Arc<WriteBackend>,
}

impl OsDisk {
    /// A disk whose O_DIRECT writes use `requested`. When io_uring is
    /// requested but the kernel or a seccomp profile refuses it, this logs
    /// one warning and uses pwrite instead; [`Disk::io_engine`] tells which.
    pub fn new(requested: IoEngineKind) -> Self {
        Self {
            backend: Arc::new(WriteBackend::start(requested)),
        }
    }
}

impl Disk for OsDisk {
    fn open(&self, path: &Path, kind: FileKind, create: bool) -> io::Result<Arc<dyn DiskFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(create);
        if kind == FileKind::Direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let file = options.open(path)?;
        let cached = (kind == FileKind::Direct)
            .then(|| open_for_cached_reads(path))
            .flatten();
        Ok(Arc::new(OsFile {
            file,
            cached,
            kind,
            backend: Arc::clone(&self.backend),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        std::fs::exists(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(path)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect()
    }

    /// An advisory `flock` on the file, held by its open descriptor.
    fn try_lock(&self, path: &Path) -> io::Result<FileLock> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(FileLock::new(file)),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another process", path.display()),
            )),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    fn free_bytes(&self, path: &Path) -> io::Result<u64> {
        let dir = File::open(path)?;
        let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: the descriptor is open for the call, and fstatvfs fills
        // the struct it is given when it returns 0.
        let rc = unsafe { libc::fstatvfs(dir.as_raw_fd(), stats.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: initialized by the successful call above.
        let stats = unsafe { stats.assume_init() };
        Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
    }

    fn io_engine(&self) -> IoEngineKind {
        self.backend.kind()
    }
}

struct OsFile {
    file: File,
    /// For a direct file, the same file opened for reads through the page
    /// cache ([`DiskFile::read_cached_at`]); `None` where that open failed
    /// (such reads are then direct).
    cached: Option<File>,
    kind: FileKind,
    backend: Arc<WriteBackend>,
}

/// `path` opened read-only through the page cache, with readahead turned
/// off, so that a point read does not read on past its record. (The kernel
/// may still cache a little more, a large folio. A later O_DIRECT write
/// leaves no stale copy: the kernel drops the cached pages it writes, or,
/// where it cannot, ext4 and the other iomap file systems write through
/// the page cache instead.) `None` if it cannot be opened.
fn open_for_cached_reads(path: &Path) -> Option<File> {
    let file = File::open(path).ok()?;
    // SAFETY: plain syscall on an fd we own.
    let advised = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    (advised == 0).then_some(file)
}

/// Reads into `buf` from `offset` until it is full or the file ends.
fn read_fully_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads into `buf` from `offset` until it is full or the file ends, but
/// only from the page cache (`preadv2` with `RWF_NOWAIT`): `None` as soon as
/// a byte would have to be read from the device. Such a miss still starts
/// reading the missing pages into the page cache (the kernel's readahead for
/// the range, even with `POSIX_FADV_RANDOM`), without waiting for them; a
/// later read of the range waits only for what is left of that transfer.
fn read_fully_nowait_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<Option<usize>> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        let iov = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        let Ok(at) = libc::off_t::try_from(offset + done as u64) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: `iov` describes `rest`, writable for its whole length for
        // the duration of the call, and the fd is open for as long as `file`.
        let got = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        match usize::try_from(got) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    // Not all in memory; or a kernel or file system that
                    // cannot tell without waiting.
                    Some(libc::EAGAIN | libc::EOPNOTSUPP) => return Ok(None),
                    _ => return Err(e),
                }
            }
        }
    }
    Ok(Some(done))
}

impl OsFile {
    fn check_direct_alignment(&self, addr: usize, len: usize, offset: u64) -> io::Result<()> {
        let align = DIRECT_ALIGN as u64;
        if self.kind == FileKind::Direct
            && (!(addr as u64).is_multiple_of(align)
                || !(len as u64).is_multiple_of(align)
                || !offset.is_multiple_of(align))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unaligned O_DIRECT transfer: address {addr:#x}, {len} bytes at {offset}"),
            ));
        }
        Ok(())
    }
}

impl DiskFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.check_direct_alignment(buf.as_ptr() as usize, buf.len(), offset)?;
        read_fully_at(&self.file, buf, offset)
    }

    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match &self.cached {
            Some(cached) => read_fully_at(cached, buf, offset),
            None => self.read_at(buf, offset),
        }
    }

    fn read_cached_nowait_at(&self, buf: &mut [u8], offset: u64) -> io::Result<Option<usize>> {
        match &self.cached {
            Some(cached) => read_fully_nowait_at(cached, buf, offset),
            None => Ok(None),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_direct_alignment(buf.as_ptr() as usize, buf.len(), offset)?;
        match self.kind {
            FileKind::Direct => self.backend.write_at(self.file.as_raw_fd(), buf, offset),
            FileKind::Mapped | FileKind::Plain => self.file.write_all_at(buf, offset),
        }
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "allocation range out of bounds",
            ));
        };
        loop {
            // SAFETY: plain syscall on an fd we own.
            let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, offset, len) };
            if rc == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn map(&self, offset: u64, len: usize) -> io::Result<Box<dyn Mapping>> {
        let raw = MmapOptions::new()
            .offset(offset)
            .len(len)
            .map_raw(&self.file)?;
        Ok(Box::new(OsMapping { raw }))
    }
}

struct OsMapping {
    raw: MmapRaw,
}

impl Mapping for OsMapping {
    fn as_ptr(&self) -> *mut u8 {
        self.raw.as_mut_ptr()
    }

    fn len(&self) -> usize {
        self.raw.len()
    }

    fn flush(&self, offset: usize, len: usize) -> io::Result<()> {
        self.raw.flush_range(offset, len)
    }
}
