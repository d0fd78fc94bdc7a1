//! sharemap-machine: the NUMA machine every analysis maps onto. A machine is hwloc's view of
//! a host (object tree, PU logical and OS numbering, NUMA nodes), a distance and latency
//! model between NUMA nodes, and seed 004's cost parameters.

mod bandwidth;
pub mod cost;
mod live;
mod placement;

pub use placement::{PlacementError, ThreadPlacement};
use sharemap_core::names;
pub mod presets;
pub mod synthetic;
pub mod topology;
mod xml;

pub use bandwidth::{ASSUMED_GBPS_PER_CORE, ASSUMED_LINK_SHARE, Bandwidth, BandwidthOrigin};
pub use cost::{CostError, CostParams};
pub use live::parse_cpulist;
pub use topology::{CacheKind, NumaNode, Obj, ObjType, Tree};

use serde::Serialize;
use std::path::Path;

/// Most PUs a machine may have. Mappings keep a cost for each pair of PUs (128 MiB at this
/// size), and traces hold at most as many threads.
pub const MAX_PUS: usize = 4096;

/// Largest machine file read (hwloc XML of a large server is a few MB).
const MAX_FILE_BYTES: u64 = 64 << 20;
/// Longest synthetic description (real ones are under 200 characters).
const MAX_SYNTHETIC_CHARS: usize = 1000;

fn synthetic_length(spec: &str) -> Result<&str, MachineError> {
    if spec.len() > MAX_SYNTHETIC_CHARS {
        return Err(MachineError::new(
            MachineErrorKind::Synthetic,
            format!("synthetic topology of {} characters: too long (at most {MAX_SYNTHETIC_CHARS})", spec.len()),
        ));
    }
    Ok(spec)
}

/// A machine that cannot be read or modelled: what kind of problem, and one line of
/// explanation ready to show the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MachineError {
    pub kind: MachineErrorKind,
    message: String,
}

/// What is wrong with a machine description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MachineErrorKind {
    /// It names no machine: empty, an unknown preset, a file that does not exist.
    Spec,
    /// A file or the live host's description that cannot be read (unreadable, too large,
    /// not text, empty).
    Unreadable,
    /// hwloc XML that is not well formed or not a topology sharemap reads.
    Xml,
    /// A synthetic description that does not parse.
    Synthetic,
    /// A topology sharemap does not model (asymmetric, leaves not PUs, a distance matrix
    /// missing a node).
    Unsupported,
}

impl MachineError {
    pub fn new(kind: MachineErrorKind, message: impl Into<String>) -> MachineError {
        MachineError { kind, message: message.into() }
    }
}

/// All objects of one depth of the tree (below the root), in logical order.
#[derive(Clone, Debug)]
pub struct Level {
    pub ty: ObjType,
    pub objs: Vec<usize>,
}

/// NUMA distances when the topology does not give them (SLIT-like values): 10 local,
/// 16 between nodes that share an object below the root (same package, die or group),
/// 21 otherwise.
pub const DISTANCE_LOCAL: u32 = 10;
pub const DISTANCE_NEAR: u32 = 16;
pub const DISTANCE_FAR: u32 = 21;
/// Latency of a local memory access in the latency model; remote = local x distance / 10.
pub const LOCAL_LATENCY_NS: f64 = 80.0;

#[derive(Clone, Debug)]
pub struct Machine {
    pub name: String,
    pub description: String,
    pub tree: Tree,
    pub levels: Vec<Level>,
    /// Object ids of the PUs in logical order.
    pub pus: Vec<usize>,
    /// Logical NUMA node of each logical PU.
    pub pu_numa: Vec<usize>,
    /// NUMA distances in logical node order.
    pub distances: Vec<Vec<u32>>,
    /// "hwloc" when the topology file gave them, "model" otherwise.
    pub distance_origin: &'static str,
    pub cost: CostParams,
    /// How the cost parameters follow the page size.
    pub cost_rule: CostRule,
    /// Whether the last-level cache holds every line of the caches under it (inclusive, so
    /// evicting a line there evicts it from them), when the description says (a preset).
    pub llc_inclusive: Option<bool>,
    /// Whether each core's last private cache holds every line of its lower ones, when the
    /// description says (a preset).
    pub private_inclusive: Option<bool>,
    /// Memory and interconnect bandwidth.
    pub bandwidth: Bandwidth,
}

