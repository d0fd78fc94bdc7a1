//! Seed 001 (Marathe & Mueller): place each page, for the whole run, on the node whose
//! threads a profile saw access it most. The profile is what a PMU reports: by default the
//! loads that miss a modelled per-thread cache (the long-latency loads the paper finds the
//! better indicator), or the accesses that miss a per-thread data TLB of the trace's pages,
//! or (`source=every`) every k-th access, a sampling no PMU offers, kept for comparison.
//! Profile and evaluation use the same trace: the best case for a profile-guided run.

use super::{Context, Policy, Prepass};
use crate::cost::{MAX_NODES, Residence, Tally, node_bit};
use crate::page::Page;
use crate::partition::SamplerKind;
use sharemap_decide::marathe;

#[derive(Debug)]
pub struct Marathe {
    pub source: marathe::Source,
}

impl Policy for Marathe {
    fn prepass(&self, line: u64) -> Prepass {
        Prepass { sampler: Some(SamplerKind::Profile { source: self.source, line: line.max(1) }), ..Prepass::default() }
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        let mut samples = [0u32; MAX_NODES];
        let mut total = 0u64;
        page.refs().for_each(|r| {
            if r.sampled {
                samples[r.node as usize] += 1;
                total += 1;
            }
        });
        let home = if total == 0 { page.first().node } else { marathe::home(&samples[..ctx.nodes]) as u16 };
        // The placement is known before the run starts, so it is the free initial one.
        let mut res = Residence::new(node_bit(home));
        res.stay(page.refs());
        res.tally.profile_samples = total;
        res.tally
    }
}
