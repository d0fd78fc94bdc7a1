//! Outputs are written to a temporary file beside the destination and renamed into place
//! when complete, so a failed run never leaves a partial file. Every temporary is also in a
//! process-wide list, so that a program stopped by a signal can remove them
//! ([`remove_temporaries`]) before it exits.
//!
//! A destination that exists and is not a regular file (a FIFO, a terminal, `/dev/null`) is
//! written in place: replacing it would turn a device node into a file. A destination that is
//! a symbolic link is written through the link, and a replaced file keeps its mode.
//!
//! Another user must not choose where sharemap writes, nor swap what it wrote:
//! - the directory written into is reached on descriptors ([`walk`]): a symbolic link owned
//!   by someone other than this user or root, anywhere on the path, is refused, and every
//!   later step (the temporary's creation, the rename, the check) is made relative to the
//!   directory that was checked, so renaming a directory on the way changes nothing;
//! - a directory every user may write and that is not sticky is refused: anyone could rename
//!   the temporary away and put theirs in its place;
//! - the temporary is made exclusively (`O_EXCL`, `O_NOFOLLOW`) under a random name, and
//!   after the rename the file at the destination must be the one written (same inode):
//!   otherwise the output is reported as not written, and the data is kept under a new
//!   temporary name when it still can be;
//! - a FIFO of another user's is not written.
//!
//! (The kernel's `fs.protected_symlinks` covers only sticky directories, and a link
//! resolved here and then renamed over would bypass it anyway.)

mod walk;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use walk::io;

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

/// Something to remove if the process is stopped before it is renamed into place.
enum Temporary {
    /// Named by path (a `tempfile` value of someone else's making).
    Path(PathBuf),
    /// A file or a directory tree `name` in the opened directory `dir`.
    At { dir: Arc<OwnedFd>, name: OsString },
}

/// Temporary files and directories not yet renamed into place or removed, by id.
static TEMPORARIES: Mutex<Vec<(u64, Temporary)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn register(t: Temporary) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner()).push((id, t));
    id
}

fn unregister(id: u64) {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
}

/// Removes every temporary file and directory still in progress. For a signal handler's
/// thread, just before the process exits.
pub fn remove_temporaries() {
    let all = std::mem::take(&mut *TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, t) in all {
        match t {
            Temporary::Path(p) if p.is_dir() => drop(std::fs::remove_dir_all(&p)),
            Temporary::Path(p) => drop(std::fs::remove_file(&p)),
            Temporary::At { dir, name } => remove_tree(dir.as_fd(), &name),
        }
    }
}

/// Removes `name` in `dir`, a file or a directory with everything in it, never following a
/// link (a link is removed itself).
fn remove_tree(dir: BorrowedFd, name: &std::ffi::OsStr) {
    if rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok() {
        return;
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if let Ok(sub) = rustix::fs::openat(dir, name, flags, Mode::empty()) {
        for entry in entries(&sub) {
            remove_tree(sub.as_fd(), &entry.0);
        }
    }
    let _ = rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR);
}

/// The entries of an opened directory (not `.` and `..`), with whether each is a directory.
fn entries(dir: &OwnedFd) -> Vec<(OsString, bool)> {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else { return Vec::new() };
    listing
        .flatten()
        .filter(|e| e.file_name().to_bytes() != b"." && e.file_name().to_bytes() != b"..")
        .map(|e| {
            let name = OsString::from(std::ffi::OsStr::from_bytes(e.file_name().to_bytes()));
            let is_dir = match e.file_type() {
                FileType::Unknown => rustix::fs::statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
                t => t == FileType::Directory,
            };
            (name, is_dir)
        })
        .collect()
}

/// A temporary file or directory of someone else's making (a `tempfile` value, say) listed
/// for removal on a signal while this value lives.
pub struct Listed(u64);

