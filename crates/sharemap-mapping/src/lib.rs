//! Thread mapping: where each thread should run so that threads sharing data meet low in
//! the memory hierarchy. Algorithms take a sharing matrix and a machine and return, for each
//! thread, a logical PU index.

pub mod algorithm;
mod bisect;
pub mod capacity;
pub mod cost;
mod eager;
pub mod exhaustive;
mod groups;
mod linux;
pub mod matrices;
mod orders;
pub mod potential;
mod refined;
pub mod relabel;
pub mod scotch;
mod spread;
mod treematch;

/// Where the modelled operating system (the `os` algorithm with its defaults) runs
/// `threads` busy threads: each thread's logical PU.
pub fn os_mapping(machine: &sharemap_machine::Machine, threads: usize) -> Vec<usize> {
    linux::Os { start: None, balance: true }.place(machine, threads)
}

pub use algorithm::{ALGORITHMS, AlgorithmInfo, MappingAlgorithm, MappingError, build, is_algorithm};
pub use capacity::Demand;
pub use cost::{CostModel, PairCosts, mapping_cost, sharing_by_level};
