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
//! node with the least adjusted cost, or global memory.
//!
//! Every node that neither read in a run nor wrote at its end gets the same update,
//! V' = min(V + k, D), so those values are kept lazily as min(raw + K, Cap) with one
//! (K, Cap) for all: a write costs O(nodes touched in its run), plus a scan for the two
//! least raw values. Nodes that never touched the page share one value ("the rest").

use crate::cost::{Costs, GLOBAL_BIT, LocSet, Residence, Tally, node_bit};
use crate::page::Ref;

const NONE: u16 = u16::MAX;
/// Entries kept in `Optimal::low`.
const LOW: usize = 12;
/// State ids besides explicit slots.
const REST: u16 = u16::MAX - 1;
const GLOB: u16 = u16::MAX - 2;

// How a state was reached at a write.
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

/// What the backward walk needs to know about one write.
struct Write {
    /// Index of the write in the page's references.
    index: usize,
    /// Index of the last write merged into this one (see `solve`): `index..=last` are
    /// consecutive writes by one node, and the page stays put.
    last: usize,
    /// Explicit slots existing when the write was processed.
    slots: u16,
    arg_u: u16,
    arg_ug: u16,
    arg_ug2: u16,
    /// The lazy transform before this write, and the one it applied to untouched states.
    k_before: f64,
    cap_before: f64,
    add: f64,
    cap: f64,
    /// Codes of an untouched state: when V + add <= cap, and otherwise.
    self_code: u8,
    cap_code: u8,
    glob_code: u8,
    /// This write's explicit codes in `touched_codes`.
    touched: std::ops::Range<usize>,
}

/// Reusable solver for one machine; holds its scratch space between pages.
pub struct Optimal {
    nodes: usize,
    c: Costs,
    slot_of_node: Vec<u16>,
    node_of_slot: Vec<u16>,
    /// Lazy values: the true value of slot j is min(raw[j] + k, cap).
    raw: Vec<f64>,
    /// Slots that include the least raw values: every slot not listed has a raw value
    /// >= `floor`. Spares a scan of all slots at most writes.
    low: Vec<u16>,
    /// Whether each slot is in `low`.
    listed: Vec<bool>,
    floor: f64,
    count: Vec<u32>,
    touched: Vec<u16>,
    is_touched: Vec<bool>,
    d: Vec<f64>,
    dg: Vec<f64>,
    next: Vec<f64>,
    /// Per slot: (first write whose transition sees it, raw value), in order.
    history: Vec<Vec<(u32, f64)>>,
    writes: Vec<Write>,
    touched_codes: Vec<(u16, u8)>,
}

