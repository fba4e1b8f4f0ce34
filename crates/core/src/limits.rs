//! How much memory one allocation sized by input may take. Every size taken from input (rows,
//! features, image pixels, archive members, streamed bytes) is checked here before anything is
//! allocated, so a hostile or mistaken input is an error naming the sizes (exit 2), never an
//! allocation abort. The budget is the memory available to the process: the system's
//! MemAvailable and the address-space limit (`ulimit -v`), whichever is smaller, or what
//! [`set_budget`] set.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

static BUDGET: AtomicU64 = AtomicU64::new(0);

/// Overrides the budget (0 restores the default). Tests use it to stay small.
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// The most bytes one allocation sized by input may take.
pub fn budget() -> u64 {
    match BUDGET.load(Ordering::Relaxed) {
        0 => system_budget(),
        b => b,
    }
}

/// MemAvailable and half the address-space limit (the rest is for code, threads and the
/// allocator), whichever is smaller; 8 GiB where neither can be read.
fn system_budget() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    });
    let as_limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max address space"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
                .map(|b| b / 2)
        });
    match (meminfo, as_limit) {
        (Some(m), Some(a)) => m.min(a),
        (Some(m), None) => m,
        (None, Some(a)) => a,
        (None, None) => 8 << 30,
    }
}

/// Under an address-space limit (`ulimit -v`), caps the C allocator's per-thread arenas so
/// that their reservations leave the limit to the data: glibc reserves 64 MiB of address space
/// for each arena, one per thread up to eight per core, so with many threads the reservations
/// alone can use up the limit, and then even a small block fails (an abort;
/// docs/performance.md, "Figures behind the code's choices"). The arenas then take at most an
/// eighth of the limit (at least one). Without a limit, or on other C libraries, nothing
/// changes. Call it first, while the process is one thread; the `rosenblatt` binary does.
pub fn fit_allocator_to_address_limit() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: getrlimit writes the struct it is given; mallopt only sets a tunable.
        unsafe {
            let mut r = std::mem::zeroed::<libc::rlimit>();
            if libc::getrlimit(libc::RLIMIT_AS, &mut r) == 0 && r.rlim_cur != libc::RLIM_INFINITY {
                libc::mallopt(libc::M_ARENA_MAX, arena_cap(r.rlim_cur as u64));
            }
        }
    }
}

/// Arenas (64 MiB of address space each) that fit an eighth of an address-space limit of
/// `limit` bytes, at least one.
pub fn arena_cap(limit: u64) -> i32 {
    (limit / 8 / (64 << 20)).clamp(1, 1024) as i32
}

/// Checks that `count` items of `item_bytes` each fit the budget; `what` names them for the
/// message ("2 rows x 268435456 features of f32").
pub fn check(what: impl FnOnce() -> String, count: u128, item_bytes: u128) -> Result<()> {
    let bytes = count.saturating_mul(item_bytes);
    let budget = budget();
    if bytes > budget as u128 {
        return Err(Error::Memory {
            what: what(),
            bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
            available: budget,
        });
    }
    Ok(())
}

/// A zero-filled vector of `len` items after [`check`].
pub fn zeros<T: Clone + Default>(what: impl FnOnce() -> String, len: usize) -> Result<Vec<T>> {
    check(what, len as u128, size_of::<T>() as u128)?;
    Ok(vec![T::default(); len])
}

/// Bytes as "1.5 GiB" / "12.0 MiB" (defined with the errors that print it).
pub use crate::error::human;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_take_an_eighth_of_the_address_limit_and_at_least_one() {
        assert_eq!(arena_cap(1 << 30), 2);
        assert_eq!(arena_cap(16 << 30), 32);
        assert_eq!(arena_cap(100 << 20), 1);
        assert_eq!(arena_cap(u64::MAX), 1024);
    }

    #[test]
    fn the_system_budget_is_positive_and_checks_refuse_past_it() {
        assert!(system_budget() > 0);
        let e = check(|| "everything".into(), u128::MAX, 4).unwrap_err();
        assert!(e.to_string().contains("everything"), "{e}");
        assert!(check(|| "a little".into(), 10, 4).is_ok());
    }
}
