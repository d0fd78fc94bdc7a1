//! The simulator's caches against DineroIV, the reference single-cache simulator: DineroIV
//! 7 (from the reference systems beside the repository, `../shared/anchors`, or
//! SHAREMAP_ANCHORS) is built in a scratch directory with 64-bit addresses (its default
//! `D4ADDR` is 32 bits wide and aliases the generators' addresses above 2^32), and the
//! generated patterns, exported with `sharemap convert` to din, must miss exactly as often
//! in `sharemap simulate`'s only cache (one core, one level: LRU, write-allocate,
//! write-back) as in DineroIV's, for several geometries.

mod common;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// DineroIV built in `dir`, with 64-bit addresses (None: its release is not here).
fn build_dinero(dir: &Path) -> Option<PathBuf> {
    run(Command::new("tar").arg("xzf").arg(common::anchor("dineroIV.tar.gz")?).arg("-C").arg(dir));
    run(Command::new("tar").arg("xzf").arg(dir.join("dineroIV/d4-7.tar.gz")).arg("-C").arg(dir));
    let src = dir.join("d4-7");
    run(Command::new("./configure").current_dir(&src));
    run(Command::new("make").arg("CFLAGS=-O2 -DD4ADDR='unsigned long'").current_dir(&src));
    Some(src.join("dineroIV"))
}

/// DineroIV's demand misses of its L1 data cache on a din trace.
fn dinero_misses(dinero: &Path, din: &Path, size: u64, line: u64, ways: u64) -> u64 {
    let out = run(Command::new(dinero)
        .args(["-l1-dsize", &size.to_string(), "-l1-dbsize", &line.to_string(), "-l1-dassoc", &ways.to_string()])
        .args(["-l1-drepl", "l", "-l1-dwalloc", "a", "-l1-dwback", "a", "-informat", "d"])
        .stdin(std::fs::File::open(din).unwrap()));
    let line = out.lines().find(|l| l.trim_start().starts_with("Demand Misses")).expect("a miss count");
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// `sharemap simulate`'s L1 misses on one core with that cache.
fn sharemap_misses(trace: &Path, size: u64, line: u64, ways: u64) -> u64 {
    let machine = format!("pack:1 numa:1 l1d:1(size={size}) core:1 pu:1");
    let out = run(Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .arg("simulate")
        .arg(trace)
        .args(["--machine", &machine, "--mechanism", "os", "--json"])
        .args(["--param", &format!("line={line}"), "--param", &format!("l1_ways={ways}")]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["mechanisms"][0]["misses"][0].as_u64().unwrap()
}

#[test]
fn single_cache_misses_agree_exactly_with_dinero_iv() {
    let dir = tempfile::tempdir().unwrap();
    let Some(dinero) = build_dinero(dir.path()) else { return };
    // (bytes, line, ways): direct-mapped to fully associative, lines of 32 to 128 bytes.
    let geometries = [(1024u64, 64u64, 1u64), (4096, 64, 4), (8192, 32, 2), (16384, 64, 8), (2048, 128, 16)];
    let mut compared = 0;
    for pattern in ["neighbor", "sor", "matmult", "producer-consumer", "migratory", "random", "read-mostly"] {
        let trace = dir.path().join(format!("{pattern}.trace"));
        let din = dir.path().join(format!("{pattern}.din"));
        run(Command::new(env!("CARGO_BIN_EXE_sharemap"))
            .args(["gen", pattern, "--threads", "4", "--accesses", "100000", "-o"])
            .arg(&trace));
        run(Command::new(env!("CARGO_BIN_EXE_sharemap")).arg("convert").arg(&trace).arg(&din));
        for &(size, line, ways) in &geometries {
            let want = dinero_misses(&dinero, &din, size, line, ways);
            let got = sharemap_misses(&trace, size, line, ways);
            assert_eq!(
                got, want,
                "{pattern}, {size} bytes, {line}-byte lines, {ways} ways: sharemap {got}, DineroIV {want}"
            );
            assert!(want > 0);
            compared += 1;
        }
    }
    assert_eq!(compared, 35);
}
