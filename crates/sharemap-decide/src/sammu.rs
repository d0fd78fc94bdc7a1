//! SAMMU's NUMA counters (seed 000, section 3.3): each statistics update of a page from a
//! node adds one to that node's saturating counter and takes one from every other node's;
//! the page migrates to node n when NC[n] - NC[home] >= NT. Here too SAMMU's parameter
//! table, seed 000's table 1 (the TLB model's, the counters'), which the detector, the
//! placement policy and the simulator's and run's mechanisms take, and the remap's.

use sharemap_core::plugin::{Param, integer, positive, ranged, share, switch};

pub const L1: Param = ranged("l1", "64", 1, 1 << 20, "L1 TLB entries");
pub const L1_WAYS: Param = ranged("l1ways", "4", 1, 64, "L1 TLB associativity");
pub const L2: Param = ranged("l2", "512", 1, 1 << 24, "L2 TLB entries");
pub const L2_WAYS: Param = ranged("l2ways", "4", 1, 64, "L2 TLB associativity");
pub const AC: Param = ranged("ac", "32", 1, 32, "bits of the access counter AC and threshold AT (1-32)");
pub const NC: Param = ranged("nc", "4", 1, 16, "bits of each NUMA counter (at most 16)");
pub const NT: Param = ranged("nt", "10", 1, u16::MAX as u64, "NUMA threshold NT");
pub const FLUSH: Param = switch(
    "flush",
    "0",
    "1: empty every TLB at the end of the trace, activating SAMMU for each entry (no equivalent in the paper)",
);
pub const TICK: Param = integer(
    "tick",
    "0",
    "empty a core's TLBs every this many of its accesses, each entry activating SAMMU as an eviction does: a scheduler tick or context switch that flushes them (0: never, the paper as written)",
);

/// The remap of the mechanism (simulate, run): its period, the mapping-potential gate and
/// the hysteresis a new mapping must clear (sharemap's, not seed 000's: the paper gives none).
pub const PERIOD_MS: Param = positive("period-ms", "1", "simulated time between remap decisions");
pub const GATE: Param = share("gate", "0.1", "mapping potential needed to remap");
pub const HYSTERESIS: Param =
    share("hysteresis", "0.1", "a new mapping must cost this share less than the current one");

/// The mechanism's table: the remap's parameters and the counters' and TLBs' it models.
pub const MECHANISM: [Param; 7] = [
    PERIOD_MS,
    NT,
    Param { doc: "bits of each NUMA counter", ..NC },
    Param { doc: "bits of the TLB entries' access counters", ..AC },
    TICK,
    GATE,
    HYSTERESIS,
];

/// A statistics update of a page from `node`: updates its counters `nc` (one per node,
/// saturating at `max`) and says whether the page, now on `home`, migrates to `node`.
pub fn update(nc: &mut [u16], node: usize, max: u16, home: usize, nt: u32) -> bool {
    for (n, c) in nc.iter_mut().enumerate() {
        *c = if n == node { (*c + 1).min(max) } else { c.saturating_sub(1) };
    }
    node != home && nc[node] as u32 >= nc[home] as u32 + nt
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_saturate_and_a_lead_of_nt_migrates() {
        let mut nc = [0u16; 2];
        for _ in 0..20 {
            assert!(!super::update(&mut nc, 0, 15, 0, 3), "its own node never migrates it");
        }
        assert_eq!(nc, [15, 0]);
        let moves: Vec<bool> = (0..12).map(|_| super::update(&mut nc, 1, 15, 0, 3)).collect();
        // After k updates from node 1: NC = [15 - k, k]; k - (15 - k) >= 3 first at k = 9.
        assert_eq!(moves.iter().position(|&m| m), Some(8));
    }
}
