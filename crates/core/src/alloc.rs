//! A global allocator that puts large blocks on cache-line boundaries.
//!
//! The K-head epoch's 4 x 2 tile loads each row in 8-wide halves (see
//! `matrix::simd::dot_tile_avx2`); when a row starts mid-line, every other load straddles
//! two cache lines and costs two. The system allocator gives 16-byte alignment, so X's rows
//! may start 16 bytes into a line; the K-head epoch is faster with X on a line boundary
//! (docs/performance.md, "Every load on one cache line").
//!
//! [`CacheLines`] is the system allocator with every block of [`LARGE`] bytes or more (of
//! alignment up to 16) aligned to 64 bytes; other blocks are left as they are. The `rosenblatt` binary and the Python
//! module install it; a program using the library may too:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: rosenblatt::CacheLines = rosenblatt::CacheLines;
//! ```
//!
//! Rows the library does not allocate (NumPy arrays, borrowed as they are) keep their own
//! alignment; memory-mapped .npy files start their data on a 64-byte boundary by format.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of this many bytes or more (asked with an alignment of at most 16, as every buffer
/// of numbers is) start on a 64-byte boundary.
pub const LARGE: usize = 4096;

/// The system allocator, with blocks of `LARGE` (4 KiB) bytes or more on 64-byte boundaries (blocks
/// asked with a larger alignment than 16 go to the system as they are).
///
/// A large block is a system block 64 bytes longer, with the caller's part starting at the
/// first 64-byte boundary past its first 8 bytes; the offset is kept in the 8 bytes before
/// it. So the system's own fast paths still apply: `calloc`'s lazily zeroed pages for zeroed
/// blocks, and `realloc` growing or moving a block without holding two copies (glibc remaps
/// large blocks in place), the bytes shifted only when the block's offset from a line
/// changed. (Asking the system for 64-byte alignment instead loses both: std then zeroes
/// with a write of every byte, and reallocates by allocating, copying and freeing.)
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheLines;

/// Whether a block of layout `l` is a large one (a function of the layout alone, so that
/// `dealloc` and `realloc` treat a block as `alloc` made it).
fn large(l: Layout) -> bool {
    l.size() >= LARGE && l.align() <= 16
}

/// The system layout of a large block of `size` bytes.
fn outer(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(64)?, 16).ok()
}

/// The caller's pointer in a system block starting at `raw` (16-byte aligned), with its
/// offset written in the 8 bytes before it.
///
/// # Safety
/// `raw` is a live system block of at least 64 bytes, 16-byte aligned.
unsafe fn place(raw: *mut u8) -> *mut u8 {
    // raw is 16-aligned, so the offset is 16, 32, 48 or 64: at least 8 bytes for the note.
    let off = 64 - (raw as usize % 64);
    // SAFETY: off <= 64 lies within the block, and the note's 8 bytes (16-aligned minus 8,
    // so 8-aligned) lie between raw and the caller's part.
    unsafe {
        let p = raw.add(off);
        p.cast::<usize>().sub(1).write(off);
        p
    }
}

/// The offset [`place`] noted before `p`.
///
/// # Safety
/// `p` came from [`place`].
unsafe fn offset(p: *mut u8) -> usize {
    // SAFETY: place wrote it there.
    unsafe { p.cast::<usize>().sub(1).read() }
}

