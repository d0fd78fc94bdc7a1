//! Thread mapping: where each thread should run so that threads sharing data meet low in
//! the memory hierarchy. Algorithms take a sharing matrix and a machine and return, for each
//! thread, a logical PU index.

pub mod algos;
mod bisect;
pub mod cost;
mod groups;
pub mod matrices;
pub mod potential;
pub mod scotch;
mod treematch;

pub use algos::{ALGORITHMS, Algorithm, map};
pub use cost::{CostModel, PairCosts, mapping_cost, sharing_by_level};
