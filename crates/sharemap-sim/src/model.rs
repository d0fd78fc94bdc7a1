//! The simulated machine: the caches of a `Machine` (hwloc's tree) with sizes, ways,
//! line size and latency, each PU's path through them, and the latencies of memory and of
//! the interconnect between NUMA nodes. The parameters and their sources: docs/simulator.md.

use serde::Serialize;
use sharemap_machine::{CacheKind, Machine, ObjType};

/// Most cores the directory follows (one bit per core).
pub const MAX_CORES: usize = 128;
/// Most lines of all simulated caches together (2 GiB of the host's memory).
pub const MAX_SIMULATED_LINES: u64 = 1 << 28;
/// Most caches of one kind (private or shared) a line can be in at once, tracked by bits.
pub const MAX_SHARED_CACHES: usize = 64;

pub use crate::params::{ParamError, Params};

/// One simulated cache.
#[derive(Clone, Debug, Serialize)]
pub struct CacheSpec {
    pub level: u8,
    pub size: u64,
    pub ways: u32,
    pub latency_ns: f64,
    /// Under one core only (its coherence state is the core's).
    pub private: bool,
    /// NUMA node of its first PU.
    pub node: usize,
    /// Logical PUs below it.
    pub pus: Vec<usize>,
}

impl CacheSpec {
    pub fn lines(&self, line: u32) -> u64 {
        self.size / line as u64
    }
}

/// A machine as the simulator sees it.
#[derive(Clone, Debug)]
pub struct Model {
    pub params: Params,
    pub line: u32,
    pub caches: Vec<CacheSpec>,
    /// Per PU: its private caches, first level first.
    pub private_path: Vec<Vec<usize>>,
    /// Per PU: its shared caches, nearest first.
    pub shared_path: Vec<Vec<usize>>,
    /// Dense index of each PU's core.
    pub pu_core: Vec<usize>,
    /// Per core, a PU of it (whose paths are the core's).
    pub core_pu: Vec<usize>,
    pub pu_node: Vec<usize>,
    pub cores: usize,
    pub nodes: usize,
    /// Index among the shared caches of each cache (None for private ones).
    pub shared_index: Vec<Option<usize>>,
    /// The cache of each shared-cache index (the inverse of `shared_index`).
    pub shared_caches: Vec<usize>,
    /// Per PU, the bits (shared-cache indices) of the shared caches on its path.
    pub shared_mask: Vec<u64>,
    /// Per cache: the cores under it when it is an inclusive last-level cache, else 0.
    pub inclusive_over: Vec<u128>,
    /// Whether each core's last private level holds every line of its lower ones.
    pub private_inclusive: bool,
    /// DRAM latency from a PU of node a to memory of node b, in ns.
    pub dram_ns: Vec<Vec<f64>>,
    /// What crossing from node a to node b adds to a transfer, in ns.
    pub hop_ns: Vec<Vec<f64>>,
    /// The memory and link bandwidths in force (the machine's, or the parameters').
    pub bandwidth: sharemap_machine::Bandwidth,
    /// What one line takes of a node's memory and of a link, in ns (0: no limit).
    pub memory_ns_per_line: f64,
    pub link_ns_per_line: f64,
    /// A line from one core to another (row: the receiving core), per pair of cores: the
    /// cores' PUs share their caches above them, so a core's PU stands for all of them.
    transfer_ns: Vec<f64>,
}

/// A machine beyond what the simulator models (too many cores or shared caches, caches
/// with several line sizes, more lines than it holds): which machine, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub machine: String,
    message: String,
}

impl ModelError {
    fn new(machine: &Machine, message: String) -> ModelError {
        ModelError { machine: machine.name.clone(), message }
    }
}

