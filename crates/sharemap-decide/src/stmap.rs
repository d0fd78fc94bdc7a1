//! STMap (seed 002) inside a software transactional memory: Algorithm 1 (per address, the
//! last two threads that accessed it, and who communicates with whom), Equation 1 (whether
//! mapping pays) and the parameters of Algorithm 2. The `stmap` detector runs them over a
//! trace; the STM (`libsharemap_stm`) runs them on its own transactional loads and stores.

use sharemap_core::plugin::{Param, count, integer};

pub const SI: Param = integer("si", "100", "sampling interval: Algorithm 1 runs once every si+1 accesses of a thread");
pub const MI: Param = count("mi", "100000", "mapping interval: accesses of the counting thread before the decision");
pub const DA: Param = count("da", "10000", "Equation 1's distinct-address threshold");

/// A parameter's default as a number (the tables hold text).
pub fn default_of(p: &Param) -> u64 {
    p.default.parse().expect("STMap's defaults are numbers")
}

/// Algorithm 1 for thread `t` on an address whose last two threads are `last` (most recent
/// first): the address's new last two, and the threads `t` communicates with (up to two).
/// Its three cases: nobody before (remember `t`); one thread before (communicate with it
/// unless it is `t`); two (communicate with both others, or the other one).
#[inline]
pub fn algorithm_1<T: Copy + PartialEq>(last: [Option<T>; 2], t: T) -> ([Option<T>; 2], [Option<T>; 2]) {
    match last {
        [None, _] => ([Some(t), None], [None, None]),
        [Some(t1), t2] if t1 == t => (last, [t2, None]),
        [Some(t1), Some(t2)] if t2 != t => ([Some(t), Some(t1)], [Some(t1), Some(t2)]),
        [Some(t1), _] => ([Some(t), Some(t1)], [Some(t1), None]),
    }
}

/// Equation 1: mapping is enabled when fewer than `da_threshold` distinct addresses were
/// seen, else when commits are fewer than aborts; None when neither tells (many addresses,
/// no transaction seen).
pub fn equation_1(distinct: u64, da_threshold: u64, commits: u64, aborts: u64) -> Option<bool> {
    if distinct < da_threshold {
        Some(true)
    } else if commits + aborts > 0 {
        Some(commits < aborts)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_1_cases() {
        assert_eq!(algorithm_1([None, None], 3), ([Some(3), None], [None, None]));
        assert_eq!(algorithm_1([Some(3), None], 3), ([Some(3), None], [None, None]));
        assert_eq!(algorithm_1([Some(2), None], 3), ([Some(3), Some(2)], [Some(2), None]));
        assert_eq!(algorithm_1([Some(3), Some(2)], 3), ([Some(3), Some(2)], [Some(2), None]));
        assert_eq!(algorithm_1([Some(2), Some(3)], 3), ([Some(3), Some(2)], [Some(2), None]));
        assert_eq!(algorithm_1([Some(2), Some(1)], 3), ([Some(3), Some(2)], [Some(2), Some(1)]));
    }

    #[test]
    fn equation_1_cases() {
        assert_eq!(equation_1(5, 10, 0, 0), Some(true));
        assert_eq!(equation_1(50, 10, 3, 7), Some(true));
        assert_eq!(equation_1(50, 10, 7, 3), Some(false));
        assert_eq!(equation_1(50, 10, 0, 0), None);
        assert_eq!((default_of(&SI), default_of(&MI), default_of(&DA)), (100, 100_000, 10_000));
    }
}
