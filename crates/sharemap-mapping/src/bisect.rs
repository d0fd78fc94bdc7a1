//! Top-down recursive bisection, in the manner of Scotch's dual recursive bipartitioning:
//! the threads are split into as many equal parts as the top level of the tree has
//! children, by halving, so that the sharing cut between parts is small; each part then
//! goes down to its child and is split again, down to the PUs. Each halving grows one side
//! greedily from a seed thread and improves the cut with Kernighan-Lin swap passes (swaps
//! keep the sizes exact, as every PU takes its share). Cutting at the top first is what
//! matters most: the top levels are the costliest to share across.

use crate::groups::Dense as DenseOf;

/// Sharing in single precision: decisions only; costs are summed in f64 elsewhere.
type Dense = DenseOf<f32>;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

/// Padding elements (no sharing) fill the slots no thread takes.
const PAD: usize = usize::MAX;

/// Scotch-like recursive bisection.
pub struct Bisection;

impl crate::algorithm::MappingAlgorithm for Bisection {
    fn spec(&self) -> String {
        "bisection".into()
    }
    fn map(
        &self,
        m: &SharingMatrix,
        machine: &Machine,
        _: &crate::cost::PairCosts,
    ) -> Result<Vec<usize>, crate::algorithm::MappingError> {
        Ok(bisection(m, machine))
    }
}

/// Maps the matrix's threads to logical PUs.
pub(crate) fn bisection(m: &SharingMatrix, machine: &Machine) -> Vec<usize> {
    let n = m.threads();
    let p = machine.pu_count();
    // Children per object at each level, from the top (the machine's own children first).
    let top = machine.levels.first().map_or(1, |l| l.objs.len());
    let below = machine.levels.windows(2).map(|w| (w[1].objs.len() / w[0].objs.len().max(1)).max(1));
    let arities: Vec<usize> = std::iter::once(top).chain(below).filter(|&a| a > 1).collect();
    let per_pu = n.div_ceil(p).max(1);
    let total = p * per_pu;
    let elems: Vec<usize> = (0..total).map(|t| if t < n { t } else { PAD }).collect();
    let mut d = Dense { k: total, cells: vec![0.0; total * total] };
    for i in 0..n {
        for j in 0..n {
            d.cells[i * total + j] = m.get(i, j) as f32;
        }
    }
    let mut slots = Vec::with_capacity(total);
    let load = d.loads();
    place(Part { elems, d, load }, &arities, &mut slots);
    let mut map = vec![0usize; n];
    for (slot, t) in slots.into_iter().enumerate() {
        if t != PAD {
            map[t] = slot / per_pu % p;
        }
    }
    map
}

/// A set of threads and the sharing among them (by position in the set).
struct Part {
    elems: Vec<usize>,
    d: Dense,
    /// Each member's total sharing within the part.
    load: Vec<f32>,
}

impl Part {
    /// The members at `positions`, with their sharing gathered from this part's matrix
    /// (compact rows: far fewer cache misses than gathering from the whole matrix).
    fn subset(&self, positions: &[usize]) -> Part {
        let k = positions.len();
        let mut cells = Vec::with_capacity(k * k);
        let mut load = Vec::with_capacity(k);
        for &i in positions {
            let row = self.d.row(i);
            let start = cells.len();
            cells.extend(positions.iter().map(|&j| row[j]));
            load.push(cells[start..].iter().sum());
        }
        Part { elems: positions.iter().map(|&i| self.elems[i]).collect(), d: Dense { k, cells }, load }
    }
}

/// Splits `part` for the levels `arities` (top first) and appends its threads in slot order.
fn place(part: Part, arities: &[usize], out: &mut Vec<usize>) {
    let Some((&arity, below)) = arities.split_first() else {
        out.extend(part.elems);
        return;
    };
    // The pieces go down independently; large ones in parallel.
    let pieces = split(part, arity);
    if pieces.first().is_some_and(|p| p.elems.len() >= 64) {
        use rayon::prelude::*;
        let placed: Vec<Vec<usize>> = pieces
            .into_par_iter()
            .map(|piece| {
                let mut slots = Vec::with_capacity(piece.elems.len());
                place(piece, below, &mut slots);
                slots
            })
            .collect();
        out.extend(placed.into_iter().flatten());
    } else {
        for piece in pieces {
            place(piece, below, out);
        }
    }
}

