//! The simulator against the research's findings, on the generators' patterns (docs/simulator.md,
//! "Fidelity"): 16 threads on 4 packages of 4 cores, one node each. `os` (identity, first
//! touch) is already sharing-aware for these 1-D patterns, so the mappings that ignore sharing
//! are `scatter` (threads spread over the packages) and round-robin pages.

use sharemap::sim::Outcome;
use sharemap::simulate::{SimulateRequest, Simulation, simulate};
use sharemap::sources::VecSink;
use sharemap::sources::generate::{self, GenParams};
use sharemap::trace::{MemoryTrace, TraceSource};

const MACHINE: &str = "pack:4 numa:1 l3:1(size=2MiB) l2:4(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
const MECHANISMS: &str = "os,oracle,sammu:period-ms=0.05,static:threads=scatter,static:threads=sharemap,\
                          static:pages=round-robin,static:pages=dominant,static:threads=scatter,pages=round-robin";

fn run(pattern: &str) -> Simulation {
    let mut sink = VecSink::default();
    generate::run(generate::find(pattern).unwrap(), &GenParams::new(16, 3_000_000, 1), &mut sink).unwrap();
    let request = SimulateRequest {
        machine: MACHINE.into(),
        mechanisms: MECHANISMS.into(),
        page_size: None,
        seed: 1,
        params: Default::default(),
    };
    let mut open = || Ok(Box::new(MemoryTrace::from_accesses(sink.accesses.iter().copied())) as Box<dyn TraceSource>);
    simulate(&mut open, &request, &|_| {}).unwrap()
}

fn get<'a>(s: &'a Simulation, name: &str) -> &'a Outcome {
    s.mechanisms.iter().find(|m| m.mechanism == name).unwrap_or_else(|| panic!("no {name}"))
}

fn time(s: &Simulation, name: &str) -> f64 {
    get(s, name).time_ns
}

#[test]
fn neighbour_sharing_gains_most_from_thread_and_data_mapping() {
    let s = run("neighbor");
    let oracle = time(&s, "oracle");
    for m in &s.mechanisms {
        assert!(oracle <= m.time_ns * 1.001, "{} beats the oracle: {} < {oracle}", m.mechanism, m.time_ns);
    }
    let neither = time(&s, "static:threads=scatter,pages=round-robin");
    let threads_only = time(&s, "static:pages=round-robin");
    let pages_only = time(&s, "static:threads=scatter");
    assert!(oracle < 0.85 * neither, "both mappings: {oracle} against {neither}");
    // Each mapping alone gains part of it; both together gain most.
    assert!(oracle < threads_only && threads_only < neither);
    assert!(oracle < pages_only && pages_only < neither);
    // Thread mapping keeps halo lines within a package: far less traffic.
    let scatter = get(&s, "static:threads=scatter").interconnect_bytes as f64;
    assert!(scatter > 3.0 * get(&s, "oracle").interconnect_bytes as f64);
    let sammu = time(&s, "sammu:period-ms=0.05");
    assert!(sammu < 1.02 * oracle, "SAMMU {sammu} against the oracle {oracle}");
}

#[test]
fn uniform_sharing_gains_nothing_from_thread_mapping_and_less_traffic_from_data_mapping() {
    let s = run("all-to-all");
    let os = time(&s, "os");
    for name in ["static:threads=scatter", "static:threads=sharemap", "oracle"] {
        let r = time(&s, name) / os;
        assert!((0.97..1.03).contains(&r), "{name}: {r} of os");
    }
    let interleaved = get(&s, "static:pages=round-robin").interconnect_bytes as f64;
    let mapped = get(&s, "static:pages=dominant").interconnect_bytes as f64;
    assert!(mapped < 0.75 * interleaved, "data mapping: {mapped} bytes against {interleaved}");
}

#[test]
fn private_data_changes_nothing_and_first_touch_fills_locally() {
    let s = run("private");
    let os = time(&s, "os");
    for name in ["oracle", "sammu:period-ms=0.05", "static:threads=scatter", "static:threads=sharemap"] {
        let r = time(&s, name) / os;
        assert!((0.995..1.005).contains(&r), "{name}: {r} of os");
    }
    // Seed 003, on fills from DRAM: first touch makes them local, round robin 1 in 4.
    assert!(get(&s, "os").local_dram_share > 0.99);
    let rr = get(&s, "static:pages=round-robin").local_dram_share;
    assert!((0.2..0.3).contains(&rr), "round robin: {rr}");
}
