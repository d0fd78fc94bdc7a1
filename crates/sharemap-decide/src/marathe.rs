//! Marathe & Mueller (seed 001): a profile samples one access in `every` of the run (the
//! first, then each `every`-th) and each sampled page lives, for the whole run, on the node
//! whose threads took most of its samples (ties: the lower node).

use sharemap_core::plugin::{Param, count};

pub const EVERY: Param = count("every", "100", "profile one access in this many (the first, then every n-th)");

/// `every`'s default: where a layer samples without a parameter of its own.
pub fn default_every() -> u64 {
    EVERY.default.parse().expect("EVERY's default is a number")
}

/// Whether the access at position `index` (from 0) of the run is in the profile.
pub fn sampled(index: u64, every: u64) -> bool {
    index.is_multiple_of(every.max(1))
}

/// The node a page's samples per node place it on.
pub fn home<T: Copy + Ord>(samples: &[T]) -> usize {
    crate::most(samples)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_access_and_every_nth_are_sampled() {
        let s: Vec<u64> = (0..10).filter(|&i| super::sampled(i, 4)).collect();
        assert_eq!(s, [0, 4, 8]);
        assert_eq!(super::home(&[2u64, 7, 7]), 1);
        assert_eq!(super::default_every(), 100);
    }
}
