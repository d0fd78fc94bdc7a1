//! Thread mapping: where each thread should run so that threads sharing data meet low in
//! the memory hierarchy. Algorithms take a sharing matrix and a machine and return, for each
//! thread, a logical PU index.

pub mod algos;
mod bisect;
pub mod cost;
pub mod matrices;
pub mod potential;
pub mod scotch;
mod treematch;

pub use algos::{map, Algorithm, ALGORITHMS};
pub use cost::{mapping_cost, sharing_by_level, CostModel, PairCosts};
