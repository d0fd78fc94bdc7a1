//! Where threads run: thread -> logical PU -> core -> NUMA node, the one answer every
//! analysis asks of a mapping (SAMMU's per-core TLBs, the placement model's nodes, the
//! page-usage CSV's first-touch node).

use crate::Machine;
use serde::Serialize;

/// Each thread's logical PU on a machine, with the PU's core and node. Thread t takes entry
/// t mod the number of entries, so a list shorter than the threads wraps around as
/// OMP_PLACES does; `identity` lists every PU once in OS order (thread i on the CPU the
/// kernel numbers i, mod CPUs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadPlacement {
    pus: Vec<usize>,
    #[serde(skip)]
    core_of_pu: Vec<usize>,
    #[serde(skip)]
    node_of_pu: Vec<usize>,
    #[serde(skip)]
    node_of_core: Vec<usize>,
    #[serde(skip)]
    nodes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("no PU given")]
    Empty,
    #[error("PU {pu} does not exist (the machine has {pus} PUs, 0..{})", pus.saturating_sub(1))]
    NoSuchPu { pu: usize, pus: usize },
}

impl ThreadPlacement {
    /// Thread i on the PU whose OS number is the i-th (mod PUs): `taskset -c i`.
    pub fn identity(machine: &Machine) -> ThreadPlacement {
        let mut by_os: Vec<usize> = (0..machine.pu_count()).collect();
        by_os.sort_by_key(|&pu| machine.pu_os_index(pu));
        Self::build(machine, by_os)
    }

    /// Thread t on `pus[t mod len]` (logical PU indexes).
    pub fn on_pus(machine: &Machine, pus: Vec<usize>) -> Result<ThreadPlacement, PlacementError> {
        if pus.is_empty() {
            return Err(PlacementError::Empty);
        }
        let count = machine.pu_count();
        if let Some(&pu) = pus.iter().find(|&&pu| pu >= count) {
            return Err(PlacementError::NoSuchPu { pu, pus: count });
        }
        Ok(Self::build(machine, pus))
    }

    fn build(machine: &Machine, pus: Vec<usize>) -> ThreadPlacement {
        let core_of_pu = machine.core_of_pu();
        let mut node_of_core = vec![0; core_of_pu.iter().max().map_or(1, |&c| c + 1)];
        for (pu, &core) in core_of_pu.iter().enumerate() {
            node_of_core[core] = machine.pu_numa[pu];
        }
        ThreadPlacement {
            pus,
            core_of_pu,
            node_of_pu: machine.pu_numa.clone(),
            node_of_core,
            nodes: machine.numa_count().max(1),
        }
    }

    /// The PU list, as given (thread t takes entry t mod its length).
    pub fn pus(&self) -> &[usize] {
        &self.pus
    }

    #[inline]
    pub fn pu(&self, thread: u32) -> usize {
        self.pus[thread as usize % self.pus.len()]
    }

    /// Core of the thread's PU (SMT siblings share one).
    #[inline]
    pub fn core(&self, thread: u32) -> usize {
        self.core_of_pu[self.pu(thread)]
    }

    #[inline]
    pub fn node(&self, thread: u32) -> usize {
        self.node_of_pu[self.pu(thread)]
    }

    pub fn node_of_core(&self, core: usize) -> usize {
        self.node_of_core.get(core).copied().unwrap_or(0)
    }

    /// Cores of the machine.
    pub fn cores(&self) -> usize {
        self.node_of_core.len()
    }

    /// NUMA nodes of the machine.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Node of each entry of the PU list (thread t uses entry t mod the length).
    pub fn node_list(&self) -> Vec<u16> {
        self.pus.iter().map(|&pu| self.node_of_pu[pu] as u16).collect()
    }

    /// Core of each entry of the PU list.
    pub fn core_list(&self) -> Vec<usize> {
        self.pus.iter().map(|&pu| self.core_of_pu[pu]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_wrap_around_the_list_and_find_their_core_and_node() {
        // Two packages (NUMA nodes) of two cores of two PUs.
        let m = Machine::from_spec("pack:2 numa:1 core:2 pu:2").unwrap();
        let id = ThreadPlacement::identity(&m);
        assert_eq!((id.pu(9), id.core(9), id.node(9)), (1, 0, 0));
        assert_eq!((id.pu(5), id.core(5), id.node(5)), (5, 2, 1));
        assert_eq!((id.cores(), id.nodes(), id.node_of_core(3)), (4, 2, 1));
        let two = ThreadPlacement::on_pus(&m, vec![6, 0]).unwrap();
        assert_eq!((two.pu(0), two.pu(1), two.pu(2)), (6, 0, 6));
        assert_eq!((two.node_list(), two.core_list()), (vec![1, 0], vec![3, 0]));
        assert_eq!(ThreadPlacement::on_pus(&m, vec![8]), Err(PlacementError::NoSuchPu { pu: 8, pus: 8 }));
        assert_eq!(ThreadPlacement::on_pus(&m, vec![]), Err(PlacementError::Empty));
    }
}
