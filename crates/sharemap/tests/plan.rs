//! The optimal placement `place` exports, checked against an independent replay.

use sharemap::trace::{Chunk, Kind, MemoryTrace, TraceSource};
use sharemap::{Machine, PlaceRequest, Session, Setup, TraceInput};
use sharemap_placement::optimal::replay;
use sharemap_placement::{Costs, Ref};
use std::collections::BTreeMap;

/// The generator's migratory data (as `sharemap gen migratory --threads 4 --accesses 50k`):
/// pages handed from thread to thread, what makes the optimum move them.
fn migratory() -> MemoryTrace {
    let pattern = sharemap::generate::pattern("migratory").unwrap();
    sharemap::generate::to_memory(pattern, &sharemap::generate::GenParams::new(4, 50_000, 1)).unwrap()
}

/// The exported placement, replayed independently against the trace, costs the optimum.
#[test]
fn exported_placement_replays_to_the_optimal_cost() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("opt.csv");
    let trace = migratory();
    let session = Session::new(TraceInput::memory(trace.clone()), Machine::from_spec("numa:4 pu:1").unwrap(), 1);
    let setup = Setup { cost: Some("r=4,R=60".into()), ..Setup::default() };
    let request = PlaceRequest { setup: setup.clone(), plan: Some(csv.clone()), ..PlaceRequest::new("first-touch") };
    let placed = session.place(&request).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut changes: BTreeMap<u64, Vec<(u64, u128)>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let page = u64::from_str_radix(f[0].trim_start_matches("0x"), 16).unwrap() / 4096;
        let set = f[2].split(';').map(|n| 1u128 << n.parse::<u32>().unwrap()).fold(0, |a, b| a | b);
        changes.entry(page).or_default().push((f[1].parse().unwrap(), set));
    }
    // The trace's references by page, with thread t on node t (4 PUs, 4 nodes).
    let mut refs: BTreeMap<u64, Vec<Ref>> = BTreeMap::new();
    let mut r = TraceInput::memory(trace).open().unwrap();
    let mut c = Chunk::default();
    while r.next_chunk(&mut c).unwrap() {
        for (i, a) in c.accesses.iter().enumerate() {
            let at = c.first_access + i as u64;
            refs.entry(a.addr / 4096).or_default().push(Ref {
                at,
                node: a.thread as u16,
                write: a.kind == Kind::Write,
                sampled: false,
            });
        }
    }
    let costs = Costs { r: 4.0, big_r: 60.0, g: f64::INFINITY, big_g: f64::INFINITY };
    let mut total = 0.0;
    for (page, rs) in &refs {
        let ch: Vec<(usize, u128)> =
            changes[page].iter().map(|&(at, set)| (rs.iter().position(|r| r.at == at).unwrap(), set)).collect();
        assert_eq!(ch[0].0, 0, "the first row of a page is its initial placement");
        total += replay(rs, &ch, &costs).cost(&costs);
    }
    assert!(text.lines().count() - 1 > refs.len(), "some page should change its placement");
    assert_eq!(total, placed.evaluation.results[0].cost);
    // JSON export has the same rows.
    let js = d.path().join("opt.json");
    let request = PlaceRequest { setup, plan: Some(js.clone()), ..PlaceRequest::new("bind") };
    session.place(&request).unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), text.lines().count() - 1);
}

/// Two variants of one policy asking for different samplers (marathe's cache-miss and
/// tlb-miss profiles) each get their own: in one request, each reports what it reports alone.
#[test]
fn variants_of_one_policy_keep_their_own_prepass() {
    let pattern = sharemap::generate::pattern("random").unwrap();
    let trace = sharemap::generate::to_memory(pattern, &sharemap::generate::GenParams::new(8, 200_000, 1)).unwrap();
    let session = Session::new(TraceInput::memory(trace), Machine::from_spec("numa:2 pu:4").unwrap(), 1);
    let place = |policies: &str| session.place(&PlaceRequest::new(policies)).unwrap().evaluation.results;
    let both = place("marathe:source=cache-miss,marathe:source=tlb-miss");
    let cache = place("marathe:source=cache-miss");
    let tlb = place("marathe:source=tlb-miss");
    assert_eq!(both.len(), 3);
    assert_eq!(
        (both[1].name.as_str(), both[2].name.as_str()),
        ("marathe:source=cache-miss", "marathe:source=tlb-miss")
    );
    for (together, alone) in [(&both[1], &cache[1]), (&both[2], &tlb[1])] {
        assert_eq!(together.tally, alone.tally, "{}", together.name);
        assert_eq!(together.cost, alone.cost);
        assert_eq!(together.vs_optimal, alone.vs_optimal);
    }
    assert_ne!(
        cache[1].tally.profile_samples, tlb[1].tally.profile_samples,
        "the samplers should see different accesses"
    );
}
