//! What one configuration of a run is: where its threads go (a pinning) and where its
//! pages go (a memory policy or a per-page plan), from the names the user gives.

use crate::{mechanism, timeline};
use serde::Serialize;
use sharemap::plan::{Plan, optimal_plan};
use sharemap::{Error, ErrorKind, Result, ThreadMap};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts};
use std::path::{Path, PathBuf};

/// Where a program's pages go, as the kernel's memory policy sets it for the whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum MemoryPolicy {
    /// The kernel's default: a page on the node of the thread that touches it first.
    FirstTouch,
    /// Pages spread over every node in turn (numactl --interleave=all).
    Interleave,
    /// Every page on one node (numactl --membind).
    Bind(usize),
}

/// What a run's data placement names: a memory policy for the whole program, a per-page
/// plan, or a plan computed from a recording for each configuration's threads (the
/// optimum's, or Marathe & Mueller's from a profile of 1 in 100 accesses).
#[derive(Clone, Debug)]
pub enum DataPlacement {
    Policy(MemoryPolicy),
    Plan(std::sync::Arc<Plan>),
    Optimal(PathBuf),
    Marathe(PathBuf),
}

impl DataPlacement {
    /// The memory policy and plan for a configuration whose threads go as `pinning` says
    /// (unpinned threads are taken as thread k on PU k).
    pub fn resolve(&self, pinning: &Pinning, host: &Machine) -> Result<(MemoryPolicy, Option<std::sync::Arc<Plan>>)> {
        let pus = match pinning {
            Pinning::Pus(pus) | Pinning::Nodes(pus) => pus.clone(),
            _ => (0..host.pu_count()).collect(),
        };
        let plan = match self {
            DataPlacement::Policy(p) => return Ok((p.clone(), None)),
            DataPlacement::Plan(plan) => return Ok((MemoryPolicy::FirstTouch, Some(plan.clone()))),
            DataPlacement::Optimal(trace) => optimal_plan(trace, ThreadMap::Pus(pus), page_size(), host)?,
            DataPlacement::Marathe(trace) => {
                let source = sharemap_decide::marathe::Source::CacheMiss {
                    kb: sharemap_decide::marathe::CACHE_KB.default.parse().expect("a number"),
                    stores: false,
                };
                mechanism::profile_plan(trace, &pus, host, source)?.0
            }
        };
        Ok((MemoryPolicy::FirstTouch, Some(std::sync::Arc::new(plan))))
    }

    /// `first-touch`, `interleave`, `bind:N`, `optimal:TRACE`, `marathe:TRACE`, or a plan
    /// file (see `Plan::read`), checked against the host: anything but first touch needs a
    /// NUMA host, and N one of its nodes.
    pub fn parse(text: &str, host: &Machine) -> Result<DataPlacement> {
        let text = text.trim();
        if text == "first-touch" {
            return Ok(DataPlacement::Policy(MemoryPolicy::FirstTouch));
        }
        let placement = if text == "interleave" {
            DataPlacement::Policy(MemoryPolicy::Interleave)
        } else if let Some(node) = text.strip_prefix("bind:") {
            match node.parse::<usize>() {
                Ok(node) => DataPlacement::Policy(MemoryPolicy::Bind(node)),
                Err(_) => return Err(Error::new(ErrorKind::DataPlacement, format!("'{text}': expected bind:NODE"))),
            }
        } else if let Some(trace) = text.strip_prefix("optimal:") {
            DataPlacement::Optimal(PathBuf::from(trace))
        } else if let Some(trace) = text.strip_prefix("marathe:") {
            DataPlacement::Marathe(PathBuf::from(trace))
        } else if Path::new(text).is_file() {
            // Read once the host is known to have nodes to place on (below).
            DataPlacement::Plan(std::sync::Arc::new(Plan { pages: Vec::new(), nodes: Vec::new() }))
        } else {
            return Err(Error::new(
                ErrorKind::DataPlacement,
                format!(
                    "'{text}': expected first-touch, interleave, bind:NODE, optimal:TRACE, marathe:TRACE or a plan file"
                ),
            ));
        };
        let nodes = host.numa_count();
        if nodes < 2 {
            return Err(Error::new(
                ErrorKind::DataPlacement,
                format!(
                    "{text} needs a NUMA host: this one has a single NUMA node, where every page is local \
                     (thread pinning works here; `sharemap vm` checks a placement in a multi-node guest)"
                ),
            ));
        }
        if let DataPlacement::Policy(MemoryPolicy::Bind(node)) = placement
            && node >= nodes
        {
            return Err(Error::new(
                ErrorKind::DataPlacement,
                format!("bind:{node}: the host has nodes 0-{}", nodes - 1),
            ));
        }
        if let DataPlacement::Plan(_) = placement {
            return Ok(DataPlacement::Plan(std::sync::Arc::new(Plan::read(Path::new(text), host, page_size())?)));
        }
        Ok(placement)
    }
}

