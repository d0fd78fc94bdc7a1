//! The workload suite (workloads/): its Makefile builds every program plain and with the
//! tracer; each checks its own result; each recorded trace shows the sharing the program is
//! written to have.

mod common;

use sharemap::SharingMatrix;
use sharemap::trace::{Chunk, EventKind, TraceReader, TraceSource};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn workloads() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
        let out = Command::new("make")
            .arg("-C")
            .arg(&dir)
            .arg(format!("SHAREMAP={}", env!("CARGO_BIN_EXE_sharemap")))
            .output()
            .expect("make");
        assert!(out.status.success(), "make: {}", String::from_utf8_lossy(&out.stderr));
        dir
    })
}

/// Size arguments small enough for a test run.
const SIZES: [(&str, &str); 10] = [
    ("sor", "96"),
    ("stencil3d", "24"),
    ("cg", "20000"),
    ("matmul", "128"),
    ("kmeans", "20000"),
    ("pipeline", "2000"),
    ("histogram", "20000"),
    ("multigrid", "16384"),
    ("initcompute", "65536"),
    ("stream", "65536"),
];

fn size(name: &str) -> &'static str {
    SIZES.iter().find(|s| s.0 == name).unwrap().1
}

#[test]
fn every_workload_checks_its_result_plain_and_traced() {
    let dir = workloads();
    for (name, n) in SIZES {
        for build in ["plain", "traced"] {
            let out = Command::new(dir.join("build").join(build).join(name))
                .arg(n)
                .env("OMP_NUM_THREADS", "4")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && text.contains(": ok"), "{build}/{name}: {text}");
        }
        // A bad size is refused.
        let out = Command::new(dir.join("build/plain").join(name)).arg("-3").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
    }
}

/// Records a workload with 4 threads; returns its oracle sharing matrix and its events.
fn record(name: &str) -> (SharingMatrix, Vec<(EventKind, String)>) {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.trace");
    let bin = workloads().join("build/traced").join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["record", "--exclude-stack", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&bin)
        .arg(size(name))
        .env("OMP_NUM_THREADS", "4")
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let an = d.path().join("an");
    let out =
        Command::new(env!("CARGO_BIN_EXE_sharemap")).arg("analyze").arg(&trace).arg("-o").arg(&an).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut events = Vec::new();
    let mut r = TraceReader::open(&trace, None).unwrap();
    let mut chunk = Chunk::default();
    while r.next_chunk(&mut chunk).unwrap() {
        events.extend(chunk.events.iter().map(|e| (e.kind, e.label.clone())));
    }
    (SharingMatrix::read(&an.join("comm.csv")).unwrap(), events)
}

/// Pairs by decreasing sharing.
fn ranked(m: &SharingMatrix) -> Vec<(usize, usize, f64)> {
    let n = m.threads();
    let mut pairs: Vec<(usize, usize, f64)> =
        (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).map(|(i, j)| (i, j, m.get(i, j))).collect();
    pairs.sort_by(|a, b| b.2.total_cmp(&a.2));
    pairs
}

#[test]
fn stencil_and_sor_threads_share_with_their_neighbours() {
    for name in ["stencil3d", "sor"] {
        let (m, _) = record(name);
        assert_eq!(m.threads(), 4);
        // Each band or slab meets the next: 0-1, 1-2, 2-3 share more than 1-3, which only
        // meet on what every thread reads (the loop's shared variables). By how much depends
        // on how finely the 2-core machine interleaves the 4 threads.
        for (a, b) in [(0, 1), (1, 2), (2, 3)] {
            assert!(m.get(a, b) > 3.0 * m.get(1, 3), "{name}: {a}-{b} {} vs 1-3 {}", m.get(a, b), m.get(1, 3));
        }
    }
}

#[test]
fn cg_and_histogram_share_between_every_pair() {
    // cg: every thread reads x entries every other thread wrote; the amounts stay within a
    // small factor of each other.
    let pairs = ranked(&record("cg").0);
    let (max, min) = (pairs[0].2, pairs[pairs.len() - 1].2);
    assert!(min > max / 50.0, "cg: {pairs:?}");
    // histogram: every pair meets on the shared bins and the tallies' cache line. How much
    // depends on which threads the 2-core machine runs at the same time, so only the
    // presence is checked.
    let pairs = ranked(&record("histogram").0);
    assert!(pairs.iter().all(|p| p.2 > 0.0), "histogram: {pairs:?}");
}

#[test]
fn the_pipeline_shares_along_its_stages() {
    // Threads: main (the consumer) 0, the producer 1, the stages 2..5 in creation order.
    let (m, _) = record("pipeline");
    assert_eq!(m.threads(), 6);
    // Each queue has a cache line of its own and each thread reads the item count once, so
    // only the five links share, whatever order the threads ran in.
    let pairs = ranked(&m);
    let top: Vec<(usize, usize)> = pairs.iter().take(5).map(|p| (p.0, p.1)).collect();
    for link in [(1, 2), (2, 3), (3, 4), (4, 5), (0, 5)] {
        assert!(top.contains(&link), "{link:?} not among {top:?}");
    }
    assert!(pairs[4].2 > 20.0 * pairs[5].2, "{pairs:?}");
}

