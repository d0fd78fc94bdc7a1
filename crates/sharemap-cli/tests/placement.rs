//! `place`, `sweep`, `filter` and `policies` as a user runs them.

mod common;
use common::{json, ok, p, s, sharemap};
use std::process::Command;

fn policy<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["policies"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no {name}"))
}

/// A two-node machine and a trace whose costs can be worked out by hand.
#[test]
fn place_reports_exact_costs_on_a_known_trace() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    // Page 0x1000: thread 0 writes 3 times, then thread 1 reads twice. Page 0x2000: thread 1 only.
    std::fs::write(
        &t,
        "thread,addr,size,kind\n0,0x1000,8,W\n0,0x1008,8,W\n0,0x1010,8,W\n1,0x1000,8,R\n1,0x1008,8,R\n1,0x2000,8,W\n",
    )
    .unwrap();
    let v = json(&ok(&[
        "place",
        s(&t),
        "--machine",
        "numa:2 pu:1",
        "--cost",
        "r=3,R=10",
        "--policy",
        "first-touch,bind,interleave",
        "--json",
    ]));
    assert_eq!(v["accesses"], 6);
    assert_eq!(v["pages"], 2);
    assert_eq!(v["policies"][0]["name"], "optimal");
    // First touch: page 1 local x3 + remote x2 (3 + 6), page 2 local: 10.
    let ft = policy(&v, "first-touch");
    assert_eq!(
        (ft["cost"].as_f64().unwrap(), ft["local"].as_u64().unwrap(), ft["remote"].as_u64().unwrap()),
        (10.0, 4, 2)
    );
    // Bind to node 0: page 1 as first touch (9), page 2's write remote (3).
    assert_eq!(policy(&v, "bind")["cost"], 12.0);
    // Interleave: page 1 -> node 1 (3 remote writes, 2 local reads), page 2 -> node 0 (remote): 9 + 2 + 3.
    assert_eq!(policy(&v, "interleave")["cost"], 14.0);
    // The optimum: nothing beats first touch here (a move costs 10 > the 4 it could save).
    assert_eq!(policy(&v, "optimal")["cost"], 10.0);
    assert_eq!(ft["vs_optimal"], 1.0);
    assert_eq!(ft["mcpr"].as_f64().unwrap(), 10.0 / 6.0);
}

#[test]
fn every_policy_runs_and_none_beats_the_optimum() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "pc.trace");
    ok(&["gen", "phase-change", "--threads", "8", "--accesses", "300k", "-o", s(&t)]);
    // Neighbouring threads on one node (thread i on CPU i), to whom the pattern hands its
    // data at each phase change.
    let v = json(&ok(&[
        "place",
        s(&t),
        "--machine",
        "pack:4 numa:1 core:2 pu:1",
        "--thread-map",
        "identity",
        "--cost",
        "ace",
        "--json",
        "--breakdown",
    ]));
    let list = v["policies"].as_array().unwrap();
    let names = String::from_utf8(ok(&["list", "policies"]).stdout).unwrap();
    assert_eq!(
        list.len(),
        1 + names
            .lines()
            .filter(|l| !l.starts_with([' ', '(']) && !l.starts_with("policy") && !l.starts_with("optimal"))
            .count()
    );
    let best = list[0]["cost"].as_f64().unwrap();
    for p in list {
        assert!(p["cost"].as_f64().unwrap() >= best - 1e-6, "{} beats the optimum", p["name"]);
        let refs = p["local"].as_u64().unwrap() + p["remote"].as_u64().unwrap() + p["global"].as_u64().unwrap();
        assert_eq!(refs, 300_000, "{}", p["name"]);
    }
    assert_eq!(v["costliest_pages"].as_array().unwrap().len(), 10);
    // Phase changes: forgetting placements at the annotations beats plain first touch.
    assert!(
        policy(&v, "migrate-on-phase")["cost"].as_f64().unwrap() < policy(&v, "first-touch")["cost"].as_f64().unwrap()
    );
}

