//! The exact off-line optimal placement of one page (seed 004 section 3), by dynamic
//! programming over the page's writes. docs/optimal.md derives it; in short:
//!
//! A write leaves the page in a single memory, so between two writes (a read-run) only
//! the starting memory `a`, the copy set `S` used during the run and the memory `b` of
//! the next write matter. With R >= G, adding all of S at the run's first read is never
//! worse than adding copies later, keeping `a` in S is free, and a node j is worth a copy
//! exactly when its reads pay for it: min(R + c_j, r c_j) (min(G + c_j, g c_j) when global
//! memory is in S). So each run costs a sum over the nodes that read in it plus a few
//! terms for a, b and global memory, and the best predecessor is one of: b itself, the
//! node with the least adjusted cost, or global memory. Nodes that never touched the page
//! all share one value ("the rest"), so a write costs O(nodes touching the page), not
//! O(machine nodes).

use crate::cost::{node_bit, Costs, LocSet, Residence, Tally, GLOBAL_BIT};
use crate::page::Ref;

const NONE: u16 = u16::MAX;
/// State ids besides explicit slots.
const REST: u16 = u16::MAX - 1;
const GLOB: u16 = u16::MAX - 2;

// How a state was reached at a write (one byte per state per write).
const A_SELF: u8 = 0; // from b itself, global memory not in the run's set
const A_MIN: u8 = 1; // from the node of least adjusted cost, no global memory
const B1: u8 = 2; // from global memory (global memory in the run's set)
const B2_SELF: u8 = 3; // from b itself with a global copy during the run
const B2_MIN: u8 = 4; // from the least node (excluding b) with a global copy
const G_STAY: u8 = 5; // global -> global
const G_B2: u8 = 6; // node -> global, global memory in the run's set
const G_B3: u8 = 7; // node -> global, node copies only during the run

/// The optimum for one page: its cost, what it consists of, and where the page was.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Solution {
    pub cost: f64,
    pub tally: Tally,
    /// (reference index in the page, location set from that reference on), at each change;
    /// the first entry is the initial placement.
    pub changes: Vec<(usize, LocSet)>,
}

struct Write {
    /// Index of the write in the page's references.
    index: usize,
    /// Explicit slots existing when the write was processed.
    slots: u16,
    arg_u: u16,
    arg_ug: u16,
    arg_ug2: u16,
    /// Offset of this write's codes (slots, then the rest, then global memory).
    codes: usize,
}

/// Reusable solver for one machine; holds its scratch space between pages.
pub struct Optimal {
    nodes: usize,
    c: Costs,
    slot_of_node: Vec<u16>,
    node_of_slot: Vec<u16>,
    val: Vec<f64>,
    count: Vec<u32>,
    touched: Vec<u16>,
    d: Vec<f64>,
    dg: Vec<f64>,
    next: Vec<f64>,
    writes: Vec<Write>,
    codes: Vec<u8>,
}

impl Optimal {
    pub fn new(nodes: usize, costs: Costs) -> Self {
        assert!(nodes >= 1 && nodes <= crate::cost::MAX_NODES);
        Optimal {
            nodes,
            c: costs,
            slot_of_node: vec![NONE; nodes],
            node_of_slot: Vec::with_capacity(nodes),
            val: Vec::with_capacity(nodes),
            count: Vec::with_capacity(nodes),
            touched: Vec::with_capacity(nodes),
            d: Vec::with_capacity(nodes),
            dg: Vec::with_capacity(nodes),
            next: Vec::with_capacity(nodes),
            writes: Vec::new(),
            codes: Vec::new(),
        }
    }

    pub fn costs(&self) -> &Costs {
        &self.c
    }

    fn reset(&mut self) {
        for &n in &self.node_of_slot {
            self.slot_of_node[n as usize] = NONE;
        }
        self.node_of_slot.clear();
        self.val.clear();
        self.count.clear();
        self.touched.clear();
        self.d.clear();
        self.dg.clear();
        self.writes.clear();
        self.codes.clear();
    }

    #[inline]
    fn slot(&mut self, node: u16, rest: f64) -> usize {
        let s = self.slot_of_node[node as usize];
        if s != NONE {
            return s as usize;
        }
        let s = self.node_of_slot.len();
        self.slot_of_node[node as usize] = s as u16;
        self.node_of_slot.push(node);
        self.val.push(rest);
        self.count.push(0);
        self.d.push(0.0);
        self.dg.push(0.0);
        s
    }

