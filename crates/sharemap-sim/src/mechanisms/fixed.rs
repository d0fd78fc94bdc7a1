//! Static mechanisms: the mapping and the placement are decided before the run.

use super::{Context, Mechanism, MechanismError, Start};
use crate::sim::{FirstPlacement, Sim};
use sharemap_core::Params;
use sharemap_core::spec::SpecError;
use sharemap_mapping::{CostModel, PairCosts};

/// The operating system: where the trace says its threads ran, when it was recorded on a
/// host like the simulated machine; else where the OS model puts them. Pages by first touch.
#[derive(Debug, Default)]
pub struct Os {
    /// The simulated PU of each CPU the kernel numbers, when replaying the recorded schedule.
    pu_of_cpu: Option<Vec<usize>>,
    schedule: super::RecordedSchedule,
    /// (threads, node) when the model puts every thread on one node of several: then every
    /// page is local under first touch, and no data placement can beat `os` here.
    one_node: Option<(usize, usize)>,
}

impl Mechanism for Os {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        self.schedule = ctx.schedule;
        if ctx.schedule == super::RecordedSchedule::Replayed {
            let m = ctx.machine;
            let cpus = (0..m.pu_count()).map(|p| m.pu_os_index(p) as usize + 1).max().unwrap_or(0);
            let mut pu_of_cpu = vec![usize::MAX; cpus];
            for p in 0..m.pu_count() {
                pu_of_cpu[m.pu_os_index(p) as usize] = p;
            }
            self.pu_of_cpu = Some(pu_of_cpu);
        }
        let pus = super::os_pus(ctx);
        let nodes: Vec<usize> = pus.iter().map(|&p| ctx.model.pu_node[p]).collect();
        if ctx.model.nodes > 1 && nodes.len() > 1 && nodes.iter().all(|&n| n == nodes[0]) && self.pu_of_cpu.is_none() {
            self.one_node = Some((nodes.len(), nodes[0]));
        }
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes: Vec::new() })
    }

    fn online(&self) -> bool {
        false
    }

    /// A thread's first `cpu` event places it (before its first access: free); a later one
    /// is a migration the recorded run made, charged as one.
    fn on_cpu(&mut self, sim: &mut Sim, thread: usize, cpu: u64) {
        if let Some(&pu) = self.pu_of_cpu.as_ref().and_then(|m| m.get(cpu as usize))
            && pu != usize::MAX
        {
            sim.move_thread(thread, pu);
        }
    }

    fn note(&self, _time_ns: f64) -> Option<String> {
        let schedule = match self.schedule {
            super::RecordedSchedule::None => None,
            super::RecordedSchedule::Replayed => {
                Some("threads where the recorded run had them (the trace's cpu events), pages by first touch".to_string())
            }
            super::RecordedSchedule::OtherHost => Some(
                "the trace's cpu events come from a host with other CPUs or nodes than this machine: threads where the OS model puts them".into(),
            ),
        };
        let one_node = self.one_node.map(|(threads, node)| {
            format!(
                "the OS model runs all {threads} threads on NUMA node {node}: every page is local under first touch, so no data placement can beat os here (spread the threads, e.g. static:threads=scatter, or give more threads)"
            )
        });
        let parts: Vec<String> = schedule.into_iter().chain(one_node).collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[derive(Debug)]
pub struct Random {
    pub seed: u64,
}

impl Mechanism for Random {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let mapper = sharemap_mapping::build("random", self.seed).map_err(MechanismError::of)?;
        let matrix = sharemap_core::SharingMatrix::new(ctx.threads.max(1));
        let costs = PairCosts::new(ctx.machine, CostModel::Latency);
        let pus = mapper.map(&matrix, ctx.machine, &costs).map_err(MechanismError::of)?;
        Ok(Start { pus, placement: FirstPlacement::Random(self.seed), homes: Vec::new() })
    }
}

#[derive(Debug)]
pub struct Oracle;

/// Each page of `pages` on the node whose threads (on `pus`) count most for it (ties: the
/// lowest node).
pub fn dominant_nodes(ctx: &Context, pus: &[usize], pages: &[(u64, Vec<u64>)]) -> Vec<(u64, usize)> {
    let m = ctx.model;
    let node_of = |t: usize| m.pu_node[pus.get(t).copied().unwrap_or(t) % m.pus()];
    let mut per_node = vec![0u64; m.nodes];
    pages
        .iter()
        .map(|(page, counts)| {
            per_node.iter_mut().for_each(|n| *n = 0);
            for (t, &n) in counts.iter().enumerate() {
                per_node[node_of(t)] += n;
            }
            (*page, sharemap_decide::marathe::home(&per_node))
        })
        .collect()
}

/// Each page on the node that made most of its memory accesses.
fn memory_nodes(memory: &[(u64, Vec<u64>)]) -> Vec<(u64, usize)> {
    memory.iter().map(|(page, per_node)| (*page, sharemap_decide::most(per_node))).collect()
}

