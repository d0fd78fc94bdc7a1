//! SAMMU's NUMA counters (seed 000, section 3.3): each statistics update of a page from a
//! node adds one to that node's saturating counter and takes one from every other node's;
//! the page migrates to node n when NC[n] - NC[home] >= NT. The parameters (NC's bits, NT)
//! are SAMMU's table, with its TLB model's, in `sharemap_detect::sammu`.

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