/// Seed 003: with 64 nodes, first touch keeps sor's references local; round robin makes
/// nearly all of them remote (about 1/64 local).
#[test]
fn first_touch_versus_round_robin_on_sor_with_64_nodes() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "sor.trace");
    ok(&["gen", "sor", "--threads", "64", "--accesses", "4M", "-o", s(&t)]);
    let v = json(&ok(&["place", s(&t), "--machine", "numa:64 pu:1", "--policy", "first-touch,round-robin", "--json"]));
    let ft = policy(&v, "first-touch")["local_ratio"].as_f64().unwrap();
    let rr = policy(&v, "round-robin")["local_ratio"].as_f64().unwrap();
    assert!(ft > 0.9, "first touch local ratio {ft}");
    assert!(rr < 0.05, "round robin local ratio {rr}");
}

/// Seed 004: on the ACE model, Delay stays within 15% of the optimum (matmult).
#[test]
fn delay_is_within_15_percent_of_optimal_on_ace() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "mm.trace");
    ok(&["gen", "matmult", "--threads", "7", "--accesses", "8M", "-o", s(&t)]);
    let v = json(&ok(&["place", s(&t), "--machine", "numa:7 pu:1", "--cost", "ace", "--policy", "delay", "--json"]));
    let ratio = policy(&v, "delay")["vs_optimal"].as_f64().unwrap();
    assert!(ratio <= 1.15, "delay / optimal = {ratio}");
}

#[test]
fn sweep_writes_csv_and_plots() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "sor.trace");
    ok(&["gen", "sor", "--threads", "7", "--accesses", "200k", "-o", s(&t)]);
    let out = p(&d, "g.csv");
    ok(&[
        "sweep",
        s(&t),
        "--machine",
        "numa:7 pu:1",
        "--cost",
        "ace",
        "--vary",
        "G",
        "--values",
        "20:3000:6",
        "--policy",
        "ace,delay",
        "-o",
        s(&out),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 6 * 3);
    // The optimum never gets cheaper as moves get dearer.
    let opt: Vec<f64> = rows.iter().filter(|r| r[2] == "optimal").map(|r| r[3].parse().unwrap()).collect();
    assert!(opt.windows(2).all(|w| w[1] >= w[0] - 1e-6), "{opt:?}");
    for what in ["mcpr", "moves", "breakdown"] {
        if cfg!(feature = "png") {
            let png = std::fs::read(p(&d, &format!("g-{what}.png"))).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        } else {
            assert!(!p(&d, &format!("g-{what}.png")).exists(), "PNG without the png feature");
        }
        let svg = std::fs::read_to_string(p(&d, &format!("g-{what}.svg"))).unwrap();
        assert!(svg.contains("<svg"));
        // Each title names the trace and the machine it is of.
        assert!(svg.contains("sor.trace on numa:7 pu:1 (r=5 R=40 g=2 G=20 at the first G)"), "{what}");
    }
    let mcpr = std::fs::read_to_string(p(&d, "g-mcpr.svg")).unwrap();
    // The optimum's line is drawn last, over any policy that ties with it.
    let last_path = mcpr.rfind("<polyline").unwrap();
    assert!(mcpr[last_path..].contains("stroke=\"#000000\""), "the optimum (black) is drawn last");
    // Page size sweep re-reads the trace at each size.
    ok(&[
        "sweep",
        s(&t),
        "--machine",
        "numa:7 pu:1",
        "--cost",
        "butterfly",
        "--vary",
        "page-size",
        "--values",
        "1024,4096",
        "-o",
        s(&p(&d, "ps.csv")),
    ]);
}

#[test]
fn filters_keep_every_access_and_report_sensitivity() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "100k", "-o", s(&t)]);
    for flag in ["--reorder", "--gaps"] {
        let out = p(&d, &format!("f{flag}.trace"));
        ok(&["filter", s(&t), flag, "-o", s(&out)]);
        let v = json(&ok(&["info", s(&out), "--json"]));
        assert_eq!(v["accesses"], 100_000);
    }
    let rep = String::from_utf8(ok(&["filter", s(&t), "--machine", "numa:4 pu:1", "--sensitivity"]).stdout).unwrap();
    assert!(rep.contains("reorder") && rep.contains("gaps") && rep.contains("changed by"), "{rep}");
}

