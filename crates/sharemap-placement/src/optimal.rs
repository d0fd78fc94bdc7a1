//! The exact off-line optimal placement of one page (seed 004 section 3), by dynamic
//! programming over the page's writes. docs/placement/optimal.md derives it; in short:
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
//! (K, Cap) for all: a write costs O(nodes touched in its run), plus the least raw value
//! among the other nodes. That least value is remembered from write to write and only
//! looked for again, by a scan of every node in lanes, when its holder is touched.
//!
//! Each write's touched nodes leave an entry (how they were reached, their reads in the
//! run, their new raw value). One walk back from the final state follows the codes, reads
//! an untouched node's value from its latest earlier entry, and charges the placement it
//! finds from the entries, without replaying the trace.

use crate::cost::{Costs, GLOBAL_BIT, LocSet, Residence, Tally, node_bit};
use crate::page::Ref;

const NONE: u16 = u16::MAX;
/// The state id of global memory.
const GLOB: u16 = u16::MAX - 1;
const NO_ENTRY: u32 = u32::MAX;
/// The value arrays are padded with +inf to a multiple of this, so scans run in lanes.
const LANES: usize = 8;
const INF: f64 = f64::INFINITY;

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

/// What the walk back needs to know about one write.
struct Write {
    /// Index of the write in the page's references.
    index: usize,
    /// Index of the last write merged into this one (see `forward`): `index..=last` are
    /// consecutive writes by one node, and the page stays put.
    last: usize,
    /// The most reads the writer made before one of those merged writes.
    max_reads: u32,
    /// This write's first entry; its entries end where the next write's begin.
    entries: u32,
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
}

/// A node touched in a write's run: how it was reached at the write, its reads in the run,
/// and its raw value from the next write on.
struct Entry {
    raw: f64,
    write: u32,
    /// The node's previous entry.
    prev: u32,
    count: u32,
    node: u16,
    code: u8,
}

/// The least values (with their nodes) among a set of nodes; the second only when asked
/// for (`TWO`).
#[derive(Clone, Copy)]
struct Least {
    v1: f64,
    a1: u16,
    v2: f64,
    a2: u16,
}

impl Least {
    const EMPTY: Least = Least { v1: INF, a1: NONE, v2: INF, a2: NONE };

    #[inline]
    fn offer<const TWO: bool>(&mut self, v: f64, a: u16) {
        if v < self.v1 {
            if TWO {
                (self.v2, self.a2) = (self.v1, self.a1);
            }
            (self.v1, self.a1) = (v, a);
        } else if TWO && v < self.v2 {
            (self.v2, self.a2) = (v, a);
        }
    }

    /// Node `a`'s value went down to `v` (one least value kept).
    #[inline]
    fn lower(&mut self, v: f64, a: u16) {
        if a == self.a1 || v < self.v1 {
            (self.v1, self.a1) = (v, a);
        }
    }
}

/// The least value of `raw` (a multiple of LANES long) and its index; INFINITY and NONE
/// when every value is infinite. The minima are taken lane by lane, which compiles to packed
/// instructions.
fn scan(raw: &[f64]) -> Least {
    let mut lanes = [INF; LANES];
    for chunk in raw.chunks_exact(LANES) {
        for l in 0..LANES {
            lanes[l] = min2(lanes[l], chunk[l]);
        }
    }
    let v1 = lanes.iter().fold(INF, |a, &b| min2(a, b));
    if v1 == INF {
        return Least::EMPTY;
    }
    // Where it first is: a chunk's lanes compared at once, a bit each.
    let mut a1 = NONE;
    for (c, chunk) in raw.chunks_exact(LANES).enumerate() {
        let hits = chunk.iter().enumerate().fold(0u32, |h, (l, &x)| h | ((x == v1) as u32) << l);
        if hits != 0 {
            a1 = (c * LANES) as u16 + hits.trailing_zeros() as u16;
            break;
        }
    }
    Least { v1, a1, ..Least::EMPTY }
}

