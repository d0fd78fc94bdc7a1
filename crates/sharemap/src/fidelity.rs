//! How faithfully a sampled trace (a burst-sampled build, `record --sample`) answers what a
//! complete recording of the same program answers: the sharing matrix, each page's dominant
//! node, and the thread mapping computed from the sharing.

use crate::{Error, ErrorKind, Result};
use serde::Serialize;
use sharemap_core::{PageUsage, SharingMatrix, ThreadPlacement};
use sharemap_detect::Detection;
use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts, mapping_cost};

/// The share of the complete trace's accesses whose pages are compared (the pages that
/// carry them, busiest first).
pub const PAGE_SHARE: f64 = 0.9;
/// The mapping algorithm whose mappings are compared.
pub const ALGORITHM: &str = "sharemap";

/// A sampled trace's answers against a complete recording's.
#[derive(Clone, Debug, Serialize)]
pub struct Fidelity {
    /// The complete trace.
    pub reference: String,
    /// Pearson correlation of the two sharing matrices over thread pairs (None with fewer
    /// than three threads: one pair has no correlation).
    pub correlation: Option<f64>,
    /// The pages that carry `PAGE_SHARE` of the complete trace's accesses.
    pub pages_compared: usize,
    /// The share of them whose dominant node (the node whose threads access it most, with
    /// the threads where the modelled OS runs them) is the same in the sampled trace; a page
    /// the sample never saw disagrees.
    pub pages_agreeing: f64,
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
    let weight = |t: usize| burst.map_or(1.0, |b| b.weight(t));
    let (pages_compared, pages_agreeing) = dominant_nodes_agree(&sampled.pages, &complete.pages, placement, &weight);
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
        pages_compared,
        pages_agreeing,
        mapping_cost_ratio,
        mapping_algorithm: ALGORITHM.into(),
    })
}

/// (pages compared, share agreeing): the busiest pages of `complete` up to `PAGE_SHARE` of
/// its accesses.
/// A sampled thread's accesses count with its `weight`.
fn dominant_nodes_agree(
    sampled: &PageUsage,
    complete: &PageUsage,
    placement: &ThreadPlacement,
    weight: &dyn Fn(usize) -> f64,
) -> (usize, f64) {
    let nodes = placement.nodes().max(1);
    let dominant = |accesses: &[u64], weight: &dyn Fn(usize) -> f64| -> Option<usize> {
        let mut per_node = vec![0f64; nodes];
        for (t, &n) in accesses.iter().enumerate() {
            if t < placement.pus().len() {
                per_node[placement.node(t as u32).min(nodes - 1)] += n as f64 * weight(t);
            }
        }
        let best = per_node.iter().copied().fold(0.0, f64::max);
        (best > 0.0).then(|| per_node.iter().position(|&c| c == best)).flatten()
    };
    let sampled: std::collections::HashMap<u64, Option<usize>> =
        sampled.sorted().into_iter().map(|(page, e)| (page, dominant(&e.accesses, weight))).collect();
    let mut pages: Vec<(u64, u64, &[u64])> =
        complete.sorted().into_iter().map(|(p, e)| (e.accesses.iter().sum(), p, e.accesses.as_slice())).collect();
    pages.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let total: u64 = pages.iter().map(|p| p.0).sum();
    let (mut covered, mut compared, mut agreeing) = (0u64, 0usize, 0usize);
    for (count, page, accesses) in pages {
        if total == 0 || covered as f64 >= PAGE_SHARE * total as f64 {
            break;
        }
        covered += count;
        compared += 1;
        if sampled.get(&page).copied().flatten().is_some_and(|n| Some(n) == dominant(accesses, &|_| 1.0)) {
            agreeing += 1;
        }
    }
    (compared, if compared == 0 { 1.0 } else { agreeing as f64 / compared as f64 })
}