    /// Solves one page: its references must be in trace order.
    pub fn solve(&mut self, refs: &[Ref]) -> Solution {
        self.reset();
        let Some(first_write) = refs.iter().position(|r| r.write) else {
            // Never written: the free initial placement puts a copy at every reader.
            let set = refs.iter().fold(0, |s, r| s | node_bit(r.node));
            let tally = Tally { local: refs.len() as u64, ..Tally::default() };
            let changes = if refs.is_empty() { vec![] } else { vec![(0, set)] };
            return Solution { cost: refs.len() as f64, tally, changes };
        };
        let c = self.c;
        let global = c.has_global();
        let wcost = |writer: u16, node: u16| if writer == node { 1.0 } else { c.r };

        // The first write: leading reads were all local for free, and the page may start anywhere.
        let lead = first_write as f64;
        let x = refs[first_write].node;
        let mut rest = lead + c.r;
        let mut glob = lead + c.g;
        let s = self.slot(x, rest);
        self.val[s] = lead + 1.0;
        self.record_first(first_write);

        for (i, rf) in refs.iter().enumerate().skip(first_write + 1) {
            if !rf.write {
                let s = self.slot(rf.node, rest);
                if self.count[s] == 0 {
                    self.touched.push(s as u16);
                }
                self.count[s] += 1;
                continue;
            }
            self.slot(rf.node, rest);
            let k = self.node_of_slot.len();
            let has_rest = k < self.nodes;

            // Per-node run terms for the nodes that read in this run.
            let (mut f_sum, mut fg_sum) = (0.0, 0.0);
            for &t in &self.touched {
                let cj = self.count[t as usize] as f64;
                let f = (c.big_r + cj).min(c.r * cj);
                f_sum += f;
                self.d[t as usize] = cj - f;
                if global {
                    let fg = (c.big_g + cj).min(c.g * cj);
                    fg_sum += fg;
                    self.dg[t as usize] = cj - fg;
                }
            }

            // Least adjusted costs over node states (explicit slots and the rest).
            let (mut min_u, mut arg_u) = (f64::INFINITY, NONE);
            let (mut min_ug, mut arg_ug, mut min_ug2, mut arg_ug2) = (f64::INFINITY, NONE, f64::INFINITY, NONE);
            for j in 0..k {
                let u = self.val[j] + self.d[j];
                if u < min_u {
                    min_u = u;
                    arg_u = j as u16;
                }
                if global {
                    let ug = self.val[j] + self.dg[j];
                    if ug < min_ug {
                        (min_ug2, arg_ug2) = (min_ug, arg_ug);
                        (min_ug, arg_ug) = (ug, j as u16);
                    } else if ug < min_ug2 {
                        (min_ug2, arg_ug2) = (ug, j as u16);
                    }
                }
            }
            if has_rest {
                if rest < min_u {
                    min_u = rest;
                    arg_u = REST;
                }
                if global {
                    if rest < min_ug {
                        (min_ug2, arg_ug2) = (min_ug, arg_ug);
                        (min_ug, arg_ug) = (rest, REST);
                    } else if rest < min_ug2 {
                        (min_ug2, arg_ug2) = (rest, REST);
                    }
                }
            }

            let base = self.codes.len();
            self.codes.resize(base + k + 2, 0);
            self.next.clear();
            // Each node state b: the best of the cases in the module comment.
            let from_glob = glob + fg_sum + c.big_g;
            for b in 0..=k {
                let is_rest = b == k;
                if is_rest && !has_rest {
                    break;
                }
                let (vb, db, dgb) = if is_rest { (rest, 0.0, 0.0) } else { (self.val[b], self.d[b], self.dg[b]) };
                let (mut best, mut code) = (f_sum + vb + db, A_SELF);
                let via_min = f_sum + min_u + c.big_r + db;
                if via_min < best {
                    (best, code) = (via_min, A_MIN);
                }
                if global {
                    let v = from_glob + dgb;
                    if v < best {
                        (best, code) = (v, B1);
                    }
                    let stay = c.big_g + fg_sum + dgb + vb;
                    if stay < best {
                        (best, code) = (stay, B2_SELF);
                    }
                    let me = if is_rest { REST } else { b as u16 };
                    let other = if arg_ug == me { min_ug2 } else { min_ug };
                    let v = 2.0 * c.big_g + fg_sum + dgb + other;
                    if v < best {
                        (best, code) = (v, B2_MIN);
                    }
                }
                let node_cost = if is_rest { c.r } else { wcost(rf.node, self.node_of_slot[b]) };
                self.next.push(best + node_cost);
                self.codes[base + b] = code;
            }
            if global {
                let (mut best, mut code) = (glob + fg_sum, G_STAY);
                let v = min_ug + c.big_g + fg_sum;
                if v < best {
                    (best, code) = (v, G_B2);
                }
                let v = min_u + f_sum + c.big_g;
                if v < best {
                    (best, code) = (v, G_B3);
                }
                glob = best + c.g;
                self.codes[base + k + 1] = code;
            }
            self.val[..k].copy_from_slice(&self.next[..k]);
            if has_rest {
                rest = self.next[k];
            }
            for &t in &self.touched {
                self.count[t as usize] = 0;
                self.d[t as usize] = 0.0;
                self.dg[t as usize] = 0.0;
            }
            self.touched.clear();
            self.writes.push(Write { index: i, slots: k as u16, arg_u, arg_ug, arg_ug2, codes: base });
        }

        // The trailing read-run, if any: no write constrains its end.
        let (mut f_sum, mut fg_sum) = (0.0, 0.0);
        for &t in &self.touched {
            let cj = self.count[t as usize] as f64;
            let f = (c.big_r + cj).min(c.r * cj);
            f_sum += f;
            self.d[t as usize] = cj - f;
            if global {
                let fg = (c.big_g + cj).min(c.g * cj);
                fg_sum += fg;
                self.dg[t as usize] = cj - fg;
            }
        }
        let k = self.node_of_slot.len();
        let mut best = (f64::INFINITY, NONE, false);
        for j in 0..=k {
            let (v, d, dg, id) = if j == k {
                if k == self.nodes {
                    break;
                }
                (rest, 0.0, 0.0, REST)
            } else {
                (self.val[j], self.d[j], self.dg[j], j as u16)
            };
            if v + f_sum + d < best.0 {
                best = (v + f_sum + d, id, false);
            }
            if global && v + c.big_g + fg_sum + dg < best.0 {
                best = (v + c.big_g + fg_sum + dg, id, true);
            }
        }
        if global && glob + fg_sum < best.0 {
            best = (glob + fg_sum, GLOB, true);
        }
        let (cost, last_state, last_glob) = best;
        let solution = self.reconstruct(refs, first_write, last_state, last_glob);
        debug_assert!(
            (solution.tally.cost(&c) - cost).abs() <= 1e-6 * cost.max(1.0),
            "replayed optimum {} differs from the dynamic program's {}",
            solution.tally.cost(&c),
            cost
        );
        Solution { cost, ..solution }
    }

