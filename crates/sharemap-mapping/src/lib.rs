//! Thread mapping: where each thread should run so that threads sharing data meet low in
//! the memory hierarchy. Algorithms take a sharing matrix and a machine and return, for each
//! thread, a logical PU index.

pub mod algorithm;
mod bisect;
pub mod cost;
mod eager;
pub mod exhaustive;
mod groups;
pub mod matrices;
mod orders;
pub mod potential;
mod refined;
pub mod scotch;
mod treematch;

pub use algorithm::{ALGORITHMS, AlgorithmInfo, MappingAlgorithm, MappingError, build, is_algorithm};
pub use cost::{CostModel, PairCosts, mapping_cost, sharing_by_level};
