//! How faithfully a sampled trace (a burst-sampled build, `record --sample`) answers what a
//! complete recording of the same program answers: the sharing matrix, each page's dominant
//! node, and the thread mapping computed from the sharing.

use crate::{Error, ErrorKind, Result};
use serde::Serialize;
use sharemap_core::{PageUsage, SharingMatrix};
use sharemap_detect::Detection;
use sharemap_machine::Machine;
use sharemap_machine::ThreadPlacement;
use sharemap_mapping::{CostModel, PairCosts, mapping_cost};

/// The share of the complete trace's accesses whose pages are compared (the pages that
/// carry them, busiest first).
pub const PAGE_SHARE: f64 = 0.9;
/// How close to a page's best node another node's accesses must come to count as near it.
pub const NEAR: f64 = 0.95;
/// The mapping algorithm whose mappings are compared.
pub const ALGORITHM: &str = "sharemap";

/// A sampled trace's answers against a complete recording's.
#[derive(Clone, Debug, Serialize)]
pub struct Fidelity {
    /// The complete trace.
    pub reference: String,
    /// Pearson correlation of the two sharing matrices over thread pairs (None with fewer
    /// than three threads, one pair having no correlation, or when either matrix is the same
    /// for every pair).
    pub correlation: Option<f64>,
    /// How much the complete sharing varies over thread pairs (standard deviation over
    /// mean; None when nothing is shared): near 0 every pair shares alike, and the
    /// correlation has no pattern to follow (it measures noise).
    pub spread: Option<f64>,
    /// The sampled sharing's distance from the complete one, as the detectors scale it: the
    /// sum over thread pairs of the differences over the complete sharing's sum.
    pub relative_error: Option<f64>,
    /// The pages that carry `PAGE_SHARE` of the complete trace's accesses.
    pub pages_compared: usize,
    /// The share of them whose dominant node (the node whose threads access it most, with
    /// the threads where the modelled OS runs them) is the same in the sampled trace; a page
    /// the sample never saw disagrees.
    pub pages_agreeing: f64,
    /// The share of them where the sample's dominant node gets, in the complete trace, at
    /// least `NEAR` of the accesses of the page's best node: placed there, the page would
    /// cost at most 1 - `NEAR` more remote accesses than at its best.
    pub pages_near_best: f64,
    /// The compared pages whose two busiest nodes are a near-tie in the complete trace (the
    /// second gets at least `NEAR` of the first's accesses): no sample can be expected to
    /// settle which one dominates.
    pub near_ties: usize,
    /// The cost, on the complete trace's sharing, of the mapping computed from the sampled
    /// trace, over that of the mapping computed from the complete one: 1 is as good.
    pub mapping_cost_ratio: f64,
    pub mapping_algorithm: String,
}

/// Compares `sampled` with `complete` (the same detector's findings on both traces).
pub fn compare(
    reference: String,
    sampled: &Detection,
    complete: &Detection,
    machine: &Machine,
    placement: &ThreadPlacement,
    burst: Option<&sharemap_trace::Burst>,
    seed: u64,
) -> Result<Fidelity> {
    let (a, b) = (&sampled.matrix, &complete.matrix);
    if a.threads() != b.threads() {
        return Err(Error::new(
            ErrorKind::Trace,
            format!(
                "--against: {reference} has {} threads and this trace {}: not recordings of the same program",
                b.threads(),
                a.threads()
            ),
        ));
    }
    let correlation = (a.threads() >= 3).then(|| a.correlation(b)).filter(|c| c.is_finite());
    let (spread, relative_error) = sharing_difference(a, b);
    let weight = |t: usize| burst.map_or(1.0, |b| b.weight(t));
    let pages = dominant_nodes_agree(&sampled.pages, &complete.pages, placement, &weight);
    let costs = PairCosts::new(machine, CostModel::Latency);
    let map = |m: &SharingMatrix| -> Result<Vec<usize>> {
        let algo =
            sharemap_mapping::build(ALGORITHM, seed).map_err(|e| Error::new(ErrorKind::Mapping, e.to_string()))?;
        algo.map(m, machine, &costs).map_err(|e| Error::new(ErrorKind::Mapping, e.to_string()))
    };
    let from_sample = mapping_cost(b, &map(a)?, &costs);
    let from_complete = mapping_cost(b, &map(b)?, &costs);
    let mapping_cost_ratio = if from_complete > 0.0 { from_sample / from_complete } else { 1.0 };
    Ok(Fidelity {
        reference,
        correlation,
        spread,
        relative_error,
        pages_compared: pages.compared,
        pages_agreeing: pages.share(pages.agreeing),
        pages_near_best: pages.share(pages.near_best),
        near_ties: pages.near_ties,
        mapping_cost_ratio,
        mapping_algorithm: ALGORITHM.into(),
    })
}

