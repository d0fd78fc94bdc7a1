//! Data placement on a modelled NUMA machine: seed 004's cost model, its exact off-line
//! optimal placement, and the online policies of the literature, all evaluated page by page.

mod chains;
pub mod cost;
pub mod evaluate;
pub mod optimal;
pub mod page;
pub mod partition;
pub mod policies;
pub mod schedule;
pub mod testing;

pub use cost::{Costs, LocSet, Residence, Tally};
pub use optimal::{Optimal, Solution};
pub use page::{Page, Ref};

#[cfg(test)]
mod optimal_tests;