#[test]
fn bad_placement_input_gets_one_clear_line() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "x.trace");
    ok(&["gen", "private", "--threads", "2", "--accesses", "1000", "-o", s(&t)]);
    let cases: [(&[&str], &str); 9] = [
        (&["--policy", "nope"], "unknown policy 'nope'"),
        (&["--cost", "r=3,R=4"], "R must be > 2r"),
        (&["--cost", "r=5,R=40,g=2"], "g and G go together"),
        (&["--cost", "x=1"], "unknown parameter 'x'"),
        (&["--set", "delay.q=1"], "has no parameter 'q'"),
        (&["--set", "delay.c=x", "--policy", "delay"], "expected an integer from 0 to 4294967295"),
        (&["--thread-map", "0,99"], "PU 99 does not exist"),
        (&["--page-size", "3000"], "power of two"),
        (&["--machine", "numa:2 pu:1", "--policy", "bind", "--set", "bind.node=5"], "bind.node=5"),
    ];
    for (extra, expect) in cases {
        let mut args = vec!["place", s(&t)];
        args.extend_from_slice(extra);
        let out = sharemap(&args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: '{err}' lacks '{expect}'");
    }
    let out = sharemap(&["place", "/nonexistent.trace"]);
    assert!(!out.status.success());
    let out = sharemap(&["sweep", s(&t), "--vary", "Q", "--values", "1", "-o", s(&p(&d, "o.csv"))]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected G, R, g, r or page-size"));
    assert!(!p(&d, "o.csv").exists(), "no partial output");
}

#[test]
fn analyze_writes_numalize_files_and_a_heatmap() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "6", "--accesses", "200k", "-o", s(&t)]);
    let out = p(&d, "an");
    ok(&["analyze", s(&t), "--detector", "oracle", "-o", s(&out)]);
    let m = sharemap::SharingMatrix::read(&out.join("comm.csv")).unwrap();
    assert_eq!(m.threads(), 6);
    for i in 0..6usize {
        for j in 0..6usize {
            if i != j {
                assert_eq!(m.get(i, j) > 0.0, i.abs_diff(j) == 1, "threads {i}, {j}");
            }
        }
    }
    let pages = std::fs::read_to_string(out.join("pages.csv")).unwrap();
    assert!(pages.starts_with("page.address,alloc.thread,alloc.location,firsttouch.thread,firsttouch.location,structure.name,T0,T1,T2,T3,T4,T5\n"));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["threads"], 6);
    assert_eq!(summary["total_sharing"].as_f64().unwrap(), m.total());
    if cfg!(feature = "png") {
        assert_eq!(&std::fs::read(out.join("heatmap.png")).unwrap()[..4], b"\x89PNG");
        assert_eq!(&std::fs::read(out.join("pages.png")).unwrap()[..4], b"\x89PNG");
    }
    // Per-node counts: the default machine has 4 nodes; each page's counts add up to its
    // per-thread counts.
    let nodes = std::fs::read_to_string(out.join("page-nodes.csv")).unwrap();
    assert!(nodes.starts_with("page.address,firsttouch.location,N0,N1,N2,N3\n"), "{nodes}");
    let sum = |line: &str, skip: usize| line.split(',').skip(skip).map(|x| x.parse::<u64>().unwrap()).sum::<u64>();
    for (a, b) in pages.lines().skip(1).zip(nodes.lines().skip(1)) {
        assert_eq!(sum(a, 6), sum(b, 2));
    }
    assert!(std::fs::read_to_string(out.join("pages.svg")).unwrap().contains("Page usage"));
    let bad = sharemap(&["analyze", s(&t), "--detector", "nope", "-o", s(&out)]);
    let err = String::from_utf8_lossy(&bad.stderr).to_string();
    assert!(
        !bad.status.success() && err.trim_end().lines().count() == 1 && err.contains("unknown detector 'nope'"),
        "{err}"
    );
}

