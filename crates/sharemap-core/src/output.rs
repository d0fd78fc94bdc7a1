//! Outputs are written to a temporary file beside the destination and renamed into place
//! when complete, so a failed run never leaves a partial file. Every temporary path is also
//! in a process-wide list, so that a program stopped by a signal can remove them
//! ([`remove_temporaries`]) before it exits.
//!
//! A destination that exists and is not a regular file (a FIFO, a terminal, `/dev/null`) is
//! written in place: replacing it would turn a device node into a file. A destination that is
//! a symbolic link is written through the link, and a replaced file keeps its mode.
//!
//! Another user must not choose where sharemap writes: a symbolic link (at the destination
//! or on the way from it) or a FIFO owned by someone other than this user or root is
//! refused, wherever it lies. (The kernel's `fs.protected_symlinks` covers only sticky
//! directories, and a link resolved here and then renamed over would bypass it anyway.)

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Why an output could not be written, naming it.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
}

impl OutputError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        OutputError::Io { path: path.to_path_buf(), source }
    }
    pub fn invalid(path: &Path, what: impl Into<String>) -> Self {
        OutputError::Invalid { path: path.to_path_buf(), what: what.into() }
    }
}

type Result<T> = std::result::Result<T, OutputError>;

/// Temporary files and directories not yet renamed into place or removed.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register(path: &Path) {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner()).push(path.to_path_buf());
}

fn unregister(path: &Path) {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| p != path);
}

/// Removes every temporary file and directory still in progress. For a signal handler's
/// thread, just before the process exits.
pub fn remove_temporaries() {
    let paths = std::mem::take(&mut *TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner()));
    for p in paths {
        if p.is_dir() {
            let _ = std::fs::remove_dir_all(&p);
        } else {
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// A temporary file or directory of someone else's making (a `tempfile` value, say) listed
/// for removal on a signal while this value lives.
pub struct Listed(PathBuf);

impl Listed {
    pub fn new(path: &Path) -> Listed {
        register(path);
        Listed(path.to_path_buf())
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        unregister(&self.0);
    }
}

/// For a child about to exec (between fork and exec): it is killed when the thread that
/// started it ends, so that nothing sharemap starts outlives it (`parent`: the starter's
/// pid, taken before the fork, in case it ended already).
pub fn die_with_parent(parent: i32) -> std::io::Result<()> {
    // SAFETY: prctl and getppid take and return plain integers.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            libc::raise(libc::SIGKILL);
        }
    }
    Ok(())
}

/// A temporary's name begins with the destination's, cut so that the whole name (a dot,
/// the name, a dot, six random characters, `.partial`) fits the 255 bytes a file name may
/// have: a destination named with 240-255 bytes stays writable.
fn temp_prefix(name: &str) -> String {
    const ROOM: usize = 255 - 1 - 1 - 6 - ".partial".len();
    let mut end = name.len().min(ROOM);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &name[..end])
}

/// The directory holding `dest` ("." for a bare file name).
fn parent_of(dest: &Path) -> &Path {
    match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

enum Target {
    /// A temporary file beside the destination, renamed over it on commit.
    Temporary { temp: tempfile::TempPath, file: File, replace: PathBuf },
    /// A special file (FIFO, device), written directly.
    InPlace(File),
    /// Committed.
    Done,
}

pub struct AtomicOutput {
    dest: PathBuf,
    target: Target,
}

/// The user owning `m` when it is neither this process's user nor root: someone else's.
pub fn foreign_owner(m: &std::fs::Metadata) -> Option<u32> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    (m.uid() != me && m.uid() != 0).then_some(m.uid())
}

