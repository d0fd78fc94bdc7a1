//! What a test needs that a machine may lack (the reference systems, a multi-node guest, a
//! browser, hwloc, root, ...) and the one rule for going without it. A test that cannot run
//! says which need was missing and why, and is counted: `scripts/test` sets
//! `SHAREMAP_SKIPPED_LOG` and names every skipped test in its summary. Where a need is
//! required it fails instead: `SHAREMAP_REQUIRE` lists needs by name, comma-separated (or
//! `all`). scripts/test requires what scripts/setup installs; CI also the reference systems.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Something a test may need that this machine may not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The reference systems' source releases (TinySTM, STAMP, DineroIV) in
    /// `SHAREMAP_ANCHORS` or `../shared/anchors` beside the repository.
    Anchors,
    /// A multi-node guest under QEMU (qemu, busybox, a guest kernel).
    Guest,
    /// A headless browser (chromium) for the HTML report.
    Browser,
    /// hwloc's `lstopo`, to compare parses with.
    Hwloc,
    /// clang and LLVM's tools (`sharemap cc --burst`).
    Clang,
    /// valgrind and gcc (the Valgrind source).
    Valgrind,
    /// Python's pyarrow (reading sharemap's Parquet).
    Pyarrow,
    /// Linux's perf tool.
    Perf,
    /// Root, and a second user it can make (the hostile-user tests).
    Root,
    /// More than one PU on this host.
    Cpus,
}

impl Need {
    /// The name `SHAREMAP_REQUIRE` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Need::Anchors => "anchors",
            Need::Guest => "guest",
            Need::Browser => "browser",
            Need::Hwloc => "hwloc",
            Need::Clang => "clang",
            Need::Valgrind => "valgrind",
            Need::Pyarrow => "pyarrow",
            Need::Perf => "perf",
            Need::Root => "root",
            Need::Cpus => "cpus",
        }
    }

    /// Whether a test wanting it must fail rather than skip here.
    pub fn required(self) -> bool {
        let list = std::env::var("SHAREMAP_REQUIRE").unwrap_or_default();
        list.split(',').map(str::trim).any(|n| n == "all" || n == self.name())
    }
}

/// The running test, as libtest names its thread, after the suite's binary ("guest::boots").
fn current_test() -> String {
    let suite = std::env::args()
        .next()
        .and_then(|a| Path::new(&a).file_name().map(|f| f.to_string_lossy().into_owned()))
        .map(|f| f.rsplit_once('-').map_or(f.clone(), |(name, _hash)| name.to_string()))
        .unwrap_or_default();
    let test = std::thread::current().name().filter(|n| *n != "main").unwrap_or("a test").to_string();
    format!("{suite}::{test}")
}

/// Says that the running test goes without `need` (`why`), and logs it for the summary; or
/// fails the test when `need` is required.
pub fn skip(need: Need, why: &str) {
    let test = current_test();
    assert!(!need.required(), "{test} cannot run: {why} (SHAREMAP_REQUIRE names '{}')", need.name());
    eprintln!("skipped: {test}: {why}");
    if let Some(log) = std::env::var_os("SHAREMAP_SKIPPED_LOG") {
        // One short line per skip, appended whole (O_APPEND): suites run one at a time.
        let line = format!("{test}\t{}\t{}\n", need.name(), why.replace(['\t', '\n'], " "));
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The reference systems' directory: `SHAREMAP_ANCHORS`, or `../shared/anchors` beside the
/// repository.
pub fn anchors_dir() -> PathBuf {
    std::env::var_os("SHAREMAP_ANCHORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/anchors"))
}

/// A file of the reference systems (`tinystm-1.0.5.tar.gz`, ...), or None after saying the
/// test skips without it.
pub fn anchor(file: &str) -> Option<PathBuf> {
    let dir = anchors_dir();
    let path = dir.join(file);
    if path.is_file() {
        return Some(path);
    }
    skip(
        Need::Anchors,
        &format!(
            "{file} is not in {} (the reference systems' releases: set SHAREMAP_ANCHORS to their directory, as the README's scripts/test note says)",
            dir.display()
        ),
    );
    None
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets or clears a variable (this crate's one test alone reads and writes the
    /// environment).
    fn set(name: &str, value: Option<&std::ffi::OsStr>) {
        // SAFETY: see above; no other thread of this test binary touches the environment.
        unsafe {
            match value {
                Some(v) => std::env::set_var(name, v),
                None => std::env::remove_var(name),
            }
        }
    }

    #[test]
    fn needs_are_required_by_name_or_all() {
        set("SHAREMAP_REQUIRE", Some("guest, anchors".as_ref()));
        assert!(Need::Guest.required() && Need::Anchors.required() && !Need::Root.required());
        // A required need fails the test instead of skipping it.
        assert!(std::panic::catch_unwind(|| skip(Need::Guest, "no qemu")).is_err());
        set("SHAREMAP_REQUIRE", Some("all".as_ref()));
        assert!(Need::Root.required());
        set("SHAREMAP_REQUIRE", None);
        assert!(!Need::Guest.required());
        // A skip is logged for the summary, one line per test.
        let dir = std::env::temp_dir().join(format!("sharemap-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skipped.tsv");
        set("SHAREMAP_SKIPPED_LOG", Some(log.as_os_str()));
        skip(Need::Hwloc, "lstopo is not installed");
        set("SHAREMAP_SKIPPED_LOG", None);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.ends_with("needs_are_required_by_name_or_all\thwloc\tlstopo is not installed\n"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
