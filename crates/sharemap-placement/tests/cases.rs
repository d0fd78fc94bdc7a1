//! The shared case suite (sharemap-decide's cases.toml) in `place`: each case's policy run
//! page by page on the case's trace, one reference per nanosecond, and the placements it
//! makes compared with the case's.

use sharemap_core::{PageSize, Spec};
use sharemap_decide::cases::{self, Case, Decision, PAGE_SIZE};
use sharemap_machine::ThreadPlacement;
use sharemap_machine::{CostParams, Machine};
use sharemap_placement::cost::record_placements;
use sharemap_placement::partition::{Partition, PartitionOptions};
use sharemap_placement::policies::{Context, Settings, build, find};
use sharemap_placement::{Costs, Ref};
use sharemap_trace::MemoryTrace;
use std::sync::Mutex;

fn decide(case: &Case) -> Vec<Decision> {
    let machine = Machine::from_spec(&case.machine).unwrap();
    // Thread t on the first PU of its node: the case's premise, which `simulate` checks
    // against the OS model.
    let pus = case.nodes.iter().map(|&n| (0..machine.pu_count()).find(|&p| machine.pu_numa[p] == n).unwrap()).collect();
    let placement = ThreadPlacement::on_pus(&machine, pus).unwrap();
    let spec = Spec::parse(&case.mechanism).unwrap();
    let policy = build(find(&spec.name).unwrap(), &Settings::default(), &spec.options).unwrap();
    let mut trace = MemoryTrace::from_accesses(case.trace_accesses());
    let opts = PartitionOptions {
        page_size: PageSize::new(PAGE_SIZE).unwrap(),
        placement,
        memory_budget: 64 << 20,
        prepass: policy.prepass(64),
    };
    let part = Partition::build(&mut trace, &opts, &|_| {}).unwrap();
    let ctx = Context {
        nodes: machine.numa_count(),
        costs: Costs::new(&CostParams { r: 1.0, big_r: 10.0, g: None, big_g: None }),
        page_size: PAGE_SIZE,
        pages: part.pages() as u64,
        init_done: None,
        phase_changes: &[],
        annotations: &[],
        refs_per_ms: 1e6,
        seed: 1,
    };
    let decisions = Mutex::new(Vec::new());
    part.par_pages(
        || (),
        |_, page| {
            let refs: Vec<Ref> = page.refs().collect();
            let (_, placed) = record_placements(|| policy.place_page(page, &ctx));
            // A placement after `charged` references: led to by the next reference (or
            // made after the page's last one).
            let mut out = decisions.lock().unwrap();
            for (charged, set) in placed {
                let at = refs.get(charged as usize).map_or(u64::MAX, |r| r.at);
                out.push(Decision { at: if charged == 0 { 0 } else { at }, page: page.number, nodes: set });
            }
        },
    )
    .unwrap();
    decisions.into_inner().unwrap()
}

#[test]
fn place_decides_as_every_layer_does() {
    let cases = cases::for_layer("place");
    assert!(cases.len() >= 5);
    let failures: Vec<String> = cases.iter().filter_map(|c| c.check("place", &decide(c)).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
