//! Static mechanisms: the mapping and the placement are decided before the run.

use super::{Context, Mechanism, Start};
use crate::sim::FirstPlacement;
use sharemap_mapping::{CostModel, PairCosts};

pub struct Os;

impl Mechanism for Os {
    fn start(&mut self, ctx: &Context) -> Result<Start, String> {
        let pus = (0..ctx.threads).map(|t| t % ctx.model.pus()).collect();
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes: Vec::new() })
    }
}

pub struct Random {
    pub seed: u64,
}

impl Mechanism for Random {
    fn start(&mut self, ctx: &Context) -> Result<Start, String> {
        let mapper = sharemap_mapping::build("random", self.seed).map_err(|e| e.to_string())?;
        let matrix = sharemap_core::SharingMatrix::new(ctx.threads.max(1));
        let costs = PairCosts::new(ctx.machine, CostModel::Latency);
        let pus = mapper.map(&matrix, ctx.machine, &costs).map_err(|e| e.to_string())?;
        Ok(Start { pus, placement: FirstPlacement::Random(self.seed), homes: Vec::new() })
    }
}

pub struct Oracle;

impl Mechanism for Oracle {
    fn start(&mut self, ctx: &Context) -> Result<Start, String> {
        let profile = ctx.profile.ok_or("the oracle needs the trace's profile")?;
        let mapper = sharemap_mapping::build("sharemap", ctx.seed).map_err(|e| e.to_string())?;
        let costs = PairCosts::new(ctx.machine, CostModel::Latency);
        let mut matrix = profile.matrix.clone();
        matrix.grow(ctx.threads.max(1));
        let pus = mapper.map(&matrix, ctx.machine, &costs).map_err(|e| e.to_string())?;
        let node_of = |t: usize| ctx.model.pu_node[pus.get(t).copied().unwrap_or(t) % ctx.model.pus()];
        if profile.page_size != ctx.page_size {
            return Err(format!("the profile has pages of {} bytes, the run {}", profile.page_size, ctx.page_size));
        }
        // Each page on the node whose threads access it most (ties: the lowest node).
        let mut homes = Vec::with_capacity(profile.pages.len());
        let mut per_node = vec![0u64; ctx.model.nodes];
        for (page, counts) in &profile.pages {
            per_node.iter_mut().for_each(|n| *n = 0);
            for (t, &n) in counts.iter().enumerate() {
                per_node[node_of(t)] += n;
            }
            let best = (0..per_node.len()).max_by_key(|&n| (per_node[n], std::cmp::Reverse(n))).unwrap_or(0);
            homes.push((*page, best));
        }
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes })
    }
}