/// How a machine's seed-004 cost parameters are derived from the page size.
#[derive(Clone, Copy, Debug)]
pub enum CostRule {
    /// A modern NUMA machine: r from the mean remote/local distance ratio.
    Numa { remote_ratio: f64 },
    /// A seed machine's own rule (ACE, Butterfly).
    Preset(fn(u64) -> CostParams),
}

impl Machine {
    /// The cost parameters for pages of `page_size` bytes and cache lines of `line_size`.
    pub fn cost_for(&self, page_size: u64, line_size: u64) -> CostParams {
        match self.cost_rule {
            CostRule::Numa { remote_ratio } => CostParams::for_numa(remote_ratio, page_size, line_size),
            CostRule::Preset(rule) => rule(page_size),
        }
    }

    /// SPEC: a preset name, `live`, an hwloc XML file, a file holding a synthetic string,
    /// or a synthetic string.
    pub fn from_spec(spec: &str) -> Result<Machine, MachineError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(MachineError::new(MachineErrorKind::Spec, "empty machine description"));
        }
        if spec == "live" {
            return Self::live();
        }
        if let Some(p) = presets::find(spec) {
            let tree = synthetic::parse(p.synthetic)?;
            let mut m = Self::from_tree(p.name, p.description, tree, None)?;
            if let Some(cost) = p.cost {
                m.cost = cost(4096);
                m.cost_rule = CostRule::Preset(cost);
            }
            m.llc_inclusive = p.llc_inclusive;
            m.private_inclusive = p.private_inclusive;
            m.bandwidth = p.bandwidth;
            return Ok(m);
        }
        let path = Path::new(spec);
        if path.is_file() {
            let len = std::fs::metadata(path)
                .map_err(|e| MachineError::new(MachineErrorKind::Unreadable, format!("{spec}: {e}")))?
                .len();
            if len > MAX_FILE_BYTES {
                return Err(MachineError::new(
                    MachineErrorKind::Unreadable,
                    format!("{spec}: {len} bytes is too large for a machine description (at most {MAX_FILE_BYTES})"),
                ));
            }
            let bytes = std::fs::read(path)
                .map_err(|e| MachineError::new(MachineErrorKind::Unreadable, format!("{spec}: {e}")))?;
            let text = String::from_utf8(bytes).map_err(|e| {
                MachineError::new(
                    MachineErrorKind::Unreadable,
                    format!(
                        "{spec}: not an hwloc XML file or synthetic string (not UTF-8 text at byte {})",
                        e.utf8_error().valid_up_to()
                    ),
                )
            })?;
            if text.trim_start().starts_with('<') {
                return Self::from_xml(&text, spec);
            }
            if text.trim().is_empty() {
                return Err(MachineError::new(
                    MachineErrorKind::Unreadable,
                    format!("{spec}: empty file (expected hwloc XML or a synthetic string)"),
                ));
            }
            let tree = synthetic::parse(synthetic_length(text.trim())?)
                .map_err(|e| MachineError::new(MachineErrorKind::Synthetic, format!("{spec}: {e}")))?;
            return Self::from_tree(spec, "synthetic topology from file", tree, None);
        }
        if spec.ends_with(".xml") || spec.contains('/') {
            return Err(MachineError::new(MachineErrorKind::Spec, format!("{spec}: no such file")));
        }
        if !spec.contains(':') {
            let names: Vec<&str> = presets::PRESETS.iter().map(|p| p.name).collect();
            return Err(MachineError::new(
                MachineErrorKind::Spec,
                format!(
                    "unknown machine '{spec}': {}give a preset ({}), 'live', an hwloc XML file or a synthetic string such as \"pack:2 core:4 pu:2\"",
                    names::did_you_mean(
                        spec,
                        presets::PRESETS.iter().flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()))
                    ),
                    names.join(", ")
                ),
            ));
        }
        let tree = synthetic::parse(synthetic_length(spec)?)?;
        Self::from_tree(spec, "synthetic topology", tree, None)
    }

    pub fn from_xml(text: &str, origin: &str) -> Result<Machine, MachineError> {
        let x = xml::parse(text, origin)?;
        Self::from_tree(origin, "hwloc XML topology", x.tree, x.distances)
    }

    /// This host. Note: modelled NUMA behaviour needs no NUMA host; this only reads topology.
    pub fn live() -> Result<Machine, MachineError> {
        let mut m = match live::lstopo_xml() {
            Some(xml) => Self::from_xml(&xml, "live")?,
            None => Self::from_tree(
                "live",
                "this host (from /sys; install hwloc for full detail)",
                live::from_sysfs()?,
                None,
            )?,
        };
        m.read_host_bandwidth();
        Ok(m)
    }

    /// The firmware's memory bandwidth of this host's nodes, when Linux shows it.
    fn read_host_bandwidth(&mut self) {
        let nodes: Vec<u32> = (0..self.numa_count()).map(|n| self.numa_os_index(n)).collect();
        if let Some(gbps) = bandwidth::host_hmat(&nodes) {
            self.bandwidth =
                Bandwidth { memory_gbps: gbps, link_gbps: gbps * ASSUMED_LINK_SHARE, origin: BandwidthOrigin::Hmat };
        }
    }

    /// This host from Linux sysfs alone (no lstopo process): for libraries running inside a
    /// program, such as the STM's online mapper.
    pub fn live_sysfs() -> Result<Machine, MachineError> {
        let mut m = Self::from_tree("live", "this host (from /sys)", live::from_sysfs()?, None)?;
        m.read_host_bandwidth();
        Ok(m)
    }

    fn from_tree(
        name: &str,
        description: &str,
        mut tree: Tree,
        distances: Option<(Vec<u32>, Vec<Vec<u64>>)>,
    ) -> Result<Machine, MachineError> {
        sort_children_by_cpuset(&mut tree);
        // Levels by depth; hwloc keeps one object type per depth.
        let mut levels: Vec<Level> = Vec::new();
        let mut frontier = vec![0usize];
        loop {
            let next: Vec<usize> = frontier.iter().flat_map(|&o| tree.objs[o].children.clone()).collect();
            if next.is_empty() {
                break;
            }
            let ty = tree.objs[next[0]].ty;
            if let Some(&odd) = next.iter().find(|&&o| tree.objs[o].ty != ty) {
                return Err(MachineError::new(
                    MachineErrorKind::Unsupported,
                    format!(
                        "{name}: unsupported asymmetric topology: depth {} mixes {} and {}",
                        levels.len() + 1,
                        ty.hwloc_name(),
                        tree.objs[odd].ty.hwloc_name()
                    ),
                ));
            }
            if frontier.iter().any(|&o| tree.objs[o].children.is_empty()) {
                return Err(MachineError::new(
                    MachineErrorKind::Unsupported,
                    format!("{name}: unsupported topology: leaves at different depths"),
                ));
            }
            levels.push(Level { ty, objs: next.clone() });
            frontier = next;
        }
        let pus = match levels.last() {
            Some(l) if l.ty == ObjType::Pu => l.objs.clone(),
            _ => {
                return Err(MachineError::new(
                    MachineErrorKind::Unsupported,
                    format!("{name}: the topology's leaves are not PUs"),
                ));
            }
        };
        if tree.numa.is_empty() {
            tree.attach_numa(0, 0, None);
        }
        renumber_numa_dfs(&mut tree);

        let holder_of = |tree: &Tree, mut o: usize| loop {
            if let Some(&n) = tree.objs[o].memory.first() {
                return n;
            }
            match tree.objs[o].parent {
                Some(p) => o = p,
                None => return 0,
            }
        };
        let pu_numa: Vec<usize> = pus.iter().map(|&p| holder_of(&tree, p)).collect();
        for (i, &n) in pu_numa.iter().enumerate() {
            tree.numa[n].pus.push(i);
        }
        // Nodes attached above several PUs own all of them, even if a lower node was chosen.
        let nn = tree.numa.len();
        let distances = match distances {
            Some((os_order, matrix)) => {
                let pos = |os: u32| os_order.iter().position(|&x| x == os);
                let mut d = vec![vec![0u32; nn]; nn];
                for (row, from) in d.iter_mut().zip(&tree.numa) {
                    for (cell, to) in row.iter_mut().zip(&tree.numa) {
                        let (Some(a), Some(b)) = (pos(from.os_index), pos(to.os_index)) else {
                            return Err(MachineError::new(
                                MachineErrorKind::Unsupported,
                                format!("{name}: NUMA distance matrix misses a node"),
                            ));
                        };
                        *cell = matrix[a][b] as u32;
                    }
                }
                Some(d)
            }
            None => None,
        };
        let distance_origin = if distances.is_some() { "hwloc" } else { "model" };
        let distances = distances.unwrap_or_else(|| model_distances(&tree));
        let remote: Vec<f64> = (0..nn)
            .flat_map(|i| (0..nn).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| distances[i][j] as f64 / distances[i][i].max(1) as f64)
            .collect();
        let ratio = if remote.is_empty() {
            DISTANCE_FAR as f64 / DISTANCE_LOCAL as f64
        } else {
            remote.iter().sum::<f64>() / remote.len() as f64
        };
        // A PU without a core above it is its own core (`core_of_pu`).
        let cores = match tree.objs.iter().filter(|o| o.ty == ObjType::Core).count() {
            0 => pus.len(),
            n => n,
        };
        let cores_per_node = cores.max(1).div_ceil(nn.max(1));
        Ok(Machine {
            name: name.to_string(),
            description: description.to_string(),
            tree,
            levels,
            pus,
            pu_numa,
            distances,
            distance_origin,
            cost: CostParams::for_numa(ratio, 4096, 64),
            cost_rule: CostRule::Numa { remote_ratio: ratio },
            llc_inclusive: None,
            private_inclusive: None,
            bandwidth: Bandwidth::assumed(cores_per_node),
        })
    }

    pub fn pu_count(&self) -> usize {
        self.pus.len()
    }
    pub fn numa_count(&self) -> usize {
        self.tree.numa.len()
    }
    pub fn count(&self, ty: ObjType) -> usize {
        self.tree.objs.iter().filter(|o| o.ty == ty).count()
    }
    pub fn cores(&self) -> usize {
        self.count(ObjType::Core)
    }
    pub fn packages(&self) -> usize {
        self.count(ObjType::Package)
    }
    /// Dense index of each logical PU's core (SMT siblings share one; a PU without a core
    /// object above it is its own core), in order of first appearance.
    pub fn core_of_pu(&self) -> Vec<usize> {
        let mut core_objs: Vec<usize> = Vec::new();
        self.pus
            .iter()
            .map(|&pu| {
                let obj =
                    self.tree.ancestors(pu).into_iter().find(|&o| self.tree.objs[o].ty == ObjType::Core).unwrap_or(pu);
                core_objs.iter().position(|&c| c == obj).unwrap_or_else(|| {
                    core_objs.push(obj);
                    core_objs.len() - 1
                })
            })
            .collect()
    }
    /// OS index of a logical PU.
    pub fn pu_os_index(&self, logical: usize) -> u32 {
        self.tree.objs[self.pus[logical]].os_index.unwrap_or(logical as u32)
    }
    /// OS index of a logical NUMA node (what the kernel's memory policies name).
    pub fn numa_os_index(&self, logical: usize) -> u32 {
        self.tree.numa[logical].os_index
    }
    /// Modelled latency in ns of an access from a PU of node `from` to memory of node `to`.
    pub fn latency_ns(&self, from: usize, to: usize) -> f64 {
        LOCAL_LATENCY_NS * self.distances[from][to] as f64 / DISTANCE_LOCAL as f64
    }
    /// What a PU of each node reads from each node's memory, in GB/s (None: no limit).
    pub fn bandwidth_table(&self) -> Vec<Vec<Option<f64>>> {
        let n = self.numa_count().max(1);
        (0..n).map(|a| (0..n).map(|b| Some(self.bandwidth.between(a, b)).filter(|g| g.is_finite())).collect()).collect()
    }

    /// Canonical hwloc synthetic string, when the tree is symmetric.
    pub fn synthetic(&self) -> Option<String> {
        synthetic::export(&self.tree, &self.levels)
    }

    pub fn summary(&self) -> MachineSummary {
        MachineSummary {
            name: self.name.clone(),
            description: self.description.clone(),
            synthetic: self.synthetic(),
            pus: self.pu_count(),
            cores: self.cores(),
            numa_nodes: self.numa_count(),
            packages: self.packages(),
            levels: self
                .levels
                .iter()
                .enumerate()
                .map(|(d, l)| {
                    let parents = if d == 0 { 1 } else { self.levels[d - 1].objs.len() };
                    LevelSummary {
                        r#type: l.ty.hwloc_name(),
                        count: l.objs.len(),
                        arity: l.objs.len() / parents.max(1),
                        cache_size: self.tree.objs[l.objs[0]].cache_size,
                    }
                })
                .collect(),
            pu_os_index: (0..self.pu_count()).map(|i| self.pu_os_index(i)).collect(),
            pu_numa: self.pu_numa.clone(),
            numa: self.tree.numa.clone(),
            distances: self.distances.clone(),
            distance_origin: self.distance_origin,
            local_latency_ns: LOCAL_LATENCY_NS,
            cost: self.cost,
            bandwidth: self.bandwidth,
            bandwidth_gbps: self.bandwidth_table(),
        }
    }
}

