//! What it costs two threads to share data, by where their PUs meet in the machine.

use sharemap_core::SharingMatrix;
use sharemap_machine::topology::ObjType;
use sharemap_machine::{LOCAL_LATENCY_NS, Machine};

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

/// Each PU's path of tree objects from the root down to it.
fn root_paths(m: &Machine) -> Vec<Vec<usize>> {
    m.pus
        .iter()
        .map(|&pu| {
            let mut a = m.tree.ancestors(pu);
            a.reverse();
            a
        })
        .collect()
}

impl PairCosts {
    pub fn new(m: &Machine, model: CostModel) -> Self {
        let p = m.pu_count();
        let paths = root_paths(m);
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

/// EagerMap's view of a mapping: the share of all sharing kept within each level of the
/// tree, that is, between threads whose PUs' lowest common object is of that level (its
/// hwloc type name), from the bottom up. The grouping maximises the lower shares level by
/// level; this reports them whatever the algorithm.
pub fn sharing_by_level(m: &SharingMatrix, map: &[usize], machine: &Machine) -> Vec<(String, f64)> {
    // A pair's lowest common object is the last shared one of its PUs' root-first paths.
    let paths = root_paths(machine);
    let n = m.threads().min(map.len());
    let mut by_object: Vec<f64> = vec![0.0; machine.tree.objs.len()];
    let mut total = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let v = m.get(i, j);
            if v == 0.0 {
                continue;
            }
            let (a, b) = (&paths[map[i]], &paths[map[j]]);
            let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            by_object[a[common - 1]] += v;
            total += v;
        }
    }
    // Levels from the PUs up, each named once.
    let mut names: Vec<String> = Vec::new();
    let mut shares: Vec<f64> = Vec::new();
    let mut depth_order: Vec<usize> = (0..machine.tree.objs.len()).collect();
    let depth = |o: usize| machine.tree.ancestors(o).len();
    depth_order.sort_by_key(|&o| std::cmp::Reverse(depth(o)));
    for o in depth_order {
        let obj = &machine.tree.objs[o];
        if matches!(obj.ty, ObjType::Pu) && n <= machine.pu_count() {
            continue; // PUs hold pairs only when oversubscribed; then every mapping has the level
        }
        if !matches!(obj.ty, ObjType::Pu) && obj.children.len() < 2 {
            continue; // one child: never the lowest common object of two PUs (a core's L1)
        }
        let name = obj.ty.hwloc_name();
        let share = if total > 0.0 { by_object[o] / total } else { 0.0 };
        match names.iter().position(|x| *x == name) {
            Some(k) => shares[k] += share,
            None => {
                names.push(name);
                shares.push(share);
            }
        }
    }
    names.into_iter().zip(shares).collect()
}

#[cfg(test)]
mod level_tests {
    use super::*;

    #[test]
    fn shares_follow_the_lowest_common_object() {
        let machine = Machine::from_spec("pack:2 core:2 pu:2").unwrap();
        let mut m = SharingMatrix::new(4);
        m.add(0, 1, 6.0); // PUs 0, 1: one core
        m.add(0, 2, 3.0); // PUs 0, 2: one package
        m.add(0, 3, 1.0); // PUs 0, 4: the machine
        let shares = sharing_by_level(&m, &[0, 1, 2, 4], &machine);
        let get = |name: &str| shares.iter().find(|(n, _)| n == name).map(|s| s.1).unwrap();
        assert_eq!((get("Core"), get("Package"), get("Machine")), (0.6, 0.3, 0.1));
        let names: Vec<&str> = shares.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["Core", "Package", "Machine"], "bottom up");
    }

    /// More threads than PUs: every mapping reports the PU level, whether or not its pairs
    /// share a PU, so that mappings line up level by level (a table's columns).
    #[test]
    fn oversubscribed_mappings_report_the_same_levels() {
        let machine = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
        let mut m = SharingMatrix::new(8);
        for t in (0..8).step_by(2) {
            m.add(t, t + 1, 1.0);
        }
        let paired = sharing_by_level(&m, &[0, 0, 1, 1, 2, 2, 3, 3], &machine);
        let apart = sharing_by_level(&m, &[0, 1, 2, 3, 0, 1, 2, 3], &machine);
        let names = |s: &[(String, f64)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&paired), names(&apart));
        assert_eq!(names(&paired)[0], "PU");
        assert_eq!((paired[0].1, apart[0].1), (1.0, 0.0));
    }
}