impl Listed {
    pub fn new(path: &Path) -> Listed {
        Listed(register(Temporary::Path(path.to_path_buf())))
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        unregister(self.0);
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

/// A fresh temporary name for `name`: `.NAME.` then six random characters then `.partial`.
fn temp_name(name: &std::ffi::OsStr) -> OsString {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut random = [0u8; 6];
    // SAFETY: getrandom writes at most the given length into the buffer.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    if got != random.len() as isize {
        // No entropy source: a counter and the time still make a name nobody prepared, as
        // the creation is exclusive and retried.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let n = t.as_nanos() as u64 ^ NEXT_ID.fetch_add(1, Ordering::Relaxed).rotate_left(32);
        random = std::array::from_fn(|i| (n >> (8 * i)) as u8);
    }
    let suffix: String = random.iter().map(|b| CHARS[*b as usize % CHARS.len()] as char).collect();
    format!("{}{suffix}.partial", temp_prefix(&name.to_string_lossy())).into()
}

/// The user owning `m` when it is neither this process's user nor root: someone else's.
pub fn foreign_owner(m: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    foreign_uid(m.uid())
}

/// `uid` when it is neither this process's user nor root.
fn foreign_uid(uid: u32) -> Option<u32> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    (uid != me && uid != 0).then_some(uid)
}

/// This process's file-creation mask, read without changing it (umask(2) would, for a moment,
/// for every thread).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Umask:")).and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