impl Optimal {
    pub fn new(nodes: usize, costs: Costs) -> Self {
        assert!(nodes >= 1 && nodes <= crate::cost::MAX_NODES);
        Optimal {
            nodes,
            c: costs,
            slot_of_node: vec![NONE; nodes],
            node_of_slot: Vec::with_capacity(nodes),
            raw: Vec::with_capacity(nodes),
            low: Vec::with_capacity(LOW + 1),
            listed: Vec::with_capacity(nodes),
            floor: f64::INFINITY,
            count: Vec::with_capacity(nodes),
            touched: Vec::with_capacity(nodes),
            is_touched: Vec::with_capacity(nodes),
            d: Vec::with_capacity(nodes),
            dg: Vec::with_capacity(nodes),
            next: Vec::with_capacity(nodes),
            history: Vec::new(),
            writes: Vec::new(),
            touched_codes: Vec::new(),
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
        self.raw.clear();
        self.low.clear();
        self.listed.clear();
        self.floor = f64::INFINITY;
        self.count.clear();
        self.touched.clear();
        self.is_touched.clear();
        self.d.clear();
        self.dg.clear();
        for h in &mut self.history {
            h.clear();
        }
        self.writes.clear();
        self.touched_codes.clear();
    }

    /// The slot of `node`, created (with the rest's raw value) if new; `valid_from` is the
    /// first write whose transition sees it.
    #[inline]
    fn slot(&mut self, node: u16, rest_raw: f64, valid_from: u32) -> usize {
        let s = self.slot_of_node[node as usize];
        if s != NONE {
            return s as usize;
        }
        self.new_slot(node, rest_raw, valid_from)
    }

    /// Out of line: at most one call per node and page, and inlining it into every
    /// reference's path made `slot` itself a call.
    #[inline(never)]
    fn new_slot(&mut self, node: u16, rest_raw: f64, valid_from: u32) -> usize {
        let s = self.node_of_slot.len();
        self.slot_of_node[node as usize] = s as u16;
        self.node_of_slot.push(node);
        self.raw.push(rest_raw);
        self.listed.push(false);
        self.note_raw(s);
        self.count.push(0);
        self.is_touched.push(false);
        self.d.push(0.0);
        self.dg.push(0.0);
        if self.history.len() <= s {
            self.history.push(Vec::new());
        }
        self.history[s].push((valid_from, rest_raw));
        s
    }

    #[inline]
    fn touch(&mut self, s: usize) {
        if !self.is_touched[s] {
            self.is_touched[s] = true;
            self.touched.push(s as u16);
        }
    }

    /// The run's per-node terms for the nodes that read in it: F and Fg (sums of each node's
    /// cheapest way to serve its reads), with each node's saving d and dg.
    fn run_terms(&mut self) -> (f64, f64) {
        let c = self.c;
        let (mut f_sum, mut fg_sum) = (0.0, 0.0);
        for &t in &self.touched {
            let cj = self.count[t as usize] as f64;
            let f = (c.big_r + cj).min(c.r * cj);
            f_sum += f;
            self.d[t as usize] = cj - f;
            if c.has_global() {
                let fg = (c.big_g + cj).min(c.g * cj);
                fg_sum += fg;
                self.dg[t as usize] = cj - fg;
            }
        }
        (f_sum, fg_sum)
    }

    /// Sets slot `s`'s raw value, keeping `low` and `floor` true.
    #[inline]
    fn set_raw(&mut self, s: usize, v: f64) {
        self.raw[s] = v;
        self.note_raw(s);
    }

    /// Lists slot `s` in `low` if its raw value fell below the floor (a listed slot may
    /// hold any value: `low` names slots, their values are read from `raw`).
    #[inline]
    fn note_raw(&mut self, s: usize) {
        if self.listed[s] || self.raw[s] >= self.floor {
            return;
        }
        self.low.push(s as u16);
        self.listed[s] = true;
        if self.low.len() > LOW {
            // Unlist the largest; the floor comes down to it.
            let raw = &self.raw;
            let (i, &top) = self.low.iter().enumerate().max_by(|a, b| raw[*a.1 as usize].total_cmp(&raw[*b.1 as usize])).expect("non-empty");
            self.low.swap_remove(i);
            self.listed[top as usize] = false;
            self.floor = self.floor.min(self.raw[top as usize]);
        }
    }

    /// The two least raw values (with slots) among slots not touched in this run.
    fn two_least_untouched(&mut self) -> (f64, u16, f64, u16) {
        let scan = |it: &mut dyn Iterator<Item = u16>, raw: &[f64], touched: &[bool]| {
            let (mut r1, mut a1, mut r2, mut a2) = (f64::INFINITY, NONE, f64::INFINITY, NONE);
            for j in it {
                let v = raw[j as usize];
                if v < r2 && !touched[j as usize] {
                    if v < r1 {
                        (r2, a2) = (r1, a1);
                        (r1, a1) = (v, j);
                    } else {
                        (r2, a2) = (v, j);
                    }
                }
            }
            (r1, a1, r2, a2)
        };
        let found = scan(&mut self.low.iter().copied(), &self.raw, &self.is_touched);
        // Valid when nothing outside `low` can be smaller (or there is nothing outside).
        let outside = self.raw.len() > self.low.len();
        if !outside || found.2 <= self.floor {
            return found;
        }
        // Rebuild `low` from every slot, then answer by a full scan.
        let mut all: Vec<u16> = (0..self.raw.len() as u16).collect();
        let raw = &self.raw;
        if all.len() > LOW {
            all.select_nth_unstable_by(LOW, |a, b| raw[*a as usize].total_cmp(&raw[*b as usize]));
            self.floor = raw[all[LOW] as usize];
            all.truncate(LOW);
        } else {
            self.floor = f64::INFINITY;
        }
        self.listed.iter_mut().for_each(|l| *l = false);
        for &j in &all {
            self.listed[j as usize] = true;
        }
        self.low = all;
        scan(&mut (0..self.raw.len() as u16), &self.raw, &self.is_touched)
    }

    /// Solves one page: its references must be in trace order.
    pub fn solve(&mut self, refs: &[Ref]) -> Solution {
        self.reset();
        let Some(first_write) = refs.iter().position(|r| r.write) else {
            // Never written: the free initial placement puts a copy at every reader.
            let set = refs.iter().fold(0, |s, r| s | node_bit(r.node));
            let tally = Tally {
                local: refs.len() as u64,
                ..Tally::default()
            };
            let changes = if refs.is_empty() {
                vec![]
            } else {
                vec![(0, set)]
            };
            return Solution {
                cost: refs.len() as f64,
                tally,
                changes,
            };
        };
        // Used by one node only (private data, the common case): all local from the start.
        let only = refs[0].node;
        if refs.iter().all(|r| r.node == only) {
            let tally = Tally {
                local: refs.len() as u64,
                ..Tally::default()
            };
            return Solution {
                cost: refs.len() as f64,
                tally,
                changes: vec![(0, node_bit(only))],
            };
        }
        let c = self.c;
        let global = c.has_global();
        let big_g = if global { c.big_g } else { 0.0 };

        // The first write: leading reads were all local for free, and the page may start anywhere.
        let lead = first_write as f64;
        let (mut k_all, mut cap_all) = (0.0f64, f64::INFINITY);
        let rest_raw = lead + c.r;
        let mut glob = lead + c.g;
        let s = self.slot(refs[first_write].node, rest_raw, 1);
        self.set_raw(s, lead + 1.0);
        self.history[s][0].1 = lead + 1.0;
        self.writes.push(Write {
            index: first_write,
            last: first_write,
            slots: 1,
            arg_u: NONE,
            arg_ug: NONE,
            arg_ug2: NONE,
            k_before: 0.0,
            cap_before: f64::INFINITY,
            add: 0.0,
            cap: f64::INFINITY,
            self_code: A_SELF,
            cap_code: A_SELF,
            glob_code: G_STAY,
            touched: 0..0,
        });

        let mut next = first_write + 1;
        while next < refs.len() {
            let i = next;
            let rf = refs[i];
            next += 1;
            let w = self.writes.len() as u32;
            if !rf.write {
                let s = self.slot(rf.node, rest_raw, w);
                self.touch(s);
                self.count[s] += 1;
                continue;
            }
            let writer = self.slot(rf.node, rest_raw, w);
            // A write by the node that made the previous write, with only that node's reads
            // in between, moves nothing (docs/optimal.md): every state stays, and only the
            // copy set for those reads is chosen, the same way for every node but the writer.
            let prev_last = self.writes.last().expect("the first write is recorded").last;
            if refs[prev_last].node == rf.node && self.touched.iter().all(|&t| t as usize == writer) {
                // The same holds for each following write by that node while only it refers
                // to the page, so the whole stretch is taken here, in registers.
                let x = rf.node;
                let mut cx = self.count[writer] as f64;
                let mut v = self.raw[writer];
                let mut last = i;
                let pending = loop {
                    let mine = (v + k_all).min(cap_all) + cx + 1.0;
                    let other = c.r + stretch_cost(&c, cx, false);
                    k_all += other;
                    cap_all += other;
                    v = mine - k_all;
                    if global {
                        glob += c.g + stretch_cost(&c, cx, true);
                    }
                    let mut reads = 0u32;
                    while next < refs.len() && refs[next].node == x && !refs[next].write {
                        reads += 1;
                        next += 1;
                    }
                    if next < refs.len() && refs[next].node == x {
                        cx = reads as f64;
                        last = next;
                        next += 1;
                    } else {
                        break reads;
                    }
                };
                self.set_raw(writer, v);
                // Lookups only need the last value per write entry.
                let h = &mut self.history[writer];
                match h.last_mut() {
                    Some(entry) if entry.0 == w => entry.1 = v,
                    _ => h.push((w, v)),
                }
                self.writes.last_mut().expect("recorded").last = last;
                // The writer's reads after the stretch's last write open the next run.
                self.count[writer] = pending;
                self.is_touched[writer] = false;
                self.touched.clear();
                if pending > 0 {
                    self.touch(writer);
                }
                continue;
            }
            self.touch(writer);
            let k = self.node_of_slot.len();
            let has_rest = k < self.nodes;
            let true_val = |raw: f64| (raw + k_all).min(cap_all);

            let (f_sum, fg_sum) = self.run_terms();

            // The two least raw values among untouched states (slots and the rest).
            let (mut r1, mut a1, mut r2, mut a2) = self.two_least_untouched();
            if has_rest {
                if rest_raw < r1 {
                    (r2, a2) = (r1, a1);
                    (r1, a1) = (rest_raw, REST);
                } else if rest_raw < r2 {
                    (r2, a2) = (rest_raw, REST);
                }
            }
            let (m1, m2) = (true_val(r1), true_val(r2));
            // Least adjusted costs over node states: untouched ones have d = dg = 0.
            let (mut min_u, mut arg_u) = (m1, a1);
            let (mut min_ug, mut arg_ug, mut min_ug2, mut arg_ug2) = (m1, a1, m2, a2);
            for &t in &self.touched {
                let v = true_val(self.raw[t as usize]);
                let u = v + self.d[t as usize];
                if u < min_u {
                    (min_u, arg_u) = (u, t);
                }
                if global {
                    let ug = v + self.dg[t as usize];
                    if ug < min_ug {
                        (min_ug2, arg_ug2) = (min_ug, arg_ug);
                        (min_ug, arg_ug) = (ug, t);
                    } else if ug < min_ug2 {
                        (min_ug2, arg_ug2) = (ug, t);
                    }
                }
            }

            // Touched states: the best of the cases in the module comment, explicitly.
            let from_glob = glob + fg_sum + big_g;
            let start = self.touched_codes.len();
            self.next.clear();
            for &t in &self.touched {
                let b = t as usize;
                let (vb, db, dgb) = (true_val(self.raw[b]), self.d[b], self.dg[b]);
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
                    let stay = big_g + fg_sum + dgb + vb;
                    if stay < best {
                        (best, code) = (stay, B2_SELF);
                    }
                    let other = if arg_ug == t { min_ug2 } else { min_ug };
                    let v = 2.0 * big_g + fg_sum + dgb + other;
                    if v < best {
                        (best, code) = (v, B2_MIN);
                    }
                }
                let node_cost = if b == writer { 1.0 } else { c.r };
                self.next.push(best + node_cost);
                self.touched_codes.push((t, code));
            }
            // Untouched states all get V' = min(V + add, cap).
            let (self_add, self_code) = if global && big_g + fg_sum < f_sum {
                (big_g + fg_sum, B2_SELF)
            } else {
                (f_sum, A_SELF)
            };
            let (mut cap, mut cap_code) = (f_sum + min_u + c.big_r, A_MIN);
            if global {
                if from_glob < cap {
                    (cap, cap_code) = (from_glob, B1);
                }
                let v = 2.0 * big_g + fg_sum + min_ug;
                if v < cap {
                    (cap, cap_code) = (v, B2_MIN);
                }
            }
            let (add, cap) = (self_add + c.r, cap + c.r);
            let mut glob_code = G_STAY;
            if global {
                let mut best = glob + fg_sum;
                let v = min_ug + big_g + fg_sum;
                if v < best {
                    (best, glob_code) = (v, G_B2);
                }
                let v = min_u + f_sum + big_g;
                if v < best {
                    (best, glob_code) = (v, G_B3);
                }
                glob = best + c.g;
            }
            let (k_before, cap_before) = (k_all, cap_all);
            k_all += add;
            cap_all = (cap_all + add).min(cap);
            for n in 0..self.touched.len() {
                let b = self.touched[n] as usize;
                // New values never exceed the new cap (docs/optimal.md), so raw + K stands for them.
                let v = self.next[n] - k_all;
                self.set_raw(b, v);
                self.history[b].push((w + 1, v));
                self.count[b] = 0;
                self.d[b] = 0.0;
                self.dg[b] = 0.0;
                self.is_touched[b] = false;
            }
            self.touched.clear();
            self.writes.push(Write {
                index: i,
                last: i,
                slots: k as u16,
                arg_u,
                arg_ug,
                arg_ug2,
                k_before,
                cap_before,
                add,
                cap,
                self_code,
                cap_code,
                glob_code,
                touched: start..self.touched_codes.len(),
            });
        }

        // The trailing read-run, if any: no write constrains its end.
        let (f_sum, fg_sum) = self.run_terms();
        let k = self.node_of_slot.len();
        let mut best = (f64::INFINITY, NONE, false);
        for j in 0..=k {
            let (raw, d, dg, id) = if j == k {
                if k == self.nodes {
                    break;
                }
                (rest_raw, 0.0, 0.0, REST)
            } else {
                (self.raw[j], self.d[j], self.dg[j], j as u16)
            };
            let v = (raw + k_all).min(cap_all);
            if v + f_sum + d < best.0 {
                best = (v + f_sum + d, id, false);
            }
            if global && v + big_g + fg_sum + dg < best.0 {
                best = (v + big_g + fg_sum + dg, id, true);
            }
        }
        if global && glob + fg_sum < best.0 {
            best = (glob + fg_sum, GLOB, true);
        }
        let (cost, last_state, last_glob) = best;
        let solution = self.reconstruct(refs, first_write, last_state, last_glob, rest_raw);
        debug_assert!(
            (solution.tally.cost(&c) - cost).abs() <= 1e-6 * cost.max(1.0),
            "replayed optimum {} differs from the dynamic program's {}",
            solution.tally.cost(&c),
            cost
        );
        Solution { cost, ..solution }
    }

