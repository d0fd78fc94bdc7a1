//! Helpers shared by the command-line tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn sharemap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sharemap")).args(args).output().expect("run sharemap")
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
