//! The operating system as a baseline: where Linux's scheduler (CFS as in kernel 6.1) puts
//! the threads of a program whose main thread starts on one CPU and creates the others, all
//! busy for the whole run. Each new thread is placed by fork balancing (`find_idlest_cpu`:
//! down the scheduling domains to the idlest group, which spreads threads over nodes and
//! cores first), then the periodic load balancer (`load_balance`) moves threads until it
//! finds every domain balanced. docs/os-model.md gives each rule its kernel source.
//!
//! What the traces cannot drive is left out: wake-up placement (threads never sleep here),
//! NUMA balancing's task moves (the `numa-balancing` mechanism models its page side), and
//! utilisation (a busy thread counts as one task of full load).

use crate::algorithm::{MappingAlgorithm, MappingError};
use crate::cost::PairCosts;
use sharemap_core::SharingMatrix;
use sharemap_machine::{Machine, ObjType};

/// NUMA domains farther than this (SLIT distance) are not fork-balanced
/// (`node_reclaim_distance`, RECLAIM_DISTANCE in include/linux/topology.h).
const RECLAIM_DISTANCE: u32 = 30;
/// A NUMA imbalance of at most this many idle CPUs is allowed while few tasks run
/// (NUMA_IMBALANCE_MIN, kernel/sched/fair.c).
const NUMA_IMBALANCE_MIN: u32 = 2;
/// One busy task's load (NICE_0_LOAD scaled down) and a CPU's capacity (SCHED_CAPACITY_SCALE).
const TASK_LOAD: u64 = 1024;

/// The `os` mapping algorithm: Linux's placement of busy threads created by the main thread.
pub struct Os {
    /// Logical PU of the main thread (where exec balancing left it).
    pub start: Option<u32>,
    /// Run the periodic load balancer after the threads are created.
    pub balance: bool,
}

impl MappingAlgorithm for Os {
    fn spec(&self) -> String {
        let mut s = "os".to_string();
        let mut opts = Vec::new();
        if let Some(cpu) = self.start {
            opts.push(format!("start={cpu}"));
        }
        if !self.balance {
            opts.push("balance=0".into());
        }
        if !opts.is_empty() {
            s = format!("{s}:{}", opts.join(","));
        }
        s
    }

    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        Ok(self.place(machine, m.threads()))
    }
}

impl Os {
    /// Each of `threads` threads' logical PU.
    pub fn place(&self, machine: &Machine, threads: usize) -> Vec<usize> {
        let domains = Domains::new(machine);
        let start = match self.start {
            // The CPU's OS number, as taskset and `run --where` print it.
            Some(cpu) => (0..machine.pu_count()).find(|&p| machine.pu_os_index(p) == cpu).unwrap_or(domains.order[0]),
            None => domains.order[0],
        };
        let mut placed = domains.fork_all(threads.max(1), start);
        if self.balance {
            domains.balance(&mut placed);
        }
        placed.on
    }
}

/// What kind of hardware a domain's CPUs share, which sets its flags.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// SMT siblings (SD_SHARE_CPUCAPACITY).
    Smt,
    /// Within a last-level cache (SD_SHARE_PKG_RESOURCES).
    Cache,
    /// Within one NUMA node, above the last-level cache.
    Package,
    /// Nodes up to this distance (SD_NUMA).
    Numa(u32),
}

/// One level of scheduling domains: a partition of the PUs, each part split into the groups
/// (the child level's parts) it balances between.
#[derive(Debug)]
struct Level {
    kind: Kind,
    /// Per domain: its groups, each a list of logical PUs in OS order; groups are ordered by
    /// their first PU's OS number.
    domains: Vec<Vec<Vec<usize>>>,
    /// Per PU: its domain and its group in it.
    domain_of: Vec<usize>,
    group_of: Vec<usize>,
    imbalance_pct: u64,
    /// The child level spreads tasks evenly (SD_PREFER_SIBLING on every non-NUMA level).
    prefer_sibling: bool,
    /// SD_BALANCE_FORK.
    fork: bool,
    /// SD_SHARE_PKG_RESOURCES.
    shares_cache: bool,
    /// Tasks that may run on the local node before fork or balancing spreads them (imb_numa_nr).
    imb_numa_nr: u32,
}

impl Level {
    fn numa(&self) -> bool {
        matches!(self.kind, Kind::Numa(_))
    }
}

