//! The walk back: from the forward pass's final state, follow each write's codes back to
//! the first write and charge the placement found, without the page's references.

use super::thresholds::stays;
use super::*;

impl Optimal {
    /// The code by which node state `b` was reached at write `wr`, whose entries are in
    /// `run_entries`; `raw_at` holds each node's raw value as of that write.
    #[inline]
    fn code_at(&self, wr: &Write, b: u16) -> u8 {
        if let Some(e) = self.run_entries.iter().find(|e| e.node == b) {
            return e.code;
        }
        // Untouched: the lazy rule, with the value the state had before this write.
        let v = min2(self.raw_at[ix(b)] + wr.k_before, wr.cap_before);
        if v + wr.add <= wr.cap { wr.self_code } else { wr.cap_code }
    }

    /// Walks the back-pointers from the final state to the first write, taking what the
    /// forward pass left newest first, and on the way charges what the placement does (a
    /// tally is a sum: the order does not matter) and notes its changes when asked, which
    /// are then put in trace order.
    #[inline(never)]
    pub(super) fn reconstruct(&mut self, survey: &Survey, end: &End, keep: bool) -> Solution {
        let loc = |s: u16| if s == GLOB { GLOBAL_BIT } else { node_bit(s) };
        // Each node's raw value at the last write: its value from the forward pass's end.
        self.raw_at = self.t.raw;
        let mut tally = Tally::default();
        // The placement's changes, latest first.
        let mut changes = Vec::new();
        let mut note = |tally: &mut Tally, old: LocSet, new: LocSet, at: usize| {
            if old != new {
                tally.charge_move(old, new);
                if keep {
                    changes.push((at, new));
                }
            }
        };
        let Some(mut wr) = self.writes.pop() else { return Solution::default() };

        // The trailing run, from the final state.
        let mut state = end.state;
        let start = wr.last + 1;
        if start < survey.len {
            let readers = (0..self.touched_len).map(|n| {
                let x = self.t.touched[ix(n)];
                (x, self.t.count[ix(x)])
            });
            let set = self.charge_run(&mut tally, readers, end.glob, loc(state), None);
            note(&mut tally, loc(state), set, start);
        }
        let mut here = loc(state);
        for i in (0..end.writes).rev() {
            self.run_entries.clear();
            for _ in 0..wr.entries {
                let Some(e) = self.entries.pop() else { break };
                self.run_entries.push(e);
            }
            if self.failed() {
                return Solution::default();
            }
            let (index, last, max_reads, x) = (wr.index, wr.last, wr.max_reads, wr.node);
            // The writer's own references while the page is in `here`.
            let (at_x, in_global) = (state == x, state == GLOB);
            // The writes merged into write i: each stretch of the writer's reads gets the
            // copy set the program chose for this state, and its closing write returns to it.
            let stay = if in_global { self.stay_in_global } else { self.stay_at_node };
            if at_x || max_reads <= stay {
                // Not even the longest stretch is worth a copy (the choice is monotone in
                // the reads): the page stays, and every reference costs the same.
                count(&mut tally, at_x, in_global, (last - index) as u64);
                for _ in 0..wr.merged {
                    self.stretches.pop();
                }
            } else {
                let mut p = last;
                for _ in 0..wr.merged {
                    // The stretch of reads before the merged write at p, back to the write before.
                    let reads = self.stretches.pop().unwrap_or(0) as usize;
                    let j = p.saturating_sub(reads);
                    let set = self.stretch_set(here, x, reads as f64);
                    note(&mut tally, set, here, p);
                    count(&mut tally, at_x, in_global, 1);
                    note(&mut tally, here, set, j);
                    tally.charge_refs(set, x, reads as u64);
                    p = j.saturating_sub(1);
                }
            }
            if i == 0 {
                // Leading reads: every reader and the first write's memory hold a copy from
                // the start (free), and the write keeps the page in its memory.
                let initial = survey.leading | here;
                note(&mut tally, initial, here, index);
                count(&mut tally, at_x, in_global, 1);
                tally.local += index as u64;
                if keep {
                    changes.push((0, initial));
                }
                break;
            }
            // The state at the previous write, and whether the run between had a global copy.
            let b = state;
            let code = if b == GLOB { wr.glob_code } else { self.code_at(&wr, b) };
            let (prev, g) = match code {
                A_SELF => (b, false),
                A_MIN => (wr.arg_u, false),
                B1 => (GLOB, true),
                B2_SELF => (b, true),
                B2_MIN => (if wr.arg_ug == b { wr.arg_ug2 } else { wr.arg_ug }, true),
                G_STAY => (GLOB, true),
                G_B2 => (wr.arg_ug, true),
                _ => (wr.arg_u, false), // G_B3
            };
            let a = loc(prev);
            // The write (from the run's copy set, or from `a` after an empty run), then the run.
            let start = wr.run_start;
            if start < index {
                let readers = self.run_entries.iter().map(|e| (e.node, e.count));
                let set = self.charge_run(&mut tally, readers, g, a, Some(here));
                note(&mut tally, set, here, index);
                count(&mut tally, at_x, in_global, 1);
                note(&mut tally, a, set, start);
            } else {
                note(&mut tally, a, here, index);
                count(&mut tally, at_x, in_global, 1);
            }
            // Past this write, its nodes' values are those from before it.
            for e in &self.run_entries {
                self.raw_at[ix(e.node)] = e.prev_raw;
            }
            state = prev;
            here = a;
            match self.writes.pop() {
                Some(w) => wr = w,
                None => return Solution::default(),
            }
        }
        changes.reverse();
        Solution { cost: tally.cost(&self.c), tally, changes }
    }

