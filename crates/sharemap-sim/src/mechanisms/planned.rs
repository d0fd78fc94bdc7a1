//! A placement decided outside the simulation and replayed in it: any placement policy of
//! `sharemap place`, or seed 004's off-line optimum, computed for one thread mapping, page by
//! page and reference by reference (sharemap-placement's `schedule`). The facade computes
//! the plan before the run; the mechanism moves and replicates pages as the plan says, at
//! the page's reference where the policy did.

use super::{Context, Mechanism, MechanismError, PlanRequest, Start};
use crate::sim::{FirstPlacement, Sim};
use rustc_hash::FxHashMap;
use sharemap_core::Params;
use sharemap_core::spec::SpecError;

/// The plan of one `place` mechanism.
#[derive(Clone, Debug, Default)]
pub struct PlannedPlacement {
    /// The thread mapping the plan was made for (each thread's logical PU).
    pub pus: Vec<usize>,
    /// Per page: (index of the page's reference from which it holds, set of nodes as bits;
    /// higher bits, such as seed 004's global memory, are ignored).
    pub pages: FxHashMap<u64, Vec<(u64, u128)>>,
}

pub fn build(p: &Params, _seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    let threads = p.text("threads");
    if threads != "identity" {
        sharemap_mapping::build(threads, 1).map_err(|e| p.error(e.to_string()))?;
    }
    Ok(Box::new(Planned {
        label: p.spec().to_string(),
        request: PlanRequest { policy: p.text("policy").to_string(), threads: threads.to_string() },
        plan: PlannedPlacement::default(),
        homed: 0,
        planned_moves: 0,
        seen: FxHashMap::default(),
    }))
}

struct Planned {
    label: String,
    request: PlanRequest,
    plan: PlannedPlacement,
    /// Pages homed before the run, and the moves and copies the plan makes during it.
    homed: usize,
    planned_moves: usize,
    /// Per page with a plan: references so far, and the next entry of its plan.
    seen: FxHashMap<u64, (u64, usize)>,
}

impl Mechanism for Planned {
    fn plan(&self) -> Option<PlanRequest> {
        Some(self.request.clone())
    }

    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let plan = ctx
            .plans
            .iter()
            .find(|(label, _)| *label == self.label)
            .map(|(_, p)| p.clone())
            .ok_or_else(|| MechanismError::of("no plan was computed for it"))?;
        // Initial placements of a single node are known before the run.
        let mut homes = Vec::new();
        for (&page, entries) in &plan.pages {
            if let Some(&(0, set)) = entries.first() {
                let nodes = set & ((1u128 << ctx.model.nodes) - 1);
                if nodes.count_ones() == 1 {
                    homes.push((page, nodes.trailing_zeros() as usize));
                }
            }
        }
        self.homed = homes.len();
        self.planned_moves = plan.pages.values().map(|e| e.iter().filter(|(at, _)| *at > 0).count()).sum();
        self.plan = plan;
        Ok(Start { pus: self.plan.pus.clone(), placement: FirstPlacement::FirstTouch, homes })
    }

    fn online(&self) -> bool {
        true
    }

    /// For the optimum: what it is optimal for. It minimises seed 004's cost, not this
    /// machine's time, so it can come out slower than first touch here.
    fn note(&self, _time_ns: f64) -> Option<String> {
        (self.request.policy == "optimal").then(|| {
            format!(
                "seed 004's optimum minimises its own cost (every reference priced local 1, remote r or global g, a page move R or G, no caches), not this machine's time: here caches serve most references and a move also invalidates the page's lines and shoots down TLBs, so its placement ({} pages homed before the run, {} moves and copies during it) can be slower than first touch",
                self.homed, self.planned_moves
            )
        })
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, addr: u64, _write: bool, _ns: f64) {
        let page = addr >> sim.page_shift();
        let Some(entries) = self.plan.pages.get(&page) else { return };
        let state = self.seen.entry(page).or_insert((0, 0));
        state.0 += 1;
        // Entries that hold from the next reference on (index = references so far).
        while let Some(&(at, set)) = entries.get(state.1) {
            if at > state.0 {
                break;
            }
            state.1 += 1;
            if at == 0 {
                continue; // the initial placement: set before the run
            }
            apply(sim, page, set, thread);
        }
    }
}

/// Puts `page` on the nodes of `set`: one node, a move; several, a home among them (moved
/// there if it is elsewhere) and copies on the others.
fn apply(sim: &mut Sim, page: u64, set: u128, thread: usize) {
    let nodes = set & ((1u128 << sim.model().nodes) - 1);
    if nodes == 0 {
        return;
    }
    let home = sim.home_of(page);
    let keep = match home {
        Some(h) if nodes >> h & 1 == 1 => h,
        _ => nodes.trailing_zeros() as usize,
    };
    if home != Some(keep) {
        sim.move_page(page, keep, thread);
    }
    if nodes.count_ones() > 1 {
        sim.replicate(page, nodes as u64, thread);
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planned").field("request", &self.request).finish_non_exhaustive()
    }
}