#[test]
fn map_groups_sharing_threads_and_reports_every_algorithm() {
    let d = tempfile::tempdir().unwrap();
    // Threads (0,5), (1,6), (2,7), (3,4) share heavily: TopoMatch format.
    let mut rows = vec![vec![0u32; 8]; 8];
    for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
        rows[a][b] = 100;
        rows[b][a] = 100;
    }
    let text: String =
        rows.iter().map(|r| r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ") + "\n").collect();
    let mat = p(&d, "m.mat");
    std::fs::write(&mat, text).unwrap();
    let v = json(&ok(&["map", s(&mat), "--machine", "pack:2 core:2 pu:2", "--algo", "all", "--json"]));
    let list = v.as_array().unwrap();
    assert!(list.iter().any(|r| r["algorithm"] == "exhaustive"));
    let best = list.iter().map(|r| r["cost"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    let default = list.iter().find(|r| r["algorithm"] == "sharemap").unwrap();
    assert_eq!(default["cost"].as_f64().unwrap(), best);
    // EagerMap's view: all the sharing stays within cores (the four pairs each on one core).
    let levels = default["sharing_by_level"].as_array().unwrap();
    assert_eq!(levels[0]["level"], "Core");
    assert_eq!(levels[0]["share"].as_f64().unwrap(), 1.0);
    let total: f64 = levels.iter().map(|l| l["share"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-12);
    let m: Vec<u64> = default["mapping"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
        assert_eq!(m[a] / 2, m[b] / 2, "threads {a} and {b} on one core");
    }
    // Text output gives a PU list for taskset and OMP_PLACES.
    // A matrix without sharing: no ratios to a cost of 0, and a sentence saying why.
    let zero = p(&d, "zero.csv");
    std::fs::write(&zero, "0,0,0\n0,0,0\n0,0,0\n").unwrap();
    let none = String::from_utf8(ok(&["map", s(&zero), "--machine", "pu:4"]).stdout).unwrap();
    assert!(none.contains("no sharing in the matrix") && !none.contains("0.000      0.000"), "{none}");
    let text = String::from_utf8(ok(&["map", s(&mat), "--machine", "pack:2 core:2 pu:2"]).stdout).unwrap();
    assert!(text.contains("OMP_PLACES=\"{"), "{text}");
    // Bad input: one line each.
    let bad = p(&d, "bad.mat");
    std::fs::write(&bad, "0 1\n1 0 2\n").unwrap();
    for (args, expect) in [
        (vec!["map", s(&bad), "--machine", "pack:2 core:2 pu:2"], "must be square"),
        (vec!["map", s(&mat), "--algo", "nope"], "unknown algorithm 'nope'"),
        (vec!["map", s(&mat), "--machine", "pack:4 core:4 pu:1", "--algo", "exhaustive"], "at most 10 PUs"),
    ] {
        let out = sharemap(&args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            !out.status.success() && err.trim_end().lines().count() == 1 && err.contains(expect),
            "{args:?}: {err}"
        );
    }
}

/// Seed 000's point: data placement depends on the thread mapping. Neighbour sharing on 4
/// NUMA nodes: a sharing-aware mapping keeps more references local than scatter.
#[test]
fn placement_quality_depends_on_the_thread_mapping() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "nb.trace");
    ok(&["gen", "neighbor", "--threads", "16", "--accesses", "400k", "-o", s(&t)]);
    let local = |map: &str| {
        let v = json(&ok(&[
            "place",
            s(&t),
            "--machine",
            "pack:4 numa:1 core:2 pu:2",
            "--thread-map",
            map,
            "-p",
            "first-touch",
            "--json",
        ]));
        (policy(&v, "first-touch")["local_ratio"].as_f64().unwrap(), policy(&v, "optimal")["cost"].as_f64().unwrap())
    };
    let (aware, aware_opt) = local("sharemap");
    let (scatter, scatter_opt) = local("scatter");
    assert!(aware > scatter + 0.03, "sharemap {aware} vs scatter {scatter}");
    assert!(aware_opt < scatter_opt);
    // A mapping file works like the list.
    let f = p(&d, "map.txt");
    std::fs::write(&f, "0 1 2 3 4 5 6 7\n8 9 10 11 12 13 14 15\n").unwrap();
    ok(&["place", s(&t), "--machine", "pack:4 numa:1 core:2 pu:2", "--thread-map", s(&f), "-p", "first-touch"]);
    // The chain with another detector, and with a matrix file: the same mapping quality
    // as the oracle's on neighbour sharing.
    let with = |sharing: &str| {
        let v = json(&ok(&[
            "place",
            s(&t),
            "--machine",
            "pack:4 numa:1 core:2 pu:2",
            "--thread-map",
            "sharemap",
            "--sharing",
            sharing,
            "-p",
            "first-touch",
            "--json",
        ]));
        policy(&v, "first-touch")["local_ratio"].as_f64().unwrap()
    };
    // STMap maps once its counting thread reaches the interval (mi), here within the trace.
    assert_eq!(with("stmap:si=10,mi=100"), aware);
    let an = p(&d, "an");
    ok(&["analyze", s(&t), "-o", s(&an)]);
    assert_eq!(with(s(&an.join("comm.csv"))), aware);
    // A matrix of another size is refused.
    let small = p(&d, "small.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "20k", "-o", s(&small)]);
    let out = sharemap(&["place", s(&small), "--thread-map", "sharemap", "--sharing", s(&an.join("comm.csv"))]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && err.trim_end().lines().count() == 1 && err.contains("the matrix has 16 threads"),
        "{err}"
    );
}

/// The Scotch export is what Scotch reads: scotch_gmap maps it, and sharemap's default
/// mapping costs no more than Scotch's under sharemap's metric.
#[test]
fn scotch_reads_the_export_and_the_default_is_no_worse() {
    if Command::new("scotch_gmap").arg("-h").output().is_err() {
        panic!("scotch_gmap is missing: scripts/setup installs the scotch package");
    }
    let d = tempfile::tempdir().unwrap();
    for (pattern, machine) in [
        ("neighbor", "pack:4 numa:1 core:2 pu:2"),
        ("all-to-all", "pack:2 numa:1 l3:1 core:4 pu:2"),
        ("matmult", "pack:4 numa:1 core:4 pu:1"),
    ] {
        let t = p(&d, &format!("{pattern}.trace"));
        ok(&["gen", pattern, "--threads", "16", "--accesses", "300k", "-o", s(&t)]);
        let dir = p(&d, pattern);
        ok(&["analyze", s(&t), "--machine", machine, "-o", s(&dir)]);
        let out = dir.join("scotch.map");
        let run = Command::new("scotch_gmap")
            .args(["-b0", "-cb"])
            .arg(dir.join("comm.grf"))
            .arg(dir.join("machine.tgt"))
            .arg(&out)
            .output()
            .unwrap();
        assert!(run.status.success(), "scotch_gmap: {}", String::from_utf8_lossy(&run.stderr));
        let text = std::fs::read_to_string(&out).unwrap();
        let mut mapping = vec![0usize; 16];
        for line in text.lines().skip(1) {
            let f: Vec<usize> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            mapping[f[0]] = f[1];
        }
        let m = sharemap::SharingMatrix::read(&dir.join("comm.csv")).unwrap();
        let mach = sharemap::Machine::from_spec(machine).unwrap();
        let scotch = sharemap::map::cost(&m, &mapping, &mach, sharemap::CostModel::Latency);
        let v = json(&ok(&["map", s(&dir.join("comm.csv")), "--machine", machine, "--json"]));
        let ours = v[0]["cost"].as_f64().unwrap();
        assert!(ours <= scotch * (1.0 + 1e-9), "{pattern}: sharemap {ours} vs Scotch {scotch}");
    }
}

#[test]
fn sampled_and_fault_detectors_compare_with_the_oracle() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "300k", "-o", s(&t)]);
    for det in ["sampled:every=10", "sampled:cache", "faults:window=20000", "stmap:si=10"] {
        let out = p(&d, det);
        ok(&["analyze", s(&t), "--detector", det, "--compare", "oracle", "-o", s(&out)]);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(v["detector"].as_str().unwrap().split(':').next(), det.split(':').next());
        assert!(v["seen"].as_u64().unwrap() < v["accesses"].as_u64().unwrap());
        assert!(v["correlation"].as_f64().unwrap() > 0.9, "{det}: {v}");
        assert!(v["mse"].as_f64().unwrap() < 0.05, "{det}: {v}");
    }
}