fn same_file(a: &rustix::fs::Stat, b: &rustix::fs::Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// Whether a file found at an output's name just after sharemap renamed its own there is
/// another writer's finished output of the same user (two builds writing one header, two
/// runs one CSV): the last rename wins, as with any atomic replace. What another user
/// could have put there instead is refused: a link, a file of theirs, or a second name
/// of someone's file.
fn written_after_ours(found: &rustix::fs::Stat) -> bool {
    let regular = rustix::fs::FileType::from_raw_mode(found.st_mode) == rustix::fs::FileType::RegularFile;
    // SAFETY: geteuid has no preconditions.
    // A link count of 0 is a file that a still later writer's rename replaced as it was read.
    regular && found.st_uid == unsafe { libc::geteuid() } && found.st_nlink <= 1
}

/// Gives the file behind `file` a new temporary name in `dir` (its own was taken from it),
/// so that what was written is not lost; returns that name.
fn relink(file: &File, dir: &OwnedFd, name: &std::ffi::OsStr) -> Option<OsString> {
    use std::os::fd::AsRawFd;
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    for _ in 0..16 {
        let kept = temp_name(name);
        match rustix::fs::linkat(rustix::fs::CWD, proc_path.as_str(), dir, kept.as_os_str(), AtFlags::SYMLINK_FOLLOW) {
            Ok(()) => return Some(kept),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(_) => return None,
        }
    }
    None
}

enum Target {
    /// A temporary file `temp` in `dir`, renamed over `name` on commit.
    Temporary { dir: Arc<OwnedFd>, dir_shown: PathBuf, temp: OsString, name: OsString, file: File, id: u64 },
    /// A special file (FIFO, device), written directly.
    InPlace(File),
    /// Committed.
    Done,
}

pub struct AtomicOutput {
    dest: PathBuf,
    target: Target,
}

impl AtomicOutput {
    pub fn create(dest: &Path) -> Result<Self> {
        Self::create_at(rustix::fs::CWD, Path::new(""), dest, dest)
    }

    /// An output at `rel` under the opened directory `base` (named `shown`), `dest` naming it
    /// in messages.
    fn create_at(base: BorrowedFd, shown: &Path, rel: &Path, dest: &Path) -> Result<Self> {
        let cannot =
            |e: rustix::io::Errno| OutputError::invalid(dest, format!("cannot write: {}", std::io::Error::from(e)));
        // Through a symbolic link to the file it names, so the link survives.
        let walk::Place { dir, name, shown: real } = walk::place(base, shown, rel, dest)?;
        let dir_shown = real.parent().map_or_else(PathBuf::new, Path::to_path_buf);
        let existing = rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let mut mode = 0o666;
        if let Some(st) = &existing {
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => return Err(OutputError::invalid(dest, "is a directory")),
                FileType::Fifo | FileType::Socket if foreign_uid(st.st_uid).is_some() => {
                    return Err(OutputError::invalid(
                        dest,
                        format!("is a FIFO owned by another user (uid {}): not written", st.st_uid),
                    ));
                }
                FileType::Fifo | FileType::Socket | FileType::CharacterDevice | FileType::BlockDevice => {
                    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let file = rustix::fs::openat(&dir, name.as_os_str(), flags, Mode::empty()).map_err(cannot)?;
                    return Ok(AtomicOutput { dest: dest.to_path_buf(), target: Target::InPlace(file.into()) });
                }
                FileType::RegularFile => mode = st.st_mode & 0o7777,
                _ => {}
            }
        }
        walk::check_dir(&dir, &dir_shown, dest)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (temp, file) = loop {
            let temp = temp_name(&name);
            // A replaced file keeps its mode; a new one gets 0666 before the umask, like any
            // file the user creates.
            match rustix::fs::openat(&dir, temp.as_os_str(), flags, Mode::from_raw_mode(mode)) {
                Ok(fd) => break (temp, File::from(fd)),
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(cannot(e)),
            }
        };
        if let Some(st) = existing.filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile) {
            // umask applies at creation: set the mode again, and keep the owner where allowed.
            let _ = rustix::fs::fchmod(&file, Mode::from_raw_mode(mode));
            let _ = rustix::fs::fchown(
                &file,
                Some(rustix::fs::Uid::from_raw(st.st_uid)),
                Some(rustix::fs::Gid::from_raw(st.st_gid)),
            );
        }
        let dir = Arc::new(dir);
        let id = register(Temporary::At { dir: dir.clone(), name: temp.clone() });
        Ok(AtomicOutput {
            dest: dest.to_path_buf(),
            target: Target::Temporary { dir, dir_shown, temp, name, file, id },
        })
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

    /// Bytes written so far, from the file itself (not from a name another user could
    /// have swapped).
    pub fn len(&self) -> Result<u64> {
        Ok(self.file().metadata().map_err(|e| OutputError::io(&self.dest, e))?.len())
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Moves the finished file into place, and checks that what is there is what was
    /// written.
    pub fn commit(mut self) -> Result<()> {
        let Target::Temporary { dir, dir_shown, temp, name, file, id } =
            std::mem::replace(&mut self.target, Target::Done)
        else {
            return Ok(());
        };
        let result = (|| {
            file.sync_data().map_err(|e| OutputError::io(&self.dest, e))?;
            let written = rustix::fs::fstat(&file).map_err(|e| io(&self.dest, e))?;
            let ours = |n: &std::ffi::OsStr| {
                rustix::fs::statat(&*dir, n, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| same_file(&st, &written))
            };
            if !ours(&temp) {
                return Err(self.swapped(&file, &dir, &dir_shown, &name, &temp));
            }
            rustix::fs::renameat(&*dir, temp.as_os_str(), &*dir, name.as_os_str()).map_err(|e| io(&self.dest, e))?;
            if !ours(&name)
                && !rustix::fs::statat(&*dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| written_after_ours(&st))
            {
                // What the rename put there is not what was written: it goes, so that
                // nothing reads it as sharemap's output.
                let _ = rustix::fs::unlinkat(&*dir, name.as_os_str(), AtFlags::empty());
                return Err(self.swapped(&file, &dir, &dir_shown, &name, &name));
            }
            Ok(())
        })();
        if result.is_err() {
            // What is still ours under the temporary name goes.
            let _ = rustix::fs::unlinkat(&*dir, temp.as_os_str(), AtFlags::empty());
        }
        unregister(id);
        result
    }

    /// The error for a temporary that another user swapped for theirs (found at `found`):
    /// the data written is given a new name when the file still has one somewhere.
    fn swapped(&self, file: &File, dir: &OwnedFd, dir_shown: &Path, name: &OsString, found: &OsString) -> OutputError {
        let kept = relink(file, dir, name).map_or_else(
            || "what was written could not be kept".to_string(),
            |k| format!("what was written is kept as {}", dir_shown.join(k).display()),
        );
        OutputError::invalid(
            &self.dest,
            format!(
                "not written: {} was replaced by someone else's file while sharemap wrote it ({kept})",
                dir_shown.join(found).display()
            ),
        )
    }

    /// Keeps the finished temporary file where it is, under its temporary name, instead of
    /// moving it into place (what a failed run wants kept for the user); returns that path.
    /// A special file was written in place: its path is the destination's.
    pub fn keep_temporary(mut self) -> Result<PathBuf> {
        let Target::Temporary { dir, dir_shown, temp, name, file, id } =
            std::mem::replace(&mut self.target, Target::Done)
        else {
            return Ok(self.dest.clone());
        };
        unregister(id);
        file.sync_data().map_err(|e| OutputError::io(&self.dest, e))?;
        let written = rustix::fs::fstat(&file).map_err(|e| io(&self.dest, e))?;
        let still = rustix::fs::statat(&*dir, temp.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| same_file(&st, &written));
        let kept = if still { Some(temp) } else { relink(&file, &dir, &name) };
        kept.map(|k| dir_shown.join(k)).ok_or_else(|| {
            OutputError::invalid(&self.dest, "the temporary file was removed by someone else: nothing could be kept")
        })
    }
}

impl Drop for AtomicOutput {
    fn drop(&mut self) {
        // Not committed: the temporary goes, if it is still ours.
        if let Target::Temporary { dir, temp, file, id, .. } = &self.target {
            let still = rustix::fs::fstat(file).ok().is_some_and(|w| {
                rustix::fs::statat(&**dir, temp.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| same_file(&st, &w))
            });
            if still {
                let _ = rustix::fs::unlinkat(&**dir, temp.as_os_str(), AtFlags::empty());
            }
            unregister(*id);
        }
    }
}

/// A directory of outputs built beside its destination and moved into place whole, so a
/// failed or stopped run leaves neither an empty directory nor old and new files mixed. The
/// staging directory is private (0700) while it is written, and its files are made relative
/// to its descriptor ([`OutputDir::output`]): nobody else can put anything in it, or swap it.
pub struct OutputDir {
    dest: PathBuf,
    parent: Arc<OwnedFd>,
    name: OsString,
    staging_name: OsString,
    staging: OwnedFd,
    shown: PathBuf,
    id: Option<u64>,
}

impl OutputDir {
    pub fn create(dest: &Path) -> Result<Self> {
        let cannot =
            |e: rustix::io::Errno| OutputError::invalid(dest, format!("cannot create: {}", std::io::Error::from(e)));
        // A link to a directory is followed only when it is this user's (or root's).
        let walk::Place { dir, name, shown } = walk::place(rustix::fs::CWD, Path::new(""), dest, dest)?;
        let parent_shown = shown.parent().map_or_else(PathBuf::new, Path::to_path_buf);
        if let Ok(st) = rustix::fs::statat(&dir, name.as_os_str(), AtFlags::empty())
            && FileType::from_raw_mode(st.st_mode) != FileType::Directory
        {
            return Err(OutputError::invalid(dest, "exists and is not a directory"));
        }
        walk::check_dir(&dir, &parent_shown, dest)?;
        let staging_name = loop {
            let n = temp_name(&name);
            match rustix::fs::mkdirat(&dir, n.as_os_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) => break n,
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(cannot(e)),
            }
        };
        let parent = Arc::new(dir);
        let id = register(Temporary::At { dir: parent.clone(), name: staging_name.clone() });
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let staging = rustix::fs::openat(&*parent, staging_name.as_os_str(), flags, Mode::empty()).map_err(cannot)?;
        let st = rustix::fs::fstat(&staging).map_err(cannot)?;
        if foreign_uid(st.st_uid).is_some() || st.st_mode & 0o077 != 0 {
            return Err(OutputError::invalid(dest, "cannot create: the staging directory was swapped by someone else"));
        }
        let shown = parent_shown.join(&staging_name);
        Ok(OutputDir { dest: dest.to_path_buf(), parent, name, staging_name, staging, shown, id: Some(id) })
    }

    /// Where the output is built until commit (for messages: write with [`OutputDir::output`]).
    pub fn staging(&self) -> &Path {
        &self.shown
    }

    /// The destination directory, as given.
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// An output file at `rel` in the directory (its subdirectories made with
    /// [`OutputDir::mkdir`]).
    pub fn output(&self, rel: &str) -> Result<AtomicOutput> {
        AtomicOutput::create_at(self.staging.as_fd(), &self.shown, Path::new(rel), &self.dest.join(rel))
    }

    /// Writes `bytes` as the file `rel` in the directory.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<()> {
        write_to(self.output(rel)?, bytes)
    }

    /// Makes the subdirectory `rel` (and those above it) in the directory.
    pub fn mkdir(&self, rel: &str) -> Result<()> {
        let mut at = std::path::PathBuf::new();
        for part in Path::new(rel).components() {
            at.push(part);
            match rustix::fs::mkdirat(&self.staging, &at, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io(&self.dest.join(&at), e)),
            }
        }
        Ok(())
    }

    /// Moves the outputs into the destination: the whole directory when it does not exist
    /// yet, otherwise file by file (other files in it stay).
    pub fn commit(mut self) -> Result<()> {
        let io_err = |e| io(&self.dest, e);
        // Made as mkdir would: 0777 before the umask.
        rustix::fs::fchmod(&self.staging, Mode::from_raw_mode(0o777 & !umask())).map_err(io_err)?;
        let made = rustix::fs::fstat(&self.staging).map_err(io_err)?;
        let exists = rustix::fs::statat(&*self.parent, self.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok();
        let result = if !exists {
            let (from, to) = (self.staging_name.as_os_str(), self.name.as_os_str());
            match rustix::fs::renameat_with(&*self.parent, from, &*self.parent, to, RenameFlags::NOREPLACE) {
                // A file system without RENAME_NOREPLACE: the name was free a moment ago.
                Err(rustix::io::Errno::INVAL) => rustix::fs::renameat(&*self.parent, from, &*self.parent, to),
                r => r,
            }
            .map_err(io_err)
            .and_then(|()| {
                let there = rustix::fs::statat(&*self.parent, self.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW);
                if there.is_ok_and(|st| same_file(&st, &made)) {
                    Ok(())
                } else {
                    // Someone else's, renamed in under the staging name: it goes.
                    let _ = rustix::fs::unlinkat(&*self.parent, self.name.as_os_str(), AtFlags::empty());
                    Err(OutputError::invalid(
                        &self.dest,
                        "not written: replaced by someone else's as it was moved into place",
                    ))
                }
            })
        } else {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            rustix::fs::openat(&*self.parent, self.name.as_os_str(), flags, Mode::empty())
                .map_err(io_err)
                .and_then(|to| move_tree(&self.staging, &to).map_err(io_err))
        };
        // The staging directory is gone or empty; whatever remains of it goes.
        remove_tree(self.parent.as_fd(), &self.staging_name);
        if let Some(id) = self.id.take() {
            unregister(id);
        }
        result
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            remove_tree(self.parent.as_fd(), &self.staging_name);
            unregister(id);
        }
    }
}