/// `parts` equal parts of `part` (its size is a multiple of `parts`), by halving.
fn split(part: Part, parts: usize) -> Vec<Part> {
    if parts <= 1 || part.elems.len() <= 1 {
        return vec![part];
    }
    let left_parts = parts / 2;
    let left_size = part.elems.len() / parts * left_parts;
    let (a, b) = halve(&part, left_size);
    drop(part);
    // The halves are independent: large ones are split on two threads.
    let (mut out, right) = if a.elems.len() >= 64 {
        rayon::join(|| split(a, left_parts), || split(b, parts - left_parts))
    } else {
        (split(a, left_parts), split(b, parts - left_parts))
    };
    out.extend(right);
    out
}

/// Two sides of `part`, the first of `size` elements, with a small cut.
#[inline(never)]
fn halve(part: &Part, size: usize) -> (Part, Part) {
    let (d, elems, load) = (&part.d, &part.elems, &part.load);
    let k = d.k;
    let side = if load.iter().all(|&l| l == 0.0) {
        (0..k).map(|i| i < size).collect()
    } else {
        // Seeds: the least loaded thread (a chain's end, a grid's corner) and the most loaded.
        let by_load = |better: fn(f32, f32) -> bool| {
            (0..k).filter(|&i| elems[i] != PAD).fold(None, |b: Option<usize>, i| match b {
                Some(j) if !better(load[i], load[j]) => Some(j),
                _ => Some(i),
            })
        };
        let seeds = [by_load(|a, b| a < b), by_load(|a, b| a > b)];
        // Both seeds grow a side; the smaller cut is refined.
        let mut best: Option<Grown> = None;
        for seed in seeds.into_iter().flatten() {
            let g = grow(d, load, seed, size);
            if best.as_ref().is_none_or(|b| g.cut < b.cut) {
                best = Some(g);
            }
        }
        let Grown { mut in_a, to_a, .. } = best.expect("a seed");
        // D[v] from what the growth already summed: load - 2 x (sharing on v's own side).
        let gain: Vec<f32> =
            (0..k).map(|v| if in_a[v] { load[v] - 2.0 * to_a[v] } else { 2.0 * to_a[v] - load[v] }).collect();
        refine(d, &mut in_a, gain, load.iter().sum());
        in_a
    };
    let (a, b): (Vec<usize>, Vec<usize>) = (0..k).partition(|&i| side[i]);
    (part.subset(&a), part.subset(&b))
}

/// A grown side: its members, every element's sharing with it, and the cut.
struct Grown {
    in_a: Vec<bool>,
    to_a: Vec<f32>,
    cut: f32,
}

/// Greedy growth of side A from `seed` to `size` elements: each step takes the element
/// whose sharing with A most exceeds its sharing with the rest.
#[inline(never)]
fn grow(d: &Dense, load: &[f32], seed: usize, size: usize) -> Grown {
    let k = d.k;
    let mut in_a = vec![false; k];
    let mut to_a = vec![0.0f32; k];
    let mut next = seed;
    // The cut: the sharing of A's members with the rest.
    let mut cut = 0.0;
    // Each candidate's score 2 * (sharing with A) - load; members are out of the running.
    let mut score: Vec<f32> = load.iter().map(|&l| -l).collect();
    for _ in 0..size {
        in_a[next] = true;
        cut += load[next] - 2.0 * to_a[next];
        score[next] = f32::NEG_INFINITY;
        // One sweep updates the scores and finds the next member.
        let (mut best, mut best_at) = (f32::NEG_INFINITY, next);
        for (x, ((t, s), &v)) in to_a.iter_mut().zip(score.iter_mut()).zip(d.row(next)).enumerate() {
            *t += v;
            *s += 2.0 * v;
            if *s > best {
                best = *s;
                best_at = x;
            }
        }
        next = best_at;
    }
    Grown { in_a, to_a, cut }
}

/// Candidates examined on each side per swap.
const TOP: usize = 4;

