//! Our parse of synthetic strings must agree with hwloc's own (lstopo), when it is installed.

use sharemap_machine::Machine;
use std::process::Command;

fn lstopo(args: &[&str]) -> Option<String> {
    let out = Command::new("lstopo-no-graphics").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn hwloc_available() -> bool {
    if lstopo(&["--version"]).is_some() {
        return true;
    }
    sharemap_testkit::skip(
        sharemap_testkit::Need::Hwloc,
        "hwloc's lstopo is not installed (scripts/setup installs it)",
    );
    false
}

const CORPUS: &[&str] = &[
    "pack:4 numa:1 l3:1 core:8 pu:2",
    "numa:3 pu:1",
    "pack:2 core:2 pu:2",
    "pack:4 l3:1(size=18MB) l2:8 l1d:1 core:1 pu:2",
    "pack:2 [numa] core:2 pu:1",
    "pack:2 numa:2 core:2 pu:1",
    "pack:4 numa:2 l3:1 l2:4 core:2 pu:1",
    "numa:2 pu:1",
    "pack:2 numa:2 pu:1",
    "pack:2 group:1 core:2 pu:1",
    "group:2 group:1 pu:2",
    "group:2 pu:1",
    "pack:2 group:2 core:1 pu:1",
    "numa:1 pack:2 pu:1",
    "pack:2 numa:2 core:1 pu:1",
    "pack:2 core:2 numa:2 pu:1",
    "pack:2 [numa(memory=5GB)] [numa] core:2 pu:1",
    "pack:2 l3:1 numa:1 core:2 pu:1",
    "pack:2 numa:3 l3:1 l2:1 core:1 pu:1",
    "l2:2 l1i:1 l1d:2 core:1 pu:1",
    "socket:2 node:2 pu:1",
    "PACK:2 pu:1",
    "die:2 core:2 pu:1",
    "numa:2(memory=2GB) core:2 pu:1",
    "pack:2 numa:1(memory=64GiB) l3:1(size=30MiB) l2:12(size=256KiB) l1d:1(size=32kB) core:1 pu:2",
    "Package:4 [NUMANode(memory=1073741824)] L3Cache:1(size=16777216) Core:8 PU:2",
];

#[test]
fn canonical_strings_match_lstopo() {
    if !hwloc_available() {
        return;
    }
    let presets = sharemap_machine::presets::PRESETS.iter().map(|p| p.synthetic);
    for spec in CORPUS.iter().copied().chain(presets) {
        let ours = Machine::from_spec(spec).unwrap().synthetic().unwrap();
        let theirs = lstopo(&["-i", spec, "--of", "synthetic"]).unwrap();
        assert_eq!(ours, theirs, "spec {spec}");
    }
}

/// Counts, PU OS indexes and NUMA membership from lstopo's XML for the same string.
#[test]
fn xml_export_of_hwloc_matches_our_model() {
    if !hwloc_available() {
        return;
    }
    let mut specs: Vec<String> = CORPUS.iter().map(|s| s.to_string()).collect();
    for p in sharemap_machine::presets::PRESETS {
        specs.push(p.synthetic.to_string());
    }
    specs.push("pack:2 core:2 pu:2(indexes=1,0,3,2,5,4,7,6)".into());
    for spec in &specs {
        let ours = Machine::from_spec(spec).unwrap();
        let xml = lstopo(&["-i", spec, "--of", "xml"]).unwrap();
        let via_hwloc = Machine::from_xml(&xml, "lstopo").unwrap();
        assert_eq!(ours.pu_count(), via_hwloc.pu_count(), "{spec}");
        assert_eq!(ours.cores(), via_hwloc.cores(), "{spec}");
        assert_eq!(ours.packages(), via_hwloc.packages(), "{spec}");
        assert_eq!(ours.numa_count(), via_hwloc.numa_count(), "{spec}");
        let os = |m: &Machine| (0..m.pu_count()).map(|i| m.pu_os_index(i)).collect::<Vec<_>>();
        assert_eq!(os(&ours), os(&via_hwloc), "PU OS indexes of {spec}");
        assert_eq!(ours.pu_numa, via_hwloc.pu_numa, "NUMA of each PU, {spec}");
        assert_eq!(ours.synthetic(), via_hwloc.synthetic(), "{spec}");
    }
}

#[test]
fn hwloc_rejects_what_we_reject() {
    if !hwloc_available() {
        return;
    }
    for spec in ["pack:2 core:3", "core:0 pu:1", "bogus:2 pu:1", "machine:2 pu:1", "pack:2 numa:1 core:2 numa:1 pu:2"] {
        assert!(Machine::from_spec(spec).is_err(), "{spec}");
        assert!(lstopo(&["-i", spec, "--of", "synthetic"]).is_none(), "hwloc accepted {spec}");
    }
}

#[test]
fn live_host_reads() {
    let m = Machine::live().unwrap();
    assert!(m.pu_count() >= 1);
    assert!(m.numa_count() >= 1);
}
