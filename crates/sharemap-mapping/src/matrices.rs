//! Synthetic sharing matrices of the shapes mapping algorithms meet, for benchmarks and the
//! comparison with Scotch. Thread ids are scrambled by a seeded permutation (except where
//! noted) so that no order-based mapping is right by accident.

use sharemap_core::SharingMatrix;

/// The kinds, with what each models.
pub static KINDS: &[(&str, &str)] = &[
    ("clustered", "groups of 8 threads sharing heavily inside, little across"),
    ("neighbour", "a chain: each thread shares with the next (1-D domain decomposition)"),
    ("stencil", "a 2-D grid: each thread shares with its 4 grid neighbours"),
    ("hierarchical", "nested groups: 1000 within pairs, 100 within 4s, 10 within 8s, 1 beyond"),
    ("uniform", "every pair the same, with 10% noise (CG-like: no mapping helps much)"),
    ("sparse", "each thread shares with 3 random others"),
];

/// A small deterministic generator (xorshift), so matrices need no extra dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A matrix of `kind` for `n` threads, or None for an unknown kind.
pub fn make(kind: &str, n: usize, seed: u64) -> Option<SharingMatrix> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut m = SharingMatrix::new(n);
    match kind {
        "clustered" => {
            for i in 0..n {
                for j in i + 1..n {
                    let v = if i / 8 == j / 8 { 50.0 + 50.0 * rng.unit() } else { 2.0 * rng.unit() };
                    m.add(i, j, v);
                }
            }
        }
        "neighbour" => {
            for i in 0..n.saturating_sub(1) {
                m.add(i, i + 1, 100.0 + 10.0 * rng.unit());
            }
        }
        "stencil" => {
            let cols = (n as f64).sqrt().ceil() as usize;
            for i in 0..n {
                if (i + 1) % cols != 0 && i + 1 < n {
                    m.add(i, i + 1, 100.0);
                }
                if i + cols < n {
                    m.add(i, i + cols, 100.0);
                }
            }
        }
        "hierarchical" => {
            for i in 0..n {
                for j in i + 1..n {
                    // The highest differing bit of the ids sets the level they meet at.
                    let level = usize::BITS - (i ^ j).leading_zeros();
                    m.add(i, j, 1000.0 / 10f64.powi(level as i32 - 1).min(1000.0));
                }
            }
        }
        "uniform" => {
            for i in 0..n {
                for j in i + 1..n {
                    m.add(i, j, 100.0 + 10.0 * rng.unit());
                }
            }
        }
        "sparse" => {
            for i in 0..n {
                for _ in 0..3 {
                    let j = rng.below(n as u64) as usize;
                    m.add(i, j, 10.0 + 90.0 * rng.unit());
                }
            }
        }
        _ => return None,
    }
    Some(scramble(&m, &mut rng))
}

/// The same sharing under a random renaming of the threads.
fn scramble(m: &SharingMatrix, rng: &mut Rng) -> SharingMatrix {
    let n = m.threads();
    let mut name: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        name.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut out = SharingMatrix::new(n);
    for i in 0..n {
        for j in i + 1..n {
            out.add(name[i], name[j], m.get(i, j));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_their_shape() {
        for (kind, _) in KINDS {
            let m = make(kind, 64, 1).unwrap();
            assert_eq!(m.threads(), 64);
            assert!(m.total() > 0.0, "{kind}");
            assert_eq!(m.get(3, 3), 0.0);
        }
        // A chain: 63 sharing pairs, each thread with at most 2 others.
        let chain = make("neighbour", 64, 1).unwrap();
        let partners = |i: usize| (0..64).filter(|&j| chain.get(i, j) > 0.0).count();
        assert_eq!((0..64).map(partners).sum::<usize>(), 2 * 63);
        assert!((0..64).all(|i| partners(i) <= 2));
        // Clusters: each thread's 7 heaviest partners are its group.
        let c = make("clustered", 64, 2).unwrap();
        let heavy = |i: usize| (0..64).filter(|&j| c.get(i, j) >= 50.0).count();
        assert!((0..64).all(|i| heavy(i) == 7));
        assert!(make("nonsense", 4, 1).is_none());
    }
}
