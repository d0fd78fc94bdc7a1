//! Autopin (Klug et al.; seed 000 section 4.3 runs it with the oracle's mapping and four
//! random ones): k candidate thread mappings, the oracle's first and k-1 random ones, each
//! tried for a probation; the one that did the most work per unit of time is kept. The
//! simulator's probation is a window of simulated time inside one run (work: accesses);
//! a real run's is a whole run of the program (no PMU measures a window here), its rate the
//! inverse of its time.

use sharemap_core::plugin::{Param, number, positive, ranged};

pub const K: Param = ranged("k", "5", 1, 1000, "candidate mappings: the oracle's and k-1 random ones");
pub const PROBATION_MS: Param = positive("probation-ms", "0.1", "simulated time each candidate is measured");
pub const WARMUP_MS: Param =
    number("warmup-ms", "0.05", "simulated time each candidate runs before it is measured (its caches fill again)");

/// The seed of the `i`-th candidate's random mapping (i from 1; the 0th is the oracle's),
/// from the run's seed: the same candidates in every layer for one seed.
pub fn random_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_add(i as u64)
}

/// The candidate kept: the highest rate (work per unit of time) of those tried, the earlier
/// of a tie (the oracle's before any random one); 0 when none was tried.
pub fn kept(rates: &[f64]) -> usize {
    (0..rates.len()).max_by(|&a, &b| rates[a].total_cmp(&rates[b]).then(b.cmp(&a))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fastest_is_kept_and_a_tie_keeps_the_earlier() {
        assert_eq!(super::kept(&[1.0, 3.0, 2.0]), 1);
        assert_eq!(super::kept(&[2.0, 1.0, 2.0]), 0);
        assert_eq!(super::kept(&[]), 0);
        assert_eq!(super::random_seed(7, 2), 9);
    }
}
