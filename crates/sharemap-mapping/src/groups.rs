//! What the grouping algorithms share: a dense matrix between the elements of one tree
//! level, greedy grouping over it, and the bottom-up walk up the tree that EagerMap and
//! TreeMatch share.

use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

/// A dense symmetric matrix between the elements of one level (threads, then groups).
/// (f64 for the grouping; the bisection's large matrices use f32, half the memory traffic.)
pub(crate) struct Dense<T = f64> {
    pub k: usize,
    pub cells: Vec<T>,
}

impl<T: Copy + std::iter::Sum<T>> Dense<T> {
    #[inline]
    pub fn get(&self, a: usize, b: usize) -> T {
        self.cells[a * self.k + b]
    }

    pub fn row(&self, a: usize) -> &[T] {
        &self.cells[a * self.k..(a + 1) * self.k]
    }

    /// Each element's total sharing.
    pub fn loads(&self) -> Vec<T> {
        (0..self.k).map(|a| self.row(a).iter().copied().sum()).collect()
    }
}

/// Greedy groups of `size`: the free element with the largest load seeds a group, which then
/// takes the free element with the highest `score(its load, its sharing with the group)`.
pub(crate) fn greedy_groups(mat: &Dense, size: usize, score: impl Fn(f64, f64) -> f64) -> Vec<Vec<usize>> {
    let k = mat.k;
    let load = mat.loads();
    let mut used = vec![false; k];
    let mut groups = Vec::with_capacity(k.div_ceil(size));
    // Seeds are found by advancing a cursor over the elements by load; each candidate's
    // sharing with the growing group is kept up to date as members join.
    let mut by_load: Vec<usize> = (0..k).collect();
    by_load.sort_by(|&a, &b| load[b].total_cmp(&load[a]).then(a.cmp(&b)));
    let mut cursor = 0;
    let mut with_group = vec![0.0f64; k];
    loop {
        while cursor < k && used[by_load[cursor]] {
            cursor += 1;
        }
        if cursor == k {
            break;
        }
        let seed = by_load[cursor];
        used[seed] = true;
        let mut g = vec![seed];
        with_group.copy_from_slice(mat.row(seed));
        while g.len() < size {
            let mut next = None;
            let mut best = f64::NEG_INFINITY;
            for x in 0..k {
                let s = score(load[x], with_group[x]);
                if !used[x] && s > best {
                    best = s;
                    next = Some(x);
                }
            }
            let Some(next) = next else { break };
            used[next] = true;
            g.push(next);
            for (w, &v) in with_group.iter_mut().zip(mat.row(next)) {
                *w += v;
            }
        }
        groups.push(g);
    }
    groups
}

/// Hierarchical grouping, shared by EagerMap and TreeMatch. Level by level from the PUs up,
/// the elements (threads, then groups of them) are gathered by `group` into groups of the
/// level's arity; the sharing between groups is summed for the next level. The final groups
/// are laid on the tree in logical order. Padding elements (no sharing) fill the slots no
/// thread takes; with more threads than PUs, each PU first takes a group of its share.
pub(crate) fn bottom_up(
    m: &SharingMatrix,
    machine: &Machine,
    group: fn(&Dense, usize) -> Vec<Vec<usize>>,
) -> Vec<usize> {
    let n = m.threads();
    let p = machine.pu_count();
    // Arity of each level, bottom-up (children per object).
    let mut arities: Vec<usize> =
        machine.levels.windows(2).map(|w| (w[1].objs.len() / w[0].objs.len().max(1)).max(1)).collect();
    arities.reverse();
    let per_pu = n.div_ceil(p).max(1);
    let total = p * per_pu;
    const PAD: usize = usize::MAX;
    let mut elems: Vec<Vec<usize>> = (0..total).map(|t| vec![if t < n { t } else { PAD }]).collect();
    let mut mat = Dense { k: total, cells: vec![0.0; total * total] };
    for i in 0..n {
        for j in 0..n {
            mat.cells[i * total + j] = m.get(i, j);
        }
    }
    let mut sizes = vec![per_pu];
    sizes.extend(arities.iter().copied());
    for size in sizes {
        if size <= 1 || elems.len() <= 1 {
            continue;
        }
        let groups = group(&mat, size);
        let kk = groups.len();
        let mut owner = vec![0usize; mat.k];
        for (g, members) in groups.iter().enumerate() {
            for &x in members {
                owner[x] = g;
            }
        }
        let mut next = Dense { k: kk, cells: vec![0.0; kk * kk] };
        for x in 0..mat.k {
            let ox = owner[x];
            for (y, &v) in mat.row(x).iter().enumerate() {
                if v != 0.0 && owner[y] != ox {
                    next.cells[ox * kk + owner[y]] += v;
                }
            }
        }
        elems = groups.iter().map(|g| g.iter().flat_map(|&e| elems[e].iter().copied()).collect()).collect();
        mat = next;
    }
    let mut map = vec![0usize; n];
    for (slot, t) in elems.into_iter().flatten().enumerate() {
        if t != PAD {
            map[t] = slot / per_pu % p;
        }
    }
    map
}
