//! The shared case suite (sharemap-decide's cases.toml) in the simulator: each case's
//! mechanism simulated on the case's machine, its page decisions compared with the case's.

use sharemap_core::SharingMatrix;
use sharemap_decide::cases::{self, Case, Decision, PAGE_SIZE};
use sharemap_machine::Machine;
use sharemap_sim::mechanisms::{parse_list, sampled_pages};
use sharemap_sim::{Context, Model, Params, Profile};
use sharemap_trace::MemoryTrace;

fn trace(case: &Case) -> MemoryTrace {
    MemoryTrace::from_accesses(case.trace_accesses())
}

fn decide(case: &Case) -> Vec<Decision> {
    let machine = Machine::from_spec(&case.machine).unwrap();
    let model = Model::new(&machine, Params::default()).unwrap();
    let threads = case.threads();
    let nodes: Vec<usize> =
        sharemap_mapping::os_mapping(&machine, threads).iter().map(|&pu| machine.pu_numa[pu]).collect();
    assert_eq!(nodes, case.nodes, "{}: the premise (where the OS model puts the threads)", case.name);
    let chosen = parse_list(&case.mechanism).unwrap();
    let profile = chosen.iter().any(|c| c.needs_profile()).then(|| Profile {
        matrix: SharingMatrix::new(threads),
        pages: Vec::new(),
        sampled: chosen
            .iter()
            .filter_map(|c| c.profile_source())
            .map(|source| (source, sampled_pages(&mut trace(case), PAGE_SIZE, source).unwrap()))
            .collect(),
        memory: Vec::new(),
        page_size: PAGE_SIZE,
    });
    let ctx = Context {
        machine: &machine,
        model: &model,
        threads,
        page_size: PAGE_SIZE,
        seed: 1,
        profile: profile.as_ref(),
        plans: &[],
        log_decisions: true,
        schedule: Default::default(),
    };
    let out = sharemap_sim::simulate(&mut trace(case), &model, &chosen, &ctx, &|_| {}).unwrap();
    out[0].decisions.iter().map(|d| Decision { at: d.at, page: d.page, nodes: d.nodes }).collect()
}

#[test]
fn the_simulator_decides_as_every_layer_does() {
    let cases = cases::for_layer("simulate");
    assert!(cases.len() >= 5);
    let failures: Vec<String> = cases.iter().filter_map(|c| c.check("simulate", &decide(c)).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
