//! The program a run starts: found as a shell finds it, told static or dynamic, and the
//! runtime libraries sharemap puts into it.

use sharemap::{Error, ErrorKind, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A program named without a slash is looked up in PATH, as a shell does.
pub fn resolve_program(program: &Path) -> Result<PathBuf> {
    if program.components().count() > 1 {
        let cannot =
            |why: &str| Err(Error::new(ErrorKind::Program, format!("cannot run {}: {why}", program.display())));
        return match std::fs::metadata(program) {
            Ok(m) if m.is_file() => Ok(program.to_path_buf()),
            Ok(m) if m.is_dir() => cannot("a directory, not a program"),
            Ok(_) => cannot("not a regular file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => cannot("no such file"),
            Err(e) => cannot(&e.to_string()),
        };
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::new(ErrorKind::Program, format!("cannot run {}: not found in PATH", program.display())))
}

/// Whether a file is an ELF executable without a program interpreter (statically linked).
/// Scripts and anything unreadable count as dynamic: the run will tell.
pub fn is_static(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    let (Some(b"\x7fELF"), Some(2), Some(1)) = (bytes.get(..4), bytes.get(4), bytes.get(5)) else { return false };
    let u16_at = |o: usize| bytes.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u64_at = |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize);
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else { return false };
    const PT_INTERP: u32 = 3;
    !(0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        bytes.get(at..at + 4).is_some_and(|t| u32::from_le_bytes(t.try_into().expect("4 bytes")) == PT_INTERP)
    })
}

/// `LD_PRELOAD` with the actor first, before what the environment already preloads.
pub fn preload_value(library: &Path) -> OsString {
    let mut v = library.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

/// Where sharemap's runtime pieces are: the libraries that `run`, `record` and `cc` put
/// into programs, and the sharemap binary a guest runs. The command line finds them beside
/// its own binary; another host (Python) says where they are.
#[derive(Clone, Debug)]
pub struct Tools {
    /// The directory holding `libsharemap_pin.so`, `libsharemap_rt.a` and the STM's
    /// libraries.
    pub dir: PathBuf,
    /// The `sharemap` binary, copied into a guest to run the program there.
    pub sharemap: Option<PathBuf>,
}

/// Where an installed sharemap keeps its libraries and headers, from its binary's directory
/// (`PREFIX/bin/sharemap`, `PREFIX/lib/sharemap/`: what scripts/install lays out).
pub const INSTALLED_LIBRARIES: &str = "../lib/sharemap";

/// The run actor's file name, the library every installation has.
const PIN_LIBRARY: &str = "libsharemap_pin.so";

impl Tools {
    /// The pieces of a `sharemap` binary: beside it, as `cargo build` leaves them, or in
    /// `../lib/sharemap` from it, as scripts/install puts them. When neither has them, the
    /// binary's own directory (and a missing library says where it was looked for).
    pub fn beside(sharemap: &Path) -> Tools {
        let bin = sharemap.parent().unwrap_or(Path::new("."));
        let installed = bin.join(INSTALLED_LIBRARIES);
        let dir = if !bin.join(PIN_LIBRARY).is_file() && installed.join(PIN_LIBRARY).is_file() {
            installed
        } else {
            bin.to_path_buf()
        };
        Tools { dir, sharemap: Some(sharemap.to_path_buf()) }
    }

    /// `sharemap run`'s actor, preloaded into the programs it starts.
    pub fn pin_library(&self) -> PathBuf {
        self.library(PIN_LIBRARY)
    }

    /// A library of the directory, by file name.
    pub fn library(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A library, or one line saying it is missing, where it was looked for and how to get it.
    pub fn existing(&self, name: &str) -> Result<PathBuf> {
        let path = self.library(name);
        if path.is_file() {
            return Ok(path);
        }
        let looked = match &self.sharemap {
            Some(exe) => {
                let bin = exe.parent().unwrap_or(Path::new("."));
                format!("{} and {}", bin.display(), bin.join(INSTALLED_LIBRARIES).display())
            }
            None => self.dir.display().to_string(),
        };
        Err(Error::new(
            ErrorKind::Program,
            format!(
                "{name} is missing (looked in {looked}): install sharemap with scripts/install, or run `cargo build --release` in its sources (`cargo install` and `cargo test` build the binary alone)"
            ),
        ))
    }
}
