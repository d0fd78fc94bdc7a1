//! kMAF, the kernel Memory Affinity Framework: a node faults on a page once per window (its
//! first access to the page in the window); after each fault the page moves to the node
//! with the most faults once that count exceeds twice the second's plus one.

use sharemap_core::plugin::{Param, positive};

/// The fault window.
pub const WINDOW_MS: Param = positive("window-ms", "100", "fault window: a node faults once per page per window");
/// The period of the thread remaps kMAF's fault sharing drives (simulated time only).
pub const PERIOD_MS: Param = positive("period-ms", "100", "simulated time between thread remap decisions");
/// What a fault costs the faulting thread (simulated time only).
pub const FAULT_US: Param = positive("fault-us", "1", "cost of a fault");

/// A fault of `node` on a page whose faults per node are `faults`: counts it, and returns
/// the node the page belongs on when the rule holds (the caller moves it unless it is there).
pub fn fault(faults: &mut [u32], node: usize) -> Option<usize> {
    faults[node] += 1;
    let best = crate::most(faults);
    let second = faults.iter().enumerate().filter(|&(n, _)| n != best).map(|(_, &c)| c).max().unwrap_or(0);
    (faults[best] > 2 * (second + 1)).then_some(best)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_leader_must_have_more_than_twice_the_second_plus_one() {
        let mut f = [0u32; 3];
        assert_eq!(super::fault(&mut f, 1), None);
        assert_eq!(super::fault(&mut f, 1), None);
        assert_eq!(super::fault(&mut f, 1), Some(1), "3 > 2 x (0 + 1)");
        assert_eq!(super::fault(&mut f, 0), None, "3 > 2 x 2 fails");
        for _ in 0..2 {
            super::fault(&mut f, 1);
        }
        assert_eq!(f, [1, 5, 0]);
        assert_eq!(super::fault(&mut f, 2), Some(1), "5 > 2 x (1 + 1)");
    }
}