/// (spread of `complete` over its thread pairs, distance of `sampled` from it): see `Fidelity`.
fn sharing_difference(sampled: &SharingMatrix, complete: &SharingMatrix) -> (Option<f64>, Option<f64>) {
    let (xs, ys): (Vec<f64>, Vec<f64>) = (sampled.pairs().collect(), complete.pairs().collect());
    let total: f64 = ys.iter().sum();
    if total <= 0.0 {
        return (None, None);
    }
    let mean = total / ys.len() as f64;
    let spread = (ys.iter().map(|y| (y - mean) * (y - mean)).sum::<f64>() / ys.len() as f64).sqrt() / mean;
    (Some(spread), Some(xs.iter().zip(&ys).map(|(x, y)| (x - y).abs()).sum::<f64>() / total))
}

/// The busiest pages of a complete trace (up to `PAGE_SHARE` of its accesses), and how many
/// of them the sample places as the complete trace does.
#[derive(Debug, PartialEq)]
struct PageAgreement {
    compared: usize,
    agreeing: usize,
    near_best: usize,
    near_ties: usize,
}

impl PageAgreement {
    fn share(&self, n: usize) -> f64 {
        if self.compared == 0 { 1.0 } else { n as f64 / self.compared as f64 }
    }
}

/// Compares each busy page's dominant node; a sampled thread's accesses count with its
/// `weight`.
fn dominant_nodes_agree(
    sampled: &PageUsage,
    complete: &PageUsage,
    placement: &ThreadPlacement,
    weight: &dyn Fn(usize) -> f64,
) -> PageAgreement {
    let nodes = placement.nodes().max(1);
    let per_node = |accesses: &[u64], weight: &dyn Fn(usize) -> f64| -> Vec<f64> {
        let mut per_node = vec![0f64; nodes];
        for (t, &n) in accesses.iter().enumerate() {
            if t < placement.pus().len() {
                per_node[placement.node(t as u32).min(nodes - 1)] += n as f64 * weight(t);
            }
        }
        per_node
    };
    // The busiest node (the lowest on ties); none for a page nobody touched.
    let dominant = |per_node: &[f64]| -> Option<usize> {
        let best = per_node.iter().copied().fold(0.0, f64::max);
        (best > 0.0).then(|| per_node.iter().position(|&c| c == best)).flatten()
    };
    let sampled: std::collections::HashMap<u64, Option<usize>> =
        sampled.sorted().into_iter().map(|(page, e)| (page, dominant(&per_node(&e.accesses, weight)))).collect();
    let mut pages: Vec<(u64, u64, &[u64])> =
        complete.sorted().into_iter().map(|(p, e)| (e.accesses.iter().sum(), p, e.accesses.as_slice())).collect();
    pages.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let total: u64 = pages.iter().map(|p| p.0).sum();
    let mut covered = 0u64;
    let mut a = PageAgreement { compared: 0, agreeing: 0, near_best: 0, near_ties: 0 };
    for (count, page, accesses) in pages {
        if total == 0 || covered as f64 >= PAGE_SHARE * total as f64 {
            break;
        }
        covered += count;
        a.compared += 1;
        let truth = per_node(accesses, &|_| 1.0);
        let best = truth.iter().copied().fold(0.0, f64::max);
        let second = truth.iter().copied().filter(|&c| c < best).fold(0.0, f64::max);
        let tied = truth.iter().filter(|&&c| c == best).count() > 1;
        if tied || second >= NEAR * best {
            a.near_ties += 1;
        }
        let Some(node) = sampled.get(&page).copied().flatten() else { continue };
        if Some(node) == dominant(&truth) {
            a.agreeing += 1;
        }
        if truth[node] >= NEAR * best {
            a.near_best += 1;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap_machine::Machine;

    /// Four threads, two per node (threads 0 and 1 on node 0).
    fn placement() -> ThreadPlacement {
        let m = Machine::from_spec("numa:2 pu:2").unwrap();
        ThreadPlacement::identity(&m)
    }

    /// Page usage with `counts[page][thread]` accesses.
    fn usage(counts: &[[u64; 4]]) -> PageUsage {
        let mut u = PageUsage::new(4096);
        for (page, per_thread) in counts.iter().enumerate() {
            for (t, &n) in per_thread.iter().enumerate() {
                for _ in 0..n {
                    u.access(t as u32, page as u64 * 4096);
                }
            }
        }
        u
    }

    #[test]
    fn strict_and_near_agreement_count_what_they_say() {
        let p = placement();
        // Page 0: node 0 by far (40 against 0); page 1: a near-tie, node 1 ahead by 1 in 40;
        // page 2: node 1 by far; page 3 (busy) never sampled.
        let complete = usage(&[[20, 20, 0, 0], [10, 9, 20, 0], [0, 0, 30, 10], [25, 25, 0, 0]]);
        // The sample gets page 0 right, picks node 0 for the near-tie, node 0 for page 2.
        let sampled = usage(&[[2, 1, 0, 0], [2, 1, 1, 1], [1, 0, 0, 0]]);
        let a = dominant_nodes_agree(&sampled, &complete, &p, &|_| 1.0);
        assert_eq!(a, PageAgreement { compared: 4, agreeing: 1, near_best: 2, near_ties: 1 });
        // Weights decide: thread 2 counting 10 times makes node 1 dominate page 1 in the sample.
        let a = dominant_nodes_agree(&sampled, &complete, &p, &|t| if t == 2 { 10.0 } else { 1.0 });
        assert_eq!((a.agreeing, a.near_best), (2, 2));
    }

    #[test]
    fn spread_and_error_measure_the_pairs() {
        let matrix = |v: [f64; 3]| {
            let mut m = SharingMatrix::new(3);
            m.add(0, 1, v[0]);
            m.add(0, 2, v[1]);
            m.add(1, 2, v[2]);
            m
        };
        // Pairs sharing alike: no spread; a sample 10 % high on one pair of three.
        let (spread, err) = sharing_difference(&matrix([110.0, 100.0, 100.0]), &matrix([100.0; 3]));
        assert!(spread.unwrap().abs() < 1e-12 && (err.unwrap() - 10.0 / 300.0).abs() < 1e-12);
        // Pairs 0, 100, 200: mean 100, population standard deviation 81.6.
        let (spread, err) = sharing_difference(&matrix([0.0, 100.0, 200.0]), &matrix([0.0, 100.0, 200.0]));
        assert!((spread.unwrap() - (20000.0f64 / 3.0).sqrt() / 100.0).abs() < 1e-12 && err == Some(0.0));
        assert_eq!(sharing_difference(&matrix([1.0; 3]), &matrix([0.0; 3])), (None, None));
    }

    #[test]
    fn only_the_pages_carrying_the_share_are_compared() {
        let p = placement();
        // 100 accesses on page 0 and 1 on each of 20 others: page 0 alone carries 83 %, so
        // pages are taken busiest first until 90 % is covered.
        let mut counts = vec![[100, 0, 0, 0]];
        counts.extend(std::iter::repeat_n([0, 0, 1, 0], 20));
        let complete = usage(&counts);
        let a = dominant_nodes_agree(&usage(&[[1, 0, 0, 0]]), &complete, &p, &|_| 1.0);
        let needed = (0.9f64 * 120.0 - 100.0).ceil() as usize;
        assert_eq!(a.compared, 1 + needed);
        assert_eq!(a.agreeing, 1);
    }
}