    /// The copy set for `c` reads by node `x` while the page stays at `at` (merged writes):
    /// the cheapest of staying, a copy at x, a global copy, as `stretch_cost` prices them.
    fn stretch_set(&self, at: LocSet, x: u16, c: f64) -> LocSet {
        let cost = &self.c;
        let xb = node_bit(x);
        if at == xb || stays(cost, at == GLOBAL_BIT, c) {
            at
        } else if at == GLOBAL_BIT || cost.big_r + c <= cost.big_g + cost.g * c {
            at | xb
        } else {
            at | GLOBAL_BIT
        }
    }

    /// The copy set of a read-run from `a` to the next write's memory `b` (None for the
    /// trailing run), given its readers and their read counts: chosen at its first read by
    /// the per-node rule, and kept until the write. Charges the reads, and returns the set.
    fn charge_run(
        &self,
        tally: &mut Tally,
        readers: impl Iterator<Item = (u16, u32)>,
        with_global: bool,
        a: LocSet,
        b: Option<LocSet>,
    ) -> LocSet {
        let mut base = a;
        if with_global {
            base |= GLOBAL_BIT;
        }
        // The next write's node gets its copy now (it pays R or G either way, and its reads gain).
        if let Some(b) = b
            && b != GLOBAL_BIT
        {
            base |= b;
        }
        let global = base & GLOBAL_BIT != 0;
        let mut set = base;
        // Branch-free: how many readers a run has, and which of them get a copy, vary at random.
        let copy_from = if with_global { self.copy_from_global } else { self.copy_from };
        for (x, n) in readers {
            let worth = n >= copy_from;
            let bit = node_bit(x);
            set |= bit & 0u128.wrapping_sub(worth as u128);
            count(tally, worth || base & bit != 0, global, n as u64);
        }
        set
    }
}

/// Counts `n` references as local, else global if global memory holds a copy, else remote,
/// as `Tally::charge_refs` does but without branches: in the walk back, whether a
/// reference is local is a coin toss.
#[inline(always)]
fn count(tally: &mut Tally, local: bool, global: bool, n: u64) {
    let (local, global) = (0u64.wrapping_sub(local as u64), 0u64.wrapping_sub(global as u64));
    tally.local += n & local;
    tally.global += n & !local & global;
    tally.remote += n & !local & !global;
}
