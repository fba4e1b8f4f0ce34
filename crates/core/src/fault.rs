//! Faults from outside the process's input bytes, made errors: a memory-mapped input that
//! is truncated or replaced while in use. Reading a page of a map past its file's new end
//! raises SIGBUS, which by default ends the process with "Bus error" and no word of which
//! file (a second job rewriting the data, a network share going away, a writer's full disk).
//!
//! Every map of an input is a [`WatchedMap`], which lists where it lies in memory, its file
//! (kept open) and its size when mapped. [`mapped_fault`] is async-signal-safe: given the
//! address of a SIGBUS it says whether it lies in a listed map and writes the message
//! naming the file and both sizes. The library installs no handler and never exits; the
//! command-line tool's handler prints the message, removes its temporary files and exits 1.

use std::ffi::CString;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Maps listed at once; more are still mapped, only not named by a fault.
const SLOTS: usize = 64;

struct Slot {
    /// The map's first byte and one past its last (0, 0: free; `start` is claimed first).
    start: AtomicUsize,
    end: AtomicUsize,
    fd: AtomicI32,
    size: AtomicU64,
    path: AtomicPtr<libc::c_char>,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    fd: AtomicI32::new(-1),
    size: AtomicU64::new(0),
    path: AtomicPtr::new(std::ptr::null_mut()),
};

static MAPS: [Slot; SLOTS] = [FREE; SLOTS];

/// A read-only map of an input file, listed for [`mapped_fault`] while it lives.
pub struct WatchedMap {
    map: memmap2::Mmap,
    _file: File,
    slot: Option<usize>,
}

impl WatchedMap {
    /// Lists `map` of `file` (named `path` in messages), `size` bytes when mapped.
    pub fn new(map: memmap2::Mmap, file: File, path: &Path) -> Self {
        let start = map.as_ptr() as usize;
        let end = start + map.len();
        let mut slot = None;
        if !map.is_empty() {
            use std::os::unix::ffi::OsStrExt;
            use std::os::unix::io::AsRawFd;
            let name = CString::new(path.as_os_str().as_bytes())
                .unwrap_or_else(|_| CString::from(c"the memory-mapped input"));
            for (i, s) in MAPS.iter().enumerate() {
                if s.start
                    .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    s.fd.store(file.as_raw_fd(), Ordering::Relaxed);
                    s.size.store(map.len() as u64, Ordering::Relaxed);
                    s.path.store(name.into_raw(), Ordering::Relaxed);
                    // Last: a fault handler matches a slot only once its end is set.
                    s.end.store(end, Ordering::Release);
                    slot = Some(i);
                    break;
                }
            }
        }
        WatchedMap {
            map,
            _file: file,
            slot,
        }
    }
}

impl AsRef<[u8]> for WatchedMap {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for WatchedMap {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let s = &MAPS[i];
            s.end.store(0, Ordering::Release);
            let p = s.path.swap(std::ptr::null_mut(), Ordering::AcqRel);
            s.fd.store(-1, Ordering::Relaxed);
            s.start.store(0, Ordering::Release);
            if !p.is_null() {
                // SAFETY: made by CString::into_raw in `new`, and swapped out once.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}

/// Whether `addr` (a SIGBUS's fault address) lies in a listed map: then writes into `buf`
/// "error: PATH changed while in use: N bytes, was M (...)" with a newline and returns its
/// length. Async-signal-safe: atomics, `fstat` and writes into `buf`, no allocation or lock.
pub fn mapped_fault(addr: usize, buf: &mut [u8]) -> Option<usize> {
    for s in &MAPS {
        let end = s.end.load(Ordering::Acquire);
        let start = s.start.load(Ordering::Acquire);
        if end == 0 || addr < start || addr >= end {
            continue;
        }
        let path = s.path.load(Ordering::Acquire);
        let was = s.size.load(Ordering::Relaxed);
        // SAFETY: fstat writes only the struct it is given; a closed fd fails harmlessly.
        let now = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            match libc::fstat(s.fd.load(Ordering::Relaxed), &mut st) {
                0 => Some(st.st_size as u64),
                _ => None,
            }
        };
        let mut w = Writer { buf, at: 0 };
        w.put(b"error: ");
        if path.is_null() {
            w.put(b"a memory-mapped input");
        } else {
            // SAFETY: a NUL-terminated string this slot owns until its map drops, which
            // cannot happen while the map's pages are being read.
            w.put(unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes());
        }
        w.put(b" changed while in use: ");
        match now {
            Some(n) => {
                w.num(n);
                w.put(b" bytes, was ");
            }
            None => w.put(b"gone, was "),
        }
        w.num(was);
        w.put(
            b" (a memory-mapped input must stay as it is until the run ends; copy it, or \
              convert text to a new file)\n",
        );
        return Some(w.at);
    }
    None
}

/// Bytes into a fixed buffer, cut at its end.
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, b: &[u8]) {
        let n = b.len().min(self.buf.len() - self.at);
        self.buf[self.at..self.at + n].copy_from_slice(&b[..n]);
        self.at += n;
    }

    fn num(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&digits[i..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_in_a_listed_map_names_the_file_and_both_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let f = File::open(&p).unwrap();
        // SAFETY: a private read-only map of a file this test owns.
        let map = unsafe { memmap2::Mmap::map(&f).unwrap() };
        let w = WatchedMap::new(map, f, &p);
        let at = w.as_ref().as_ptr() as usize + 100;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(10)
            .unwrap();
        let mut buf = [0u8; 512];
        let n = mapped_fault(at, &mut buf).expect("listed");
        let msg = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(
            msg.contains("x.npy changed while in use: 10 bytes, was 8192"),
            "{msg}"
        );
        assert!(mapped_fault(1, &mut buf).is_none());
        drop(w);
        assert!(mapped_fault(at, &mut buf).is_none());
    }
}
