//! Writing output files safely. The rules, the same for every file rosenblatt writes:
//! - everything is written to a temporary file beside the target and renamed into place only
//!   when complete, so a failure never leaves a partial file;
//! - a symbolic link is written through (the file it points to is replaced, the link stays);
//! - an existing file keeps its permissions; a new one is readable by all (0644);
//! - a target that exists and is not a regular file (a device, a pipe, a folder) is refused,
//!   and so is a target that is also one of the inputs, or whose folder does not exist
//!   ([`check_target`], called before any work);
//! - temporary files are removed on SIGINT and SIGTERM ([`remove_temps`], called by the CLI's
//!   signal handler);
//! - a temporary is named `.rosenblatt-MACHINE-PID-XXXXXX...` (MACHINE: a hash of the host
//!   name, the boot and the process-id namespace, so that containers and machines that share
//!   a folder, or a host name, are told apart; PID: the writer's process id), and one left by
//!   a process that is gone (SIGKILL, power loss) is removed by the next write into the same
//!   folder from the same machine ([`remove_stale_temps`]); never one of a live process, nor
//!   one written from another machine or process namespace, nor one named any other way. The
//!   Python package names and removes its temporaries the same way.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::NamedTempFile;

use crate::error::{Error, Result};

/// Temporary files not yet renamed into place, for cleanup on a signal.
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The file `out` names: the target of a symbolic link, else `out` itself.
fn resolve(out: &Path) -> PathBuf {
    std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf())
}

/// Checks that `out` can be written under the rules above, before any work is done.
pub fn check_target(out: &Path, inputs: &[&Path]) -> Result<()> {
    let bad = |msg: String| {
        Err(Error::Output {
            path: out.to_path_buf(),
            msg,
        })
    };
    match std::fs::metadata(out) {
        Ok(m) if !m.is_file() => {
            let what = if m.is_dir() {
                "a folder"
            } else {
                "not a regular file (a device or a pipe)"
            };
            return bad(format!("the output is {what}; give the path of a file"));
        }
        Ok(_) => {
            let target = resolve(out);
            if let Some(i) = inputs.iter().find(|i| resolve(i) == target) {
                return bad(format!(
                    "the output is also the input {}; write it elsewhere",
                    i.display()
                ));
            }
        }
        Err(_) => {
            let dir = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                return bad(format!("the folder {} does not exist", dir.display()));
            }
        }
    }
    Ok(())
}

/// Checks that no two of `outputs` are the same file.
pub fn check_distinct(outputs: &[&Path]) -> Result<()> {
    for (i, a) in outputs.iter().enumerate() {
        if let Some(b) = outputs[..i].iter().find(|b| resolve(b) == resolve(a)) {
            return Err(Error::Output {
                path: a.to_path_buf(),
                msg: format!("is given twice (also as {})", b.display()),
            });
        }
    }
    Ok(())
}

/// A temporary file beside an output's target, renamed onto it by [`Temp::persist`] and
/// removed if dropped before.
pub struct Temp {
    file: Option<NamedTempFile>,
    target: PathBuf,
}

/// A temporary file beside the file `out` names (same folder, so the final rename is atomic),
/// with the given suffix (plotters picks the image format from it).
pub fn temp_beside(out: &Path, suffix: &str) -> std::io::Result<Temp> {
    let target = resolve(out);
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    remove_stale_temps(&dir);
    // The list is locked while the file is made and listed, so a signal handler clearing the
    // list (remove_temps) waits for the listing instead of missing a file made just before.
    let mut list = TEMPS.lock();
    let file = tempfile::Builder::new()
        .prefix(&temp_prefix())
        .suffix(suffix)
        .tempfile_in(dir)?;
    if let Ok(t) = &mut list {
        t.push(file.path().to_path_buf());
    }
    drop(list);
    Ok(Temp {
        file: Some(file),
        target,
    })
}

impl Temp {
    /// The temporary file's path.
    pub fn path(&self) -> &Path {
        self.file.as_ref().map_or(Path::new(""), |f| f.path())
    }

    /// The open temporary file.
    pub fn as_file_mut(&mut self) -> &mut std::fs::File {
        self.file
            .as_mut()
            .expect("a Temp holds its file until persisted")
            .as_file_mut()
    }

