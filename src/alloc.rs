//! A global allocator that puts large blocks on cache-line boundaries.
//!
//! The K-head epoch's 4 x 2 tile loads each row in 8-wide halves (see
//! `backend::simd::dot_tile_avx2`); when a row starts mid-line, every other load straddles
//! two cache lines and costs two. The system allocator gives 16-byte alignment, so X's rows
//! started 16 bytes into a line: at 60,000 x 784 (rows of 49 whole lines) K = 64 measured
//! 60-61 ms per epoch against 50.5-52 with X on a line boundary (four alternated runs each).
//!
//! [`CacheLines`] is the system allocator with every block of [`LARGE`] bytes or more aligned
//! to 64 bytes; smaller blocks are left as they are. The `rosenblatt` binary and the Python
//! module install it; a program using the library may too:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: rosenblatt::alloc::CacheLines = rosenblatt::alloc::CacheLines;
//! ```
//!
//! Rows the library does not allocate (NumPy arrays, borrowed as they are) keep their own
//! alignment; memory-mapped .npy files start their data on a 64-byte boundary by format.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of this many bytes or more start on a 64-byte boundary.
pub const LARGE: usize = 4096;

/// The system allocator, with blocks of [`LARGE`] bytes or more on 64-byte boundaries.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheLines;

/// The layout actually asked of the system for `l`: a function of the size and alignment
/// alone, so that `dealloc` and `realloc` give back what `alloc` took.
fn adjusted(l: Layout) -> Layout {
    if l.size() >= LARGE && l.align() < 64 {
        // 64 is a power of two and the size is unchanged, so this cannot fail; fall back to
        // the layout as given rather than panic inside the allocator.
        l.align_to(64).unwrap_or(l)
    } else {
        l
    }
}

// SAFETY: every block comes from `System` with the adjusted layout, and goes back to it
// with the same adjusted layout (a pure function of the caller's layout, which the
// `GlobalAlloc` contract makes the caller repeat). The adjusted layout has the caller's size
// and at least its alignment, so the block satisfies the caller's layout.
unsafe impl GlobalAlloc for CacheLines {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (non-zero size) carries over; see above.
        unsafe { System.alloc(adjusted(l)) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(adjusted(l)) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` with `adjusted(l)`.
        unsafe { System.dealloc(p, adjusted(l)) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let Ok(new) = Layout::from_size_align(new_size, l.align()) else {
            return std::ptr::null_mut();
        };
        let (old_adj, new_adj) = (adjusted(l), adjusted(new));
        if old_adj.align() == new_adj.align() {
            // SAFETY: `p` came from `alloc` with `old_adj`; the alignment is kept.
            return unsafe { System.realloc(p, old_adj, new_size) };
        }
        // The block crosses LARGE: a new block with the new alignment, then the bytes.
        // SAFETY: `new_adj` has a non-zero size (new_size >= LARGE or the old one was).
        let q = unsafe { System.alloc(new_adj) };
        if !q.is_null() {
            // SAFETY: both blocks are live, distinct, and hold at least the bytes copied.
            unsafe {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                System.dealloc(p, old_adj);
            }
        }
        q
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