/// What `sharemap machine --json` prints.
#[derive(Serialize)]
pub struct MachineSummary {
    pub name: String,
    pub description: String,
    pub synthetic: Option<String>,
    pub pus: usize,
    pub cores: usize,
    pub numa_nodes: usize,
    pub packages: usize,
    pub levels: Vec<LevelSummary>,
    pub pu_os_index: Vec<u32>,
    pub pu_numa: Vec<usize>,
    pub numa: Vec<NumaNode>,
    pub distances: Vec<Vec<u32>>,
    pub distance_origin: &'static str,
    pub local_latency_ns: f64,
    pub cost: CostParams,
    pub bandwidth: Bandwidth,
    /// What a PU of node a reads from node b's memory, in GB/s (`null`: no limit).
    pub bandwidth_gbps: Vec<Vec<Option<f64>>>,
}

#[derive(Serialize)]
pub struct LevelSummary {
    pub r#type: String,
    pub count: usize,
    pub arity: usize,
    pub cache_size: Option<u64>,
}

/// hwloc orders siblings by the lowest OS index of their PUs (their cpuset), and logical
/// numbering follows that order. PUs without an OS index get their depth-first position.
fn sort_children_by_cpuset(tree: &mut Tree) {
    let mut order = Vec::new();
    let mut stack = vec![0usize];
    while let Some(o) = stack.pop() {
        order.push(o);
        stack.extend(tree.objs[o].children.iter().rev().copied());
    }
    let mut next_pu = 0u32;
    for &o in &order {
        if tree.objs[o].ty == ObjType::Pu {
            tree.objs[o].os_index.get_or_insert(next_pu);
            next_pu += 1;
        }
    }
    let mut min_pu = vec![u32::MAX; tree.objs.len()];
    for &o in order.iter().rev() {
        let own = if tree.objs[o].ty == ObjType::Pu { tree.objs[o].os_index.unwrap_or(u32::MAX) } else { u32::MAX };
        min_pu[o] = tree.objs[o].children.iter().map(|&c| min_pu[c]).fold(own, u32::min);
    }
    for o in order {
        let mut children = std::mem::take(&mut tree.objs[o].children);
        children.sort_by_key(|&c| min_pu[c]);
        tree.objs[o].children = children;
    }
}