/// Where a destination leads: itself, or the file at the end of its chain of symbolic links
/// (a dangling chain: its last link, which the rename then replaces). A link of another
/// user's on the way is refused.
fn follow_links(dest: &Path) -> Result<PathBuf> {
    let mut at = dest.to_path_buf();
    for _ in 0..40 {
        let Ok(m) = std::fs::symlink_metadata(&at) else { return Ok(at) };
        if !m.file_type().is_symlink() {
            return Ok(at);
        }
        if let Some(uid) = foreign_owner(&m) {
            return Err(OutputError::invalid(
                dest,
                format!(
                    "{} is a symbolic link owned by another user (uid {uid}): not followed (remove it, or name the file it points to)",
                    at.display()
                ),
            ));
        }
        let target = std::fs::read_link(&at).map_err(|e| OutputError::io(dest, e))?;
        let next = parent_of(&at).join(target);
        if std::fs::symlink_metadata(&next).is_err() {
            // Dangling: the rename replaces the last link.
            return Ok(at);
        }
        at = next;
    }
    Err(OutputError::invalid(dest, "too many levels of symbolic links"))
}

impl AtomicOutput {
    pub fn create(dest: &Path) -> Result<Self> {
        let cannot = |e: std::io::Error| OutputError::invalid(dest, format!("cannot write: {e}"));
        // Through a symbolic link to the file it names, so the link survives.
        let real = follow_links(dest)?;
        let existing = std::fs::metadata(&real).ok();
        if let Some(m) = &existing {
            if m.is_dir() {
                return Err(OutputError::invalid(dest, "is a directory"));
            }
            let t = m.file_type();
            if (t.is_fifo() || t.is_socket())
                && let Some(uid) = foreign_owner(m)
            {
                return Err(OutputError::invalid(
                    dest,
                    format!("is a FIFO owned by another user (uid {uid}): not written"),
                ));
            }
            if t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket() {
                let file = OpenOptions::new().write(true).open(&real).map_err(cannot)?;
                return Ok(AtomicOutput { dest: dest.to_path_buf(), target: Target::InPlace(file) });
            }
        }
        let dir = parent_of(&real);
        if !dir.is_dir() {
            return Err(OutputError::invalid(
                dest,
                format!("cannot write: directory {} does not exist", dir.display()),
            ));
        }
        let name = real.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        // A replaced file keeps its mode; a new one gets 0666 before the umask, like any file
        // the user creates (tempfile's default, 0600, would survive the rename).
        let mode = existing.as_ref().map_or(0o666, |m| m.mode() & 0o7777);
        let temp = tempfile::Builder::new()
            .prefix(&temp_prefix(&name))
            .suffix(".partial")
            .permissions(std::fs::Permissions::from_mode(mode))
            .tempfile_in(dir)
            .map_err(cannot)?;
        if let Some(m) = &existing {
            // umask applies at creation: set the mode again, and keep the owner where allowed.
            let _ = temp.as_file().set_permissions(std::fs::Permissions::from_mode(mode));
            let _ = std::os::unix::fs::fchown(temp.as_file(), Some(m.uid()), Some(m.gid()));
        }
        let (file, temp) = temp.into_parts();
        register(&temp);
        Ok(AtomicOutput { dest: dest.to_path_buf(), target: Target::Temporary { temp, file, replace: real } })
    }

    pub fn path(&self) -> &Path {
        &self.dest
    }

    fn file(&self) -> &File {
        match &self.target {
            Target::Temporary { file, .. } => file,
            Target::InPlace(file) => file,
            Target::Done => unreachable!("no writing after commit"),
        }
    }

    /// A buffered writer on the temporary file.
    pub fn writer(&self) -> Result<BufWriter<File>> {
        let f = self.file().try_clone().map_err(|e| OutputError::io(&self.dest, e))?;
        Ok(BufWriter::with_capacity(1 << 20, f))
    }

    /// Moves the finished file into place.
    pub fn commit(mut self) -> Result<()> {
        match std::mem::replace(&mut self.target, Target::Done) {
            Target::InPlace(_) | Target::Done => Ok(()),
            Target::Temporary { temp, file, replace } => {
                file.sync_data().map_err(|e| OutputError::io(&self.dest, e))?;
                let path = temp.to_path_buf();
                let result = temp.persist(&replace).map_err(|e| OutputError::io(&self.dest, e.error));
                unregister(&path);
                result
            }
        }
    }
}

