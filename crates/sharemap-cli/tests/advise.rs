//! `advise` as a user runs it: on a program with nothing to gain it says so and warns off
//! packing; on one with sharing to exploit it names the mapping, and the command it gives to
//! check the figures gives the same figures.

mod common;
use common::{json, ok, p, s, sharemap};

/// Four packages of two cores, a 1 MiB last-level cache each, memory bandwidth by the
/// model's assumption (2 GB/s a core).
const MACHINE: &str = "pack:4 numa:1 l3:1(size=1MiB) l2:2(size=256KiB) l1d:1(size=32KiB) core:2 pu:1";

fn candidate<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["candidates"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no {name}"))
}

/// Eight threads on private data of 1 MiB each: spread over the four packages by the OS, as
/// well as any mapping can; packed into one, their 8 MiB overflow its cache and wait for
/// its memory.
#[test]
fn a_program_with_little_to_gain_is_not_worth_mapping_and_packing_is_advised_against() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "private.trace");
    ok(&["gen", "private", "--threads", "8", "--accesses", "2M", "--footprint", "8MiB", "--seed", "1", "-o", s(&t)]);
    let v = json(&ok(&["advise", s(&t), "--machine", MACHINE, "--json"]));
    assert_eq!(v["candidates"].as_array().unwrap().len(), 9);
    assert_eq!(v["candidates"][0]["name"], "os");
    let best = &v["candidates"][v["best"].as_u64().unwrap() as usize];
    let gain = best["speedup"].as_f64().unwrap();
    assert!((1.0..1.02).contains(&gain), "the best gains {gain}");
    assert_eq!(v["worth_it"], false);
    assert!(v["verdict"].as_str().unwrap().starts_with("not worth it: no mapping or placement is 2 % faster"), "{v}");
    assert!(v["apply"].is_null());
    // Packed, the threads wait for one node's memory.
    let (compact, os) = (candidate(&v, "compact"), candidate(&v, "os"));
    assert!(compact["speedup"].as_f64().unwrap() < 0.8, "{compact}");
    assert!(compact["bandwidth_wait_percent"].as_f64().unwrap() > os["bandwidth_wait_percent"].as_f64().unwrap());
    let avoided: Vec<&str> = v["avoid"].as_array().unwrap().iter().map(|a| a[0].as_str().unwrap()).collect();
    assert!(avoided.contains(&"compact") && !avoided.contains(&"scatter"), "{avoided:?}");
    // A lower threshold takes the small gain.
    let v = json(&ok(&["advise", s(&t), "--machine", MACHINE, "--json", "--threshold", "1"]));
    assert_eq!(v["worth_it"], true);
    let text = String::from_utf8(ok(&["advise", s(&t), "--machine", MACHINE]).stdout).unwrap();
    assert!(text.contains("\nverdict  not worth it") && text.contains("\navoid    compact ("), "{text}");
}

/// Neighbour sharing over eight threads: a sharing-aware mapping wins, and `check` (a plain
/// `simulate` of the OS and the winner) gives the advice's ratio.
#[test]
fn a_program_with_sharing_to_exploit_is_advised_a_mapping_the_simulator_confirms() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "neighbor.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "2M", "--seed", "1", "-o", s(&t)]);
    let v = json(&ok(&["advise", s(&t), "--machine", MACHINE, "--json"]));
    assert_eq!(v["worth_it"], true, "{}", v["verdict"]);
    let best = &v["candidates"][v["best"].as_u64().unwrap() as usize];
    assert_eq!(best["needs_sharing"], true, "{best}");
    assert!(best["speedup"].as_f64().unwrap() >= 1.02);
    let apply = v["apply"].as_str().unwrap();
    assert!(
        apply.starts_with(&format!("sharemap run --thread-map {} --sharing ", best["thread_map"].as_str().unwrap()))
    );
    // The check, run as printed (without the shell's quotes), gives the same figures.
    let check = v["check"].as_str().unwrap();
    assert!(check.contains(&format!("--mechanism os,{}", best["mechanism"].as_str().unwrap())), "{check}");
    let sim = json(&ok(&[
        "simulate",
        s(&t),
        "--machine",
        MACHINE,
        "--mechanism",
        &format!("os,{}", best["mechanism"].as_str().unwrap()),
        "--json",
    ]));
    let ratio = sim["mechanisms"][0]["time_ns"].as_f64().unwrap() / sim["mechanisms"][1]["time_ns"].as_f64().unwrap();
    assert!((ratio - best["speedup"].as_f64().unwrap()).abs() < 1e-9, "{ratio} against {best}");
}

#[test]
fn bad_advice_requests_are_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "n.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "20k", "-o", s(&t)]);
    for (args, expect) in [
        (vec!["--threshold=-1"], "--threshold -1: expected a percentage from 0 to 100"),
        (vec!["--threshold", "NaN"], "--threshold NaN: expected a percentage from 0 to 100"),
        (vec!["--param", "mlp=0"], "--param"),
        (vec!["--machine", "nonesuch"], "nonesuch"),
        (vec!["--roi"], "no region of interest"),
    ] {
        let out = sharemap(&[&["advise", s(&t)][..], &args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.trim().lines().count() == 1 && err.contains(expect), "{args:?}: {err}");
    }
}