impl Model {
    pub fn new(machine: &Machine, params: Params) -> Result<Model, ModelError> {
        let pu_core = machine.core_of_pu();
        let cores = pu_core.iter().max().map_or(0, |&c| c + 1);
        if cores > MAX_CORES {
            return Err(ModelError::new(
                machine,
                format!("{} has {cores} cores: the simulator follows at most {MAX_CORES}", machine.name),
            ));
        }
        let pu_node = machine.pu_numa.clone();
        let nodes = machine.numa_count().max(1);
        let tree = &machine.tree;

        // Data and unified caches, in tree order, with the PUs below each.
        let mut caches = Vec::new();
        let mut cache_of_obj = std::collections::HashMap::new();
        let mut line = None;
        for (id, obj) in tree.objs.iter().enumerate() {
            let ObjType::Cache { level, kind } = obj.ty else { continue };
            if kind == CacheKind::Instruction {
                continue;
            }
            let pus: Vec<usize> = machine
                .pus
                .iter()
                .enumerate()
                .filter(|&(_, &pu)| tree.ancestors(pu).contains(&id))
                .map(|(i, _)| i)
                .collect();
            if pus.is_empty() {
                continue;
            }
            let lvl = (level.clamp(1, 4) - 1) as usize;
            let l = obj.cache_line.unwrap_or(params.line);
            if *line.get_or_insert(l) != l {
                return Err(ModelError::new(
                    machine,
                    format!(
                        "{}: caches with lines of {} and {l} bytes: the simulator needs one line size",
                        machine.name,
                        line.unwrap_or(l)
                    ),
                ));
            }
            let size = obj.cache_size.unwrap_or(ObjType::default_cache_size(level));
            let private = pus.iter().all(|&p| pu_core[p] == pu_core[pus[0]]);
            cache_of_obj.insert(id, caches.len());
            caches.push(CacheSpec {
                level,
                size,
                ways: obj.cache_ways.unwrap_or(params.level_ways[lvl]),
                latency_ns: params.level_ns[lvl],
                private,
                node: pu_node[pus[0]],
                pus,
            });
        }
        let line = line.unwrap_or(params.line);
        if !line.is_power_of_two() || line < 8 {
            return Err(ModelError::new(machine, format!("{}: cache line of {line} bytes", machine.name)));
        }
        if let Some(c) = caches.iter().find(|c| c.size < line as u64) {
            return Err(ModelError::new(
                machine,
                format!("{}: an L{} cache of {} bytes holds no {line}-byte line", machine.name, c.level, c.size),
            ));
        }

        // Each simulated line takes 8 bytes of the host's memory.
        let total: u64 = caches.iter().map(|c| c.lines(line)).sum();
        if total > MAX_SIMULATED_LINES {
            return Err(ModelError::new(
                machine,
                format!(
                    "{}: its caches hold {total} lines of {line} bytes; the simulator holds at most {MAX_SIMULATED_LINES} ({} GiB of caches)",
                    machine.name,
                    (MAX_SIMULATED_LINES * line as u64) >> 30
                ),
            ));
        }
        let mut private_path = Vec::new();
        let mut shared_path = Vec::new();
        for &pu in &machine.pus {
            let mut path: Vec<usize> =
                tree.ancestors(pu).into_iter().filter_map(|o| cache_of_obj.get(&o).copied()).collect();
            path.sort_by_key(|&c| caches[c].level);
            let (p, s): (Vec<usize>, Vec<usize>) = path.into_iter().partition(|&c| caches[c].private);
            private_path.push(p);
            shared_path.push(s);
        }
        let mut shared_index = vec![None; caches.len()];
        let mut n = 0;
        for (i, c) in caches.iter().enumerate() {
            if !c.private {
                shared_index[i] = Some(n);
                n += 1;
            }
        }
        if n > MAX_SHARED_CACHES {
            return Err(ModelError::new(
                machine,
                format!("{} has {n} shared caches: the simulator follows at most {MAX_SHARED_CACHES}", machine.name),
            ));
        }
        let dram_ns: Vec<Vec<f64>> = (0..nodes)
            .map(|a| {
                (0..nodes)
                    .map(|b| {
                        let (a, b) = if machine.numa_count() == 0 { (0, 0) } else { (a, b) };
                        // The machine's latency model, scaled to the local latency asked for.
                        machine.latency_ns(a, b) * params.dram_ns / sharemap_machine::LOCAL_LATENCY_NS
                    })
                    .collect()
            })
            .collect();
        let hop_ns =
            (0..nodes).map(|a| (0..nodes).map(|b| (dram_ns[a][b] - dram_ns[a][a]).max(0.0)).collect()).collect();
        let shared_caches = (0..caches.len()).filter(|&c| !caches[c].private).collect();
        let shared_mask = shared_path
            .iter()
            .map(|path| path.iter().fold(0, |acc, &c| acc | 1 << shared_index[c].unwrap_or(0)))
            .collect();
        // A core's first PU: its siblings sit under the same caches.
        let mut core_pu = vec![0; cores];
        for (pu, &c) in pu_core.iter().enumerate().rev() {
            core_pu[c] = pu;
        }
        // An inclusive last level: the last shared cache of each path, with its cores.
        let inclusive = match params.llc_inclusive {
            2 => machine.llc_inclusive.unwrap_or(false),
            v => v == 1,
        };
        let mut inclusive_over = vec![0u128; caches.len()];
        if inclusive {
            for (pu, path) in shared_path.iter().enumerate() {
                if let Some(&llc) = path.last() {
                    inclusive_over[llc] |= 1u128 << pu_core[pu];
                }
            }
        }
        let private_inclusive = match params.private_inclusive {
            2 => machine.private_inclusive.unwrap_or(true),
            v => v == 1,
        };
        let mut bandwidth = machine.bandwidth;
        if params.mem_gbps >= 0.0 {
            bandwidth.memory_gbps = params.mem_gbps;
            bandwidth.origin = sharemap_machine::BandwidthOrigin::Parameters;
        }
        if params.link_gbps >= 0.0 {
            bandwidth.link_gbps = params.link_gbps;
            bandwidth.origin = sharemap_machine::BandwidthOrigin::Parameters;
        }
        let per_line = |gbps: f64| if gbps > 0.0 { line as f64 / gbps } else { 0.0 };
        let (memory_ns_per_line, link_ns_per_line) = (per_line(bandwidth.memory_gbps), per_line(bandwidth.link_gbps));
        let mut model = Model {
            params,
            line,
            caches,
            private_path,
            shared_path,
            pu_core,
            core_pu,
            pu_node,
            cores,
            nodes,
            shared_caches,
            shared_mask,
            inclusive_over,
            private_inclusive,
            shared_index,
            dram_ns,
            hop_ns,
            bandwidth,
            memory_ns_per_line,
            link_ns_per_line,
            transfer_ns: Vec::new(),
        };
        let core_pu = &model.core_pu;
        model.transfer_ns =
            (0..cores * cores).map(|i| model.transfer_between(core_pu[i / cores], core_pu[i % cores])).collect();
        Ok(model)
    }