impl AtomicOutput {
    /// Keeps the finished temporary file where it is, under its temporary name, instead of
    /// moving it into place (what a failed run wants kept for the user); returns that path.
    /// A special file was written in place: its path is the destination's.
    pub fn keep_temporary(mut self) -> Result<PathBuf> {
        match std::mem::replace(&mut self.target, Target::Done) {
            Target::InPlace(_) | Target::Done => Ok(self.dest.clone()),
            Target::Temporary { temp, file, replace } => {
                file.sync_data().map_err(|e| OutputError::io(&self.dest, e))?;
                let path = temp.to_path_buf();
                unregister(&path);
                let kept = temp.keep().map_err(|e| OutputError::io(&self.dest, e.error))?;
                // Named beside the destination as the user gave it (not made absolute).
                Ok(kept.file_name().map_or(kept.clone(), |name| replace.with_file_name(name)))
            }
        }
    }
}

impl Drop for AtomicOutput {
    fn drop(&mut self) {
        // Not committed: the TempPath removes the file itself.
        if let Target::Temporary { temp, .. } = &self.target {
            unregister(temp);
        }
    }
}

/// A directory of outputs built beside its destination and moved into place whole, so a
/// failed or stopped run leaves neither an empty directory nor old and new files mixed.
pub struct OutputDir {
    dest: PathBuf,
    staging: Option<tempfile::TempDir>,
}

impl OutputDir {
    pub fn create(dest: &Path) -> Result<Self> {
        // A link to a directory is followed only when it is this user's (or root's).
        follow_links(dest)?;
        if dest.exists() && !dest.is_dir() {
            return Err(OutputError::invalid(dest, "exists and is not a directory"));
        }
        let parent = parent_of(dest);
        if !parent.is_dir() {
            return Err(OutputError::invalid(
                dest,
                format!("cannot create: directory {} does not exist", parent.display()),
            ));
        }
        let name = dest.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let staging = tempfile::Builder::new()
            .prefix(&temp_prefix(&name))
            .suffix(".partial")
            // 0777 before the umask, like a directory the user makes (not tempfile's 0700).
            .permissions(std::fs::Permissions::from_mode(0o777))
            .tempdir_in(parent)
            .map_err(|e| OutputError::invalid(dest, format!("cannot create: {e}")))?;
        register(staging.path());
        Ok(OutputDir { dest: dest.to_path_buf(), staging: Some(staging) })
    }

    /// Where a file of the output is written until commit.
    pub fn staging(&self) -> &Path {
        self.staging.as_ref().expect("staging directory until commit").path()
    }

    /// Moves the outputs into the destination: the whole directory when it does not exist
    /// yet, otherwise file by file (other files in it stay).
    pub fn commit(mut self) -> Result<()> {
        let staging = self.staging.take().expect("staging directory until commit");
        let from = staging.path().to_path_buf();
        let io = |e| OutputError::io(&self.dest, e);
        if !self.dest.exists() {
            let kept = staging.keep();
            let result = std::fs::rename(&kept, &self.dest).map_err(io);
            if result.is_err() {
                let _ = std::fs::remove_dir_all(&kept);
            }
            unregister(&from);
            return result;
        }
        let result = move_tree(&from, &self.dest).map_err(io);
        unregister(&from);
        result
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if let Some(s) = &self.staging {
            unregister(s.path());
        }
    }
}

