//! The walk back: from the forward pass's final state, follow each write's codes back to
//! the first write and charge the placement found, without replaying the trace.

use super::thresholds::stays;
use super::*;

impl Optimal {
    /// The code by which node state `b` was reached at write `i`. The node's cursor walks
    /// its entries backwards as the caller visits earlier writes.
    #[inline]
    fn code_at(&mut self, i: usize, b: u16, rest_raw: f64) -> u8 {
        let wr = &self.writes[i];
        let mut e = self.t.cursor[ix(b)];
        while e != NO_ENTRY && self.entries[e as usize].write as usize > i {
            e = self.entries[e as usize].prev;
        }
        self.t.cursor[ix(b)] = e;
        if e != NO_ENTRY && self.entries[e as usize].write as usize == i {
            return self.entries[e as usize].code;
        }
        // Untouched: the lazy rule, with the value the state had before this write.
        let raw = if e == NO_ENTRY { rest_raw } else { self.entries[e as usize].raw };
        let v = min2(raw + wr.k_before, wr.cap_before);
        if v + wr.add <= wr.cap { wr.self_code } else { wr.cap_code }
    }

    /// The entries of write `i`: the nodes touched in the run before it.
    fn entries_of(&self, i: usize) -> &[Entry] {
        let start = self.writes[i].entries as usize;
        let end = self.writes.get(i + 1).map_or(self.entries.len(), |w| w.entries as usize);
        &self.entries[start..end]
    }

    /// Walks the back-pointers from the final state to the first write and, on the way,
    /// charges what the placement does (a tally is a sum: the order does not matter) and
    /// notes its changes, which are then put in trace order.
    #[inline(never)]
    pub(super) fn reconstruct(&mut self, refs: &[Ref], first_write: usize, end: &End) -> Solution {
        let w = self.writes.len();
        let loc = |s: u16| if s == GLOB { GLOBAL_BIT } else { node_bit(s) };
        for &n in &self.seen {
            self.t.cursor[ix(n)] = self.t.head[ix(n)];
        }
        let mut tally = Tally::default();
        // The placement's changes, latest first.
        let mut changes = Vec::new();
        let mut note = |tally: &mut Tally, old: LocSet, new: LocSet, at: usize| {
            if old != new {
                tally.charge_move(old, new);
                changes.push((at, new));
            }
        };

        // The trailing run, from the final state.
        let mut state = end.state;
        let start = self.writes[w - 1].last + 1;
        if start < refs.len() {
            let readers = (0..self.touched_len).map(|n| {
                let x = self.t.touched[ix(n)];
                (x, self.t.count[ix(x)])
            });
            let set = self.charge_run(&mut tally, readers, end.glob, loc(state), None);
            note(&mut tally, loc(state), set, start);
        }
        let mut here = loc(state);
        for i in (0..w).rev() {
            let (index, last, max_reads) = {
                let wr = &self.writes[i];
                (wr.index, wr.last, wr.max_reads)
            };
            let x = refs[index].node;
            // The writer's own references while the page is in `here`.
            let (at_x, in_global) = (state == x, state == GLOB);
            // The writes merged into write i: each stretch of the writer's reads gets the
            // copy set the program chose for this state, and its closing write returns to it.
            let stay = if in_global { self.stay_in_global } else { self.stay_at_node };
            if at_x || max_reads <= stay {
                // Not even the longest stretch is worth a copy (the choice is monotone in
                // the reads): the page stays, and every reference costs the same.
                count(&mut tally, at_x, in_global, (last - index) as u64);
            } else {
                let mut p = last;
                while p > index {
                    // refs[index] is a write: the walk back over the stretch stops there.
                    let mut j = p;
                    while !refs[j - 1].write {
                        j -= 1;
                    }
                    let reads = p - j;
                    let set = self.stretch_set(here, x, reads as f64);
                    note(&mut tally, set, here, p);
                    count(&mut tally, at_x, in_global, 1);
                    note(&mut tally, here, set, j);
                    tally.charge_refs(set, x, reads as u64);
                    p = j - 1;
                }
            }
            if i == 0 {
                // Leading reads: every reader and the first write's memory hold a copy from
                // the start (free), and the write keeps the page in its memory.
                let initial = refs[..first_write].iter().fold(here, |s, r| s | node_bit(r.node));
                note(&mut tally, initial, here, index);
                count(&mut tally, at_x, in_global, 1);
                tally.local += first_write as u64;
                changes.push((0, initial));
                break;
            }
            // The state at the previous write, and whether the run between had a global copy.
            let b = state;
            let code = if b == GLOB { self.writes[i].glob_code } else { self.code_at(i, b, end.rest_raw) };
            let wr = &self.writes[i];
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
            let start = self.writes[i - 1].last + 1;
            if start < index {
                let readers = self.entries_of(i).iter().map(|e| (e.node, e.count));
                let set = self.charge_run(&mut tally, readers, g, a, Some(here));
                note(&mut tally, set, here, index);
                count(&mut tally, at_x, in_global, 1);
                note(&mut tally, a, set, start);
            } else {
                note(&mut tally, a, here, index);
                count(&mut tally, at_x, in_global, 1);
            }
            state = prev;
            here = a;
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