/// SAMMU on the neighbour pattern, one thread per core: its matrix follows the oracle's
/// (correlation >= 0.9). With SMT siblings sharing a TLB the siblings'
/// sharing is invisible to it (the entry keeps one thread id), as in seed 000's design.
#[test]
fn sammu_follows_the_oracle_on_neighbour_sharing() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "16", "--accesses", "2M", "-o", s(&t)]);
    let out = p(&d, "sammu");
    ok(&[
        "analyze",
        s(&t),
        "--machine",
        "pack:2 numa:1 core:8 pu:1",
        "--detector",
        // Each thread's 16-page block fits seed 000's 64 + 512-entry TLBs, which then never
        // evict: TLBs smaller than the working set, as with the paper's benchmarks.
        "sammu:l1=8,l2=32",
        "--compare",
        "oracle",
        "-o",
        s(&out),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["compared_with"], "oracle:page", "a bare oracle compares at the detector's granularity");
    assert!(v["correlation"].as_f64().unwrap() >= 0.9, "{v}");
    assert_eq!(v["sammu"]["updates_from_flush"], 0, "no flush unless asked for");
    let r = &v["sammu"];
    assert!(r["evictions"].as_u64().unwrap() > 0);
    assert!(r["extra_memory_accesses"].as_u64().unwrap() >= 2 * r["triggers"].as_u64().unwrap());
    assert!(r["storage_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn analyze_windows_cut_the_matrix() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "300k", "-o", s(&t)]);
    let out = p(&d, "w");
    ok(&["analyze", s(&t), "--split", "100000", "-o", s(&out)]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["windows"]["count"], 3);
    assert_eq!(v["windows"]["phase_changes"].as_array().unwrap().len(), 0, "a steady pattern has one phase");
    let total: f64 = (0..3)
        .map(|k| sharemap::SharingMatrix::read(&out.join(format!("windows/comm-{k:04}.csv"))).unwrap().total())
        .sum();
    assert_eq!(total, v["total_sharing"].as_f64().unwrap(), "windows add up to the whole");
    let bad = sharemap(&["analyze", s(&t), "--split", "1000", "--detector", "stmap", "-o", s(&out)]);
    assert!(!bad.status.success());
}

/// The `sammu` policy acts on the TLB model's events. On init-then-compute each computing
/// thread's pages stay in its TLBs, so with seed 000's 32-bit access counters no event tells
/// SAMMU to move them (only the initialising thread's evictions are seen); 8-bit counters
/// saturate within the compute phase and the pages follow their users.
#[test]
fn sammu_placement_runs_on_tlb_events() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "i.trace");
    ok(&["gen", "init-then-compute", "--threads", "16", "--accesses", "2M", "-o", s(&t)]);
    let run = |extra: &[&str]| {
        let mut args = vec!["place", s(&t), "--machine", "pack:4 numa:1 core:4 pu:1", "-p", "sammu", "--json"];
        args.extend_from_slice(extra);
        let v = json(&ok(&args));
        let p = policy(&v, "sammu");
        (p["cost"].as_f64().unwrap(), p["moves"].as_u64().unwrap())
    };
    let (seed_cost, seed_moves) = run(&[]);
    assert_eq!(seed_moves, 0);
    let (small_cost, small_moves) = run(&["--set", "sammu.ac=8"]);
    assert!(small_moves > 0 && small_cost < seed_cost, "ac=8: {small_cost} vs {seed_cost}");
    let (_, proxy_moves) = run(&["--set", "sammu.events=proxy"]);
    assert!(proxy_moves > 0);
    for (set, expect) in
        [("sammu.events=x", "not tlb or proxy"), ("sammu.ac=40", "from 1 to 32"), ("sammu.l1=2", "TLB entries")]
    {
        let out = sharemap(&["place", s(&t), "-p", "sammu", "--set", set]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success() && err.trim_end().lines().count() == 1 && err.contains(expect), "{set}: {err}");
    }
}