/// Kernighan-Lin passes of swaps. Each pass swaps the best pair among the few elements of
/// each side that gain most on their own, locks them, and keeps the prefix of swaps with the
/// largest total gain.
/// `gain` holds each element's D: sharing across the cut minus sharing on its own side; it
/// is kept up to date by the swaps. Gains below 1e-5 of all sharing are not pursued, and a
/// pass makes at most 32 + k/8 swaps: the growth leaves little to fix, and each swap costs
/// O(k).
#[inline(never)]
fn refine(d: &Dense, in_a: &mut [bool], mut gain: Vec<f32>, all_sharing: f32) {
    let k = d.k;
    let eps = 1e-5 * all_sharing;
    let max_steps = (32 + k / 8).min(64);
    let mut locked = vec![false; k];
    let mut swaps: Vec<(usize, usize)> = Vec::new();
    for _pass in 0..3 {
        locked.fill(false);
        swaps.clear();
        let (mut total, mut best_total, mut best_len) = (0.0f32, 0.0f32, 0usize);
        let mut tops = Tops::new();
        for v in 0..k {
            tops.offer(in_a[v], gain[v], v);
        }
        loop {
            let mut pick: Option<(f32, usize, usize)> = None;
            for &(ga, a) in tops.side(true) {
                for &(gb, b) in tops.side(false) {
                    let g = ga + gb - 2.0 * d.get(a, b);
                    if pick.is_none_or(|(pg, _, _)| g > pg) {
                        pick = Some((g, a, b));
                    }
                }
            }
            let Some((g, a, b)) = pick.filter(|_| swaps.len() < max_steps) else { break };
            locked[a] = true;
            locked[b] = true;
            tops = swap(d, in_a, &mut gain, &locked, a, b);
            swaps.push((a, b));
            total += g;
            if total > best_total + eps {
                best_total = total;
                best_len = swaps.len();
            } else if swaps.len() - best_len > 32 {
                // A long run without a new best: the pass has found what it will.
                break;
            }
        }
        for &(a, b) in swaps[best_len..].iter().rev() {
            swap(d, in_a, &mut gain, &locked, a, b);
        }
        if best_len == 0 {
            break;
        }
    }
}

/// Swaps the sides of `a` and `b`, updates every D, and returns the best unlocked elements
/// of each side for the next step (found in the same sweep).
fn swap(d: &Dense, in_a: &mut [bool], gain: &mut [f32], locked: &[bool], a: usize, b: usize) -> Tops {
    let (ab, before_a, before_b) = (d.get(a, b), gain[a], gain[b]);
    in_a.swap(a, b);
    let b_side = in_a[b];
    let (row_a, row_b) = (d.row(a), d.row(b));
    // v on a's old side (now b's) gains 2(m[v][a] - m[v][b]); the other side loses it.
    // (A branch-free loop, so that it vectorises.)
    for (((g, &side), &wa), &wb) in gain.iter_mut().zip(in_a.iter()).zip(row_a).zip(row_b) {
        let sign = if side == b_side { 2.0 } else { -2.0 };
        *g += sign * (wa - wb);
    }
    let mut tops = Tops::new();
    for v in 0..d.k {
        if !locked[v] && v != a && v != b {
            tops.offer(in_a[v], gain[v], v);
        }
    }
    // a and b themselves changed sides: what was across is now on their side and the
    // reverse, except their own pair, which is across both before and after.
    gain[a] = 2.0 * ab - before_a;
    gain[b] = 2.0 * ab - before_b;
    for x in [a, b] {
        if !locked[x] {
            tops.offer(in_a[x], gain[x], x);
        }
    }
    tops
}

/// The `TOP` unlocked elements of each side with the largest D, best first.
struct Tops {
    best: [[(f32, usize); TOP]; 2],
    len: [usize; 2],
}

impl Tops {
    fn new() -> Self {
        Tops { best: [[(f32::NEG_INFINITY, 0); TOP]; 2], len: [0; 2] }
    }

    #[inline]
    fn offer(&mut self, side: bool, g: f32, v: usize) {
        let (list, len) = (&mut self.best[side as usize], &mut self.len[side as usize]);
        if *len == TOP && g <= list[TOP - 1].0 {
            return;
        }
        let mut i = (*len).min(TOP - 1);
        while i > 0 && list[i - 1].0 < g {
            list[i] = list[i - 1];
            i -= 1;
        }
        list[i] = (g, v);
        *len = (*len + 1).min(TOP);
    }

