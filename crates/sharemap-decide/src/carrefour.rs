//! Carrefour (Dashti et al., ASPLOS 2013), its per-page rules: at each epoch's end, a page
//! with at least `min-accesses` accesses in the epoch moves to a node that made at least
//! `share` of them; else, if nobody wrote it in the epoch, it is replicated on every node
//! that read it; else it is interleaved (page number mod nodes). Carrefour's machine-wide
//! triggers (memory controller imbalance, DRAM traffic) are left out.

use sharemap_core::plugin::{Param, positive, ranged, share};

pub const EPOCH_MS: Param = positive("epoch-ms", "1000", "decision period");
pub const SHARE: Param = share("share", "0.9", "fraction of a page's accesses that makes it one node's page");
pub const MIN_ACCESSES: Param =
    ranged("min-accesses", "16", 1, u32::MAX as u64, "pages with fewer accesses in an epoch are left alone");

/// Where a page goes at an epoch's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Migrate(usize),
    /// A copy on each node of the set (bit n: node n).
    Replicate(u128),
    Interleave(usize),
}

/// The decision for a page from one epoch's accesses per node (`counts`, one per node) and
/// whether it was written; None when it had too few accesses.
pub fn decide(counts: &[u32], written: bool, page: u64, share: f64, min_accesses: u64) -> Option<Decision> {
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    if total < min_accesses.max(1) {
        return None;
    }
    let best = crate::most(counts);
    Some(if counts[best] as f64 >= share * total as f64 {
        Decision::Migrate(best)
    } else if !written {
        Decision::Replicate(counts.iter().enumerate().filter(|(_, c)| **c > 0).fold(0, |m, (n, _)| m | 1u128 << n))
    } else {
        Decision::Interleave((page % counts.len() as u64) as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_per_case() {
        assert_eq!(decide(&[1, 9], true, 7, 0.9, 10), Some(Decision::Migrate(1)));
        assert_eq!(decide(&[1, 8], true, 7, 0.9, 10), None, "too few");
        assert_eq!(decide(&[5, 5, 0], false, 7, 0.9, 1), Some(Decision::Replicate(0b011)));
        assert_eq!(decide(&[5, 5, 0], true, 7, 0.9, 1), Some(Decision::Interleave(1)));
    }
}
