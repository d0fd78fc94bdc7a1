//! Reaching the directory an output goes into on descriptors, one component at a time, so
//! that what is checked is what is written into: every component is opened without
//! following it, and a symbolic link is followed only after its owner is checked (this
//! user's or root's). A name swapped after the walk cannot redirect a write made relative to
//! the descriptor the walk returned.

use super::{OutputError, Result, foreign_uid};
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The most links followed in one walk, as the kernel's own limit.
const MAX_LINKS: usize = 40;

pub(super) fn io(path: &Path, e: rustix::io::Errno) -> OutputError {
    OutputError::io(path, std::io::Error::from(e))
}

pub(super) fn open_path(dir: BorrowedFd, name: impl rustix::path::Arg, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(dir, name, flags | OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
}

/// A link's owner checked: refused when it is another user's.
fn check_link(st: &Stat, at: &Path, dest: &Path) -> Result<()> {
    match foreign_uid(st.st_uid) {
        Some(uid) => Err(OutputError::invalid(
            dest,
            format!(
                "{} is a symbolic link owned by another user (uid {uid}): not followed (remove it, or name the file it points to)",
                at.display()
            ),
        )),
        None => Ok(()),
    }
}

/// Opens directory `path` (relative to `base` unless absolute) as an `O_PATH` descriptor,
/// following only links of this user's or root's. `shown` is how `base` is named in
/// messages; `dest` is the output the walk is for. Returns the descriptor and the
/// directory's name as walked (links replaced by what they point to).
pub(super) fn open_dir(base: BorrowedFd, shown: &Path, path: &Path, dest: &Path) -> Result<(OwnedFd, PathBuf)> {
    let root = || open_path(CWD, "/", OFlags::DIRECTORY).map_err(|e| io(Path::new("/"), e));
    let (mut fd, mut at) = if path.is_absolute() {
        (root()?, PathBuf::from("/"))
    } else {
        (open_path(base, ".", OFlags::DIRECTORY).map_err(|e| io(shown, e))?, shown.to_path_buf())
    };
    let mut todo: VecDeque<OsString> = components(path);
    let mut links = 0;
    while let Some(part) = todo.pop_front() {
        if part == "." {
            continue;
        }
        let next_at = if part == ".." { parent_name(&at) } else { at.join(&part) };
        let next = open_path(fd.as_fd(), part.as_os_str(), OFlags::NOFOLLOW).map_err(|e| {
            if e == rustix::io::Errno::NOENT {
                OutputError::invalid(dest, format!("cannot write: directory {} does not exist", next_at.display()))
            } else {
                io(&next_at, e)
            }
        })?;
        let st = rustix::fs::fstat(&next).map_err(|e| io(&next_at, e))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => (fd, at) = (next, next_at),
            FileType::Symlink => {
                check_link(&st, &next_at, dest)?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(OutputError::invalid(dest, "too many levels of symbolic links"));
                }
                let target = rustix::fs::readlinkat(&next, "", Vec::new()).map_err(|e| io(&next_at, e))?;
                let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                if target.is_absolute() {
                    (fd, at) = (root()?, PathBuf::from("/"));
                }
                for part in components(&target).into_iter().rev() {
                    todo.push_front(part);
                }
            }
            _ => return Err(OutputError::invalid(dest, format!("{} is not a directory", next_at.display()))),
        }
    }
    Ok((fd, at))
}

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir => Some(".".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn parent_name(at: &Path) -> PathBuf {
    match at.file_name() {
        Some(_) => at.parent().map_or_else(|| PathBuf::from(".."), Path::to_path_buf),
        None => at.join(".."),
    }
}

/// Where an output named `dest` goes: the opened directory, the name in it, and the path as
/// walked (for messages).
pub(super) struct Place {
    pub dir: OwnedFd,
    pub name: OsString,
    pub shown: PathBuf,
}

/// Resolves `path` (relative to `base`, named `shown` in messages) to the directory and name
/// to write: through links of this user's or root's to the file at the end of their chain
/// (a dangling chain: its last link, which the rename replaces); another user's link
/// anywhere on the way is refused. `dest` names the output in messages.
pub(super) fn place(base: BorrowedFd, shown: &Path, path: &Path, dest: &Path) -> Result<Place> {
    let mut path = path.to_path_buf();
    let mut base_fd = open_path(base, ".", OFlags::DIRECTORY).map_err(|e| io(shown, e))?;
    let mut base_shown = shown.to_path_buf();
    for _ in 0..MAX_LINKS {
        let name = match path.components().next_back() {
            Some(Component::Normal(n)) => n.to_os_string(),
            _ => return Err(OutputError::invalid(dest, "is not a file name")),
        };
        let parent = path.parent().unwrap_or(Path::new(""));
        let (dir, dir_shown) = open_dir(base_fd.as_fd(), &base_shown, parent, dest)?;
        let at = dir_shown.join(&name);
        let st = match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => st,
            _ => return Ok(Place { dir, name, shown: at }),
        };
        check_link(&st, &at, dest)?;
        let target = rustix::fs::readlinkat(&dir, name.as_os_str(), Vec::new()).map_err(|e| io(&at, e))?;
        let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
        if rustix::fs::statat(&dir, &target, AtFlags::empty()).is_err() {
            // Dangling: the rename replaces the last link.
            return Ok(Place { dir, name, shown: at });
        }
        (base_fd, base_shown, path) = (dir, dir_shown, target);
    }
    Err(OutputError::invalid(dest, "too many levels of symbolic links"))
}

/// Refuses a directory that every user may write and that is not sticky: anyone could rename
/// sharemap's temporary away and put their own file or link in its place.
pub(super) fn check_dir(dir: &OwnedFd, shown: &Path, dest: &Path) -> Result<Stat> {
    let st = rustix::fs::fstat(dir).map_err(|e| io(shown, e))?;
    if st.st_mode & 0o002 != 0 && st.st_mode & 0o1000 == 0 {
        return Err(OutputError::invalid(
            dest,
            format!(
                "directory {} is writable by every user and not sticky (mode {:o}): another user could swap what is written there (chmod +t it, or write elsewhere)",
                shown.display(),
                st.st_mode & 0o7777
            ),
        ));
    }
    Ok(st)
}