    /// The code by which state `b` (a slot id, REST or GLOB) was reached at write `i`.
    /// `cursor[s]` walks slot s's history backwards as the caller visits earlier writes.
    fn code_at(&self, i: usize, b: u16, rest_raw: f64, cursor: &mut [usize]) -> u8 {
        let wr = &self.writes[i];
        if b == GLOB {
            return wr.glob_code;
        }
        if let Some(&(_, code)) = self.touched_codes[wr.touched.clone()]
            .iter()
            .find(|&&(t, _)| t == b)
        {
            return code;
        }
        // Untouched: the lazy rule, with the value the state had before this write.
        let raw = if b == REST || b as usize >= wr.slots as usize {
            rest_raw
        } else {
            let h = &self.history[b as usize];
            let at = &mut cursor[b as usize];
            while h[*at - 1].0 > i as u32 {
                *at -= 1;
            }
            h[*at - 1].1
        };
        let v = (raw + wr.k_before).min(wr.cap_before);
        if v + wr.add <= wr.cap {
            wr.self_code
        } else {
            wr.cap_code
        }
    }

    /// Walks the back-pointers from the final state, then replays the placement with the
    /// shared accounting, which also yields the tally.
    fn reconstruct(
        &self,
        refs: &[Ref],
        first_write: usize,
        last_state: u16,
        last_glob: bool,
        rest_raw: f64,
    ) -> Solution {
        let w = self.writes.len();
        // states[i]: the page's state at write i, as a slot id (stable: slots are only
        // appended; a slot created later than write i means that node, then still in "the
        // rest"), GLOB, or REST for a rest node not yet pinned down. glob_in_run[i]: the run
        // before write i (i >= 1) had a global copy.
        let mut states = vec![NONE; w];
        let mut glob_in_run = vec![false; w];
        let mut cursor: Vec<usize> = self.history[..self.node_of_slot.len()].iter().map(Vec::len).collect();
        states[w - 1] = last_state;
        for i in (1..w).rev() {
            let wr = &self.writes[i];
            let b = states[i];
            let me = if b == GLOB {
                GLOB
            } else if b == REST || b as usize >= wr.slots as usize {
                REST
            } else {
                b
            };
            let (prev, g) = match self.code_at(i, b, rest_raw, &mut cursor) {
                A_SELF => (b, false),
                A_MIN => (wr.arg_u, false),
                B1 => (GLOB, true),
                B2_SELF => (b, true),
                B2_MIN => (
                    if wr.arg_ug == me {
                        wr.arg_ug2
                    } else {
                        wr.arg_ug
                    },
                    true,
                ),
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
                    let k = if j + 1 < w {
                        self.writes[j + 1].slots as usize
                    } else {
                        k_final
                    };
                    let explicit = &self.node_of_slot[..k];
                    let node = (0..self.nodes as u16)
                        .find(|n| !explicit.contains(n))
                        .expect("a node outside the explicit slots");
                    node_bit(node)
                }
                s => node_bit(self.node_of_slot[s as usize]),
            }
        };
        let write_locs: Vec<LocSet> = (0..w).map(|i| loc_of(states[i], i)).collect();

