//! `simulate` as a user runs it: exact counts on a trace worked out by hand, the JSON every
//! mechanism reports, and bad input.

mod common;
use common::{json, ok, p, s, sharemap};

fn mechanism<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["mechanisms"].as_array().unwrap().iter().find(|m| m["mechanism"] == name).unwrap_or_else(|| panic!("no {name}"))
}

/// Two packages with one node each; a CSV trace whose misses and transfers are known.
#[test]
fn simulate_counts_a_known_trace_exactly() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    // Thread 0 (package 0) writes line 0x1000, thread 1 (package 1 under os) reads it, then
    // thread 0 reads it again and thread 1 writes it.
    std::fs::write(&t, "thread,addr,size,kind\n0,0x1000,8,W\n1,0x1000,8,R\n0,0x1000,8,R\n1,0x1000,8,W\n").unwrap();
    let machine = "pack:2 numa:1 l3:1(size=1MiB) l2:1(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
    let v = json(&ok(&["simulate", s(&t), "--machine", machine, "--mechanism", "os", "--json"]));
    assert_eq!((v["cores"].as_u64(), v["numa_nodes"].as_u64(), v["threads"].as_u64()), (Some(2), Some(2), Some(2)));
    let os = mechanism(&v, "os");
    assert_eq!(os["accesses"], 4);
    // 1: DRAM (local, first touch). 2: from core 0 across packages (modified: written back
    // to node 0, which is local to core 0). 3: L1 hit. 4: upgrade, invalidating core 0.
    assert_eq!((os["dram_local"].as_u64(), os["dram_remote"].as_u64()), (Some(1), Some(0)));
    assert_eq!(os["transfers_remote"], 1);
    assert_eq!(os["writebacks"], 1);
    // One core per package: every cache is private to its core, so only core 0 holds a copy.
    assert_eq!(os["invalidations_remote"], 1);
    // L1 misses: accesses 1 and 2; the third hits; the fourth is an upgrade of a present line.
    assert_eq!(os["mpka"][0]["level"], 1);
    assert_eq!(os["mpka"][0]["mpka"], 500.0);
    // Traffic: one line transferred, one invalidation across the interconnect.
    assert_eq!(os["interconnect_bytes"], 64 + 16);
    assert_eq!(os["vs_os"]["time"], 1.0);
    // Without the shared line (a spin flag, say), nothing is left but nothing moves either.
    let v = json(&ok(&[
        "simulate",
        s(&t),
        "--machine",
        machine,
        "--mechanism",
        "os,oracle",
        "--exclude",
        "0x1000+64",
        "--json",
    ]));
    for m in v["mechanisms"].as_array().unwrap() {
        assert_eq!((m["accesses"].as_u64(), m["transfers_remote"].as_u64()), (Some(0), Some(0)), "{m}");
    }
}

#[test]
fn every_mechanism_runs_on_a_generated_trace() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "16", "--accesses", "200k", "-o", s(&t)]);
    let v = json(&ok(&["simulate", s(&t), "--machine", "sammu", "--json"]));
    let names: Vec<&str> =
        v["mechanisms"].as_array().unwrap().iter().map(|m| m["mechanism"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["os", "random", "oracle", "marathe", "sammu", "autopin", "place", "numa-balancing", "kmaf", "carrefour"]
    );
    for m in v["mechanisms"].as_array().unwrap() {
        assert_eq!(m["accesses"], 200_000);
        assert!(m["time_ns"].as_f64().unwrap() > 0.0);
        assert_eq!(m["mpka"].as_array().unwrap().len(), 3, "L1, L2, L3");
    }
    // Random pages on 4 nodes: about a quarter of DRAM accesses local; first touch keeps
    // this pattern's (mostly private) data local.
    let random = mechanism(&v, "random")["local_dram_share"].as_f64().unwrap();
    let os = mechanism(&v, "os")["local_dram_share"].as_f64().unwrap();
    assert!((0.15..0.4).contains(&random), "random: {random}");
    assert!(os > 0.9, "os: {os}");
    // The table names every mechanism.
    let table =
        String::from_utf8(ok(&["simulate", s(&t), "--machine", "sammu", "--mechanism", "os,random"]).stdout).unwrap();
    assert!(table.contains("os") && table.contains("random") && table.contains("L3 MPKA"), "{table}");
    let list = String::from_utf8(ok(&["simulate", "--list"]).stdout).unwrap();
    assert!(list.contains("oracle") && list.contains("seed 000"), "{list}");
    // The plots: three figures, SVG and (with the png feature) PNG each.
    let base = p(&d, "fig");
    ok(&["simulate", s(&t), "--machine", "sammu", "--mechanism", "os,random", "--plot", s(&base)]);
    let exts: &[&str] = if cfg!(feature = "png") { &["svg", "png"] } else { &["svg"] };
    for fig in ["time", "misses", "traffic"] {
        for ext in exts {
            let f = p(&d, &format!("fig-{fig}.{ext}"));
            assert!(std::fs::metadata(&f).map(|m| m.len() > 1000).unwrap_or(false), "{}", f.display());
        }
    }
    let svg = std::fs::read_to_string(p(&d, "fig-time.svg")).unwrap();
    assert!(svg.contains("random") && svg.contains("time / os time"), "the time figure names its bars and axis");
}