/// The host's page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

impl MemoryPolicy {
    /// The value of `SHAREMAP_MEMPOLICY` for the actor.
    pub(crate) fn env(&self, host: &Machine) -> Option<String> {
        match self {
            MemoryPolicy::FirstTouch => None,
            MemoryPolicy::Interleave => {
                let nodes: Vec<String> = (0..host.numa_count()).map(|n| host.numa_os_index(n).to_string()).collect();
                Some(format!("interleave:{}", nodes.join(",")))
            }
            MemoryPolicy::Bind(n) => Some(format!("bind:{}", host.numa_os_index(*n))),
        }
    }
}

/// How threads are placed in one configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum Pinning {
    /// Not at all: the OS scheduler decides (the `os` baseline).
    Os,
    /// Thread k (the tracer's numbering) on logical PU `pus[k mod len]`.
    Pus(Vec<usize>),
    /// Thread k on the CPUs of the NUMA node of logical PU `pus[k mod len]`: an algorithm's
    /// mapping of more threads than the host has PUs, which the scheduler balances within
    /// each node (pinned one per PU, threads sharing a CPU take turns while others idle).
    Nodes(Vec<usize>),
    /// A random permutation of the PUs, drawn afresh for each run from this seed.
    Random(u64),
}

/// One configuration of a measurement.
#[derive(Clone, Debug)]
pub struct Configuration {
    pub name: String,
    pub pinning: Pinning,
    pub memory: MemoryPolicy,
    /// A home node per page, applied by migration as the program touches its pages.
    pub plan: Option<std::sync::Arc<Plan>>,
    /// What runs it beyond pinning and placement (autopin, the kernel's NUMA balancing).
    pub procedure: mechanism::Procedure,
    /// The sampled profile its plan came from (marathe).
    pub profile: Option<mechanism::Profile>,
    /// What the simulator decided on the recording, which this configuration replays (SAMMU,
    /// kMAF, Carrefour).
    pub replayed: Option<mechanism::Replayed>,
    /// Its decisions in the order they fired, applied at their times (then `plan` holds each
    /// page's last move, which the run's end is counted against).
    pub timeline: Option<std::sync::Arc<timeline::Timeline>>,
}

impl Configuration {
    /// A thread mapping and a memory policy, nothing more.
    pub fn fixed(name: &str, pinning: Pinning, memory: MemoryPolicy) -> Configuration {
        Configuration {
            name: name.into(),
            pinning,
            memory,
            plan: None,
            procedure: mechanism::Procedure::Fixed,
            profile: None,
            replayed: None,
            timeline: None,
        }
    }
}

/// The PUs a thread map gives on the host: an algorithm maps `sharing` when given, and a
/// matrix of as many silent threads as the host has PUs otherwise (the order-based
/// algorithms: compact, scatter, round-robin, identity). `os` is not a thread map: see
/// `Pinning::Os`.
pub fn pinning(map: &ThreadMap, host: &Machine, sharing: Option<&SharingMatrix>, seed: u64) -> Result<Pinning> {
    let pinning = map_threads(map, host, sharing, seed)?;
    let (Pinning::Pus(pus) | Pinning::Nodes(pus)) = &pinning else { return Ok(pinning) };
    let allowed = allowed_cpus()?;
    if let Some(&pu) = pus.iter().find(|&&p| !allowed.contains(&(host.pu_os_index(p) as usize))) {
        return Err(Error::new(
            ErrorKind::ThreadMap,
            format!(
                "PU {pu} (CPU {}) is outside the CPUs this process may use (a cpuset or taskset limits it to {}): \
                 the kernel would refuse it",
                host.pu_os_index(pu),
                list(&allowed)
            ),
        ));
    }
    Ok(pinning)
}

