//! SAMMU (seed 000, section 3) inside the simulation: its TLB detector sees every access on
//! the core the thread runs on; its sharing matrix remaps the threads every period (gate and
//! hysteresis); its NUMA counters move a page when another node's counter leads the page's
//! node's by NT.

use super::remap::Remapper;
use super::{Context, KIND, Mechanism, MechanismError, Start, positive_f64};
use crate::sim::{FirstPlacement, Sim};
use rustc_hash::FxHashMap;
use sharemap_core::spec::{Spec, SpecError};
use sharemap_detect::sammu::{Sammu, SammuParams};

pub fn build(spec: &Spec, _seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    let d = SammuParams::default();
    let params = SammuParams {
        ac_bits: spec.positive(KIND, "ac", d.ac_bits as u64)?.clamp(1, 32) as u32,
        nc_bits: spec.positive(KIND, "nc", d.nc_bits as u64)?.min(16) as u32,
        nt: spec.positive(KIND, "nt", d.nt as u64)?.min(u32::MAX as u64) as u32,
        ..d
    };
    let share = |key: &str, default: f64| -> Result<f64, SpecError> {
        match spec.get(key) {
            None | Some(None) => Ok(default),
            Some(Some(v)) => v
                .parse::<f64>()
                .ok()
                .filter(|x| (0.0..=1.0).contains(x))
                .ok_or_else(|| spec.error(KIND, format!("{key} must be a number from 0 to 1"))),
        }
    };
    Ok(Box::new(SammuMechanism {
        params,
        period_ns: positive_f64(spec, "period-ms", 1.0)? * 1e6,
        gate: share("gate", sharemap_mapping::potential::DEFAULT_THRESHOLD)?,
        hysteresis: share("hysteresis", 0.1)?,
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
        });
        let pus = (0..ctx.threads).map(|t| t % m.pus()).collect();
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes: Vec::new() })
    }

    fn online(&self) -> bool {
        true
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
            let updates = st.detector.report.updates;
            st.remap.consider(&st.detector.matrix, updates, sim);
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
        for (k, c) in nc.iter_mut().enumerate() {
            *c = if k == n { (*c + 1).min(self.max_nc) } else { c.saturating_sub(1) };
        }
        if let Some(home) = sim.home_of(page)
            && home != n
            && nc[n] as u32 >= nc[home] as u32 + nt
        {
            sim.move_page(page, n, thread);
        }
    }
}
