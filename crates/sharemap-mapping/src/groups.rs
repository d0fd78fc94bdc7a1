//! What the grouping algorithms share: a dense matrix between the elements of one tree
//! level, and greedy grouping over it (EagerMap's and TreeMatch's building block).

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
