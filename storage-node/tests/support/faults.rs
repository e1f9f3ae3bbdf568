//! Disks that wrap the real one ([`OsDisk`]) through the engine's `Disk`
//! trait: [`FaultDisk`] slows, pauses or fails chosen operations (or refuses
//! O_DIRECT as ramfs does); [`PowerCutDisk`] keeps every write in memory
//! until it is synced, so that cutting the power loses exactly what was not
//! synced.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use storage_node::aligned::AlignedBuf;
use storage_node::{Disk, DiskFile, FileKind, IoEngineKind, Mapping, OsDisk};

/// Which operations a [`FaultDisk`] disturbs.
#[derive(Debug, Default)]
pub struct FaultPlan {
    /// Direct (value-log) writes that have started.
    pub direct_writes: AtomicUsize,
    /// Once this many direct writes have started, the next ones fail with
    /// `direct_write_errno`.
    pub fail_direct_writes_from: AtomicUsize,
    pub direct_write_errno: AtomicUsize,
    /// Allocations (preallocation of key-log chunks and buffers).
    pub allocations: AtomicUsize,
    /// Once this many allocations have happened, the next ones fail with
    /// `allocate_errno`.
    pub fail_allocations_from: AtomicUsize,
    pub allocate_errno: AtomicUsize,
    /// Milliseconds every direct write sleeps before it starts.
    pub direct_write_delay_ms: AtomicUsize,
    /// Once this many direct writes have started, the next ones never finish
    /// (the flush hangs until the process is killed).
    pub pause_direct_writes_from: AtomicUsize,
    /// Opening a file with O_DIRECT fails with EINVAL, as on a file system
    /// without direct I/O (ramfs).
    pub refuse_direct_opens: AtomicBool,
}

impl FaultPlan {
    /// A plan that disturbs nothing (yet).
    pub fn new() -> Arc<Self> {
        let plan = Self::default();
        plan.fail_direct_writes_from
            .store(usize::MAX, Ordering::SeqCst);
        plan.fail_allocations_from
            .store(usize::MAX, Ordering::SeqCst);
        plan.pause_direct_writes_from
            .store(usize::MAX, Ordering::SeqCst);
        Arc::new(plan)
    }

    /// Fails direct writes from now on with `errno`.
    pub fn fail_direct_writes_now(&self, errno: i32) {
        self.direct_write_errno
            .store(errno as usize, Ordering::SeqCst);
        let now = self.direct_writes.load(Ordering::SeqCst);
        self.fail_direct_writes_from.store(now, Ordering::SeqCst);
    }

    /// Fails allocations from now on with `errno`.
    pub fn fail_allocations_now(&self, errno: i32) {
        self.allocate_errno.store(errno as usize, Ordering::SeqCst);
        let now = self.allocations.load(Ordering::SeqCst);
        self.fail_allocations_from.store(now, Ordering::SeqCst);
    }
}

/// Implements the `Disk` methods other than `open` by passing them to the
/// wrapped disk in field `$inner`: a wrapping disk writes only its `open`.
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
            plan: Arc::clone(&self.plan),
        }))
    }
    delegate_disk!(inner);
}

struct FaultFile {
    inner: Arc<dyn DiskFile>,
    kind: FileKind,
    plan: Arc<FaultPlan>,
}

impl DiskFile for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.kind == FileKind::Direct {
            let n = self.plan.direct_writes.fetch_add(1, Ordering::SeqCst);
            let delay = self.plan.direct_write_delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                std::thread::sleep(Duration::from_millis(delay as u64));
            }
            if n >= self.plan.pause_direct_writes_from.load(Ordering::SeqCst) {
                loop {
                    std::thread::park();
                }
            }
            if n >= self.plan.fail_direct_writes_from.load(Ordering::SeqCst) {
                let errno = self.plan.direct_write_errno.load(Ordering::SeqCst) as i32;
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        self.inner.write_at(buf, offset)
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let n = self.plan.allocations.fetch_add(1, Ordering::SeqCst);
        if n >= self.plan.fail_allocations_from.load(Ordering::SeqCst) {
            let errno = self.plan.allocate_errno.load(Ordering::SeqCst) as i32;
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.inner.allocate(offset, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }

    fn map(&self, offset: u64, len: usize) -> io::Result<Box<dyn Mapping>> {
        self.inner.map(offset, len)
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
