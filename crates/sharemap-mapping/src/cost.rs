//! What it costs two threads to share data, by where their PUs meet in the machine.

use sharemap_detect::SharingMatrix;
use sharemap_machine::topology::ObjType;
use sharemap_machine::{Machine, LOCAL_LATENCY_NS};

/// How a level of the tree is priced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostModel {
    /// Latency of the lowest shared level, in ns: L1 (and the same core) 1, L2 4, L3 15,
    /// deeper caches 25, else memory: 80 ns times the NUMA distance / 10 (the machine's).
    Latency,
    /// Hops: the number of tree levels from a PU up to the lowest common ancestor (the
    /// hop-bytes metric of TopoMatch and Scotch, unit cost per level).
    Hops,
}

/// Cost of sharing between each pair of logical PUs (p x p). A machine has few distinct
/// costs (one per level, per NUMA distance), so each pair stores the index of its cost in
/// one byte: a 1,024-PU table is 1 MiB and stays in cache while mappings are costed.
#[derive(Clone, Debug)]
pub struct PairCosts {
    pub pus: usize,
    class: Vec<u8>,
    values: Vec<f64>,
}

impl PairCosts {
    pub fn new(m: &Machine, model: CostModel) -> Self {
        let p = m.pu_count();
        // Root-first paths from the root to each PU.
        let paths: Vec<Vec<usize>> = m
            .pus
            .iter()
            .map(|&pu| {
                let mut a = m.tree.ancestors(pu);
                a.reverse();
                a
            })
            .collect();
        let mut cost = vec![0.0; p * p];
        for i in 0..p {
            for j in 0..p {
                let (a, b) = (&paths[i], &paths[j]);
                let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                let lca = a[common - 1];
                cost[i * p + j] = match model {
                    CostModel::Hops => (a.len() - common) as f64,
                    CostModel::Latency => match m.tree.objs[lca].ty {
                        ObjType::Pu | ObjType::Core => 1.0,
                        ObjType::Cache { level: 1, .. } => 1.0,
                        ObjType::Cache { level: 2, .. } => 4.0,
                        ObjType::Cache { level: 3, .. } => 15.0,
                        ObjType::Cache { .. } => 25.0,
                        _ => {
                            let (ni, nj) = (m.pu_numa[i], m.pu_numa[j]);
                            LOCAL_LATENCY_NS * m.distances[ni][nj] as f64 / m.distances[ni][ni].max(1) as f64
                        }
                    },
                };
            }
        }
        let mut values: Vec<f64> = cost.clone();
        values.sort_by(f64::total_cmp);
        values.dedup();
        assert!(values.len() <= 256, "more than 256 distinct pair costs");
        let class = cost.iter().map(|c| values.partition_point(|v| v < c) as u8).collect();
        PairCosts { pus: p, class, values }
    }

    #[inline]
    pub fn get(&self, a: usize, b: usize) -> f64 {
        self.values[self.class[a * self.pus + b] as usize]
    }
}

/// The cost of a mapping (thread -> logical PU): the sum over thread pairs of their sharing
/// times the cost of their PUs' lowest shared level.
pub fn mapping_cost(m: &SharingMatrix, map: &[usize], c: &PairCosts) -> f64 {
    let n = m.threads().min(map.len());
    let mut total = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let v = m.get(i, j);
            if v != 0.0 {
                total += v * c.get(map[i], map[j]);
            }
        }
    }
    total
}