/// Renames every file under `from` to the same place under `to`, making directories (a link
/// in `to` is not followed).
fn move_tree(from: &OwnedFd, to: &OwnedFd) -> rustix::io::Result<()> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for (name, is_dir) in entries(from) {
        if is_dir {
            match rustix::fs::mkdirat(to, name.as_os_str(), Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e),
            }
            let sub_from = rustix::fs::openat(from, name.as_os_str(), flags, Mode::empty())?;
            let sub_to = rustix::fs::openat(to, name.as_os_str(), flags, Mode::empty())?;
            move_tree(&sub_from, &sub_to)?;
        } else {
            rustix::fs::renameat(from, name.as_os_str(), to, name.as_os_str())?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `dest` as one output: whole or not at all, through an exclusive temporary
/// file of a random name beside it (never a name another user could have prepared), a
/// special file written in place.
pub fn write_whole(dest: &Path, bytes: &[u8]) -> Result<()> {
    write_to(AtomicOutput::create(dest)?, bytes)
}

fn write_to(out: AtomicOutput, bytes: &[u8]) -> Result<()> {
    let mut w = out.writer()?;
    w.write_all(bytes).map_err(|e| OutputError::io(out.path(), e))?;
    flush(&mut w, out.path())?;
    drop(w);
    out.commit()
}

/// Makes directory `dest` if missing (as `mkdir -p` would, through links of this user's or
/// root's only), for outputs that sharemap writes into it one by one and reads back or runs
/// (the demo's programs and traces): refused when another user owns it or every user may
/// write it, as anything they put there would be read, or run, as this user.
pub fn make_dir(dest: &Path) -> Result<()> {
    if let Some(up) = dest.parent().filter(|p| !p.as_os_str().is_empty())
        && std::fs::symlink_metadata(up).is_err()
    {
        make_dir(up)?;
    }
    let walk::Place { dir, name, shown } = walk::place(rustix::fs::CWD, Path::new(""), dest, dest)?;
    match rustix::fs::mkdirat(&dir, name.as_os_str(), Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(OutputError::invalid(dest, format!("cannot create: {}", std::io::Error::from(e)))),
    }
    let made = walk::open_path(dir.as_fd(), name.as_os_str(), OFlags::DIRECTORY | OFlags::NOFOLLOW)
        .map_err(|e| OutputError::invalid(dest, format!("is not a directory: {}", std::io::Error::from(e))))?;
    let st = rustix::fs::fstat(&made).map_err(|e| io(&shown, e))?;
    if let Some(uid) = foreign_uid(st.st_uid) {
        return Err(OutputError::invalid(dest, format!("is owned by another user (uid {uid}): not written into")));
    }
    if st.st_mode & 0o002 != 0 {
        return Err(OutputError::invalid(
            dest,
            format!("is writable by every user (mode {:o}): not written into", st.st_mode & 0o7777),
        ));
    }
    Ok(())
}

/// Flushes a buffered writer, naming the file on failure.
pub fn flush(w: &mut impl Write, path: &Path) -> Result<()> {
    w.flush().map_err(|e| OutputError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

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
        let listed = |id: u64| TEMPORARIES.lock().unwrap().iter().any(|(i, _)| *i == id);
        let out = AtomicOutput::create(&dest).unwrap();
        let Target::Temporary { id, .. } = &out.target else { panic!("a temporary") };
        let id = *id;
        assert!(listed(id));
        drop(out);
        assert!(!listed(id));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let staged = OutputDir::create(&dir.path().join("results")).unwrap();
        let id = staged.id.unwrap();
        assert!(listed(id), "the staging directory is listed for signal clean-up");
        drop(staged);
        assert!(!listed(id));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_output_directory_appears_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("results");
        let failed = OutputDir::create(&dest).unwrap();
        failed.write("a.csv", b"1").unwrap();
        drop(failed);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let out = OutputDir::create(&dest).unwrap();
        out.mkdir("windows").unwrap();
        out.write("windows/w0.csv", b"w").unwrap();
        out.write("a.csv", b"1").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("windows/w0.csv")).unwrap(), "w");
        assert_ne!(std::fs::metadata(&dest).unwrap().mode() & 0o055, 0, "made as mkdir would, not 0700");

        // Into an existing directory: our files are replaced, the user's stay.
        std::fs::write(dest.join("mine.txt"), "keep").unwrap();
        let again = OutputDir::create(&dest).unwrap();
        again.write("a.csv", b"2").unwrap();
        again.commit().unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a.csv")).unwrap(), "2");
        assert_eq!(std::fs::read_to_string(dest.join("mine.txt")).unwrap(), "keep");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// The one temporary in `dir` whose name begins with `.NAME.`.
    fn temporary_of(dir: &Path, name: &str) -> PathBuf {
        let found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!(".{name}.")))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].clone()
    }

    /// Someone renames the temporary away and puts a link in its place: the output is not
    /// reported as written, the link's target is untouched, nothing is left at the name,
    /// and what was written is kept under a new temporary name.
    #[test]
    fn a_swapped_temporary_is_never_reported_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let dest = dir.path().join("out.trace");
        let out = AtomicOutput::create(&dest).unwrap();
        let mut w = out.writer().unwrap();
        w.write_all(b"recorded").unwrap();
        flush(&mut w, &dest).unwrap();
        drop(w);
        let temp = temporary_of(dir.path(), "out.trace");
        std::fs::rename(&temp, dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, &temp).unwrap();
        assert_eq!(out.len().unwrap(), 8, "the size is the written file's");
        let err = out.commit().unwrap_err().to_string();
        assert!(err.contains("not written") && err.contains("replaced by someone else's"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&dest).is_err(), "nothing at the destination");
        let kept = err.split("kept as ").nth(1).unwrap().trim_end_matches(')');
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "recorded", "{err}");
    }

    /// Writers of one user racing to one name: each commit succeeds and the name holds one
    /// writer's whole output (the last rename wins), never a mix and never nothing.
    #[test]
    fn concurrent_writers_of_one_name_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("shared.h");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let dest = &dest;
                s.spawn(move || {
                    for _ in 0..40 {
                        write_whole(dest, &[b'a' + t; 4096]).unwrap();
                    }
                });
            }
        });
        let got = std::fs::read(&dest).unwrap();
        assert_eq!(got.len(), 4096);
        assert!(got.iter().all(|&b| b == got[0]));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
    }

    /// What may stand at the name after the rename: another finished output of this user's,
    /// not a link, nor a second name of a file.
    #[test]
    fn only_a_file_of_this_users_own_counts_as_a_later_writers() {
        let dir = tempfile::tempdir().unwrap();
        let stat = |p: &Path| rustix::fs::lstat(p).unwrap();
        let file = dir.path().join("out");
        write_whole(&file, b"1").unwrap();
        assert!(written_after_ours(&stat(&file)));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(!written_after_ours(&stat(&link)));
        std::fs::hard_link(&file, dir.path().join("second")).unwrap();
        assert!(!written_after_ours(&stat(&file)));
    }

    /// The directory of an output may be reached through this user's own link; in a
    /// directory every user may write only a sticky one is written.
    #[test]
    fn own_links_on_the_way_are_followed_and_open_shared_directories_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("via")).unwrap();
        write_whole(&dir.path().join("via/../via/out.csv"), b"1").unwrap();
        assert_eq!(std::fs::read(real.join("out.csv")).unwrap(), b"1");

        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = write_whole(&dir.path().join("via/x.csv"), b"1").unwrap_err().to_string();
        assert!(err.contains("writable by every user and not sticky"), "{err}");
        let err = OutputDir::create(&real.join("results")).err().unwrap().to_string();
        assert!(err.contains("writable by every user and not sticky"), "{err}");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o1777)).unwrap();
        write_whole(&real.join("x.csv"), b"2").unwrap();
        let err = make_dir(&real).unwrap_err().to_string();
        assert!(err.contains("writable by every user"), "a directory programs are built in: {err}");

        let err = write_whole(&dir.path().join("none/x.csv"), b"1").unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        make_dir(&dir.path().join("a/b/c")).unwrap();
        assert!(dir.path().join("a/b/c").is_dir());
    }

    /// The staging directory swapped for a link to another directory: the files go into the
    /// staging directory that was made (written on its descriptor), the link's target stays
    /// empty, and the commit says the output was not written.
    #[test]
    fn an_output_directory_is_written_on_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let dest = dir.path().join("results");
        let out = OutputDir::create(&dest).unwrap();
        let staging = temporary_of(dir.path(), "results");
        assert_eq!(std::fs::metadata(&staging).unwrap().mode() & 0o777, 0o700, "private while written");
        std::fs::rename(&staging, dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, &staging).unwrap();
        out.mkdir("windows").unwrap();
        out.write("windows/w0.csv", b"w").unwrap();
        out.write("comm.csv", b"1").unwrap();
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        assert_eq!(std::fs::read(dir.path().join("moved/comm.csv")).unwrap(), b"1");
        let err = out.commit().unwrap_err().to_string();
        assert!(err.contains("not written"), "{err}");
        assert!(std::fs::symlink_metadata(&dest).is_err(), "the link renamed in is removed");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    }
}