/// `--param` changes the model: on one thread touching pages of its own node once each,
/// every access is a page walk and a local DRAM read, so the time moves by exactly the
/// change of each latency times its count.
#[test]
fn model_parameters_change_the_time_by_what_they_cost() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    let mut csv = String::from("thread,addr,size,kind\n");
    for page in 0..50u64 {
        csv += &format!("0,{:#x},8,R\n", 0x10_0000 + page * 4096 + (page % 7) * 64);
    }
    std::fs::write(&t, csv).unwrap();
    let machine = "pack:2 numa:1 l3:1(size=1MiB) l2:1(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
    let run = |params: &[&str]| {
        let mut args = vec!["simulate", s(&t), "--machine", machine, "--mechanism", "os", "--json"];
        for p in params {
            args.extend(["--param", p]);
        }
        let v = json(&ok(&args));
        mechanism(&v, "os").clone()
    };
    let base = run(&[]);
    assert_eq!((base["page_walks"].as_u64(), base["dram_local"].as_u64()), (Some(50), Some(50)));
    let time = |m: &serde_json::Value| m["time_ns"].as_f64().unwrap();
    let slower_walks = run(&["walk_ns=1000"]);
    assert!((time(&slower_walks) - time(&base) - 50.0 * (1000.0 - 25.0)).abs() < 1e-6);
    let slower_dram = run(&["dram-ns=160", "access-ns=3"]);
    assert!((time(&slower_dram) - time(&base) - 50.0 * (80.0 + 2.0)).abs() < 1e-6);
    // The JSON says what the run used.
    let v =
        json(&ok(&["simulate", s(&t), "--machine", machine, "--mechanism", "os", "--json", "--param", "walk_ns=7"]));
    assert_eq!(v["params"]["walk_ns"], 7.0);
}

#[test]
fn bad_input_gets_one_line_and_a_failure() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    std::fs::write(&t, "thread,addr,size,kind\n0,0x1000,8,W\n").unwrap();
    // Caches at the documented maximum: every mechanism's simulator at once is more than any
    // host here has, said before anything is allocated.
    let huge = "pack:1 numa:1 l3:1(size=16GiB) core:1 pu:1";
    let cases: [(&[&str], &str); 9] = [
        (&["simulate", s(&t), "--machine", huge, "--mechanism", "all"], "needs up to 102400 MiB (10240 MiB each"),
        (&["simulate", s(&t), "--mechanism", "nope"], "mechanism 'nope': unknown mechanism"),
        (
            &["simulate", s(&t), "--param", "walk=3"],
            "--param: parameter 'walk': unknown (did you mean 'walk-ns'? known: access-ns,",
        ),
        (&["simulate", s(&t), "--param", "dram_ns=-5"], "--param: parameter dram-ns=-5: expected a number of ns"),
        // Clocks that would reach infinity, and counts beyond a u32, say what is allowed.
        (&["simulate", s(&t), "--param", "dram_ns=1e308"], "dram-ns=1e308: expected a number of ns from 0 to 1e9"),
        (&["simulate", s(&t), "--param", "tlb_entries=4294967296"], "expected a whole number from 0 to 4294967295"),
        (&["simulate", s(&t), "--machine", "pack:x"], "bad synthetic topology \"pack:x\""),
        (&["simulate", s(&t), "--page-size", "3000"], "power of two"),
        (&["simulate", "/nonexistent.trace"], "/nonexistent.trace"),
    ];
    for (args, want) in cases {
        let out = sharemap(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let bad = p(&d, "bad.csv");
    std::fs::write(&bad, "thread,addr,size,kind\n0,0x1000,8,W\nzero,0x1000,8,R\n").unwrap();
    let out = sharemap(&["simulate", s(&bad)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("bad.csv:3:"), "{err}");
}

/// A page size given to `simulate` is checked as `place` checks it: never rounded up
/// silently, never beyond 1 GiB.
#[test]
fn page_sizes_are_checked_as_place_checks_them() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    std::fs::write(&t, "thread,addr,size,kind\n0,0x1000,8,W\n1,0x2000,8,R\n").unwrap();
    for size in ["0", "1", "3", "32", "2147483648", "9223372036854775808"] {
        let out = sharemap(&["simulate", s(&t), "--mechanism", "os", "--page-size", size]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--page-size {size} was taken");
        assert!(err.contains(&format!("--page-size {size}: expected a power of two from 64 bytes to 1 GiB")), "{err}");
        let place = sharemap(&["place", s(&t), "--page-size", size]);
        assert_eq!(String::from_utf8_lossy(&place.stderr), err, "place and simulate say the same");
    }
    let v = json(&ok(&["simulate", s(&t), "--mechanism", "os", "--page-size", "65536", "--json"]));
    assert_eq!(v["page_size"], 65536);
}

/// A line crossing nodes counts its size in interconnect bytes: thread 1 reads two lines of a
/// page homed on thread 0's node, 2 remote DRAM reads, 2 lines of traffic whatever the size.
#[test]
fn interconnect_bytes_count_the_line_size() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    std::fs::write(&t, "thread,addr,size,kind\n0,0x10000,8,W\n1,0x10400,8,R\n1,0x10800,8,R\n").unwrap();
    for line in [64u64, 128, 256] {
        let param = format!("line={line}");
        let v = json(&ok(&[
            "simulate",
            s(&t),
            "--machine",
            "numa:2 pu:1",
            "--mechanism",
            "os",
            "--param",
            &param,
            "--json",
        ]));
        let os = &v["mechanisms"][0];
        assert_eq!(os["dram_remote"], 2, "{os}");
        assert_eq!(os["interconnect_bytes"], 2 * line, "line={line}");
    }
}

/// Every built-in machine can be simulated, `stmap-opteron` with its 40 shared caches (8 L3s
/// and 32 L2s of two cores each) included.
#[test]
fn every_preset_is_simulated() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "20k", "-o", s(&t)]);
    for preset in sharemap::machine::PRESETS {
        let v = json(&ok(&["simulate", s(&t), "--machine", preset.name, "--mechanism", "os", "--json"]));
        assert_eq!(mechanism(&v, "os")["accesses"], 20_000, "{}", preset.name);
    }
}

