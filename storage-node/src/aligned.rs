//! Heap buffers aligned for O_DIRECT.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every O_DIRECT transfer: file offsets, lengths and memory
/// addresses are multiples of it. 4 KiB covers devices with 512-byte and
/// 4 KiB blocks.
pub const DIRECT_ALIGN: usize = 4096;

/// Rounds `n` up to a multiple of [`DIRECT_ALIGN`].
pub fn align_up(n: u64) -> u64 {
    n.next_multiple_of(DIRECT_ALIGN as u64)
}

/// Rounds `n` down to a multiple of [`DIRECT_ALIGN`].
pub fn align_down(n: u64) -> u64 {
    n - n % DIRECT_ALIGN as u64
}

/// A byte buffer whose start address and capacity are multiples of
/// [`DIRECT_ALIGN`], so any aligned sub-range of it can be the target or
/// source of an O_DIRECT transfer.
///
/// `len` (what `Deref` exposes) may be shorter than the aligned capacity;
/// the bytes past `len` up to the capacity exist and are initialised, but
/// hold whatever was last written there: zeros in a fresh buffer, possibly
/// stale bytes in one reused from a [`BufferPool`]. An empty buffer has
/// capacity 0 and allocates nothing.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes with capacity rounded up to the alignment
    /// (nothing at all for `len == 0`).
    ///
    /// # Panics
    /// If the allocation fails (like `Vec`).
    pub fn zeroed(len: usize) -> Self {
        let capacity = len.next_multiple_of(DIRECT_ALIGN);
        if capacity == 0 {
            return Self {
                // An aligned, dangling pointer: valid for slices of length 0.
                ptr: NonNull::<[u8; DIRECT_ALIGN]>::dangling().cast(),
                len: 0,
                capacity: 0,
            };
        }
        let layout = Self::layout(capacity);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        Self { ptr, len, capacity }
    }

    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity, DIRECT_ALIGN).expect("aligned layout is valid")
    }

    /// Capacity in bytes: a multiple of [`DIRECT_ALIGN`], at least `len`.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The whole aligned capacity, for an O_DIRECT read that may run past
    /// `len` to the next block boundary.
    pub fn spare_aligned_mut(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `capacity` bytes, initialised (zeroed
        // when allocated); with capacity 0 the pointer is dangling but
        // aligned and non-null, which an empty slice allows.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Sets the visible length to `len`, at most the capacity. Bytes that
    /// become visible keep whatever they held (they are initialised).
    ///
    /// # Panics
    /// If `len` exceeds the capacity.
    pub fn set_len_within_capacity(&mut self, len: usize) {
        assert!(len <= self.capacity, "length beyond capacity");
        self.len = len;
    }
}

/// Aligned buffers kept for reuse, so that reads do not allocate (and zero,
/// and fault in) fresh memory for every request.
///
/// A pool made with [`BufferPool::new`] keeps buffers of any size and hands
/// out the first one large enough. One made with [`BufferPool::sized`]
/// gives every buffer it allocates for a request of up to its class the
/// same capacity, so that any kept buffer serves any such request at once;
/// larger requests get a buffer of their own, which is not kept.
#[derive(Debug)]
pub struct BufferPool {
    free: std::sync::Mutex<Vec<AlignedBuf>>,
    keep: usize,
    class_bytes: Option<usize>,
}

impl BufferPool {
    /// A pool that keeps at most `keep` buffers of any size.
    pub fn new(keep: usize) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            free: std::sync::Mutex::new(Vec::new()),
            keep,
            class_bytes: None,
        })
    }

    /// A pool that keeps at most `keep` buffers of `class_bytes` (rounded
    /// up to [`DIRECT_ALIGN`]) each: at most `keep * class_bytes` bytes.
    pub fn sized(keep: usize, class_bytes: usize) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            free: std::sync::Mutex::new(Vec::new()),
            keep,
            class_bytes: Some(class_bytes.next_multiple_of(DIRECT_ALIGN)),
        })
    }

    /// A buffer of `len` bytes whose contents are unspecified (stale bytes
    /// of an earlier use, or zeros): the caller overwrites what it exposes.
    /// `take(0)` allocates nothing and leaves the pool's buffers in it.
    pub fn take(self: &std::sync::Arc<Self>, len: usize) -> PooledBuf {
        if len == 0 {
            return PooledBuf {
                buf: Some(AlignedBuf::zeroed(0)),
                pool: std::sync::Arc::clone(self),
            };
        }
        let mut buf = match self.class_bytes {
            Some(class) if len <= class => self
                .free_list()
                .pop()
                .unwrap_or_else(|| AlignedBuf::zeroed(class)),
            Some(_) => AlignedBuf::zeroed(len),
            None => {
                let reused = {
                    let mut free = self.free_list();
                    free.iter()
                        .position(|b| b.capacity() >= len)
                        .map(|i| free.swap_remove(i))
                };
                reused.unwrap_or_else(|| AlignedBuf::zeroed(len))
            }
        };
        buf.set_len_within_capacity(len);
        PooledBuf {
            buf: Some(buf),
            pool: std::sync::Arc::clone(self),
        }
    }

    fn free_list(&self) -> std::sync::MutexGuard<'_, Vec<AlignedBuf>> {
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn give_back(&self, buf: AlignedBuf) {
        if buf.capacity() == 0 || self.class_bytes.is_some_and(|c| buf.capacity() != c) {
            return;
        }
        let mut free = self.free_list();
        if free.len() < self.keep {
            free.push(buf);
        }
    }
}