/// `place` says where the threads run, and warns when they all share one node (every
/// policy keeping pages there then ties with the optimum).
#[test]
fn place_shows_each_threads_pu_and_warns_on_one_node() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("n.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "20k", "-o", t.to_str().unwrap()]);
    // Thread i on CPU i: the first eight cores of package 0 (logical PUs 0, 2, ...).
    let out = ok(&[
        "place",
        t.to_str().unwrap(),
        "--machine",
        "sammu",
        "--policy",
        "first-touch",
        "--thread-map",
        "identity",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("threads on PUs 0 2 4 6 8 10 12 14 (node 0: 0-7)"), "{text}");
    assert!(text.contains("note: all 8 threads run on NUMA node 0"), "{text}");
    // By default, where Linux puts them: every node used.
    let out = ok(&["place", t.to_str().unwrap(), "--machine", "sammu", "--policy", "first-touch"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("node 3:") && !text.contains("note: all"), "{text}");
    let out =
        ok(&["place", t.to_str().unwrap(), "--machine", "sammu", "--policy", "first-touch", "--thread-map", "scatter"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("node 0: 0, 4; node 1: 1, 5; node 2: 2, 6; node 3: 3, 7") && !text.contains("note: all"),
        "{text}"
    );
    let args = ["place", t.to_str().unwrap(), "--machine", "sammu", "-p", "first-touch", "--thread-map", "identity"];
    let out = ok(&[&args[..], &["--json"]].concat());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["threads"].as_array().unwrap().len(), 8);
    assert_eq!(doc["threads"][7]["pu"], 14);
    assert_eq!(doc["threads"][7]["node"], 0);
}

/// `--sharing stmap` follows STMap's online decision: enabled, the threads are mapped with
/// the sharing known at the mapping interval (not the whole trace's); not enabled, they stay
/// where the OS put them and the output says so.
#[test]
fn stmap_sharing_follows_its_decision_and_the_matrix_at_the_interval() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("two-phases.csv");
    // Phase 1: 0-1 and 2-3 share (thread 1 makes 200 accesses); phase 2, ten times longer:
    // 0-2 and 1-3 share.
    let mut csv = String::from("thread,addr,size,kind\n");
    for _ in 0..200 {
        csv += "0,0x1000,8,W\n1,0x1000,8,R\n2,0x2000,8,W\n3,0x2000,8,R\n";
    }
    for _ in 0..2000 {
        csv += "0,0x3000,8,W\n2,0x3000,8,R\n1,0x4000,8,W\n3,0x4000,8,R\n";
    }
    std::fs::write(&t, csv).unwrap();
    let place = |sharing: &str| {
        let out = ok(&[
            "place",
            t.to_str().unwrap(),
            "--machine",
            "pack:2 numa:1 core:2 pu:1",
            "--policy",
            "first-touch",
            "--thread-map",
            "sharemap",
            "--sharing",
            sharing,
            "--json",
        ]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let pus: Vec<u64> = doc["threads"].as_array().unwrap().iter().map(|t| t["pu"].as_u64().unwrap()).collect();
        (pus, doc["notes"].clone())
    };
    let package = |pu: u64| pu / 2;
    // The whole trace's sharing pairs 0 with 2.
    let (whole, notes) = place("oracle");
    assert_eq!(package(whole[0]), package(whole[2]), "{whole:?}");
    assert!(notes.is_null());
    // STMap decides after thread 1's 200th access, knowing phase 1 only: 0 goes with 1.
    let (at_mi, notes) = place("stmap:si=0,mi=200,da=1000");
    assert_eq!(package(at_mi[0]), package(at_mi[1]), "{at_mi:?}");
    assert!(notes[0].as_str().unwrap().contains("mapping enabled"), "{notes}");
    // Too many distinct addresses for Equation 1 and no transactions: no mapping.
    let (stay, notes) = place("stmap:si=0,mi=200,da=1");
    // Where the modelled OS puts four busy threads: spread over the two packages.
    assert_eq!(stay, vec![0, 2, 1, 3]);
    assert!(notes[0].as_str().unwrap().contains("stay where the OS put them"), "{notes}");
    // The interval is never reached: no mapping either.
    let (never, notes) = place("stmap:si=0,mi=100000,da=1000");
    assert_eq!(never, vec![0, 2, 1, 3]);
    assert!(notes[0].as_str().unwrap().contains("never reached"), "{notes}");
}

/// Runs sharemap and returns its output with its peak resident memory in MiB (the child's
/// own, from wait4: other tests' commands running meanwhile do not count).
fn peak_mib(args: &[&str]) -> (std::process::ExitStatus, f64) {
    use std::os::unix::process::ExitStatusExt;
    // Reaped by wait4 below, which std's Child does not offer.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data (integers), valid when zeroed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own child, not waited for yet; both pointers are to live locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (std::process::ExitStatus::from_raw(status), usage.ru_maxrss as f64 / 1024.0)
}

/// One hot page (a spin-wait flag array: 90 % of 6M references, from every node, reads and
/// writes) must not take memory beyond --memory-mb: every policy and the optimum read it
/// window by window. Before, its references were held whole (16 bytes each, 86 MB here)
/// and the optimum's record of its writes beside them: 150-200 MB at --memory-mb 16.
#[test]
fn a_hot_page_stays_within_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let trace = p(&dir, "hot.trace");
    let mut w = sharemap::trace::TraceWriter::create(&trace, None, sharemap::trace::Metadata::default()).unwrap();
    let mut x = 3u64;
    for _ in 0..6_000_000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let t = (x >> 61) as u32;
        let a = if x >> 40 & 15 < 14 {
            // Each thread sets its own flag now and then, and spins reading the others'.
            let own = x >> 32 & 31 == 0;
            let flag = 0x7000_0000 + 64 * if own { t as u64 } else { x >> 20 & 7 };
            if own { sharemap::trace::Access::write(t, flag, 8) } else { sharemap::trace::Access::read(t, flag, 8) }
        } else {
            sharemap::trace::Access::write(t, 0x1000_0000_0000 + ((t as u64) << 24) + 8 * (x >> 8 & 0xffff), 8)
        };
        w.access(a).unwrap();
    }
    w.finish().unwrap();
    let machine = "pack:4 numa:1 core:2 pu:1";
    // Without a pass in trace order the fixed part is about 10 MB; with one (SAMMU's TLB
    // model, a profile sampler) about 35 MB more (docs/placement/README.md).
    for (policies, fixed) in [("first-touch,ace,carrefour,next-touch", 24.0), ("all", 60.0)] {
        let (status, peak) =
            peak_mib(&["place", s(&trace), "--machine", machine, "--policy", policies, "--memory-mb", "16"]);
        assert!(status.success(), "place --policy {policies} failed");
        eprintln!("place --policy {policies} --memory-mb 16: peak {peak:.1} MiB");
        assert!(peak <= 16.0 + fixed, "--policy {policies}: peak {peak:.0} MiB at --memory-mb 16");
    }
}