    fn record_first(&mut self, index: usize) {
        // The first write has no predecessor; its codes are never read.
        self.writes.push(Write { index, slots: 1, arg_u: NONE, arg_ug: NONE, arg_ug2: NONE, codes: 0 });
        self.codes.clear();
    }

    /// Walks the back-pointers from the final state, then replays the placement with the
    /// shared accounting, which also yields the tally.
    fn reconstruct(&self, refs: &[Ref], first_write: usize, last_state: u16, last_glob: bool) -> Solution {
        let w = self.writes.len();
        // states[i]: the page's state at write i, as a slot id (stable: slots are only
        // appended; a slot created later than write i means that node, then still in "the
        // rest"), GLOB, or REST for a rest node not yet pinned down. glob_in_run[i]: the run
        // before write i (i >= 1) had a global copy.
        let mut states = vec![NONE; w];
        let mut glob_in_run = vec![false; w];
        states[w - 1] = last_state;
        for i in (1..w).rev() {
            let wr = &self.writes[i];
            let b = states[i];
            let k = wr.slots as usize;
            let me = if b == GLOB || b == REST || (b as usize) >= k { if b == GLOB { GLOB } else { REST } } else { b };
            let code = match me {
                GLOB => self.codes[wr.codes + k + 1],
                REST => self.codes[wr.codes + k],
                s => self.codes[wr.codes + s as usize],
            };
            let (prev, g) = match code {
                A_SELF => (b, false),
                A_MIN => (wr.arg_u, false),
                B1 => (GLOB, true),
                B2_SELF => (b, true),
                B2_MIN => (if wr.arg_ug == me { wr.arg_ug2 } else { wr.arg_ug }, true),
                G_STAY => (GLOB, true),
                G_B2 => (wr.arg_ug, true),
                _ => (wr.arg_u, false), // G_B3
            };
            states[i - 1] = prev;
            glob_in_run[i] = g;
        }

        // A concrete node for each unpinned stretch in the rest: one that is not explicit
        // when the stretch is last used (slots only grow, so it never was before either).
        let k_final = self.node_of_slot.len();
        let loc_of = |state: u16, i: usize| -> LocSet {
            match state {
                GLOB => GLOBAL_BIT,
                REST => {
                    let mut j = i;
                    while j + 1 < w && states[j + 1] == REST {
                        j += 1;
                    }
                    let k = if j + 1 < w { self.writes[j + 1].slots as usize } else { k_final };
                    let explicit = &self.node_of_slot[..k];
                    let node = (0..self.nodes as u16).find(|n| !explicit.contains(n)).expect("a node outside the explicit slots");
                    node_bit(node)
                }
                s => node_bit(self.node_of_slot[s as usize]),
            }
        };
        let write_locs: Vec<LocSet> = (0..w).map(|i| loc_of(states[i], i)).collect();

        let c = &self.c;
        let mut changes = Vec::new();
        // Leading reads: every reader and the first write's memory hold a copy from the start.
        let initial = refs[..first_write].iter().fold(write_locs[0], |s, r| s | node_bit(r.node));
        let mut res = Residence::new(initial);
        changes.push((0, initial));
        for r in &refs[..first_write] {
            res.read(r.node);
        }
        let mut counts = vec![0u32; self.nodes];
        for i in 0..w {
            let start = if i == 0 { first_write } else { self.writes[i - 1].index + 1 };
            let end = self.writes[i].index;
            if i > 0 {
                self.run(refs, start..end, &mut counts, glob_in_run[i], write_locs[i - 1], Some(write_locs[i]), &mut res, &mut changes);
            }
            moved(&mut res, write_locs[i], end, &mut changes);
            res.write(refs[end].node);
        }
        let start = self.writes[w - 1].index + 1;
        self.run(refs, start..refs.len(), &mut counts, last_glob, write_locs[w - 1], None, &mut res, &mut changes);
        Solution { cost: res.tally.cost(c), tally: res.tally, changes }
    }