/// The scheduling domains Linux builds for a machine (kernel/sched/topology.c: SMT, MC at the
/// last-level cache, the package, then one level per NUMA distance), degenerate ones removed.
#[derive(Debug)]
struct Domains {
    levels: Vec<Level>,
    /// Logical PUs in OS order.
    order: Vec<usize>,
}

/// Where threads are: the PU of each thread and the tasks running on each PU.
struct Placed {
    on: Vec<usize>,
    running: Vec<u32>,
}

/// A group's figures as `update_sg_lb_stats` computes them for busy tasks.
#[derive(Clone, Copy, Debug)]
struct Stats {
    running: u32,
    idle: u32,
    weight: u32,
    /// 0: has spare CPUs, 1: fully busy, 2: overloaded (enum group_type's order).
    class: u8,
    /// Load per capacity, TASK_LOAD for one task per CPU.
    avg_load: u64,
}

impl Stats {
    fn of(pus: &[usize], running: &[u32]) -> Stats {
        let n: u32 = pus.iter().map(|&p| running[p]).sum();
        let weight = pus.len() as u32;
        let class = match n.cmp(&weight) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Greater => 2,
        };
        Stats {
            running: n,
            idle: pus.iter().filter(|&&p| running[p] == 0).count() as u32,
            weight,
            class,
            avg_load: n as u64 * TASK_LOAD / weight as u64,
        }
    }
}

/// `adjust_numa_imbalance`: a small imbalance is allowed while the destination runs few tasks.
fn adjust_numa_imbalance(imbalance: u32, dst_running: u32, imb_numa_nr: u32) -> u32 {
    if dst_running <= imb_numa_nr && imbalance <= NUMA_IMBALANCE_MIN { 0 } else { imbalance }
}

impl Domains {
    fn new(machine: &Machine) -> Domains {
        let pus = machine.pu_count();
        let mut order: Vec<usize> = (0..pus).collect();
        order.sort_by_key(|&p| machine.pu_os_index(p));
        let mut rank = vec![0; pus];
        for (i, &p) in order.iter().enumerate() {
            rank[p] = i;
        }
        let node = &machine.pu_numa;
        // Candidate partitions, each a label per PU.
        let core = machine.core_of_pu();
        let mut within_node: Vec<(Kind, Vec<usize>)> = vec![(Kind::Smt, core)];
        let mut llc: Option<Vec<usize>> = None;
        for level in &machine.levels {
            let kind = match level.ty {
                ObjType::Cache { .. } => Kind::Cache,
                ObjType::Package | ObjType::Die | ObjType::Group => Kind::Package,
                _ => continue,
            };
            let labels: Vec<usize> = machine
                .pus
                .iter()
                .enumerate()
                .map(|(p, &obj)| {
                    let up = machine.tree.ancestors(obj);
                    up.into_iter().find(|o| level.objs.contains(o)).map_or(usize::MAX - p, |o| o)
                })
                .collect();
            // Above a node, the NUMA levels take over (x86 drops the package level then).
            if !coarsens(&labels, node) {
                continue;
            }
            if kind == Kind::Cache {
                // Levels come root first: the first cache level met is the last-level cache.
                llc.get_or_insert_with(|| labels.clone());
            }
            within_node.push((kind, labels));
        }
        within_node.push((Kind::Package, node.clone()));
        // Without caches in the description, take the package (else the node) as sharing one.
        let llc = llc.unwrap_or_else(|| {
            within_node.iter().find(|(k, _)| *k == Kind::Package).map(|(_, l)| l.clone()).unwrap_or(node.clone())
        });
        // Finest first; of equal partitions, the one named for what it shares.
        let kind_rank = |k: &Kind| [Kind::Smt, Kind::Cache, Kind::Package].iter().position(|x| x == k);
        within_node.sort_by_key(|(kind, labels)| (std::cmp::Reverse(distinct(labels)), kind_rank(kind)));
        let mut candidates = within_node;
        let mut distances: Vec<u32> = machine.distances.iter().flatten().copied().collect();
        distances.sort_unstable();
        distances.dedup();
        for &d in distances.iter().skip(1) {
            candidates.push((Kind::Numa(d), nodes_within(machine, d)));
        }
        candidates.push((Kind::Numa(u32::MAX), vec![0; pus]));

        let mut current: Vec<usize> = (0..pus).collect();
        let mut levels: Vec<Level> = Vec::new();
        for (kind, labels) in candidates {
            if !coarsens(&current, &labels) || distinct(&labels) == distinct(&current) {
                continue;
            }
            let kind = match kind {
                Kind::Numa(u32::MAX) => Kind::Numa(distances.last().copied().unwrap_or(0)),
                // A partition of whole nodes met before any NUMA level is not NUMA.
                k => k,
            };
            let shares_cache = coarsens(&labels, &llc);
            levels.push(Level::build(kind, &labels, &current, &order, &rank, shares_cache));
            current = labels;
        }
        if levels.last().is_some_and(|l| !l.numa()) && machine.numa_count() > 1 {
            unreachable!("the last candidate spans every PU");
        }
        let weight_of = |labels: &[usize]| labels.iter().filter(|&&l| l == labels[order[0]]).count() as u32;
        set_imb_numa_nr(&mut levels, weight_of(node), weight_of(&llc));
        Domains { levels, order }
    }

