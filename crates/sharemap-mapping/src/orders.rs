//! The order-based mappings: each lays the threads on an order of the PUs (thread t on PU
//! order[t mod PUs]), whatever they share.

use crate::algorithm::{MappingAlgorithm, MappingError};
use crate::cost::PairCosts;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

/// Thread t on `order[t mod PUs]`.
fn by_order(m: &SharingMatrix, order: &[usize]) -> Vec<usize> {
    (0..m.threads()).map(|t| order[t % order.len()]).collect()
}

/// The OS order: thread i on the PU whose OS index is i (mod PUs).
pub struct Identity;

impl MappingAlgorithm for Identity {
    fn spec(&self) -> String {
        "identity".into()
    }
    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        let mut by_os: Vec<usize> = (0..machine.pu_count()).collect();
        by_os.sort_by_key(|&l| machine.pu_os_index(l));
        Ok(by_order(m, &by_os))
    }
}

/// hwloc's logical order: neighbouring threads share every cache level.
pub struct Compact;

impl MappingAlgorithm for Compact {
    fn spec(&self) -> String {
        "compact".into()
    }
    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        Ok(compact(m, machine))
    }
}

pub(crate) fn compact(m: &SharingMatrix, machine: &Machine) -> Vec<usize> {
    by_order(m, &(0..machine.pu_count()).collect::<Vec<_>>())
}

/// Spread over the top of the tree first (packages), then down (hwloc distrib-like).
pub struct Scatter;

impl MappingAlgorithm for Scatter {
    fn spec(&self) -> String {
        "scatter".into()
    }
    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        Ok(scatter(m, machine))
    }
}

pub(crate) fn scatter(m: &SharingMatrix, machine: &Machine) -> Vec<usize> {
    by_order(m, &order_by_path(machine, true))
}

/// One thread per core in logical order, then the cores' second PUs: threads share the last
/// level of cache but not a core (seed 002's round-robin).
pub struct RoundRobin;

impl MappingAlgorithm for RoundRobin {
    fn spec(&self) -> String {
        "round-robin".into()
    }
    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        Ok(round_robin(m, machine))
    }
}

pub(crate) fn round_robin(m: &SharingMatrix, machine: &Machine) -> Vec<usize> {
    by_order(m, &order_by_core(machine))
}

/// A seeded random permutation of the PUs.
pub struct Random(pub u64);

impl MappingAlgorithm for Random {
    fn spec(&self) -> String {
        format!("random:seed={}", self.0)
    }
    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        let p = machine.pu_count();
        let mut order: Vec<usize> = (0..p).collect();
        let mut x = self.0 ^ 0x9e3779b97f4a7c15;
        for i in (1..p).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        Ok(by_order(m, &order))
    }
}

/// Each PU's root-to-PU path of child positions.
fn child_paths(machine: &Machine) -> Vec<Vec<usize>> {
    let tree = &machine.tree;
    machine
        .pus
        .iter()
        .map(|&pu| {
            let mut path: Vec<usize> = tree
                .ancestors(pu)
                .windows(2)
                .map(|w| tree.objs[w[1]].children.iter().position(|&c| c == w[0]).unwrap_or(0))
                .collect();
            path.reverse();
            path
        })
        .collect()
}

/// PUs sorted by their path read from the bottom (scatter: consecutive PUs differ at the top).
fn order_by_path(machine: &Machine, from_bottom: bool) -> Vec<usize> {
    let paths = child_paths(machine);
    let mut order: Vec<usize> = (0..machine.pu_count()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&paths[a], &paths[b]);
        if from_bottom { pa.iter().rev().cmp(pb.iter().rev()) } else { pa.cmp(pb) }
    });
    order
}

/// PUs sorted by (position within their core, logical order).
fn order_by_core(machine: &Machine) -> Vec<usize> {
    let paths = child_paths(machine);
    let mut order: Vec<usize> = (0..machine.pu_count()).collect();
    order.sort_by_key(|&pu| (paths[pu].last().copied().unwrap_or(0), pu));
    order
}
