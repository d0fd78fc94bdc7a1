//! Seed 001 (Marathe & Mueller): place each page, for the whole run, on the node whose
//! threads a profile saw access it most. The profile is a sample of the accesses: every
//! k-th one, or those missing a modelled per-thread cache (long-latency loads) or TLB.
//! Profile and evaluation use the same trace: the best case for a profile-guided run.

use super::{Context, Policy, Prepass};
use crate::cost::{MAX_NODES, Residence, Tally, node_bit};
use crate::page::Page;
use crate::partition::SamplerKind;
use sharemap_decide::marathe;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Every,
    CacheMiss,
    TlbMiss,
}

impl Source {
    /// One of the words the `source` parameter takes.
    pub fn parse(word: &str) -> Source {
        match word {
            "cache-miss" => Source::CacheMiss,
            "tlb-miss" => Source::TlbMiss,
            _ => Source::Every,
        }
    }
}

#[derive(Debug)]
pub struct Marathe {
    pub source: Source,
    pub every: u64,
    pub cache_kb: u64,
    pub tlb_entries: u32,
}

impl Policy for Marathe {
    fn prepass(&self, line: u64) -> Prepass {
        let sampler = match self.source {
            Source::Every => None,
            Source::CacheMiss => {
                Some(SamplerKind::CacheMiss { size: self.cache_kb * 1024, ways: 8, line: line.max(1) })
            }
            Source::TlbMiss => Some(SamplerKind::TlbMiss { entries: self.tlb_entries, ways: 4 }),
        };
        Prepass { sampler, ..Prepass::default() }
    }

    fn run(&self, page: &Page, ctx: &Context) -> Tally {
        let mut samples = [0u32; MAX_NODES];
        let mut total = 0u64;
        page.refs().for_each(|r| {
            let seen = match self.source {
                Source::Every => marathe::sampled(r.at, self.every),
                _ => r.sampled,
            };
            if seen {
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