    /// Each thread's PU after the main thread, on `start`, created the others one by one.
    fn fork_all(&self, threads: usize, start: usize) -> Placed {
        let mut placed = Placed { on: vec![start], running: vec![0; self.order.len()] };
        placed.running[start] = 1;
        for _ in 1..threads {
            let pu = self.fork(start, &placed.running);
            placed.on.push(pu);
            placed.running[pu] += 1;
        }
        placed
    }

    /// `find_idlest_cpu` for a task forked on `parent`: from the highest domain that
    /// balances on fork, down, moving to the idlest group's idlest CPU.
    fn fork(&self, parent: usize, running: &[u32]) -> usize {
        // The walk up stops at the first level that does not balance on fork.
        let top = self.levels.iter().take_while(|l| l.fork).count();
        let mut cpu = parent;
        for level in self.levels[..top].iter().rev() {
            if let Some(g) = self.idlest_group(level, cpu, running) {
                cpu = idlest_cpu(g, running);
            }
        }
        cpu
    }

    /// `find_idlest_group`: the group of `cpu`'s domain a new task should go to, or None to
    /// stay in the local group.
    fn idlest_group<'a>(&self, level: &'a Level, cpu: usize, running: &[u32]) -> Option<&'a [usize]> {
        let groups = &level.domains[level.domain_of[cpu]];
        let local_index = level.group_of[cpu];
        let local = Stats::of(&groups[local_index], running);
        let mut idlest: Option<(usize, Stats)> = None;
        for i in (1..groups.len()).map(|k| (local_index + k) % groups.len()) {
            let s = Stats::of(&groups[i], running);
            let better = match idlest {
                None => true,
                Some((_, best)) if s.class != best.class => s.class < best.class,
                Some((_, best)) if s.class == 0 => {
                    s.idle > best.idle || (s.idle == best.idle && s.running < best.running)
                }
                Some((_, best)) => s.avg_load < best.avg_load,
            };
            if better {
                idlest = Some((i, s));
            }
        }
        let (i, idlest) = idlest?;
        if local.class != idlest.class {
            return (idlest.class < local.class).then(|| groups[i].as_slice());
        }
        if local.class == 0 {
            if level.numa() {
                let imbalance = local.idle.abs_diff(idlest.idle);
                let allowed = level.imb_numa_nr.min(local.weight);
                if adjust_numa_imbalance(imbalance, local.running + 1, allowed) == 0 {
                    return None;
                }
            }
            return (local.idle < idlest.idle).then(|| groups[i].as_slice());
        }
        let slack = TASK_LOAD * (level.imbalance_pct - 100) / 100;
        if level.numa() && idlest.avg_load + slack >= local.avg_load {
            return None;
        }
        if idlest.avg_load >= local.avg_load + slack || 100 * local.avg_load <= level.imbalance_pct * idlest.avg_load {
            return None;
        }
        Some(groups[i].as_slice())
    }

    /// The periodic load balancer run until no domain finds an imbalance: each time, the
    /// lowest level's first imbalanced domain moves one task. Returns whether it settled
    /// (it always has on the machines tested; the bound guards against a cycle).
    fn balance(&self, placed: &mut Placed) -> bool {
        let bound = 64 * (placed.on.len() + 1) * (self.levels.len() + 1);
        for _ in 0..bound {
            let Some((from, to)) = self.imbalance(&placed.running) else { return true };
            // The most recently created task on the busiest CPU goes.
            let t = (0..placed.on.len()).rev().find(|&t| placed.on[t] == from).expect("a task on the busiest CPU");
            placed.on[t] = to;
            placed.running[from] -= 1;
            placed.running[to] += 1;
        }
        false
    }

    /// The first move `load_balance` would make: (from PU, to PU).
    fn imbalance(&self, running: &[u32]) -> Option<(usize, usize)> {
        for level in &self.levels {
            for groups in &level.domains {
                for local in 0..groups.len() {
                    if let Some(mv) = self.pull(level, groups, local, running) {
                        return Some(mv);
                    }
                }
            }
        }
        None
    }

    /// `find_busiest_group` and `calculate_imbalance` as seen from the `local` group, for
    /// busy tasks: the move that balancing pulls, if any.
    fn pull(&self, level: &Level, groups: &[Vec<usize>], local: usize, running: &[u32]) -> Option<(usize, usize)> {
        let here = Stats::of(&groups[local], running);
        let mut busiest: Option<(usize, Stats)> = None;
        for i in (1..groups.len()).map(|k| (local + k) % groups.len()) {
            let s = Stats::of(&groups[i], running);
            if s.running == 0 {
                continue;
            }
            let busier = match busiest {
                None => true,
                Some((_, b)) if s.class != b.class => s.class > b.class,
                Some((_, b)) if s.class == 0 => s.idle < b.idle || (s.idle == b.idle && s.running > b.running),
                Some((_, b)) => s.avg_load > b.avg_load,
            };
            if busier {
                busiest = Some((i, s));
            }
        }
        let (b, busy) = busiest?;
        if here.class > busy.class {
            return None;
        }
        let total: u32 = groups.iter().map(|g| Stats::of(g, running).running).sum();
        let capacity: u64 = groups.iter().map(|g| g.len() as u64).sum();
        let average = total as u64 * TASK_LOAD / capacity;
        if here.class == 2
            && (here.avg_load >= busy.avg_load
                || here.avg_load >= average
                || 100 * busy.avg_load <= level.imbalance_pct * here.avg_load)
        {
            return None;
        }
        let dst_idle = here.idle > 0;
        let forced = level.prefer_sibling && here.class == 0 && busy.running > here.running + 1;
        if !forced
            && busy.class != 2
            && (!dst_idle || (busy.weight > 1 && here.idle <= busy.idle + 1) || busy.running == 1)
        {
            return None;
        }
        let tasks = if here.class == 0 {
            if busy.class == 2 && !level.shares_cache {
                // Fill the local group's spare capacity.
                1
            } else {
                let diff = if busy.weight == 1 || level.prefer_sibling {
                    busy.running.saturating_sub(here.running)
                } else {
                    here.idle.saturating_sub(busy.idle)
                };
                let diff =
                    if level.numa() { adjust_numa_imbalance(diff, here.running + 1, level.imb_numa_nr) } else { diff };
                diff >> 1
            }
        } else {
            let local_load = here.running as u64 * TASK_LOAD / here.weight as u64;
            if here.class < 2 && (local_load >= busy.avg_load || local_load >= average) {
                return None;
            }
            let load = (busy.avg_load.saturating_sub(average) * busy.weight as u64)
                .min(average.saturating_sub(local_load) * here.weight as u64);
            // A task moves once the imbalance reaches half its load.
            u32::from(2 * load >= TASK_LOAD)
        };
        if tasks == 0 {
            return None;
        }
        let from = busiest_cpu(&groups[b], running);
        let to = idlest_cpu(&groups[local], running);
        // Moving must leave the destination less loaded than the source was (no ping-pong).
        (running[from] > running[to] + u32::from(running[to] > 0)).then_some((from, to))
    }
}