    /// Replays the read-run refs[start..end] from `a`: the copy set is chosen at its first
    /// read by the per-node rule, and kept until the write.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        refs: &[Ref],
        span: std::ops::Range<usize>,
        counts: &mut [u32],
        with_global: bool,
        a: LocSet,
        b: Option<LocSet>,
        res: &mut Residence,
        changes: &mut Vec<(usize, LocSet)>,
    ) {
        let (start, end) = (span.start, span.end);
        if start >= end {
            return;
        }
        let c = &self.c;
        for r in &refs[start..end] {
            counts[r.node as usize] += 1;
        }
        let mut set = a;
        if with_global {
            set |= GLOBAL_BIT;
        }
        for r in &refs[start..end] {
            let cj = counts[r.node as usize] as f64;
            let worth = if with_global { c.big_g + cj < c.g * cj } else { c.big_r + cj < c.r * cj };
            if worth {
                set |= node_bit(r.node);
            }
        }
        // The next write's node gets its copy now (it pays R or G either way, and its reads gain).
        if let Some(b) = b {
            if b != GLOBAL_BIT {
                set |= b;
            }
        }
        moved(res, set, start, changes);
        for r in &refs[start..end] {
            res.read(r.node);
            counts[r.node as usize] = 0;
        }
    }
}

/// Moves the page to `set` if it is elsewhere, noting the change.
fn moved(res: &mut Residence, set: LocSet, at: usize, changes: &mut Vec<(usize, LocSet)>) {
    if res.set() != set {
        res.place(set);
        changes.push((at, set));
    }
}

/// Charges a placement given as changes (reference index, set from there on; the first is
/// the free initial placement) against a page's references, on any machine's costs.
pub fn replay(refs: &[Ref], changes: &[(usize, LocSet)], _costs: &Costs) -> Tally {
    let Some(&(_, initial)) = changes.first() else {
        return Tally::default();
    };
    let mut res = Residence::new(initial);
    let mut next = 1;
    for (i, r) in refs.iter().enumerate() {
        while next < changes.len() && changes[next].0 == i {
            res.place(changes[next].1);
            next += 1;
        }
        if r.write {
            res.write(r.node);
        } else {
            res.read(r.node);
        }
    }
    res.tally
}
