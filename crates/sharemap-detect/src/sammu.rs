//! SAMMU (seed 000, section 3): sharing and page-usage detection in the MMU.
//!
//! Each core has a two-level data TLB (shared by its SMT siblings) whose entries carry a
//! saturating access counter (AC) and the id of the last thread that used them. When an
//! entry leaves the TLB, or its AC saturates, SAMMU looks up the page's history entry:
//! if AC >= AT (the page's access threshold) the threshold moves to (AT + AC) / 2
//! (equation 1), the sharing matrix gains one unit between the thread and each thread of
//! the page's 2-entry sharers vector, the thread enters that vector, and the page's NUMA
//! counters move (+1 for the thread's node, -1 for the others, saturating); a migration is
//! notified when NC[n] - NC[m] >= NT for the page's node m. Otherwise AT drops by
//! (AT - AC) / (AT / AC) (equation 2) and nothing else changes.

use crate::detector::{Detection, Detector, DetectorContext, DetectorInfo, Report};
use sharemap_core::plugin::Caps;
use sharemap_core::{PageUsage, SharingMatrix};
use sharemap_machine::ThreadPlacement;
use sharemap_trace::Chunk;

pub(crate) const INFO: DetectorInfo = DetectorInfo {
    name: "sammu",
    source: "SAMMU (seed 000), section 3: sharing and page usage detected in the MMU",
    summary: "per-core two-level data TLBs (shared by SMT siblings) with access counters; an eviction or a saturated counter with AC >= AT updates the page's sharers and NUMA counters (page granularity, on --machine's cores)",
    params: PARAMS,
    caps: Caps::NONE,
    build: |params, ctx| Ok(Box::new(SammuDetector::new(SammuParams::from_params(params), ctx))),
};

// SAMMU's parameters (seed 000's table 1) and its TLB model are sharemap-decide's: one
// table and one model for the detector, the `sammu` placement policy and the simulator's
// and run's mechanisms.
pub use sharemap_decide::sammu::{PARAMS, Sammu, SammuParams, SammuReport};

/// SAMMU run over a trace with threads placed on the machine's cores.
pub struct SammuDetector {
    sammu: Sammu,
    placement: ThreadPlacement,
    page_shift: u32,
    usage: PageUsage,
    accesses: u64,
    threads: usize,
}

impl SammuDetector {
    pub fn new(p: SammuParams, ctx: &DetectorContext) -> Self {
        let placement = ctx.placement.clone();
        SammuDetector {
            sammu: Sammu::new(p, placement.cores(), placement.nodes()),
            placement,
            page_shift: ctx.page_size.shift(),
            usage: PageUsage::new(ctx.page_size.bytes()),
            accesses: 0,
            threads: ctx.threads,
        }
    }
}

impl Detector for SammuDetector {
    fn spec(&self) -> String {
        let p = self.sammu.params();
        format!(
            "sammu:l1={},l1ways={},l2={},l2ways={},ac={},nc={},nt={}{}{}",
            p.l1_entries,
            p.l1_ways,
            p.l2_entries,
            p.l2_ways,
            p.ac_bits,
            p.nc_bits,
            p.nt,
            if p.flush_at_end { ",flush=1" } else { "" },
            if p.tick > 0 { format!(",tick={}", p.tick) } else { String::new() }
        )
    }

    fn granularity(&self) -> crate::Granularity {
        crate::Granularity::Page
    }

    fn chunk(&mut self, chunk: &Chunk) {
        let a = &chunk.accesses;
        for (&t, &addr) in a.thread.iter().zip(&a.addr) {
            let core = self.placement.core(t);
            self.sammu.access(t, core, self.placement.node_of_core(core), addr >> self.page_shift);
            self.usage.access(t, addr);
            self.threads = self.threads.max(t as usize + 1);
        }
        self.accesses += a.len() as u64;
    }

    fn matrix(&self) -> &SharingMatrix {
        &self.sammu.matrix
    }

    fn finish(self: Box<Self>) -> Detection {
        let SammuDetector { mut sammu, placement, usage, accesses, threads, .. } = *self;
        if sammu.params().flush_at_end {
            sammu.flush(|c| placement.node_of_core(c));
        }
        sammu.report.storage_bytes = sammu.storage(threads);
        let r = &sammu.report;
        let flushed =
            if sammu.params().flush_at_end { format!(", {} flushed at the end", r.flushed) } else { String::new() };
        let ticked = if sammu.params().tick > 0 {
            format!(", {} at ticks ({} updates)", r.ticked, r.updates_from_ticks)
        } else {
            String::new()
        };
        let line = format!(
            "SAMMU: {} activations ({} evictions, {} saturations{flushed}{ticked}), {} statistics updates ({} from evictions, {} from saturations, {} from the flush), {} migration notifications; {} extra memory accesses ({:.3} per access), {} bytes of storage",
            r.triggers,
            r.evictions,
            r.saturations,
            r.updates,
            r.updates_from_evictions,
            r.updates_from_saturations,
            r.updates_from_flush,
            r.migration_notifications,
            r.extra_memory_accesses,
            r.extra_memory_accesses as f64 / accesses.max(1) as f64,
            r.storage_bytes
        );
        let report =
            Report { key: "sammu", json: serde_json::to_value(r).expect("a report serialises"), lines: vec![line] };
        Detection {
            seen: r.triggers,
            matrix: sammu.matrix,
            pages: usage,
            accesses,
            report: Some(report),
            decision: None,
        }
    }
}