        let c = &self.c;
        let mut changes = Vec::new();
        // Leading reads: every reader and the first write's memory hold a copy from the start.
        let initial = refs[..first_write]
            .iter()
            .fold(write_locs[0], |s, r| s | node_bit(r.node));
        let mut res = Residence::new(initial);
        changes.push((0, initial));
        for r in &refs[..first_write] {
            res.read(r.node);
        }
        let mut counts = vec![0u32; self.nodes];
        let mut readers = Vec::new();
        for i in 0..w {
            let start = if i == 0 {
                first_write
            } else {
                self.writes[i - 1].last + 1
            };
            let end = self.writes[i].index;
            if i > 0 {
                self.run(
                    refs,
                    start..end,
                    &mut counts,
                    &mut readers,
                    glob_in_run[i],
                    write_locs[i - 1],
                    Some(write_locs[i]),
                    &mut res,
                    &mut changes,
                );
            }
            moved(&mut res, write_locs[i], end, &mut changes);
            res.write(refs[end].node);
            // Merged writes: each stretch of the writer's reads gets the copy set the
            // program chose for this state, and its closing write returns to the state.
            let mut j = end + 1;
            while j <= self.writes[i].last {
                let reads = refs[j..].iter().take_while(|r| !r.write).count();
                if reads > 0 {
                    let set = self.stretch_set(write_locs[i], refs[j].node, reads as f64);
                    moved(&mut res, set, j, &mut changes);
                    // A stretch is one node's: its reads all cost the same.
                    res.read_many(refs[j].node, reads as u64);
                }
                moved(&mut res, write_locs[i], j + reads, &mut changes);
                res.write(refs[j + reads].node);
                j += reads + 1;
            }
        }
        let start = self.writes[w - 1].last + 1;
        self.run(
            refs,
            start..refs.len(),
            &mut counts,
            &mut readers,
            last_glob,
            write_locs[w - 1],
            None,
            &mut res,
            &mut changes,
        );
        Solution {
            cost: res.tally.cost(c),
            tally: res.tally,
            changes,
        }
    }

    /// The copy set for `c` reads by node `x` while the page stays at `at` (merged writes):
    /// the cheapest of staying, a copy at x, a global copy, as `stretch_cost` prices them.
    fn stretch_set(&self, at: LocSet, x: u16, c: f64) -> LocSet {
        let cost = &self.c;
        let xb = node_bit(x);
        if at == xb {
            return at;
        }
        if at == GLOBAL_BIT {
            return if cost.big_g + c < cost.g * c { at | xb } else { at };
        }
        let (stay, copy, global) = (cost.r * c, cost.big_r + c, cost.big_g + cost.g * c);
        if stay <= copy && stay <= global {
            at
        } else if copy <= global {
            at | xb
        } else {
            at | GLOBAL_BIT
        }
    }

    /// Replays the read-run refs[start..end] from `a`: the copy set is chosen at its first
    /// read by the per-node rule, and kept until the write.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        refs: &[Ref],
        span: std::ops::Range<usize>,
        counts: &mut [u32],
        readers: &mut Vec<u16>,
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
        // Each reader's count decides its copy; the set then stays for the whole run, so
        // the reads are charged per reader.
        readers.clear();
        for r in &refs[start..end] {
            let n = &mut counts[r.node as usize];
            if *n == 0 {
                readers.push(r.node);
            }
            *n += 1;
        }
        let mut set = a;
        if with_global {
            set |= GLOBAL_BIT;
        }
        for &x in readers.iter() {
            let cj = counts[x as usize] as f64;
            let worth = if with_global {
                c.big_g + cj < c.g * cj
            } else {
                c.big_r + cj < c.r * cj
            };
            if worth {
                set |= node_bit(x);
            }
        }
        // The next write's node gets its copy now (it pays R or G either way, and its reads gain).
        if let Some(b) = b {
            if b != GLOBAL_BIT {
                set |= b;
            }
        }
        moved(res, set, start, changes);
        for &x in readers.iter() {
            res.read_many(x, counts[x as usize] as u64);
            counts[x as usize] = 0;
        }
    }
}

