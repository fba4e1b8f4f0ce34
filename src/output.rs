//! Writing output files safely. The rules, the same for every file rosenblatt writes:
//! - everything is written to a temporary file beside the target and renamed into place only
//!   when complete, so a failure never leaves a partial file;
//! - a symbolic link is written through (the file it points to is replaced, the link stays);
//! - an existing file keeps its permissions; a new one is readable by all (0644);
//! - a target that exists and is not a regular file (a device, a pipe, a folder) is refused,
//!   and so is a target that is also one of the inputs, or whose folder does not exist
//!   ([`check_target`], called before any work);
//! - temporary files are removed on SIGINT and SIGTERM ([`remove_temps`], called by the CLI's
//!   signal handler).

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
    // The list is locked while the file is made and listed, so a signal handler clearing the
    // list (remove_temps) waits for the listing instead of missing a file made just before.
    let mut list = TEMPS.lock();
    let file = tempfile::Builder::new()
        .prefix(".rosenblatt-")
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