/// `find_idlest_group_cpu`: the group's first idle CPU, else its least loaded one.
fn idlest_cpu(group: &[usize], running: &[u32]) -> usize {
    *group.iter().min_by_key(|&&p| running[p]).expect("groups are not empty")
}

/// `find_busiest_queue` for tasks: the CPU running most.
fn busiest_cpu(group: &[usize], running: &[u32]) -> usize {
    *group.iter().rev().max_by_key(|&&p| running[p]).expect("groups are not empty")
}

fn distinct(labels: &[usize]) -> usize {
    let mut v = labels.to_vec();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// Whether every part of `fine` lies inside one part of `coarse`.
fn coarsens(fine: &[usize], coarse: &[usize]) -> bool {
    let mut seen = std::collections::HashMap::new();
    fine.iter().zip(coarse).all(|(f, c)| *seen.entry(*f).or_insert(*c) == *c)
}

/// PUs labelled by the groups of nodes within `d` of each other (closed transitively, as
/// the kernel's NUMA masks are for the symmetric distance tables hwloc reports).
fn nodes_within(machine: &Machine, d: u32) -> Vec<usize> {
    let n = machine.distances.len().max(1);
    let mut group: Vec<usize> = (0..n).collect();
    for _ in 0..n {
        for a in 0..n {
            for b in 0..n {
                if machine.distances.get(a).and_then(|r| r.get(b)).is_some_and(|&x| x <= d) {
                    let g = group[a].min(group[b]);
                    group[a] = g;
                    group[b] = g;
                }
            }
        }
    }
    machine.pu_numa.iter().map(|&node| group.get(node).copied().unwrap_or(0)).collect()
}

impl Level {
    fn build(
        kind: Kind,
        labels: &[usize],
        child: &[usize],
        order: &[usize],
        rank: &[usize],
        shares_cache: bool,
    ) -> Level {
        let pus = labels.len();
        // Domains and groups in OS order of their first PU.
        let mut domain_ids: Vec<usize> = Vec::new();
        let mut domains: Vec<Vec<Vec<usize>>> = Vec::new();
        let mut group_ids: Vec<Vec<usize>> = Vec::new();
        let (mut domain_of, mut group_of) = (vec![0; pus], vec![0; pus]);
        for &p in order {
            let d = domain_ids.iter().position(|&x| x == labels[p]).unwrap_or_else(|| {
                domain_ids.push(labels[p]);
                domains.push(Vec::new());
                group_ids.push(Vec::new());
                domain_ids.len() - 1
            });
            let g = group_ids[d].iter().position(|&x| x == child[p]).unwrap_or_else(|| {
                group_ids[d].push(child[p]);
                domains[d].push(Vec::new());
                group_ids[d].len() - 1
            });
            domains[d][g].push(p);
            domain_of[p] = d;
            group_of[p] = g;
        }
        debug_assert!(domains.iter().flatten().all(|g| g.windows(2).all(|w| rank[w[0]] < rank[w[1]])));
        let numa = matches!(kind, Kind::Numa(_));
        Level {
            kind,
            domains,
            domain_of,
            group_of,
            imbalance_pct: if kind == Kind::Smt { 110 } else { 117 },
            prefer_sibling: false,
            fork: !matches!(kind, Kind::Numa(d) if d > RECLAIM_DISTANCE),
            shares_cache: shares_cache && !numa,
            imb_numa_nr: 1,
        }
    }
}

/// `build_sched_domains`' allowed NUMA imbalance. The kernel computes it before it drops
/// degenerate domains, so the first level above the last-level cache is always the node's
/// (x86's DIE level, `cpu_cpu_mask`): there, the caches per node (an eighth of the node's
/// CPUs when it has one); each NUMA level multiplies that by how many first-NUMA-level
/// spans it covers. Also sets SD_PREFER_SIBLING's effect: a level balances task counts
/// evenly when its child level is not NUMA.
fn set_imb_numa_nr(levels: &mut [Level], node_weight: u32, llc_weight: u32) {
    let weight = |l: &Level| l.domains[0].iter().map(Vec::len).sum::<usize>() as u32;
    let llcs = node_weight / llc_weight.max(1);
    let imb = if llcs <= 1 { node_weight >> 3 } else { llcs }.max(1);
    let imb_span = levels.iter().find(|l| l.numa()).map_or(node_weight, weight);
    for i in 0..levels.len() {
        levels[i].prefer_sibling = i > 0 && !levels[i - 1].numa();
        levels[i].imb_numa_nr = if levels[i].shares_cache { 0 } else { imb * (weight(&levels[i]) / imb_span).max(1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(spec: &str, threads: usize) -> Vec<usize> {
        let machine = Machine::from_spec(spec).unwrap();
        let m = SharingMatrix::new(threads);
        let costs = PairCosts::new(&machine, crate::CostModel::Latency);
        Os { start: None, balance: true }.map(&m, &machine, &costs).unwrap()
    }

    fn per_node(spec: &str, threads: usize) -> Vec<usize> {
        let machine = Machine::from_spec(spec).unwrap();
        let mut count = vec![0; machine.numa_count()];
        for pu in place(spec, threads) {
            count[machine.pu_numa[pu]] += 1;
        }
        count
    }

    #[test]
    fn domains_follow_the_topology() {
        let m = Machine::from_spec("pack:4 numa:1 l3:1 l2:8 l1d:1 core:1 pu:2").unwrap();
        let d = Domains::new(&m);
        let kinds: Vec<Kind> = d.levels.iter().map(|l| l.kind).collect();
        assert_eq!(kinds, vec![Kind::Smt, Kind::Cache, Kind::Numa(21)]);
        // One last-level cache of 16 CPUs per node: two tasks may stay on one node.
        assert_eq!(d.levels[2].imb_numa_nr, 2);
        // Nodes of 8 CPUs or fewer (the guests of the kernel comparison): one.
        let small = Domains::new(&Machine::from_spec("pack:4 numa:1 l3:1 core:4 pu:1").unwrap());
        assert_eq!(small.levels.last().unwrap().imb_numa_nr, 1);
        assert!(d.levels[2].prefer_sibling && d.levels[1].prefer_sibling && !d.levels[0].prefer_sibling);
        assert_eq!(d.levels[1].domains[0].len(), 8);
    }

    #[test]
    fn threads_spread_over_cores_before_smt_siblings() {
        let spec = "pack:1 l3:1 core:4 pu:2";
        let machine = Machine::from_spec(spec).unwrap();
        let core = machine.core_of_pu();
        let on = place(spec, 4);
        let mut cores: Vec<usize> = on.iter().map(|&p| core[p]).collect();
        cores.sort_unstable();
        assert_eq!(cores, vec![0, 1, 2, 3]);
        // Eight threads fill every PU.
        let mut all = place(spec, 8);
        all.sort_unstable();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn threads_spread_over_nodes_with_a_small_local_allowance() {
        // Four nodes of 8 cores (X7550): the balancer evens the nodes to within the allowance.
        let x7550 = "pack:4 numa:1 l3:1 l2:8 l1d:1 core:1 pu:2";
        assert_eq!(per_node(x7550, 1), vec![1, 0, 0, 0]);
        let eight = per_node(x7550, 8);
        assert!(eight.iter().all(|&n| n <= 3) && eight.iter().filter(|&&n| n > 0).count() == 4, "{eight:?}");
        assert_eq!(per_node(x7550, 64), vec![16; 4]);
        // Two nodes of four cores: eight threads, four per node.
        assert_eq!(per_node("pack:2 numa:1 l3:1 core:4 pu:1", 8), vec![4, 4]);
    }

    #[test]
    fn oversubscription_spreads_the_load_evenly() {
        let machine = Machine::from_spec("pack:2 numa:1 l3:1 core:2 pu:1").unwrap();
        for threads in [5, 8, 9, 13] {
            let on = place("pack:2 numa:1 l3:1 core:2 pu:1", threads);
            let mut per_pu = vec![0; machine.pu_count()];
            on.iter().for_each(|&p| per_pu[p] += 1);
            let (lo, hi) = (per_pu.iter().min().unwrap(), per_pu.iter().max().unwrap());
            assert!(hi - lo <= 1, "{threads} threads: {per_pu:?}");
        }
    }

    #[test]
    fn far_nodes_are_not_fork_balanced() {
        // Nodes at distance 40 are beyond RECLAIM_DISTANCE: fork keeps threads on the first
        // node, the balancer then spreads them.
        let machine = Machine::from_spec("pack:2 numa:1 l3:1 core:4 pu:1").unwrap();
        let mut far = machine.clone();
        far.distances = vec![vec![10, 40], vec![40, 10]];
        let d = Domains::new(&far);
        assert!(!d.levels.last().unwrap().fork);
        let forked = d.fork_all(4, 0);
        assert!(forked.on.iter().all(|&p| far.pu_numa[p] == 0), "{:?}", forked.on);
    }

    #[test]
    fn the_balancer_settles_on_every_shape() {
        for spec in [
            "pu:1",
            "core:2 pu:2",
            "pack:2 numa:1 l3:1 core:4 pu:2",
            "pack:4 numa:2 l3:1 l2:4 core:1 pu:1",
            "pack:2 numa:2 l3:1 core:3 pu:2",
            "pack:8 numa:1 l3:1 l2:12 core:1 pu:2",
        ] {
            let machine = Machine::from_spec(spec).unwrap();
            let d = Domains::new(&machine);
            for threads in [1, 2, 3, 5, 8, 16, 17, 40, 100] {
                let mut placed = d.fork_all(threads, d.order[0]);
                assert!(d.balance(&mut placed), "{spec}, {threads} threads");
                let busy = placed.running.iter().filter(|&&r| r > 0).count();
                assert_eq!(busy, threads.min(machine.pu_count()), "{spec}, {threads}: an idle PU while one waits");
            }
        }
    }
}
