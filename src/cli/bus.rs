//! SIGBUS from a memory-mapped input truncated or replaced while in use: the file named with
//! both sizes (`rosenblatt_core::fault`), the temporaries removed, exit 1. A SIGBUS anywhere else
//! goes to the handler that was there before (Rust's own, or the default action).

use std::sync::OnceLock;

/// Whether a thread is already reporting a mapped input's fault.
static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The SIGBUS action before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs the handler (once, while the process is one thread).
pub(crate) fn install() {
    // SAFETY: a sigaction struct zeroed then filled as sigaction(2) asks; the handler only
    // calls async-signal-safe code (see `on_bus`).
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_bus as *const () as usize;
        // On the faulting thread's own stack: Rust's alternate signal stacks (for stack
        // overflows) are a few KiB, less than the message and a path take.
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &act, &mut old) == 0 {
            let _ = PREVIOUS.set(old);
        }
    }
}

extern "C" fn on_bus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let mut buf = [0u8; 1536];
    if let Some(n) = rosenblatt_core::fault::mapped_fault(addr, &mut buf) {
        if REPORTED.swap(true, std::sync::atomic::Ordering::AcqRel) {
            // Another thread faulted on the same file first and is ending the process.
            loop {
                // SAFETY: pause is async-signal-safe.
                unsafe { libc::pause() };
            }
        }
        rosenblatt_core::output::remove_temps_in_signal_handler();
        // SAFETY: write and _exit are async-signal-safe.
        unsafe {
            libc::write(2, buf.as_ptr().cast(), n);
            libc::_exit(1);
        }
    }
    // Not a mapped input: the previous handler, else the default action (returning re-runs
    // the faulting access, which then ends the process as before).
    // SAFETY: restoring or calling the action the process had, as it was installed.
    unsafe {
        match PREVIOUS.get() {
            Some(old)
                if old.sa_flags & libc::SA_SIGINFO != 0
                    && old.sa_sigaction != libc::SIG_DFL
                    && old.sa_sigaction != libc::SIG_IGN =>
            {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(old.sa_sigaction);
                f(sig, info, ctx);
            }
            _ => {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}
