//! Spread, then group: the threads split evenly over every last-level cache, grouped by
//! sharing within each. For programs whose speed is memory bandwidth (a STREAM-like triad),
//! every node's memory controller works and every cache holds a share; the sharing still
//! decides which threads meet under one cache. sharemap's default spreads only as far as the
//! data needs room, so this is the variant that spreads as far as the machine goes.

use crate::algorithm::{MappingAlgorithm, MappingError};
use crate::capacity::{self, Units};
use crate::cost::PairCosts;
use crate::refined::{Refined, refine};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

pub struct Spread;

impl MappingAlgorithm for Spread {
    fn spec(&self) -> String {
        "spread".into()
    }

    fn map(&self, m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> Result<Vec<usize>, MappingError> {
        // The default's grouping by sharing, packed; then cut into as many runs as there
        // are caches (a group stays together where the counts allow), swaps keeping each
        // cache's share.
        let grouped = Refined.map(m, machine, costs)?;
        let Some(units) = Units::of(machine) else { return Ok(grouped) };
        let mut spread = capacity::balance(&grouped, &units, units.count(), machine.pu_count());
        refine(m, &mut spread, costs);
        Ok(spread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;

    /// Four threads in two sharing pairs on four packages of two cores: one thread per
    /// package (every cache used), where the default packs each pair into one package.
    #[test]
    fn every_cache_gets_its_share_of_the_threads() {
        let machine = Machine::from_spec("pack:4 l3:1 core:2 pu:1").unwrap();
        let mut m = SharingMatrix::new(4);
        m.add(0, 1, 100.0);
        m.add(2, 3, 100.0);
        let costs = PairCosts::new(&machine, CostModel::Latency);
        let package = |pu: usize| pu / 2;
        let spread = Spread.map(&m, &machine, &costs).unwrap();
        let mut packages: Vec<usize> = spread.iter().map(|&p| package(p)).collect();
        packages.sort_unstable();
        assert_eq!(packages, [0, 1, 2, 3], "{spread:?}");
        let packed = Refined.map(&m, &machine, &costs).unwrap();
        assert_eq!((package(packed[0]), package(packed[2])), (package(packed[1]), package(packed[3])), "{packed:?}");
        // Eight threads on eight cores: two to a package, the pairs kept together.
        let mut m = SharingMatrix::new(8);
        for t in (0..8).step_by(2) {
            m.add(t, t + 1, 100.0);
        }
        let spread = Spread.map(&m, &machine, &costs).unwrap();
        for t in (0..8).step_by(2) {
            assert_eq!(package(spread[t]), package(spread[t + 1]), "{spread:?}");
        }
    }
}
