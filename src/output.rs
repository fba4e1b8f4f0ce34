//! Writing output files safely: everything is written to a temporary file in the target's
//! folder and renamed into place only when complete, so a failure never leaves a partial file.

use std::path::Path;

use tempfile::NamedTempFile;

/// A temporary file next to `out` (same folder, so the final rename is atomic), with the
/// given suffix (plotters picks the image format from it).
pub fn temp_beside(out: &Path, suffix: &str) -> std::io::Result<NamedTempFile> {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(".rosenblatt-")
        .suffix(suffix)
        .tempfile_in(dir)
}

/// Renames the finished temporary onto `out`, readable by others like any file a tool writes
/// (temporaries are created private, 0600).
pub fn persist(tmp: NamedTempFile, out: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.persist(out).map_err(|e| e.error)?;
    Ok(())
}
