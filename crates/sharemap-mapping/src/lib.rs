//! Thread mapping: where each thread should run so that threads sharing data meet low in
//! the memory hierarchy. Algorithms take a sharing matrix and a machine and return, for each
//! thread, a logical PU index.

pub mod algos;
pub mod cost;
pub mod potential;
pub mod scotch;

pub use algos::{map, Algorithm, ALGORITHMS};
pub use cost::{mapping_cost, CostModel, PairCosts};
