//! The shared case suite (sharemap-decide's cases.toml) in the simulator, as `sharemap
//! simulate` runs it: each case's mechanism simulated through the Session on the case's
//! machine (the whole trace's profile, memory profile and plans as a user's run builds
//! them), its page decisions compared with the case's. `Session::starts`, what `run`
//! applies of a mechanism decided before the run, must give the same homes.

use sharemap::trace::MemoryTrace;
use sharemap::{Machine, Session, SimulateRequest, TraceInput};
use sharemap_decide::cases::{self, Case, Decision, PAGE_SIZE, What};

fn session(case: &Case) -> Session {
    let machine = Machine::from_spec(&case.machine).unwrap();
    let threads = case.threads();
    let nodes: Vec<usize> =
        sharemap_mapping::os_mapping(&machine, threads).iter().map(|&pu| machine.pu_numa[pu]).collect();
    assert_eq!(nodes, case.nodes, "{}: the premise (where the OS model puts the threads)", case.name);
    Session::new(TraceInput::memory(MemoryTrace::from_accesses(case.trace_accesses())), machine, 1)
}

fn request(case: &Case) -> SimulateRequest {
    SimulateRequest {
        mechanisms: case.mechanism.clone(),
        page_size: Some(PAGE_SIZE),
        log_decisions: true,
        ..Default::default()
    }
}

fn decide(case: &Case) -> Vec<Decision> {
    let out = session(case).simulate(&request(case)).unwrap();
    out.mechanisms[0].decisions.iter().map(|d| Decision { at: d.at, page: d.page, nodes: d.nodes }).collect()
}

#[test]
fn the_simulator_decides_as_every_layer_does() {
    let cases = cases::for_layer("simulate");
    assert!(cases.len() >= 5);
    let failures: Vec<String> = cases.iter().filter_map(|c| c.check("simulate", &decide(c)).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where a mechanism decided before the run starts (`Session::starts`) is where the
/// simulation of it started: the same threads, the same homes.
#[test]
fn a_mechanisms_start_is_what_its_simulation_started_with() {
    for case in cases::for_layer("simulate").into_iter().filter(|c| c.what == What::Homes) {
        let session = session(&case);
        let start = session.starts(&request(&case)).unwrap().pop().unwrap();
        let simulated = session.simulate(&request(&case)).unwrap().mechanisms.remove(0);
        let mut homes: Vec<(u64, u128)> = start.homes.iter().map(|&(p, n)| (p, 1u128 << n)).collect();
        homes.sort();
        let mut first: Vec<(u64, u128)> = Vec::new();
        for d in &simulated.decisions {
            if !first.iter().any(|(p, _)| *p == d.page) {
                first.push((d.page, d.nodes));
            }
        }
        first.sort();
        let planned: Vec<(u64, u128)> = first.into_iter().filter(|(p, _)| homes.iter().any(|(h, _)| h == p)).collect();
        assert_eq!(homes, planned, "{}", case.name);
        assert_eq!(start.pus, simulated.final_pus, "{}: a static mechanism's threads stay where they start", case.name);
    }
}