/// Per-node state. Indexed by `node & 127` (see `ix`): node ids are below 128, and a fixed
/// size lets the compiler drop the bounds checks from the per-reference path.
struct Nodes {
    /// The lazy value (the true value is min(raw + K, Cap)); +inf for padding and, during a
    /// write, for the nodes touched in its run, so that a scan sees only the others.
    raw: [f64; 128],
    /// Reads in the current run.
    count: [u32; 128],
    /// The run in which the node was last touched (`Optimal::run`).
    stamp: [u32; 128],
    /// The node's latest entry, and the entry the walk back is at.
    head: [u32; 128],
    cursor: [u32; 128],
    /// Nodes touched in the current run, in order, and per position: true value, savings
    /// d and dg.
    touched: [u16; 128],
    tv: [f64; 128],
    d: [f64; 128],
    dg: [f64; 128],
}

#[inline(always)]
fn ix(n: impl Into<usize>) -> usize {
    n.into() & 127
}

/// Moves on to the next run's number: no node's stamp equals it.
#[inline]
fn next_run(run: &mut u32, t: &mut Nodes) {
    *run = run.wrapping_add(1);
    if *run == 0 {
        // Stamps wrapped around: none may look current.
        t.stamp = [0; 128];
        *run = 1;
    }
}

/// The lesser of two costs, which are never NaN here: one instruction, where `f64::min`
/// adds a NaN test.
#[inline(always)]
fn min2(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// Reusable solver for one machine; holds its scratch space between pages.
pub struct Optimal {
    nodes: usize,
    /// `nodes` rounded up to LANES: the part of `raw` a scan reads.
    padded: usize,
    c: Costs,
    /// The most reads in a stretch for which the page stays where it is, when it is at a
    /// node other than the writer's, and when it is in global memory (see `stretch_set`).
    stay_at_node: u32,
    stay_in_global: u32,
    /// The fewest reads for which a node's copy pays in a run without global memory, and
    /// in one with (see `charge_run`).
    copy_from: u32,
    copy_from_global: u32,
    t: Box<Nodes>,
    /// How many nodes are in `t.touched`.
    touched_len: usize,
    /// The current run's number: a node is touched in it when its stamp equals it.
    run: u32,
    /// Nodes with entries (what a new page must reset besides the values).
    seen: Vec<u16>,
    writes: Vec<Write>,
    entries: Vec<Entry>,
}

/// Where the forward pass ended: the optimum, the final state, whether the trailing run has
/// a global copy, and the starting raw value (that of every node without entries).
struct End {
    cost: f64,
    state: u16,
    glob: bool,
    rest_raw: f64,
}

impl Optimal {
    pub fn new(nodes: usize, costs: Costs) -> Self {
        assert!((1..=crate::cost::MAX_NODES).contains(&nodes));
        Optimal {
            nodes,
            padded: nodes.div_ceil(LANES) * LANES,
            c: costs,
            stay_at_node: most_reads_kept(&costs, false),
            stay_in_global: most_reads_kept(&costs, true),
            copy_from: fewest_reads_copied(&costs, false),
            copy_from_global: fewest_reads_copied(&costs, true),
            t: Box::new(Nodes {
                raw: [INF; 128],
                count: [0; 128],
                stamp: [0; 128],
                head: [NO_ENTRY; 128],
                cursor: [NO_ENTRY; 128],
                touched: [0; 128],
                tv: [0.0; 128],
                d: [0.0; 128],
                dg: [0.0; 128],
            }),
            touched_len: 0,
            run: 1,
            seen: Vec::with_capacity(nodes),
            writes: Vec::new(),
            entries: Vec::new(),
        }
    }

    pub fn costs(&self) -> &Costs {
        &self.c
    }

    /// Forgets the previous page: the nodes with entries, and the reads of its last run
    /// (the values are set for every node at the page's first write).
    fn reset(&mut self) {
        for &n in &self.seen {
            self.t.head[ix(n)] = NO_ENTRY;
            self.t.cursor[ix(n)] = NO_ENTRY;
        }
        self.seen.clear();
        for n in 0..self.touched_len {
            let node = self.t.touched[ix(n)];
            self.t.count[ix(node)] = 0;
        }
        self.touched_len = 0;
        next_run(&mut self.run, &mut self.t);
        self.writes.clear();
        self.entries.clear();
    }

    /// Solves one page: its references must be in trace order, from nodes below `nodes`.
    pub fn solve(&mut self, refs: &[Ref]) -> Solution {
        debug_assert!(
            refs.iter().all(|r| (r.node as usize) < self.nodes),
            "a reference from a node beyond the machine's {}",
            self.nodes
        );
        let Some(first_write) = refs.iter().position(|r| r.write) else {
            // Never written: the free initial placement puts a copy at every reader.
            let set = refs.iter().fold(0, |s, r| s | node_bit(r.node));
            let tally = Tally { local: refs.len() as u64, ..Tally::default() };
            let changes = if refs.is_empty() { vec![] } else { vec![(0, set)] };
            return Solution { cost: refs.len() as f64, tally, changes };
        };
        // Used by one node only (private data, the common case): all local from the start.
        let only = refs[0].node;
        if refs.iter().all(|r| r.node == only) {
            let tally = Tally { local: refs.len() as u64, ..Tally::default() };
            return Solution { cost: refs.len() as f64, tally, changes: vec![(0, node_bit(only))] };
        }
        self.reset();
        let end = if self.c.has_global() {
            self.forward::<true>(refs, first_write)
        } else {
            self.forward::<false>(refs, first_write)
        };
        let solution = self.reconstruct(refs, first_write, &end);
        debug_assert!(
            (solution.tally.cost(&self.c) - end.cost).abs() <= 1e-6 * end.cost.max(1.0),
            "replayed optimum {} differs from the dynamic program's {}",
            solution.tally.cost(&self.c),
            end.cost
        );
        Solution { cost: end.cost, ..solution }
    }

    /// The dynamic program over the page's writes (`GLOBAL`: the machine has global memory).
    #[inline(never)]
    fn forward<const GLOBAL: bool>(&mut self, refs: &[Ref], first_write: usize) -> End {
        let c = self.c;
        let big_g = if GLOBAL { c.big_g } else { 0.0 };
        let nodes = self.nodes;
        // The hot state lives in locals and split borrows, so the per-reference path keeps
        // it in registers.
        let t: &mut Nodes = &mut self.t;
        let seen = &mut self.seen;
        let writes = &mut self.writes;
        let entries = &mut self.entries;
        let padded = self.padded;
        let mut run = self.run;
        let mut touched_len = 0usize;
        // Notes that `node` refers to the page in the current run. Without a branch on
        // whether it is new to the run (in a random order of nodes that branch is a coin
        // toss): the list's next slot is written either way.
        let touch = |t: &mut Nodes, touched_len: &mut usize, run: u32, node: u16| {
            let n = ix(node);
            t.touched[ix(*touched_len)] = node;
            *touched_len += (t.stamp[n] != run) as usize;
            t.stamp[n] = run;
        };

        // The first write: leading reads were all local for free, and the page may start anywhere.
        let lead = first_write as f64;
        let (mut k_all, mut cap_all) = (0.0f64, INF);
        let rest_raw = lead + c.r;
        let mut glob = lead + c.g;
        let x0 = refs[first_write].node;
        t.raw[..nodes].fill(rest_raw);
        t.raw[ix(x0)] = lead + 1.0;
        seen.push(x0);
        entries.push(Entry { raw: lead + 1.0, write: 0, prev: NO_ENTRY, count: 0, node: x0, code: A_SELF });
        t.head[ix(x0)] = 0;
        // The least raw values, remembered from write to write.
        let mut least = scan(&t.raw[..padded]);
        writes.push(Write {
            index: first_write,
            last: first_write,
            max_reads: 0,
            entries: 0,
            arg_u: NONE,
            arg_ug: NONE,
            arg_ug2: NONE,
            k_before: 0.0,
            cap_before: INF,
            add: 0.0,
            cap: INF,
            self_code: A_SELF,
            cap_code: A_SELF,
            glob_code: G_STAY,
        });
        let mut last_writer = x0;
        let mut w = 1u32;

        let mut next = first_write + 1;
        while next < refs.len() {
            let i = next;
            let rf = &refs[i];
            next += 1;
            if !rf.write {
                touch(t, &mut touched_len, run, rf.node);
                t.count[ix(rf.node)] += 1;
                continue;
            }
            let x = rf.node;
            let xi = ix(x);
            // A write by the node that made the previous write, with only that node's reads
            // in between, moves nothing (docs/placement/optimal.md): every state stays, and
            // only the copy set for those reads is chosen, the same way for every node but
            // the writer.
            let only_x = touched_len == 0 || (touched_len == 1 && t.touched[0] == x);
            if only_x && last_writer == x {
                // The same holds for each following write by that node while only it refers
                // to the page, so the whole stretch is taken here, in registers.
                let mut cx = t.count[xi] as f64;
                let mut v = t.raw[xi];
                let mut last = i;
                let mut max_reads = t.count[xi];
                let pending = loop {
                    let mine = min2(v + k_all, cap_all) + cx + 1.0;
                    let other = c.r + stretch_cost(&c, cx, false);
                    k_all += other;
                    cap_all += other;
                    v = mine - k_all;
                    if GLOBAL {
                        glob += c.g + stretch_cost(&c, cx, true);
                    }
                    let mut reads = 0u32;
                    while next < refs.len() && refs[next].node == x && !refs[next].write {
                        reads += 1;
                        next += 1;
                    }
                    if next < refs.len() && refs[next].node == x {
                        cx = reads as f64;
                        max_reads = max_reads.max(reads);
                        last = next;
                        next += 1;
                    } else {
                        break reads;
                    }
                };
                // The writer's value went down (its stretch is cheaper than anyone else's);
                // its entry of the previous write holds the value from the next write on.
                t.raw[xi] = v;
                entries[t.head[xi] as usize].raw = v;
                least.lower(v, x);
                let rec = writes.last_mut().expect("the first write is recorded");
                rec.last = last;
                rec.max_reads = rec.max_reads.max(max_reads);
                // The writer's reads after the stretch's last write open the next run.
                t.count[xi] = pending;
                touched_len = 0;
                next_run(&mut run, t);
                if pending > 0 {
                    touch(t, &mut touched_len, run, x);
                }
                continue;
            }
            touch(t, &mut touched_len, run, x);
            let (k_before, cap_before) = (k_all, cap_all);
            let true_val = |raw: f64| min2(raw + k_before, cap_before);

            // The run's per-node terms: F and Fg (sums of each node's cheapest way to serve
            // its reads), each node's savings d and dg, and its value, hidden from the scan.
            // The least adjusted costs U and Ug among these nodes come along.
            let (mut f_sum, mut fg_sum) = (0.0, 0.0);
            let (mut tu, mut tu_arg) = (INF, NONE);
            let mut tug = Least::EMPTY;
            for n in 0..touched_len {
                let node = t.touched[ix(n)];
                let j = ix(node);
                let cj = t.count[j] as f64;
                let v = true_val(t.raw[j]);
                let f = min2(c.big_r + cj, c.r * cj);
                f_sum += f;
                let d = cj - f;
                t.d[ix(n)] = d;
                if v + d < tu {
                    (tu, tu_arg) = (v + d, node);
                }
                if GLOBAL {
                    let fg = min2(c.big_g + cj, c.g * cj);
                    fg_sum += fg;
                    t.dg[ix(n)] = cj - fg;
                    tug.offer::<true>(v + cj - fg, node);
                }
                t.tv[ix(n)] = v;
                t.raw[j] = INF;
            }

            // The least raw value among untouched nodes: remembered unless its node is
            // touched. Only the least is needed, with global memory too: for a touched node
            // b, the least Ug over the other nodes is among the touched ones and the least
            // untouched one (no other untouched node is smaller, and none is b).
            let untouched =
                if least.a1 != NONE && t.stamp[ix(least.a1)] == run { scan(&t.raw[..padded]) } else { least };
            let m1 = if untouched.v1 < INF { true_val(untouched.v1) } else { INF };
            // Least adjusted costs over node states: untouched ones have d = dg = 0.
            let (mut min_u, mut arg_u) = (m1, untouched.a1);
            if tu < min_u {
                (min_u, arg_u) = (tu, tu_arg);
            }
            let (mut min_ug, mut arg_ug, mut min_ug2, mut arg_ug2) = (INF, NONE, INF, NONE);
            if GLOBAL {
                let mut ug = tug;
                ug.offer::<true>(m1, untouched.a1);
                (min_ug, arg_ug, min_ug2, arg_ug2) = (ug.v1, ug.a1, ug.v2, ug.a2);
            }

            // Untouched states all get V' = min(V + add, cap).
            let from_glob = glob + fg_sum + big_g;
            let (self_add, self_code) =
                if GLOBAL && big_g + fg_sum < f_sum { (big_g + fg_sum, B2_SELF) } else { (f_sum, A_SELF) };
            let (mut cap, mut cap_code) = (f_sum + min_u + c.big_r, A_MIN);
            if GLOBAL {
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
            if GLOBAL {
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
            k_all += add;
            cap_all = min2(cap_all + add, cap);

            // Touched states: the best of the cases in the module comment, explicitly.
            let first_entry = entries.len() as u32;
            least = untouched;
            for n in 0..touched_len {
                let node = t.touched[ix(n)];
                let j = ix(node);
                let (vb, db, dgb) = (t.tv[ix(n)], t.d[ix(n)], t.dg[ix(n)]);
                let (mut best, mut code) = (f_sum + vb + db, A_SELF);
                let via_min = f_sum + min_u + c.big_r + db;
                if via_min < best {
                    (best, code) = (via_min, A_MIN);
                }
                if GLOBAL {
                    let v = from_glob + dgb;
                    if v < best {
                        (best, code) = (v, B1);
                    }
                    let stay = big_g + fg_sum + dgb + vb;
                    if stay < best {
                        (best, code) = (stay, B2_SELF);
                    }
                    let other = if arg_ug == node { min_ug2 } else { min_ug };
                    let v = 2.0 * big_g + fg_sum + dgb + other;
                    if v < best {
                        (best, code) = (v, B2_MIN);
                    }
                }
                let node_cost = std::hint::select_unpredictable(node == x, 1.0, c.r);
                // New values never exceed the new cap (docs/placement/optimal.md), so
                // raw + K stands for them.
                let v = best + node_cost - k_all;
                t.raw[j] = v;
                if t.head[j] == NO_ENTRY {
                    seen.push(node);
                }
                entries.push(Entry { raw: v, write: w, prev: t.head[j], count: t.count[j], node, code });
                t.head[j] = entries.len() as u32 - 1;
                t.count[j] = 0;
                least.offer::<false>(v, node);
            }
            touched_len = 0;
            next_run(&mut run, t);
            writes.push(Write {
                index: i,
                last: i,
                max_reads: 0,
                entries: first_entry,
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
            });
            last_writer = x;
            w += 1;
        }
        // The walk back reads the trailing run's nodes; the next page goes on from `run`.
        self.touched_len = touched_len;
        self.run = run;

        // The trailing read-run, if any: no write constrains its end.
        let t = &self.t;
        let f = |cj: f64| min2(c.big_r + cj, c.r * cj);
        let fg = |cj: f64| min2(c.big_g + cj, c.g * cj);
        let (mut f_sum, mut fg_sum) = (0.0, 0.0);
        for n in 0..touched_len {
            let cj = t.count[ix(t.touched[ix(n)])] as f64;
            f_sum += f(cj);
            if GLOBAL {
                fg_sum += fg(cj);
            }
        }
        let mut best = (INF, NONE, false);
        let mut consider = |raw: f64, cj: f64, id: u16| {
            let v = min2(raw + k_all, cap_all);
            let u = v + f_sum + cj - f(cj);
            if u < best.0 {
                best = (u, id, false);
            }
            if GLOBAL {
                let ug = v + big_g + fg_sum + cj - fg(cj);
                if ug < best.0 {
                    best = (ug, id, true);
                }
            }
        };
        for n in 0..nodes as u16 {
            consider(t.raw[ix(n)], t.count[ix(n)] as f64, n);
        }
        if GLOBAL && glob + fg_sum < best.0 {
            best = (glob + fg_sum, GLOB, true);
        }
        End { cost: best.0, state: best.1, glob: best.2, rest_raw }
    }

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
    fn reconstruct(&mut self, refs: &[Ref], first_write: usize, end: &End) -> Solution {
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

/// Whether a stretch of `c` reads by the writer leaves the page where it is, at a node other
/// than the writer's or in global memory: staying costs no more than a copy at the writer
/// or (from a node) a copy in global memory. A copy to both never pays: R <= 2G.
fn stays(cost: &Costs, in_global: bool, c: f64) -> bool {
    if c == 0.0 {
        return true;
    }
    if in_global {
        cost.g * c <= cost.big_g + c
    } else {
        let stay = cost.r * c;
        stay <= cost.big_r + c && (!cost.has_global() || stay <= cost.big_g + cost.g * c)
    }
}

/// The most reads for which `stays` holds (it holds for every count up to some bound: each
/// side of each comparison grows linearly, staying the fastest).
fn most_reads_kept(cost: &Costs, in_global: bool) -> u32 {
    last_holding(|c| stays(cost, in_global, c))
}

/// Whether node's `c` reads in a run pay for a copy of their own (`with_global`: global
/// memory holds one during the run), as the dynamic program prices them.
fn copy_pays(cost: &Costs, with_global: bool, c: f64) -> bool {
    if with_global { cost.big_g + c < cost.g * c } else { cost.big_r + c < cost.r * c }
}

/// The fewest reads for which `copy_pays` holds (it holds from some count on: the copy's
/// side grows slowest; never for none, R and G being positive); u32::MAX if none does.
fn fewest_reads_copied(cost: &Costs, with_global: bool) -> u32 {
    last_holding(|c| !copy_pays(cost, with_global, c)).saturating_add(1)
}

/// The largest count for which `holds` does, given that it holds at 0 and, once false,
/// stays false; u32::MAX if it holds there. By bisection, on the very float comparison.
fn last_holding(holds: impl Fn(f64) -> bool) -> u32 {
    let (mut lo, mut hi) = (0u32, u32::MAX);
    if holds(hi as f64) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid as f64) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// What `c` reads by the writer cost while the page stays at a node other than the writer
/// (`in_global` false: stay remote, copy to the writer, or copy to global memory) or in
/// global memory (stay, or copy to the writer). A copy to both is never cheaper: R <= 2G.
fn stretch_cost(cost: &Costs, c: f64, in_global: bool) -> f64 {
    if in_global {
        min2(cost.g * c, cost.big_g + c)
    } else {
        let best = min2(cost.r * c, cost.big_r + c);
        if cost.has_global() { min2(best, cost.big_g + cost.g * c) } else { best }
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
mod internals {
    use super::*;
    use proptest::prelude::*;

    fn costs(r: f64, big_r: f64, global: Option<(f64, f64)>) -> Costs {
        let (g, big_g) = global.unwrap_or((INF, INF));
        Costs { r, big_r, g, big_g }
    }

    proptest! {
        /// The read-count thresholds found once per machine sit exactly where the cost
        /// comparisons they stand for change their answer.
        #[test]
        fn read_thresholds_match_the_comparisons(
            r in 1.01f64..20.0,
            big_r_over in 0.0f64..5000.0,
            global in prop::option::of((1.01f64..3.0, 0.0f64..3000.0)),
        ) {
            let big_r = 2.0 * r + 1e-9 + big_r_over;
            let global = global.map(|(g, extra)| {
                let g = g.min(r);
                let big_g = (2.0 * g + extra).max(big_r / 2.0).min(big_r);
                (g, big_g)
            });
            let c = costs(r, big_r, global);
            for in_global in [false, true] {
                if in_global && global.is_none() {
                    continue;
                }
                let keep = most_reads_kept(&c, in_global);
                prop_assert!(stays(&c, in_global, keep as f64));
                prop_assert!(keep == u32::MAX || !stays(&c, in_global, keep as f64 + 1.0));
                let copy = fewest_reads_copied(&c, in_global);
                prop_assert!(copy > 0 && !copy_pays(&c, in_global, copy as f64 - 1.0));
                prop_assert!(copy == u32::MAX || copy_pays(&c, in_global, copy as f64));
            }
        }
    }

    proptest! {
        /// The lane-wise scan finds the least value and where it first is, as sorting does,
        /// with padding and hidden entries (+inf) and repeated values.
        #[test]
        fn scan_matches_sorting(values in prop::collection::vec(prop_oneof![Just(INF), (-20i32..20).prop_map(f64::from)], 1..130)) {
            let mut raw = values.clone();
            raw.resize(values.len().div_ceil(LANES) * LANES, INF);
            let mut sorted: Vec<(f64, usize)> = raw.iter().copied().zip(0..).filter(|p| p.0 < INF).collect();
            sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let least = scan(&raw);
            match sorted.first() {
                None => prop_assert!(least.a1 == NONE && least.v1 == INF),
                Some(&(v, at)) => prop_assert_eq!((least.v1, least.a1 as usize), (v, at)),
            }
        }
    }
}
