//! A mechanism's decisions in the order they fired when it was simulated on a recording,
//! replayed in a real run: each page move and each thread remap at its share of the
//! recorded run (accesses simulated by then over all of them), scaled to the real run's
//! expected length. Seed 000 fed SAMMU's offline decisions into its runs this way.

use serde::Serialize;
use sharemap::simulate::{PageDecision, ThreadMove};
use sharemap_machine::Machine;
use std::time::Duration;

/// Decisions by their share of the recorded run, in the host's OS numbering.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Each remap: its share of the run, and every thread's CPU after it (by creation order).
    pub remaps: Vec<(f64, Vec<usize>)>,
    /// Each page move: its share of the run, the page's address and its node after it.
    pub moves: Vec<(f64, u64, i32)>,
}

/// A timeline at a real run's scale: offsets from the program's start.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub remaps: Vec<(Duration, Vec<usize>)>,
    pub moves: Vec<(Duration, u64, i32)>,
}

/// How much of a timeline one run got to before it ended.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct TimelineOutcome {
    /// What `share 1` stood for: the run length the decisions were spread over.
    pub scale_seconds: f64,
    pub remaps: usize,
    pub remaps_applied: usize,
    pub moves: usize,
    /// Page moves whose time came before the program ended (each then migrated once the
    /// page was touched, as a plan's pages are).
    pub moves_due: usize,
}

impl TimelineOutcome {
    /// What a placer reached; the totals and the scale are the caller's to fill in.
    pub(crate) fn reached(p: crate::placer::Progress) -> TimelineOutcome {
        TimelineOutcome { remaps_applied: p.remaps_applied, moves_due: p.moves_due, ..TimelineOutcome::default() }
    }
}

impl Timeline {
    /// The timeline of one simulated mechanism: its page decisions (the first of each page
    /// is its first touch, not a move; a replicated page goes to its lowest node) and its
    /// thread moves, grouped into remaps by the access they happened at, each remap giving
    /// every thread's PU after it (walked back from `final_pus`, where the last one left
    /// them). `accesses`: the recorded run's length.
    pub fn of_simulation(
        decisions: &[PageDecision],
        thread_moves: &[ThreadMove],
        final_pus: &[usize],
        accesses: u64,
        page_size: u64,
        host: &Machine,
    ) -> Timeline {
        let share = |at: u64| if accesses == 0 { 0.0 } else { (at as f64 / accesses as f64).min(1.0) };
        let nodes = host.numa_count();
        let mut where_now: std::collections::HashMap<u64, u128> = std::collections::HashMap::new();
        let mut moves = Vec::new();
        for d in decisions {
            let before = where_now.insert(d.page, d.nodes);
            let moved = before.is_some_and(|b| b != d.nodes);
            let lowest = d.nodes.trailing_zeros() as usize;
            if moved && d.nodes != 0 && lowest < nodes {
                moves.push((share(d.at), d.page * page_size, host.numa_os_index(lowest) as i32));
            }
        }
        // Walked back from the end: the mapping after each remap, then undo its moves.
        let mut mapping = final_pus.to_vec();
        let mut remaps = Vec::new();
        let mut i = thread_moves.len();
        while i > 0 {
            let at = thread_moves[i - 1].at;
            let cpus = mapping.iter().map(|&pu| host.pu_os_index(pu) as usize).collect();
            remaps.push((share(at), cpus));
            while i > 0 && thread_moves[i - 1].at == at {
                let m = thread_moves[i - 1];
                if let Some(slot) = mapping.get_mut(m.thread) {
                    *slot = m.from;
                }
                i -= 1;
            }
        }
        remaps.reverse();
        Timeline { remaps, moves }
    }

    /// The timeline spread over a run of `length`.
    pub fn at_scale(&self, length: Duration) -> Schedule {
        let at = |share: f64| length.mul_f64(share);
        Schedule {
            remaps: self.remaps.iter().map(|(s, cpus)| (at(*s), cpus.clone())).collect(),
            moves: self.moves.iter().map(|&(s, page, node)| (at(s), page, node)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaps_give_every_threads_cpu_after_them_and_moves_leave_out_first_touches() {
        let host = Machine::from_spec("numa:2 pu:2").unwrap();
        let m = |at, thread, from, to| ThreadMove { at, thread, from, to };
        // Two remaps: at 100 threads 0 and 1 swap; at 300 thread 2 goes to PU 0.
        let moves = [m(100, 0, 0, 1), m(100, 1, 1, 0), m(300, 2, 2, 0)];
        let d = |at, page, nodes| PageDecision { at, page, nodes };
        let decisions = [d(0, 7, 1), d(50, 8, 2), d(200, 7, 2), d(250, 8, 2), d(350, 7, 3)];
        let t = Timeline::of_simulation(&decisions, &moves, &[1, 0, 0, 3], 400, 4096, &host);
        let os = |pus: [usize; 4]| pus.map(|p| host.pu_os_index(p) as usize).to_vec();
        assert_eq!(t.remaps, vec![(0.25, os([1, 0, 2, 3])), (0.75, os([1, 0, 0, 3]))]);
        // Page 7 moves to node 1 at 200, then gains a copy on node 0 (its lowest) at 350;
        // page 8's second decision changes nothing.
        let node = |n| host.numa_os_index(n) as i32;
        assert_eq!(t.moves, vec![(0.5, 7 * 4096, node(1)), (0.875, 7 * 4096, node(0))]);
        let s = t.at_scale(Duration::from_secs(2));
        assert_eq!(s.remaps[1].0, Duration::from_millis(1500));
        assert_eq!(s.moves[0].0, Duration::from_secs(1));
    }
}