#[test]
fn annotations_reach_the_trace() {
    let (m, events) = record("initcompute");
    assert_eq!(events.iter().filter(|e| e.0 == EventKind::InitDone).count(), 1);
    // The main thread initialised everything: it shares with every worker more than the
    // workers share among themselves.
    for w in 1..4 {
        assert!(m.get(0, w) > 10.0 * m.get(1, 2).max(m.get(2, 3)), "{w}");
    }
    let (_, events) = record("multigrid");
    let phases: Vec<&str> = events.iter().filter(|e| e.0 == EventKind::PhaseChange).map(|e| e.1.as_str()).collect();
    // Two V-cycles over 4 levels: 3 2 1 0 1 2 3, twice.
    assert_eq!(phases.len(), 14, "{phases:?}");
    assert_eq!(&phases[..4], ["level-3", "level-2", "level-1", "level-0"]);
}

/// A recording with MG-like neighbour sharing (multigrid, 8 threads), simulated on 4 nodes:
/// SAMMU, which starts where the OS puts the threads and remaps only when it pays, is no
/// slower than the OS; nor is the oracle, whose page homes follow the memory accesses (by
/// raw accesses they lose: 70 % local against the OS's 95 %), beyond the noise: its ratio
/// to the OS moves with the recording's interleaving (0.984 to 1.007 over 12 recordings),
/// so a loss within 2 % is not one.
#[test]
fn sammu_and_the_oracle_are_no_slower_than_the_os_on_a_multigrid_recording() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("mg.trace");
    let bin = workloads().join("build/traced/multigrid");
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["record", "--exclude-stack", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&bin)
        .arg(size("multigrid"))
        .env("OMP_NUM_THREADS", "8")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let machine = "pack:4 numa:1 l3:1(size=2MiB) l2:2(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .arg("simulate")
        .arg(&trace)
        .args(["--machine", machine, "--mechanism", "os,sammu,oracle", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let time = |i: usize| v["mechanisms"][i]["time_ns"].as_f64().unwrap();
    assert!(time(1) <= time(0) * 1.001, "sammu {} against os {}", time(1), time(0));
    assert!(time(2) <= time(0) * 1.02, "the oracle {} against os {}", time(2), time(0));
}

/// `sharemap reproduce` runs every claim of the seed papers at their scale, the CG claim on a
/// recording of the workloads' cg it makes itself, and none is left unrun on a machine set up
/// by scripts/setup. A claim holds, or it does not and carries the experiment that tests the
/// reason given. The claims that hold must go on holding, and the diagnostics that confirm
/// their reason must go on confirming it: a change is a decision, not an accident. The others
/// (docs/reproduce.md, "Open") are only required to run and say what they found.
#[test]
fn reproduce_runs_every_claim_and_explains_those_that_do_not_hold() {
    let d = tempfile::tempdir().unwrap();
    // STAMP's tarball named relative to the working directory, as a user types it. Without
    // it (a fresh clone) the claim that needs it is not run, and the skip is counted.
    let stamp = common::anchor("stamp-0.9.10.tar.gz");
    let mut reproduce = Command::new(env!("CARGO_BIN_EXE_sharemap"));
    reproduce.args(["reproduce", "--json", "--keep"]).arg(d.path()).env_remove("SHAREMAP_ANCHORS");
    if let Some(stamp) = &stamp {
        reproduce.current_dir(stamp.parent().unwrap()).arg("--stamp").arg(stamp.file_name().unwrap());
    }
    let out = reproduce.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let claims = v.as_array().unwrap();
    assert!(claims.len() >= 20, "{} claims", claims.len());
    let holds = [
        "first-touch-local",
        "first-touch-fills",
        "migration-mgrid",
        "optimum-exhaustive",
        "optimum-concave-in-g",
        "corollary-scaling",
        "delay-near-optimum",
        "moves-jump-near-page",
        "filters",
        "sammu-matrix",
        "kmaf-below-sammu",
        "stmap-sampling",
        "marathe-serial-init",
    ];
    let confirmed = [
        "sammu-time",
        "sammu-overhead",
        "marathe-latency-ahead-of-tlb",
        "replication-sor",
        "sammu-cg-matrix",
        "platinum-butterfly-ace",
        "page-size",
    ];
    for c in claims {
        let name = c["name"].as_str().unwrap();
        for field in ["source", "claim", "paper", "sharemap", "why", "scale"] {
            assert!(!c[field].as_str().unwrap().is_empty(), "{name}: no {field}");
        }
        let verdict = c["verdict"].as_str().unwrap();
        if name == "stmap-equation-1" && stamp.is_none() {
            assert_eq!(verdict, "not-run", "{name} ran without STAMP: {}", c["why"]);
            continue;
        }
        assert_ne!(verdict, "not-run", "{name}: {}", c["why"]);
        if holds.contains(&name) {
            assert_eq!(verdict, "holds", "{name}: {}", c["sharemap"]);
        }
        if verdict == "does-not-hold" {
            let diagnostic = &c["diagnostic"];
            assert!(diagnostic.is_object(), "{name} does not hold and carries no diagnostic");
            assert!(!diagnostic["found"].as_str().unwrap().is_empty(), "{name}");
            if confirmed.contains(&name) {
                assert_eq!(diagnostic["confirms"], true, "{name}: {}", diagnostic["found"]);
            }
        }
    }
    // A quick run says so on every claim.
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["reproduce", "--json", "--quick", "--claim", "first-touch-local,corollary-scaling"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for c in v.as_array().unwrap() {
        assert!(c["scale"].as_str().unwrap().starts_with("quick"), "{}", c["scale"]);
    }
    // A recording given that does not exist: one line, before any claim runs.
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["reproduce", "--claim", "cg-data-mapping", "--cg", "/nonexistent/cg.trace"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // An unknown claim: one line, naming the known ones.
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap")).args(["reproduce", "--claim", "nope"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--claim") && err.contains("first-touch-local"), "{err}");
}