// SAFETY: a small block is the system's, with the caller's layout. A large block is a system
// block of `outer(size)` with the caller's `size` bytes inside it on a 64-byte boundary
// (which satisfies any alignment up to 16, all that `large` accepts); `offset` recovers the
// system block, which goes back with the same `outer(size)` the caller's layout gives.
unsafe impl GlobalAlloc for CacheLines {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !large(l) {
            // SAFETY: the caller's contract carries over.
            return unsafe { System.alloc(l) };
        }
        let Some(o) = outer(l.size()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: o has a non-zero size; a non-null block gets its offset noted.
        unsafe {
            let raw = System.alloc(o);
            if raw.is_null() {
                return raw;
            }
            place(raw)
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !large(l) {
            // SAFETY: as in `alloc`.
            return unsafe { System.alloc_zeroed(l) };
        }
        let Some(o) = outer(l.size()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: as in `alloc`; the note lies before the caller's part, which stays zero.
        unsafe {
            let raw = System.alloc_zeroed(o);
            if raw.is_null() {
                return raw;
            }
            place(raw)
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if !large(l) {
            // SAFETY: p came from `System` with this layout.
            return unsafe { System.dealloc(p, l) };
        }
        // SAFETY: p came from `place` in a system block of outer(l.size()), which exists
        // (alloc succeeded with it).
        unsafe {
            let raw = p.sub(offset(p));
            System.dealloc(raw, outer(l.size()).unwrap_unchecked());
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let Ok(new) = Layout::from_size_align(new_size, l.align()) else {
            return std::ptr::null_mut();
        };
        match (large(l), large(new)) {
            // SAFETY: p came from `System` with l; new_size is non-zero (the caller's
            // contract) and the alignment is unchanged.
            (false, false) => unsafe { System.realloc(p, l, new_size) },
            (true, true) => {
                let Some(o) = outer(new_size) else {
                    return std::ptr::null_mut();
                };
                // SAFETY: the system block of p (as in dealloc) is resized to o; on failure
                // it is untouched. The caller's bytes sit at the old offset in the new block
                // (min(old, new) of them fit: offset <= 64); if the block's offset from a
                // line changed, they move (ptr::copy allows the overlap), then the note.
                unsafe {
                    let old_off = offset(p);
                    let raw = System.realloc(
                        p.sub(old_off),
                        outer(l.size()).unwrap_unchecked(),
                        o.size(),
                    );
                    if raw.is_null() {
                        return raw;
                    }
                    let off = 64 - (raw as usize % 64);
                    if off != old_off {
                        std::ptr::copy(raw.add(old_off), raw.add(off), l.size().min(new_size));
                    }
                    place(raw)
                }
            }
            // Across LARGE: a new block of the new kind, then the bytes.
            _ => {
                // SAFETY: new has a non-zero size (the caller's contract); both blocks are
                // live and distinct, and hold the bytes copied; p goes back as it came.
                unsafe {
                    let q = self.alloc(new);
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                        self.dealloc(p, l);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large blocks start on a line, small ones as the system gives them, and growing or
    /// shrinking across the threshold keeps the bytes and the alignment rule.
    #[test]
    fn large_blocks_start_on_a_cache_line_and_keep_their_bytes() {
        let a = CacheLines;
        for size in [LARGE, LARGE + 4, 1 << 20, 3 << 20] {
            let l = Layout::from_size_align(size, 4).unwrap();
            // SAFETY: non-zero size; freed with the same layout.
            unsafe {
                let p = a.alloc(l);
                assert!(!p.is_null());
                assert_eq!(p as usize % 64, 0, "{size} bytes");
                a.dealloc(p, l);
                let z = a.alloc_zeroed(l);
                assert_eq!(z as usize % 64, 0);
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                a.dealloc(z, l);
            }
        }
        // SAFETY: each pointer is used with the layout it was last given.
        unsafe {
            let l = Layout::from_size_align(100, 4).unwrap();
            let p = a.alloc(l);
            for i in 0..100 {
                *p.add(i) = i as u8;
            }
            // Small -> large: moved to a line boundary, bytes kept.
            let q = a.realloc(p, l, 2 * LARGE);
            assert_eq!(q as usize % 64, 0);
            assert!((0..100).all(|i| *q.add(i) == i as u8));
            let l2 = Layout::from_size_align(2 * LARGE, 4).unwrap();
            // Large -> larger: still on a line.
            let r = a.realloc(q, l2, 8 * LARGE);
            assert_eq!(r as usize % 64, 0);
            assert!((0..100).all(|i| *r.add(i) == i as u8));
            // Large -> small: bytes kept.
            let l3 = Layout::from_size_align(8 * LARGE, 4).unwrap();
            let s = a.realloc(r, l3, 50);
            assert!((0..50).all(|i| *s.add(i) == i as u8));
            a.dealloc(s, Layout::from_size_align(50, 4).unwrap());
        }
    }
}