/// Renames every file under `from` to the same place under `to`, making directories.
fn move_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            move_tree(&entry.path(), &target)?;
        } else {
            std::fs::rename(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `dest` as one output: whole or not at all, through an exclusive temporary
/// file of a random name beside it (never a name another user could have prepared), a
/// special file written in place.
pub fn write_whole(dest: &Path, bytes: &[u8]) -> Result<()> {
    let out = AtomicOutput::create(dest)?;
    let mut w = out.writer()?;
    w.write_all(bytes).map_err(|e| OutputError::io(dest, e))?;
    flush(&mut w, dest)?;
    drop(w);
    out.commit()
}

/// Flushes a buffered writer, naming the file on failure.
pub fn flush(w: &mut impl Write, path: &Path) -> Result<()> {
    w.flush().map_err(|e| OutputError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(out: AtomicOutput, text: &str) {
        let mut w = out.writer().unwrap();
        w.write_all(text.as_bytes()).unwrap();
        flush(&mut w, Path::new("x")).unwrap();
        drop(w);
        out.commit().unwrap();
    }

    #[test]
    fn a_replaced_file_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.csv");
        std::fs::write(&dest, "old").unwrap();
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).unwrap();
        write(AtomicOutput::create(&dest).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
        assert_eq!(std::fs::metadata(&dest).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn special_files_are_written_in_place_and_links_followed() {
        let dir = tempfile::tempdir().unwrap();
        // /dev/null stays a device.
        write(AtomicOutput::create(Path::new("/dev/null")).unwrap(), "gone");
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        // A link keeps pointing at its file, which gets the new content.
        let file = dir.path().join("real.csv");
        let link = dir.path().join("link.csv");
        std::fs::write(&file, "old").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write(AtomicOutput::create(&link).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    }

    /// A link planted under a name a writer might have chosen for its temporary (the old
    /// `PATH.tmp.PID`) is never followed: the temporary is made exclusively, under a random
    /// name, and the file the link points at stays as it was.
    #[test]
    fn a_planted_link_beside_the_output_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let dest = dir.path().join("matrix.csv");
        let planted = dir.path().join(format!("matrix.csv.tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_whole(&dest, b"0,1\n1,0\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "0,1\n1,0\n");
        assert!(std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
    }

    /// Destinations named with up to 255 bytes (the most a file name has) are written; the
    /// temporary's name is cut to fit, at a character's edge.
    #[test]
    fn the_longest_names_are_written() {
        let dir = tempfile::tempdir().unwrap();
        for len in [239, 240, 241, 250, 255] {
            let dest = dir.path().join("x".repeat(len));
            write_whole(&dest, b"1").unwrap_or_else(|e| panic!("{len}: {e}"));
            assert_eq!(std::fs::read(&dest).unwrap(), b"1");
            let staged = dir.path().join("d".repeat(len));
            OutputDir::create(&staged).unwrap().commit().unwrap();
            assert!(staged.is_dir(), "{len}");
        }
        let wide = "é".repeat(127);
        assert!(temp_prefix(&wide).len() <= 241 && temp_prefix(&wide).ends_with("é."));
    }

    #[test]
    fn unfinished_outputs_leave_nothing_and_are_listed_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("t.trace");
        let out = AtomicOutput::create(&dest).unwrap();
        let listed = || TEMPORARIES.lock().unwrap().iter().filter(|p| p.parent() == Some(dir.path())).count();
        assert_eq!(listed(), 1);
        drop(out);
        assert_eq!(listed(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let staged = OutputDir::create(&dir.path().join("results")).unwrap();
        assert_eq!(listed(), 1, "the staging directory is listed for signal clean-up");
        drop(staged);
        assert_eq!(listed(), 0);
    }

    #[test]
    fn an_output_directory_appears_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("results");
        let failed = OutputDir::create(&dest).unwrap();
        std::fs::write(failed.staging().join("a.csv"), "1").unwrap();
        drop(failed);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let out = OutputDir::create(&dest).unwrap();
        std::fs::create_dir(out.staging().join("windows")).unwrap();
        std::fs::write(out.staging().join("windows/w0.csv"), "w").unwrap();
        std::fs::write(out.staging().join("a.csv"), "1").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("windows/w0.csv")).unwrap(), "w");
        assert_ne!(std::fs::metadata(&dest).unwrap().mode() & 0o055, 0, "made as mkdir would, not 0700");

        // Into an existing directory: our files are replaced, the user's stay.
        std::fs::write(dest.join("mine.txt"), "keep").unwrap();
        let again = OutputDir::create(&dest).unwrap();
        std::fs::write(again.staging().join("a.csv"), "2").unwrap();
        again.commit().unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a.csv")).unwrap(), "2");
        assert_eq!(std::fs::read_to_string(dest.join("mine.txt")).unwrap(), "keep");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
