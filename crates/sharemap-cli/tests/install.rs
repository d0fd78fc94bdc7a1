//! Installed as a user installs it: a binary copied alone says which library it lacks and
//! how to get it; scripts/install's layout (PREFIX/bin, PREFIX/lib/sharemap) works from any
//! directory: `cc`, `record` and `run` find their libraries there.

mod common;
use common::{p, s};
use std::path::Path;
use std::process::Command;

/// Two threads, each writing its own 1000 ints: 2000 stores the tracer sees.
const PROGRAM: &str = r#"
#include <pthread.h>
static int a[2][1000];
static void *work(void *arg) { long t = (long)arg; for (int i = 0; i < 1000; i++) a[t][i] = i; return 0; }
int main(void) {
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], 0, work, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], 0);
    return a[1][999] == 999 ? 0 : 1;
}
"#;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap()
}

#[test]
fn an_installed_sharemap_finds_its_libraries_and_a_lone_binary_says_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "prog.c");
    std::fs::write(&src, PROGRAM).unwrap();

    // The binary alone (as `cargo install` leaves it): one line naming the library and the way.
    let lone = p(&dir, "lone");
    std::fs::create_dir(&lone).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_sharemap"), lone.join("sharemap")).unwrap();
    let out = Command::new(lone.join("sharemap"))
        .args(["cc", "-O1", "-pthread", s(&src), "-o", s(&p(&dir, "x"))])
        .env("SHAREMAP_COMPILER", "gcc")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("libsharemap_rt.a is missing") && err.contains("scripts/install"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = Command::new(lone.join("sharemap")).args(["run", "--", "/bin/true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libsharemap_pin.so is missing") && err.lines().count() == 1, "{err}");

    // scripts/install's layout, used from elsewhere.
    let prefix = p(&dir, "prefix");
    let out = Command::new(repo().join("scripts/install")).arg("--no-build").arg(&prefix).output().unwrap();
    assert!(out.status.success(), "scripts/install: {}", String::from_utf8_lossy(&out.stderr));
    for f in [
        "bin/sharemap",
        "lib/sharemap/libsharemap_rt.a",
        "lib/sharemap/libsharemap_pin.so",
        "lib/sharemap/include/stm/stm.h",
    ] {
        assert!(prefix.join(f).is_file(), "{f} not installed");
    }
    let installed = prefix.join("bin/sharemap");
    let prog = p(&dir, "prog");
    let out = Command::new(&installed)
        .args(["cc", "-O1", "-pthread", s(&src), "-o", s(&prog)])
        .env("SHAREMAP_COMPILER", "gcc")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "installed cc: {}", String::from_utf8_lossy(&out.stderr));
    let trace = p(&dir, "prog.trace");
    let out = Command::new(&installed).args(["record", "-o", s(&trace), "--", s(&prog)]).output().unwrap();
    assert!(out.status.success(), "installed record: {}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&installed).args(["info", s(&trace), "--json"]).output().unwrap();
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["writes"].as_u64(), Some(2000), "{info}");
    assert_eq!(info["threads"].as_u64(), Some(3), "main and two workers: {info}");
    let out = Command::new(&installed).args(["run", "--thread-map", "compact", "--", s(&prog)]).output().unwrap();
    assert!(out.status.success(), "installed run: {}", String::from_utf8_lossy(&out.stderr));
}
