//! The exact optimum by branch and bound (small machines only): the truth the other
//! algorithms are tested against.

use crate::algorithm::{MappingAlgorithm, MappingError};
use crate::cost::PairCosts;
use crate::cost::mapping_cost;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

/// Most PUs `exhaustive` accepts.
pub const EXHAUSTIVE_MAX_PUS: usize = 10;

pub struct Exhaustive;

impl MappingAlgorithm for Exhaustive {
    fn spec(&self) -> String {
        "exhaustive".into()
    }

    fn fits(&self, threads: usize, pus: usize) -> Result<(), MappingError> {
        if pus > EXHAUSTIVE_MAX_PUS {
            return Err(MappingError::TooManyPus { pus, max: EXHAUSTIVE_MAX_PUS });
        }
        if threads > pus {
            return Err(MappingError::MoreThreadsThanPus { threads, pus });
        }
        Ok(())
    }

    fn map(&self, m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> Result<Vec<usize>, MappingError> {
        self.fits(m.threads(), machine.pu_count())?;
        Ok(exhaustive(m, costs))
    }
}

/// Branch and bound over distinct PUs for each thread.
fn exhaustive(m: &SharingMatrix, c: &PairCosts) -> Vec<usize> {
    let n = m.threads();
    let mut best_map: Vec<usize> = (0..n).collect();
    let mut best = mapping_cost(m, &best_map, c);
    let mut cur = vec![0usize; n];
    let mut used = vec![false; c.pus];
    #[allow(clippy::too_many_arguments)]
    fn go(
        t: usize,
        partial: f64,
        m: &SharingMatrix,
        c: &PairCosts,
        cur: &mut [usize],
        used: &mut [bool],
        best: &mut f64,
        best_map: &mut Vec<usize>,
    ) {
        let n = cur.len();
        if partial >= *best {
            return;
        }
        if t == n {
            *best = partial;
            best_map.copy_from_slice(cur);
            return;
        }
        for q in 0..c.pus {
            if used[q] {
                continue;
            }
            let add: f64 = (0..t).map(|u| m.get(t, u) * c.get(q, cur[u])).sum();
            used[q] = true;
            cur[t] = q;
            go(t + 1, partial + add, m, c, cur, used, best, best_map);
            used[q] = false;
        }
    }
    go(0, 0.0, m, c, &mut cur, &mut used, &mut best, &mut best_map);
    best_map
}