    /// A line from PU `b`'s core to PU `a`'s: through the nearest cache they share, or
    /// across the interconnect between their nodes.
    pub(crate) fn transfer_between(&self, a: usize, b: usize) -> f64 {
        match self.common_shared(a, b) {
            Some(c) => self.caches[c].latency_ns + self.params.snoop_ns,
            None => {
                let llc = self.shared_path[a].last().map_or(self.params.level_ns[2], |&c| self.caches[c].latency_ns);
                llc + self.params.snoop_ns + self.hop_ns[self.pu_node[a]][self.pu_node[b]]
            }
        }
    }

    /// What a transfer of a line from PU `b`'s core to PU `a`'s costs.
    #[inline]
    pub fn transfer_ns(&self, a: usize, b: usize) -> f64 {
        self.core_transfer_ns(self.pu_core[a], self.pu_core[b])
    }

    /// What a transfer of a line from core `b` to core `a` costs.
    #[inline]
    pub fn core_transfer_ns(&self, a: usize, b: usize) -> f64 {
        self.transfer_ns[a * self.cores + b]
    }

    pub fn pus(&self) -> usize {
        self.pu_core.len()
    }

    /// Cache levels present, lowest first.
    pub fn levels(&self) -> Vec<u8> {
        let mut l: Vec<u8> = self.caches.iter().map(|c| c.level).collect();
        l.sort_unstable();
        l.dedup();
        l
    }

    /// What is inclusive of what, in words (for a table's header): a core's last private
    /// level over its lower ones, when it has several; the last-level cache over the cores
    /// under it, when there is one shared.
    pub fn inclusion(&self) -> Vec<String> {
        let mut out = Vec::new();
        let path = self.private_path.first().map_or(&[][..], |p| p.as_slice());
        if let [lower @ .., last] = path
            && !lower.is_empty()
        {
            let (top, below) = (self.caches[*last].level, self.caches[lower[lower.len() - 1]].level);
            let not = if self.private_inclusive { "" } else { "not " };
            out.push(format!("L{top} {not}inclusive of L{below}"));
        }
        if let Some(&llc) = self.shared_path.first().and_then(|p| p.last()) {
            let not = if self.inclusive_over[llc] != 0 { "" } else { "not " };
            out.push(format!("L{} {not}inclusive", self.caches[llc].level));
        }
        out
    }

    /// The host memory one simulation of this model may take, in bytes: its caches' tags
    /// (8 bytes a line) and, for every line they can hold at once, a directory entry (16
    /// bytes, in a table kept at most half full), and the bandwidth ledgers.
    pub fn host_bytes(&self) -> u64 {
        let lines: u64 = self.caches.iter().map(|c| c.lines(self.line)).sum();
        lines * (8 + 2 * 16)
            + crate::sim::Channels::host_bytes(self.nodes, self.memory_ns_per_line, self.link_ns_per_line)
    }

    /// The nearest shared cache two PUs both sit under, if any.
    pub fn common_shared(&self, a: usize, b: usize) -> Option<usize> {
        self.shared_path[a].iter().copied().find(|c| self.shared_path[b].contains(c))
    }
}