/// hwloc numbers NUMA nodes logically in depth-first order of the objects holding them.
fn renumber_numa_dfs(tree: &mut Tree) {
    let mut order = Vec::new();
    let mut stack = vec![0usize];
    while let Some(o) = stack.pop() {
        order.extend(tree.objs[o].memory.iter().copied());
        stack.extend(tree.objs[o].children.iter().rev().copied());
    }
    let mut new_index = vec![0; tree.numa.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut numa: Vec<NumaNode> = order.iter().map(|&old| tree.numa[old].clone()).collect();
    for n in &mut numa {
        n.pus.clear();
    }
    for o in &mut tree.objs {
        for m in &mut o.memory {
            *m = new_index[*m];
        }
    }
    tree.numa = numa;
}

fn model_distances(tree: &Tree) -> Vec<Vec<u32>> {
    let n = tree.numa.len();
    let mut d = vec![vec![DISTANCE_LOCAL; n]; n];
    for (i, row) in d.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if i == j {
                continue;
            }
            let a = tree.ancestors(tree.numa[i].attached_to);
            let b = tree.ancestors(tree.numa[j].attached_to);
            let lca = a.iter().find(|x| b.contains(x)).copied().unwrap_or(0);
            *cell = if lca == 0 { DISTANCE_FAR } else { DISTANCE_NEAR };
        }
    }
    d
}

#[cfg(test)]
mod tests;