/// The PUs of a thread map on a machine, unchecked against this process's CPUs (for a
/// machine that is not this one: `vm`'s guest).
pub fn map_threads(map: &ThreadMap, host: &Machine, sharing: Option<&SharingMatrix>, seed: u64) -> Result<Pinning> {
    let mut by_node = false;
    let pus = match map {
        // A real run's OS is the kernel itself: nothing pinned.
        ThreadMap::Os(_) => return Ok(Pinning::Os),
        ThreadMap::Identity => sharemap_machine::ThreadPlacement::identity(host).pus().to_vec(),
        ThreadMap::Pus(pus) => pus.clone(),
        ThreadMap::Algorithm(name) if name.trim() == "random" && sharing.is_none() => return Ok(Pinning::Random(seed)),
        ThreadMap::Algorithm(name) => {
            let alg = sharemap_mapping::build(name, seed)?;
            let silent = SharingMatrix::new(host.pu_count());
            let matrix = sharing.unwrap_or(&silent);
            // More threads than PUs: each PU takes `per` threads, as if it had that many
            // hardware threads, so that threads sharing most share a PU.
            let per = matrix.threads().div_ceil(host.pu_count()).max(1);
            by_node = per > 1;
            let slots = if per > 1 { oversubscribed(host, per)? } else { host.clone() };
            let costs = PairCosts::new(&slots, CostModel::Latency);
            let on_slots = alg
                .map(matrix, &slots, &costs)
                .map_err(|e| Error::new(ErrorKind::ThreadMap, format!("{name}: {e}")))?;
            on_slots.into_iter().map(|slot| slot / per).collect()
        }
    };
    if let Some(&bad) = pus.iter().find(|&&p| p >= host.pu_count()) {
        return Err(Error::new(
            ErrorKind::ThreadMap,
            format!("PU {bad} does not exist: the host has PUs 0-{} (logical indices)", host.pu_count() - 1),
        ));
    }
    Ok(if by_node { Pinning::Nodes(pus) } else { Pinning::Pus(pus) })
}

/// The host with `per` PUs in place of each of its PUs (logical PU p of the host is PUs
/// p*per .. p*per+per-1 of the result: PUs are numbered core by core).
fn oversubscribed(host: &Machine, per: usize) -> Result<Machine> {
    let synthetic = host.synthetic().ok_or_else(|| {
        Error::new(ErrorKind::ThreadMap, "more threads than PUs on an asymmetric host: give a mapping of PUs")
    })?;
    let (levels, last) = synthetic.rsplit_once(' ').unwrap_or(("", synthetic.as_str()));
    let pus: usize = last
        .strip_prefix("PU:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::new(ErrorKind::ThreadMap, format!("unexpected synthetic topology '{synthetic}'")))?;
    Ok(Machine::from_spec(&format!("{levels} PU:{}", pus * per))?)
}

/// The CPUs the calling process may run on (its affinity mask).
pub(crate) fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data, valid zeroed; sched_getaffinity fills at most its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(Error::from(std::io::Error::last_os_error()));
        }
        set
    };
    // SAFETY: CPU_ISSET reads within the set for every index below its size in bits.
    Ok((0..8 * std::mem::size_of::<libc::cpu_set_t>()).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

pub(crate) fn list(v: &[usize]) -> String {
    v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight threads in four pairs that share, on a host of four PUs in two packages: each
    /// pair gets a PU of its own, so the mapping holds what the sharing says, and the threads
    /// are pinned by their PUs' nodes.
    #[test]
    fn more_threads_than_pus_share_pus_by_sharing() {
        let host = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
        let mut m = SharingMatrix::new(8);
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            m.add(a, b, 100.0);
        }
        let Pinning::Nodes(pus) = map_threads(&ThreadMap::Algorithm("sharemap".into()), &host, Some(&m), 1).unwrap()
        else {
            panic!("pinned by node: more threads than PUs")
        };
        assert_eq!(pus.len(), 8);
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            assert_eq!(pus[a], pus[b], "{pus:?}");
        }
        let mut used = pus.clone();
        used.sort();
        used.dedup();
        assert_eq!(used, vec![0, 1, 2, 3]);
    }

    #[test]
    fn data_placement_needs_several_nodes() {
        let policy = |text: &str, host: &Machine| match DataPlacement::parse(text, host) {
            Ok(DataPlacement::Policy(p)) => Ok(p),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        let one = Machine::from_spec("pack:1 core:2 pu:1").unwrap();
        assert_eq!(policy("first-touch", &one).unwrap(), MemoryPolicy::FirstTouch);
        let e = policy("interleave", &one).unwrap_err();
        assert!(e.contains("needs a NUMA host"), "{e}");
        assert!(DataPlacement::parse("optimal:x.trace", &one).unwrap_err().to_string().contains("needs a NUMA host"));
        let two = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
        assert_eq!(policy("bind:1", &two).unwrap(), MemoryPolicy::Bind(1));
        assert!(policy("bind:2", &two).unwrap_err().contains("nodes 0-1"));
        assert!(policy("spread", &two).unwrap_err().contains("expected first-touch"));
        assert!(matches!(DataPlacement::parse("optimal:x.trace", &two), Ok(DataPlacement::Optimal(_))));
    }
}