/// What `c` reads by the writer cost while the page stays at a node other than the writer
/// (`in_global` false: stay remote, copy to the writer, or copy to global memory) or in
/// global memory (stay, or copy to the writer). A copy to both is never cheaper: R <= 2G.
fn stretch_cost(cost: &Costs, c: f64, in_global: bool) -> f64 {
    if in_global {
        (cost.g * c).min(cost.big_g + c)
    } else {
        let best = (cost.r * c).min(cost.big_r + c);
        if cost.has_global() { best.min(cost.big_g + cost.g * c) } else { best }
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

#[cfg(test)]
mod least_values {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The short list of least raw values answers like a scan of every slot, whatever
        /// the sequence of value changes and touched sets.
        #[test]
        fn two_least_untouched_matches_a_scan(
            slots in 2usize..60,
            ops in prop::collection::vec((0usize..60, -50i32..50, prop::collection::vec(0usize..60, 0..4)), 1..300),
        ) {
            let costs = Costs { r: 2.0, big_r: 10.0, g: f64::INFINITY, big_g: f64::INFINITY };
            let mut o = Optimal::new(slots, costs);
            for n in 0..slots as u16 {
                o.slot(n, 0.0, 0);
            }
            for (s, v, touched) in ops {
                if v % 3 == 0 {
                    // Raise the least value, as a write does to the node it serves.
                    let least = (0..slots).min_by(|&a, &b| o.raw[a].total_cmp(&o.raw[b])).unwrap();
                    o.set_raw(least, o.raw[least] + 60.0);
                } else {
                    o.set_raw(s % slots, v as f64);
                }
                for t in &touched {
                    o.is_touched[t % slots] = true;
                }
                let (r1, _, r2, _) = o.two_least_untouched();
                let mut free: Vec<f64> = (0..slots).filter(|&j| !o.is_touched[j]).map(|j| o.raw[j]).collect();
                free.sort_by(f64::total_cmp);
                prop_assert_eq!(r1, free.first().copied().unwrap_or(f64::INFINITY));
                prop_assert_eq!(r2, free.get(1).copied().unwrap_or(f64::INFINITY));
                o.is_touched.iter_mut().for_each(|t| *t = false);
            }
        }
    }
}