/// A thread streaming from DRAM against a memory bandwidth set below its demand: its time
/// is at least its lines over the bandwidth, the lines that waited are counted, and the
/// table says so; without the limit nothing waits. `machine` prints the table it uses.
#[test]
fn a_memory_bandwidth_below_the_demand_slows_a_stream_to_the_bandwidth() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "t.csv");
    let mut csv = String::from("thread,addr,size,kind\n");
    for l in 0..4000u64 {
        csv.push_str(&format!("0,{:#x},8,W\n", 0x100_0000 + 64 * l));
    }
    std::fs::write(&t, csv).unwrap();
    let machine = "pack:1 numa:1 l2:1(size=64KiB) l1d:1(size=32KiB) core:1 pu:1";
    let run = |params: &[&str]| {
        let mut args = vec!["simulate", s(&t), "--machine", machine, "--mechanism", "os"];
        for p in params {
            args.extend(["--param", p]);
        }
        let text = String::from_utf8(ok(&args).stdout).unwrap();
        args.push("--json");
        (text, json(&ok(&args)))
    };
    // 0.64 GB/s: 100 ns a line, more than the 81 ns a miss costs.
    let (text, v) = run(&["mem-gbps=0.64"]);
    let os = mechanism(&v, "os");
    assert_eq!(v["bandwidth"]["memory_gbps"], 0.64);
    assert!(os["bandwidth_waits"].as_u64().unwrap() > 0, "{os}");
    // Every line read and every line written back went through the memory.
    let lines = (os["dram_local"].as_u64().unwrap() + os["writebacks"].as_u64().unwrap()) as f64;
    assert!(os["time_ns"].as_f64().unwrap() >= lines * 100.0 * 0.99, "{os}");
    assert!(text.contains("bandwidth (--param): memory 0.64 GB/s a node, link 1 GB/s each way"), "{text}");
    assert!(text.contains("that waited: os "), "{text}");
    let (text, v) = run(&["mem-gbps=0", "link_gbps=0"]);
    assert_eq!(mechanism(&v, "os")["bandwidth_waits"], 0);
    assert!(text.contains("memory no limit a node, link no limit each way"), "{text}");
    let (text, _) = run(&[]);
    assert!(text.contains("bandwidth (assumed): memory 2 GB/s a node, link 1 GB/s each way; no line waited"), "{text}");

    let shown = String::from_utf8(ok(&["machine", "sammu-x7550"]).stdout).unwrap();
    assert!(shown.contains("bandwidth  (preset): memory 16 GB/s a node, link 10 GB/s each way"), "{shown}");
    assert!(shown.contains("   16.0  10.0  10.0  10.0"), "{shown}");
    let v = json(&ok(&["machine", "sammu-x7550", "--json"]));
    assert_eq!(v["bandwidth_gbps"][0][1], 10.0);
    assert_eq!(v["bandwidth"]["origin"], "preset");
    let v = json(&ok(&["machine", "ace", "--json"]));
    assert!(v["bandwidth_gbps"][0][0].is_null());
}
