//! Outputs are written to a temporary file beside the destination and renamed into place
//! when complete, so a failed run never leaves a partial file.

use crate::error::{Result, TraceError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct AtomicOutput {
    dest: PathBuf,
    temp: tempfile::NamedTempFile,
}

impl AtomicOutput {
    pub fn create(dest: &Path) -> Result<Self> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if dest.is_dir() {
            return Err(TraceError::invalid(dest, "is a directory"));
        }
        if !dir.is_dir() {
            return Err(TraceError::invalid(dest, format!("cannot write: directory {} does not exist", dir.display())));
        }
        let name = dest.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        // Mode 0666 before the umask, like any file the user creates (tempfile's default,
        // 0600, would survive the rename).
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(|e| TraceError::invalid(dest, format!("cannot write: {e}")))?;
        Ok(AtomicOutput { dest: dest.to_path_buf(), temp })
    }

    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// A buffered writer on the temporary file.
    pub fn writer(&self) -> Result<BufWriter<File>> {
        let f = self.temp.as_file().try_clone().map_err(|e| TraceError::io(&self.dest, e))?;
        Ok(BufWriter::with_capacity(1 << 20, f))
    }

    /// Moves the finished file into place.
    pub fn commit(self) -> Result<()> {
        self.temp.as_file().sync_data().map_err(|e| TraceError::io(&self.dest, e))?;
        let dest = self.dest.clone();
        self.temp.persist(&dest).map_err(|e| TraceError::io(&dest, e.error))?;
        Ok(())
    }
}

/// Flushes a buffered writer, naming the file on failure.
pub fn flush(w: &mut impl Write, path: &Path) -> Result<()> {
    w.flush().map_err(|e| TraceError::io(path, e))
}
