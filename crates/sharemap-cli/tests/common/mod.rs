//! Helpers shared by the command-line tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn sharemap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sharemap")).args(args).output().expect("run sharemap")
}

/// `sharemap` with more environment variables.
pub fn sharemap_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sharemap"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run sharemap")
}

pub fn ok(args: &[&str]) -> Output {
    let out = sharemap(args);
    assert!(out.status.success(), "sharemap {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

pub fn p(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A C program built with gcc (-O1 -pthread and `flags`) in `dir`.
pub fn build_c(dir: &tempfile::TempDir, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = p(dir, &format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = p(dir, name);
    let st = Command::new("gcc").args(["-O1", "-pthread"]).args(flags).arg(&src).arg("-o").arg(&out).status().unwrap();
    assert!(st.success(), "gcc {name}");
    out
}

/// A child of `parent` (its main thread's) that `is_it` recognises by its /proc entry,
/// waited for up to `seconds`.
pub fn child_of(parent: i32, seconds: u64, is_it: impl Fn(i32) -> bool) -> Option<i32> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < until {
        let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).unwrap_or_default();
        if let Some(c) = children.split_whitespace().filter_map(|p| p.parse::<i32>().ok()).find(|&c| is_it(c)) {
            return Some(c);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

/// Whether process `pid` ends (is gone, or a zombie waiting for whoever adopted it) within
/// `seconds`; one still running then is killed, so that no test leaves it behind.
pub fn ends_within(pid: i32, seconds: u64) -> bool {
    let ended = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < until {
        if ended() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: a signal to a process the test made.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    false
}

/// The skip rule and the reference systems, for the suites that include this module (not
/// every suite uses them).
#[allow(unused_imports)]
pub use sharemap_testkit::{Need, anchor, skip};