    fn side(&self, side: bool) -> &[(f32, usize)] {
        &self.best[side as usize][..self.len[side as usize]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(m: &SharingMatrix) -> Part {
        let n = m.threads();
        let d = Dense { k: n, cells: (0..n * n).map(|c| m.get(c / n, c % n) as f32).collect() };
        Part { elems: (0..n).collect(), load: d.loads(), d }
    }

    #[test]
    fn a_scrambled_chain_is_cut_once() {
        // A chain over 16 threads in scrambled order: halving must cut one link only.
        let order = [5, 12, 0, 9, 14, 3, 7, 1, 10, 15, 2, 8, 13, 4, 11, 6];
        let mut m = SharingMatrix::new(16);
        for w in order.windows(2) {
            m.add(w[0], w[1], 10.0);
        }
        let (a, b) = halve(&whole(&m), 8);
        let (a, b) = (a.elems, b.elems);
        assert_eq!((a.len(), b.len()), (8, 8));
        let cut: f64 = a.iter().flat_map(|&x| b.iter().map(move |&y| (x, y))).map(|(x, y)| m.get(x, y)).sum();
        assert_eq!(cut, 10.0);
    }

    fn d_from_scratch(d: &Dense, in_a: &[bool]) -> Vec<f32> {
        (0..d.k).map(|v| (0..d.k).map(|u| if in_a[u] == in_a[v] { -d.get(v, u) } else { d.get(v, u) }).sum()).collect()
    }

    proptest::proptest! {
        /// The D values a swap maintains are those computed from scratch.
        #[test]
        fn swaps_keep_d_exact(k in 4usize..12, cells in proptest::collection::vec(0u8..9, 144), sides in proptest::collection::vec(proptest::bool::ANY, 12), picks in proptest::collection::vec((0usize..12, 0usize..12), 1..6)) {
            let mut d = Dense { k, cells: vec![0.0; k * k] };
            for a in 0..k {
                for b in a + 1..k {
                    let w = cells[a * 12 + b] as f32;
                    d.cells[a * k + b] = w;
                    d.cells[b * k + a] = w;
                }
            }
            let mut in_a: Vec<bool> = sides[..k].to_vec();
            let mut gain = d_from_scratch(&d, &in_a);
            let locked = vec![false; k];
            for (x, y) in picks {
                let (x, y) = (x % k, y % k);
                if in_a[x] == in_a[y] {
                    continue;
                }
                let tops = swap(&d, &mut in_a, &mut gain, &locked, x, y);
                let exact = d_from_scratch(&d, &in_a);
                for v in 0..k {
                    proptest::prop_assert!((gain[v] - exact[v]).abs() < 1e-9, "D[{}] {} vs {}", v, gain[v], exact[v]);
                }
                // The tops are the largest D of each side.
                for side in [true, false] {
                    let mut of_side: Vec<f32> = (0..k).filter(|&v| in_a[v] == side).map(|v| exact[v]).collect();
                    of_side.sort_by(|a, b| b.total_cmp(a));
                    let got: Vec<f32> = tops.side(side).iter().map(|t| t.0).collect();
                    proptest::prop_assert_eq!(got.len(), of_side.len().min(TOP));
                    for (g, e) in got.iter().zip(&of_side) {
                        proptest::prop_assert!((g - e).abs() < 1e-9);
                    }
                }
            }
        }
    }

    #[test]
    fn swaps_never_change_the_sizes() {
        let mut m = SharingMatrix::new(12);
        for i in 0..12 {
            m.add(i, (i * 7 + 3) % 12, 1.0 + i as f64);
        }
        for size in [3, 4, 6, 9] {
            let (a, b) = halve(&whole(&m), size);
            assert_eq!((a.elems.len(), b.elems.len()), (size, 12 - size));
            // The parts' matrices are the original sharing among their members.
            for part in [&a, &b] {
                assert_eq!(part.load, part.d.loads());
                for (i, &x) in part.elems.iter().enumerate() {
                    for (j, &y) in part.elems.iter().enumerate() {
                        assert_eq!(part.d.get(i, j), m.get(x, y) as f32);
                    }
                }
            }
        }
    }
}