    /// Renames the finished file onto its target, with the target's permissions when it
    /// exists (0644 for a new file; temporaries are created private, 0600).
    pub fn persist(mut self) -> std::io::Result<()> {
        let file = self.file.take().expect("a Temp is persisted once");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let perms = std::fs::metadata(&self.target)
                .map(|m| m.permissions())
                .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o644));
            // By path: a writer may have renamed a new file onto the temporary's path.
            std::fs::set_permissions(file.path(), perms)?;
        }
        // Renamed first, then unlisted: a signal in between finds the name gone (harmless)
        // rather than a temporary no longer listed.
        let temp_path = file.path().to_path_buf();
        let done = file.persist(&self.target).map_err(|e| e.error);
        unregister(&temp_path);
        done?;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            unregister(f.path());
        }
    }
}

fn unregister(p: &Path) {
    if let Ok(mut t) = TEMPS.lock() {
        t.retain(|q| q != p);
    }
}

/// Removes every temporary file not yet renamed into place (for a signal handler: the
/// process ends without running destructors).
pub fn remove_temps() {
    if let Ok(t) = TEMPS.lock() {
        for p in t.iter() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// [`remove_temps`] for a handler of a synchronous signal (SIGBUS): no allocation and no
/// waiting; if another thread holds the list at that moment the temporaries stay, and the
/// next run writing beside them removes them (their process is gone).
#[cfg(unix)]
pub fn remove_temps_in_signal_handler() {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(t) = TEMPS.try_lock() {
        for p in t.iter() {
            let b = p.as_os_str().as_bytes();
            let mut c = [0u8; 4096];
            if b.len() < c.len() && !b.contains(&0) {
                c[..b.len()].copy_from_slice(b);
                // SAFETY: a NUL-terminated path on the stack; unlink is async-signal-safe.
                unsafe { libc::unlink(c.as_ptr().cast()) };
            }
        }
    }
}

/// What every temporary's name starts with.
const TEMP_PREFIX: &str = ".rosenblatt-";

/// This process's temporaries' prefix: `.rosenblatt-MACHINE-PID-`.
pub fn temp_prefix() -> String {
    format!("{TEMP_PREFIX}{}-{}-", machine_tag(), std::process::id())
}

/// Who can ask whether a process id is alive, as temporaries carry it: 16 hex digits of a
/// hash (FNV-1a) of the host name, the boot (Linux's boot_id) and the process-id namespace
/// (`/proc/self/ns/pid`). Two containers of one host with their own process ids, or two
/// machines with the same name, differ.
pub fn machine_tag() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut add = |bytes: &[u8]| {
        for &b in bytes.iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    add(raw_host_name().unwrap_or_default().as_bytes());
    add(std::fs::read("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .as_slice());
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap_or_default();
    add(ns.to_string_lossy().as_bytes());
    format!("{h:016x}")
}

#[cfg(unix)]
fn raw_host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(not(unix))]
fn raw_host_name() -> Option<String> {
    std::env::var("COMPUTERNAME").ok()
}

/// The writer (machine tag, process id) of a temporary named by [`temp_prefix`]; `None` for
/// any other name.
pub fn temp_writer(name: &str) -> Option<(&str, u32)> {
    let rest = name.strip_prefix(TEMP_PREFIX)?;
    let mut parts = rest.splitn(3, '-');
    let host = parts.next().filter(|h| !h.is_empty())?;
    let pid = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((host, pid))
}

/// Whether process `pid` of this host may be running: true unless the system says there is
/// no such process (this process always; where that cannot be asked, always).
pub fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else {
            return true;
        };
        if p <= 0 {
            return true;
        }
        // SAFETY: signal 0 only asks whether the process exists.
        let r = unsafe { libc::kill(p, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Removes from `dir` the temporaries this machine's processes (same `machine_tag`) left and
/// that are no longer running (regular files only; errors ignored: another run may remove
/// them first). Returns how many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let host = machine_tag();
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some((h, pid)) = temp_writer(name) else {
            continue;
        };
        let regular = e.file_type().is_ok_and(|t| t.is_file());
        if h == host && regular && !process_alive(pid) && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporaries_name_their_writer() {
        let prefix = temp_prefix();
        let name = format!("{prefix}AbC123.tmp");
        assert_eq!(
            temp_writer(&name),
            Some((machine_tag().as_str(), std::process::id()))
        );
        assert_eq!(temp_writer(".rosenblatt-AbC123.tmp"), None);
        assert_eq!(temp_writer(".rosenblatt-h-x-AbC.tmp"), None);
        assert_eq!(temp_writer("model.json"), None);
        assert_eq!(machine_tag().len(), 16);
        assert_eq!(machine_tag(), machine_tag());
        assert!(process_alive(std::process::id()));
    }
}
