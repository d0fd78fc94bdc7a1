//! SAMMU (seed 000, section 3) inside the simulation: its TLB detector sees every access on
//! the core the thread runs on; its sharing matrix remaps the threads every period (gate and
//! hysteresis); its NUMA counters move a page when another node's counter leads the page's
//! node's by NT.

use super::remap::Remapper;
use super::{Context, Mechanism, MechanismError, Start};
use crate::sim::{FirstPlacement, Sim};
use rustc_hash::FxHashMap;
use sharemap_core::Params;
use sharemap_core::spec::SpecError;
use sharemap_decide::sammu::{Sammu, SammuParams};

pub fn build(p: &Params, _seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    Ok(Box::new(SammuMechanism {
        params: SammuParams::from_params(p),
        period_ns: p.number("period-ms") * 1e6,
        gate: p.number("gate"),
        hysteresis: p.number("hysteresis"),
        state: None,
    }))
}

struct SammuMechanism {
    params: SammuParams,
    period_ns: f64,
    gate: f64,
    hysteresis: f64,
    state: Option<State>,
}

struct State {
    detector: Sammu,
    remap: Remapper,
    /// NUMA counters: `nodes` per page, the page's index in `index`.
    index: FxHashMap<u64, usize>,
    counters: Vec<u16>,
    nodes: usize,
    max_nc: u16,
    next_decision_ns: f64,
    /// Remap decisions taken (one per period) and those that moved threads.
    decisions: u64,
    remaps: u64,
}

impl Mechanism for SammuMechanism {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let m = ctx.model;
        self.state = Some(State {
            detector: Sammu::new(self.params, m.cores, m.nodes).log_updates(),
            remap: Remapper::new(ctx, self.gate, self.hysteresis)?,
            index: FxHashMap::default(),
            counters: Vec::new(),
            nodes: m.nodes,
            max_nc: ((1u32 << self.params.nc_bits) - 1) as u16,
            next_decision_ns: self.period_ns,
            decisions: 0,
            remaps: 0,
        });
        let pus = super::os_pus(ctx);
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes: Vec::new() })
    }

    fn online(&self) -> bool {
        true
    }

    /// What SAMMU saw and did: its updates (and why there are none), its remap decisions
    /// (none when the run is shorter than the period) and how many moved threads.
    fn note(&self, time_ns: f64) -> Option<String> {
        let st = self.state.as_ref()?;
        let r = &st.detector.report;
        let seen = if r.updates == 0 {
            format!(
                "its TLBs reported nothing ({} evictions, {} saturations, none with AC >= AT): each core's pages fit its TLBs",
                r.evictions, r.saturations
            )
        } else {
            format!(
                "{} statistics updates, {:.1} % of them seeing another thread in the sharers vector",
                r.updates,
                100.0 * st.detector.sharing_share()
            )
        };
        let decided = if st.decisions == 0 {
            format!(
                "never decided a thread mapping: the run ({:.3} ms) is shorter than its period ({} ms)",
                time_ns / 1e6,
                self.period_ns / 1e6
            )
        } else {
            format!(
                "{} remap decisions (one per {} ms), {} of them moved threads",
                st.decisions,
                self.period_ns / 1e6,
                st.remaps
            )
        };
        Some(format!("SAMMU: {seen}; {decided}; {} migration notifications", r.migration_notifications))
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, addr: u64, _write: bool, _ns: f64) {
        let Some(st) = self.state.as_mut() else { return };
        let m = sim.model();
        let pu = sim.pu_of(thread);
        let (core, node) = (m.pu_core[pu], m.pu_node[pu]);
        let page = addr >> sim.page_shift();
        st.detector.access(thread as u32, core, node, page);
        if st.detector.has_updates() {
            let updates: Vec<(u64, usize)> = st.detector.take_updates().collect();
            for (page, n) in updates {
                st.count(sim, page, n, thread, self.params.nt);
            }
        }
        if sim.thread_clock(thread) >= st.next_decision_ns {
            let now = sim.time_ns();
            st.next_decision_ns = now + self.period_ns;
            st.decisions += 1;
            let share = st.detector.sharing_share();
            if st.remap.consider(&st.detector.matrix, share, sim) {
                st.remaps += 1;
            }
        }
    }
}

impl State {
    /// A statistics update of `page` from node `n`: +1 there, -1 elsewhere (saturating);
    /// the page moves to `n` when its counter leads the page's node's by `nt`.
    fn count(&mut self, sim: &mut Sim, page: u64, n: usize, thread: usize, nt: u32) {
        let nodes = self.nodes;
        let next = self.index.len();
        let i = *self.index.entry(page).or_insert(next);
        if i == next {
            self.counters.resize(self.counters.len() + nodes, 0);
        }
        let nc = &mut self.counters[i * nodes..(i + 1) * nodes];
        // A page without a home (read only, mapped to the zero page) has nothing to move.
        let home = sim.home_of(page).unwrap_or(n);
        if sharemap_decide::sammu::update(nc, n, self.max_nc, home, nt) {
            sim.move_page(page, n, thread);
        }
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for SammuMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SammuMechanism")
            .field("params", &self.params)
            .field("period_ns", &self.period_ns)
            .field("gate", &self.gate)
            .field("hysteresis", &self.hysteresis)
            .finish_non_exhaustive()
    }
}
