//! The `rosenblatt` command: parses arguments, calls the library, prints, and maps errors
//! to exit codes (0 ok, 1 runtime failure, 2 usage or input error).

mod cli;

fn main() {
    // Mesa's Vulkan loader prints "error: XDG_RUNTIME_DIR is invalid or not set" when the
    // variable is missing (containers, CI). It needs no real runtime dir for compute, so give
    // it the temp dir rather than alarm users. Done first, while the process is one thread.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    rosenblatt_core::limits::fit_allocator_to_address_limit();
    std::process::exit(cli::run());
}

/// Large blocks (X, the weights) on cache-line boundaries: see `rosenblatt_core::alloc`.
#[global_allocator]
static ALLOC: rosenblatt_core::alloc::CacheLines = rosenblatt_core::alloc::CacheLines;