/// A buffer borrowed from a [`BufferPool`], returned to it when dropped.
#[derive(Debug)]
pub struct PooledBuf {
    buf: Option<AlignedBuf>,
    pool: std::sync::Arc<BufferPool>,
}

impl Deref for PooledBuf {
    type Target = AlignedBuf;

    fn deref(&self) -> &AlignedBuf {
        self.buf.as_ref().expect("present until dropped")
    }
}

impl DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut AlignedBuf {
        self.buf.as_mut().expect("present until dropped")
    }
}

impl AsRef<[u8]> for PooledBuf {
    fn as_ref(&self) -> &[u8] {
        self.deref()
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.give_back(buf);
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: len <= capacity, the bytes are initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: len <= capacity, the bytes are initialised, and we hold &mut.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity == 0 {
            return;
        }
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.capacity)) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_aligned_zeroed_and_rounded() {
        let mut buf = AlignedBuf::zeroed(5000);
        assert_eq!(buf.as_ptr() as usize % DIRECT_ALIGN, 0);
        assert_eq!(buf.len(), 5000);
        assert_eq!(buf.capacity(), 8192);
        assert!(buf.iter().all(|&b| b == 0));
        buf[4999] = 7;
        assert_eq!(buf.spare_aligned_mut()[4999], 7);
    }

    #[test]
    fn empty_buffers_allocate_nothing_and_skip_the_pool() {
        let mut empty = AlignedBuf::zeroed(0);
        assert_eq!((empty.len(), empty.capacity()), (0, 0));
        assert!(empty.spare_aligned_mut().is_empty());
        let pool = BufferPool::new(2);
        let big = pool.take(10_000);
        let addr = big.as_ptr() as usize;
        drop(big);
        let none = pool.take(0);
        assert_eq!(
            none.capacity(),
            0,
            "take(0) does not hand out a pooled buffer"
        );
        drop(none);
        assert_eq!(pool.take(10_000).as_ptr() as usize, addr);
    }

    #[test]
    fn sized_pool_reuses_one_class_and_drops_larger_buffers() {
        let pool = BufferPool::sized(1, 16 * 1024);
        let small = pool.take(4096);
        assert_eq!((small.len(), small.capacity()), (4096, 16 * 1024));
        let addr = small.as_ptr() as usize;
        drop(small);
        let again = pool.take(12 * 1024);
        assert_eq!(
            again.as_ptr() as usize,
            addr,
            "any kept buffer serves the class"
        );
        assert_eq!(again.len(), 12 * 1024);
        let second = pool.take(8192);
        assert_ne!(second.as_ptr() as usize, addr);
        drop(again);
        drop(second);
        assert_eq!(pool.free_list().len(), 1, "at most `keep` buffers kept");
        let large = pool.take(64 * 1024);
        assert_eq!(large.capacity(), 64 * 1024);
        drop(large);
        assert!(
            pool.free_list().iter().all(|b| b.capacity() == 16 * 1024),
            "a buffer above the class is not kept"
        );
    }

    #[test]
    fn pooled_buffers_are_reused() {
        let pool = BufferPool::new(2);
        let first = pool.take(10_000);
        let addr = first.as_ptr() as usize;
        assert_eq!(first.len(), 10_000);
        drop(first);
        let again = pool.take(5_000);
        assert_eq!(again.as_ptr() as usize, addr, "the buffer came back");
        assert_eq!(again.len(), 5_000);
        let bigger = pool.take(100_000);
        assert!(bigger.capacity() >= 100_000);
    }

    #[test]
    fn rounding_helpers() {
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_down(8191), 4096);
    }
}