/// The oracle's thread mapping: the whole trace's sharing, sharemap's default algorithm;
/// without any sharing, where the OS puts the threads (nothing to gain from moving them).
pub fn oracle_mapping(ctx: &Context) -> Result<Vec<usize>, MechanismError> {
    let profile = ctx.profile.ok_or_else(|| MechanismError::of("needs the trace's profile"))?;
    if profile.matrix.total() == 0.0 {
        return Ok(super::os_pus(ctx));
    }
    let mapper = sharemap_mapping::build("sharemap", ctx.seed).map_err(MechanismError::of)?;
    let costs = PairCosts::new(ctx.machine, CostModel::Latency);
    let mut matrix = profile.matrix.clone();
    matrix.grow(ctx.threads.max(1));
    let demand = profile.demand(matrix.threads());
    Ok(mapper.map_with(&matrix, ctx.machine, &costs, Some(&demand)).map_err(MechanismError::of)?.0)
}

fn profile<'a>(ctx: &'a Context) -> Result<&'a super::Profile, MechanismError> {
    let profile = ctx.profile.ok_or_else(|| MechanismError::of("needs the trace's profile"))?;
    if profile.page_size != ctx.page_size {
        return Err(MechanismError::of(format!(
            "the profile has pages of {} bytes, the run {}",
            profile.page_size, ctx.page_size
        )));
    }
    Ok(profile)
}

impl Mechanism for Oracle {
    fn needs_profile(&self) -> bool {
        true
    }

    fn memory_profile_pus(&self, ctx: &Context) -> Result<Option<Vec<usize>>, MechanismError> {
        oracle_mapping(ctx).map(Some)
    }

    /// Threads by the whole trace's sharing; each page on the node that makes most of its
    /// memory accesses under that mapping (what caches miss: a page the caches hold for one
    /// node and another node keeps missing on belongs to the other). Without the memory
    /// profile, the node with most accesses.
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let profile = profile(ctx)?;
        let pus = oracle_mapping(ctx)?;
        let homes = match profile.memory_under(&pus) {
            Some(memory) => memory_nodes(memory),
            None => dominant_nodes(ctx, &pus, &profile.pages),
        };
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes })
    }
}

/// Marathe & Mueller: the pages its profile samples, each on the node with most samples.
#[derive(Debug)]
pub struct Marathe {
    pub source: sharemap_decide::marathe::Source,
}

impl Mechanism for Marathe {
    fn needs_profile(&self) -> bool {
        true
    }

    fn profile_source(&self) -> Option<sharemap_decide::marathe::Source> {
        Some(self.source)
    }

    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let profile = profile(ctx)?;
        let pus = super::os_pus(ctx);
        let sampled = profile
            .sampled_pages(self.source)
            .ok_or_else(|| MechanismError::of(format!("the profile has no pages of {}", self.source.describe())))?;
        let homes = dominant_nodes(ctx, &pus, sampled);
        Ok(Start { pus, placement: FirstPlacement::FirstTouch, homes })
    }
}

/// Any thread mapping with any initial placement (`static:threads=ALGO,pages=HOW`).
#[derive(Debug)]
pub struct Static {
    threads: String,
    pages: String,
    seed: u64,
}

pub fn build_static(p: &Params, seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    let threads = p.text("threads").to_string();
    if threads != "identity" {
        sharemap_mapping::build(&threads, seed).map_err(|e| p.error(e.to_string()))?;
    }
    Ok(Box::new(Static { threads, pages: p.text("pages").to_string(), seed }))
}

impl Mechanism for Static {
    fn needs_profile(&self) -> bool {
        !matches!(self.threads.as_str(), "os" | "identity" | "random")
            || matches!(self.pages.as_str(), "dominant" | "memory")
    }

    fn memory_profile_pus(&self, ctx: &Context) -> Result<Option<Vec<usize>>, MechanismError> {
        if self.pages == "memory" { self.pus(ctx).map(Some) } else { Ok(None) }
    }

    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let pus = self.pus(ctx)?;
        let (placement, homes) = match self.pages.as_str() {
            "round-robin" => (FirstPlacement::RoundRobin, Vec::new()),
            "random" => (FirstPlacement::Random(self.seed), Vec::new()),
            "dominant" => (FirstPlacement::FirstTouch, dominant_nodes(ctx, &pus, &profile(ctx)?.pages)),
            "memory" => {
                let memory = profile(ctx)?
                    .memory_under(&pus)
                    .ok_or_else(|| MechanismError::of("the profile has no memory accesses for this mapping"))?;
                (FirstPlacement::FirstTouch, memory_nodes(memory))
            }
            _ => (FirstPlacement::FirstTouch, Vec::new()),
        };
        Ok(Start { pus, placement, homes })
    }
}

impl Static {
    /// Where its thread mapping puts the threads.
    fn pus(&self, ctx: &Context) -> Result<Vec<usize>, MechanismError> {
        Ok(if self.threads == "identity" {
            super::identity_pus(ctx)
        } else if self.threads == "os" {
            super::os_pus(ctx)
        } else {
            let mapper = sharemap_mapping::build(&self.threads, self.seed).map_err(MechanismError::of)?;
            let costs = PairCosts::new(ctx.machine, CostModel::Latency);
            let mut matrix = match ctx.profile {
                Some(p) => p.matrix.clone(),
                None => sharemap_core::SharingMatrix::new(ctx.threads.max(1)),
            };
            matrix.grow(ctx.threads.max(1));
            let demand = ctx.profile.map(|p| p.demand(matrix.threads()));
            mapper.map_with(&matrix, ctx.machine, &costs, demand.as_ref()).map_err(MechanismError::of)?.0
        })
    }
}
