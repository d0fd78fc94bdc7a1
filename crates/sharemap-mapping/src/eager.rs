//! EagerMap-like mapping: bottom-up greedy grouping of the threads that share most, one
//! tree level at a time, then the groups laid on the tree in order.

use crate::algorithm::{MappingAlgorithm, MappingError};
use crate::cost::PairCosts;
use crate::groups::{Dense, bottom_up, greedy_groups};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

pub struct Eager;

impl MappingAlgorithm for Eager {
    fn spec(&self) -> String {
        "eagermap".into()
    }
    fn map(&self, m: &SharingMatrix, machine: &Machine, _: &PairCosts) -> Result<Vec<usize>, MappingError> {
        Ok(eager(m, machine))
    }
}

pub(crate) fn eager(m: &SharingMatrix, machine: &Machine) -> Vec<usize> {
    bottom_up(m, machine, eager_groups)
}

/// EagerMap-like grouping: each group starts with the element that shares most in all and
/// grows by the element sharing most with the group so far.
fn eager_groups(mat: &Dense, size: usize) -> Vec<Vec<usize>> {
    greedy_groups(mat, size, |_load, with_group| with_group)
}
