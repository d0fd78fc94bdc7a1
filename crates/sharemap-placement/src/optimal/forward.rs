//! The forward pass: the dynamic program over a page's writes, keeping each node's value
//! lazily and the least value remembered between writes.

use super::*;

/// The least values (with their nodes) among a set of nodes; the second only when asked
/// for (`TWO`).
#[derive(Clone, Copy)]
pub(super) struct Least {
    pub(super) v1: f64,
    pub(super) a1: u16,
    pub(super) v2: f64,
    pub(super) a2: u16,
}

impl Least {
    const EMPTY: Least = Least { v1: INF, a1: NONE, v2: INF, a2: NONE };

    #[inline]
    pub(super) fn offer<const TWO: bool>(&mut self, v: f64, a: u16) {
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
    pub(super) fn lower(&mut self, v: f64, a: u16) {
        if a == self.a1 || v < self.v1 {
            (self.v1, self.a1) = (v, a);
        }
    }
}

/// The least value of `raw` (a multiple of LANES long) and its index; INFINITY and NONE
/// when every value is infinite. The minima are taken lane by lane, which compiles to packed
/// instructions.
pub(super) fn scan(raw: &[f64]) -> Least {
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

/// The forward pass's reading of a page: the next reference, or the next one if it
/// qualifies. A slice is read by index (the common case, and the fastest); a page read
/// window by window through a peekable pass.
pub(super) trait Cursor {
    fn next(&mut self) -> Option<Ref>;
    fn next_if(&mut self, f: impl FnOnce(&Ref) -> bool) -> Option<Ref>;
}

pub(super) struct SliceCursor<'a> {
    pub refs: &'a [Ref],
    pub pos: usize,
}

impl Cursor for SliceCursor<'_> {
    #[inline(always)]
    fn next(&mut self) -> Option<Ref> {
        let r = self.refs.get(self.pos).copied();
        self.pos += 1;
        r
    }

    #[inline(always)]
    fn next_if(&mut self, f: impl FnOnce(&Ref) -> bool) -> Option<Ref> {
        let r = self.refs.get(self.pos).copied().filter(f);
        self.pos += r.is_some() as usize;
        r
    }
}

impl<I: Iterator<Item = Ref>> Cursor for std::iter::Peekable<I> {
    #[inline(always)]
    fn next(&mut self) -> Option<Ref> {
        Iterator::next(self)
    }

    #[inline(always)]
    fn next_if(&mut self, f: impl FnOnce(&Ref) -> bool) -> Option<Ref> {
        std::iter::Peekable::next_if(self, f)
    }
}

impl Optimal {
    /// The dynamic program over the page's writes (`GLOBAL`: the machine has global memory).
    #[inline(never)]
    pub(super) fn forward<const GLOBAL: bool>(&mut self, refs: impl Cursor, first_write: usize) -> End {
        let c = self.c;
        let big_g = if GLOBAL { c.big_g } else { 0.0 };
        let nodes = self.nodes;
        // The hot state lives in locals and split borrows, so the per-reference path keeps
        // it in registers.
        let t: &mut Nodes = &mut self.t;
        let writes = &mut self.writes;
        let entries = &mut self.entries;
        let stretches = &mut self.stretches;
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
        let mut refs = refs;
        for _ in 0..first_write {
            refs.next();
        }
        let x0 = refs.next().expect("the first write is there").node;
        t.raw[..nodes].fill(rest_raw);
        t.raw[ix(x0)] = lead + 1.0;
        entries.push(Entry { prev_raw: rest_raw, count: 0, node: x0, code: A_SELF });
        // The least raw values, remembered from write to write.
        let mut least = scan(&t.raw[..padded]);
        // The latest write, still growing by merged writes; the walk back gets it once the
        // next write is recorded.
        let mut cur = Write {
            index: first_write,
            last: first_write,
            run_start: 0,
            max_reads: 0,
            merged: 0,
            entries: 1,
            node: x0,
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
        };
        let mut last_writer = x0;
        let mut w = 1usize;

        // The index of the next reference `refs` gives.
        let mut next = first_write + 1;
        while let Some(rf) = refs.next() {
            let i = next;
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
                let mut reads_before = t.count[xi];
                let mut v = t.raw[xi];
                let mut last = i;
                let mut max_reads = t.count[xi];
                let pending = loop {
                    stretches.push(reads_before);
                    cur.merged += 1;
                    let cx = reads_before as f64;
                    let mine = min2(v + k_all, cap_all) + cx + 1.0;
                    let other = c.r + stretch_cost(&c, cx, false);
                    k_all += other;
                    cap_all += other;
                    v = mine - k_all;
                    if GLOBAL {
                        glob += c.g + stretch_cost(&c, cx, true);
                    }
                    let mut reads = 0u32;
                    while refs.next_if(|r| r.node == x && !r.write).is_some() {
                        reads += 1;
                        next += 1;
                    }
                    if refs.next_if(|r| r.node == x).is_some() {
                        reads_before = reads;
                        max_reads = max_reads.max(reads);
                        last = next;
                        next += 1;
                    } else {
                        break reads;
                    }
                };
                // The writer's value went down (its stretch is cheaper than anyone else's).
                t.raw[xi] = v;
                least.lower(v, x);
                cur.last = last;
                cur.max_reads = cur.max_reads.max(max_reads);
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
                t.prev[ix(n)] = t.raw[j];
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
                entries.push(Entry { prev_raw: t.prev[ix(n)], count: t.count[j], node, code });
                t.count[j] = 0;
                least.offer::<false>(v, node);
            }
            let entries_here = touched_len as u32;
            touched_len = 0;
            next_run(&mut run, t);
            let run_start = cur.last + 1;
            writes.push(cur);
            cur = Write {
                index: i,
                last: i,
                run_start,
                max_reads: 0,
                merged: 0,
                entries: entries_here,
                node: x,
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
            };
            last_writer = x;
            w += 1;
        }
        writes.push(cur);
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
        End { cost: best.0, state: best.1, glob: best.2, writes: w }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