/// `simulate` and `sweep` say so too when every thread shares one node (two threads, which
/// the OS model keeps on one package), as does `place` for a mapping algorithm that packs
/// them: no command answers a question its setup made trivial without saying so.
#[test]
fn every_command_says_when_all_threads_share_one_node() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("n2.trace");
    ok(&["gen", "neighbor", "--threads", "2", "--accesses", "20k", "-o", t.to_str().unwrap()]);
    let t = t.to_str().unwrap();
    let out = ok(&["simulate", t, "--machine", "sammu", "--mechanism", "os,oracle"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("note: os: the OS model runs all 2 threads on NUMA node 0"), "{text}");
    let csv = d.path().join("sweep.csv");
    let out = ok(&["sweep", t, "--machine", "sammu", "--vary", "r", "--values", "2,3", "-o", csv.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("note: all 2 threads run on NUMA node 0").count(), 1, "{text}");
    // Eight threads, which the OS model spreads over the nodes: nothing to say.
    let t8 = d.path().join("n8.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "20k", "-o", t8.to_str().unwrap()]);
    let out = ok(&["simulate", t8.to_str().unwrap(), "--machine", "sammu", "--mechanism", "os,oracle"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("note: os"));
    let out =
        ok(&["place", t8.to_str().unwrap(), "--machine", "sammu", "-p", "first-touch", "--thread-map", "compact"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("note: all 8 threads run on NUMA node 0"), "{text}");
}
