//! Online placement policies. Each one decides, reference by reference, where a page
//! lives, using only the past; the shared [`Residence`] charges what it does. A policy is
//! one `Policy` impl plus one entry in [`POLICIES`] (name, source, parameters).

mod kernel;
mod marathe;
mod replication;
mod seed004;
mod simple;

use crate::cost::{Costs, Residence, Tally, node_bit};
use crate::page::{Page, Ref};
use crate::partition::SamplerKind;
pub use sharemap_core::Param;
use sharemap_core::spec::param as p;
use sharemap_detect::sammu::SammuParams;
use std::collections::BTreeMap;

/// What a policy may know besides the page's own references.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    pub nodes: usize,
    pub costs: Costs,
    pub page_size: u64,
    /// Pages in the trace.
    pub pages: u64,
    /// Positions of annotations (see `Partition`).
    pub init_done: Option<u64>,
    pub phase_changes: &'a [u64],
    pub annotations: &'a [u64],
    /// References per millisecond of the traced run: converts the kernel's time-based
    /// periods into positions in the trace.
    pub refs_per_ms: f64,
    pub seed: u64,
}

impl Context<'_> {
    /// A duration in milliseconds as a number of references (at least 1).
    pub fn refs(&self, ms: f64) -> u64 {
        (ms * self.refs_per_ms).round().max(1.0) as u64
    }
}

pub trait Policy: Send + Sync {
    /// Runs the policy over one page's references.
    fn run(&self, page: &Page, ctx: &Context) -> Tally;

    /// What the pass that splits the trace by page must compute for this policy; `line` is
    /// the trace's cache-line size.
    fn prepass(&self, _line: u64) -> Prepass {
        Prepass::default()
    }
}

/// Work done in trace order while the trace is split by page, for the policies that need it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prepass {
    /// Which accesses a profile sees (marks references as sampled).
    pub sampler: Option<SamplerKind>,
    /// SAMMU's TLB model: its statistics updates become the pages' TLB events.
    pub tlb: Option<SammuParams>,
}

impl Prepass {
    /// What a set of policies needs together (the first policy asking for a sampler or a TLB
    /// model sets it).
    pub fn of(policies: &[(String, Box<dyn Policy>)], line: u64) -> Prepass {
        policies
            .iter()
            .map(|(_, p)| p.prepass(line))
            .fold(Prepass::default(), |acc, p| Prepass { sampler: acc.sampler.or(p.sampler), tlb: acc.tlb.or(p.tlb) })
    }
}

/// A registry row: how `sharemap policies` lists a policy and how settings build it.
pub struct PolicyInfo {
    pub name: &'static str,
    /// Where it comes from.
    pub source: &'static str,
    pub summary: &'static str,
    pub params: &'static [Param],
    build: fn(&Values) -> Result<Box<dyn Policy>, PolicyError>,
}

/// Every policy, in the order `--policy all` reports them.
pub static POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "first-touch",
        source: "Linux default; seed 003 (Marchetti et al.) with its init-done annotation",
        summary: "the page lives on the node that touches it first; after an init-done annotation, the first node to touch it after that",
        params: &[],
        build: |_| Ok(Box::new(simple::FirstTouch)),
    },
    PolicyInfo {
        name: "first-n-fills",
        source: "seed 003 (Marchetti et al.), section 3.2",
        summary: "first touch, then the first node to make n references (after init-done, if annotated) becomes the home",
        params: &[p("n", "16", "references that make a node the page's home")],
        build: |v| Ok(Box::new(simple::FirstNFills { n: v.u64("n")? as u32 })),
    },
    PolicyInfo {
        name: "round-robin",
        source: "seed 003's baseline; numactl-style spreading",
        summary: "the k-th page touched (in trace order) lives on node k mod nodes",
        params: &[],
        build: |_| Ok(Box::new(simple::Static(simple::Spread::ByTouch))),
    },
    PolicyInfo {
        name: "interleave",
        source: "numactl --interleave=all",
        summary: "page number mod nodes",
        params: &[],
        build: |_| Ok(Box::new(simple::Static(simple::Spread::ByNumber))),
    },
    PolicyInfo {
        name: "random",
        source: "seed 004's random static placement baseline",
        summary: "each page on a node drawn from a hash of its number and --seed",
        params: &[],
        build: |_| Ok(Box::new(simple::Static(simple::Spread::Random))),
    },
    PolicyInfo {
        name: "bind",
        source: "numactl --membind",
        summary: "every page on one node",
        params: &[p("node", "0", "the node")],
        build: |v| Ok(Box::new(simple::Static(simple::Spread::Bind(v.u64("node")? as u16)))),
    },
    PolicyInfo {
        name: "next-touch",
        source: "affinity-on-next-touch (madvise-style), marked at every annotation",
        summary: "first touch; after each annotation (init-done, phase-change, roi-begin) the next node to touch a page gets it",
        params: &[],
        build: |_| Ok(Box::new(simple::NextTouch { phases_only: false })),
    },
    PolicyInfo {
        name: "migrate-on-phase",
        source: "seed 003 (Marchetti et al.), section 4.2",
        summary: "first touch honouring init-done; placements are forgotten at phase-change annotations and the next node to touch a page gets it",
        params: &[],
        build: |_| Ok(Box::new(simple::NextTouch { phases_only: true })),
    },
    PolicyInfo {
        name: "numa-balancing",
        source: "Linux automatic NUMA balancing (kernel/sched/fair.c defaults)",
        summary: "every scan period the scanner marks scan-size MB of pages in address order; the next access faults, and the page migrates to the faulting node if the previous fault came from that node too (two-stage filter)",
        params: &[
            p("scan-delay-ms", "1000", "numa_balancing_scan_delay_ms: first scan after start"),
            p("scan-period-ms", "1000", "numa_balancing_scan_period_min_ms: time between scans"),
            p("scan-size-mb", "256", "numa_balancing_scan_size_mb: address space marked per scan"),
        ],
        build: |v| {
            Ok(Box::new(kernel::NumaBalancing {
                delay_ms: v.f64("scan-delay-ms")?,
                period_ms: v.f64("scan-period-ms")?,
                size_mb: v.f64("scan-size-mb")?,
            }))
        },
    },
    PolicyInfo {
        name: "sammu",
        source: "seed 000 (SAMMU), section 3.3: NUMA counters",
        summary: "saturating per-node counters, +1 for the node of a TLB event and -1 for the others; migrate when NC[n] - NC[home] >= NT; TLB events from SAMMU's per-core TLB model run over the trace (statistics updates: evictions and saturations with AC >= AT)",
        params: &[
            p("bits", "4", "counter width"),
            p("nt", "10", "migration threshold NT"),
            p(
                "events",
                "tlb",
                "tlb: SAMMU's TLB model (per-core L1 64x4, L2 512x4, SMT siblings sharing) drives the counters; proxy: events guessed from the page's own accesses (gap, burst)",
            ),
            p("l1", "64", "L1 data TLB entries (4-way) of the TLB model"),
            p("l2", "512", "L2 TLB entries (4-way) of the TLB model"),
            p(
                "ac",
                "32",
                "bits of the TLB model's access counters AC and thresholds AT (seed 000: 32; fewer bits saturate sooner, giving events on working sets that stay in the TLBs)",
            ),
            p(
                "gap",
                "1000",
                "proxy: a node's access this many references after its previous one counts as a TLB eviction event",
            ),
            p("burst", "256", "proxy: accesses of one residency that count as an access-counter saturation event"),
        ],
        build: |v| {
            let proxy = match v.text("events") {
                "tlb" => false,
                "proxy" => true,
                other => {
                    let value = other.to_string();
                    return Err(PolicyError::NotOneOf {
                        policy: "sammu",
                        key: "events".into(),
                        value,
                        choices: "tlb or proxy",
                    });
                }
            };
            Ok(Box::new(kernel::Sammu {
                max: ((1u32 << v.u64("bits")?.clamp(1, 15)) - 1) as u16,
                threshold: v.u64("nt")? as u16,
                proxy,
                tlb: if proxy { None } else { Some(sammu_tlb(v)?) },
                gap: v.u64("gap")?.max(1),
                burst: v.u64("burst")?.max(1) as u32,
            }))
        },
    },
    PolicyInfo {
        name: "kmaf",
        source: "kMAF (kernel Memory Affinity Framework)",
        summary: "counts page faults per node (first access per node per window); migrates to the node with most faults when max > 2 x (second + 1)",
        params: &[p("window-ms", "100", "fault window: a node faults once per page per window")],
        build: |v| Ok(Box::new(kernel::Kmaf { window_ms: v.f64("window-ms")? })),
    },
    PolicyInfo {
        name: "carrefour",
        source: "Carrefour (Dashti et al., ASPLOS 2013)",
        summary: "per epoch and page: migrate if one node makes >= share of the accesses, replicate if read-only and shared, else interleave",
        params: &[
            p("epoch-ms", "1000", "decision period"),
            p("share", "0.9", "fraction of a page's accesses that makes it a single node's page"),
            p("min-accesses", "16", "pages with fewer accesses in an epoch are left alone"),
        ],
        build: |v| {
            Ok(Box::new(kernel::Carrefour {
                epoch_ms: v.f64("epoch-ms")?,
                share: v.f64("share")?,
                min_accesses: v.u64("min-accesses")? as u32,
            }))
        },
    },
    PolicyInfo {
        name: "marathe",
        source: "seed 001 (Marathe & Mueller): hardware profile-guided placement",
        summary: "a profile of sampled accesses places each page, for the whole run, on the node with the most samples (unsampled pages: first touch)",
        params: &[
            p("source", "every", "every (each k-th access), cache-miss (long-latency-load proxy) or tlb-miss"),
            p("k", "100", "sampling period for source=every"),
            p("cache-kb", "32", "per-thread cache for source=cache-miss (KiB, 8-way, line size of the trace)"),
            p("tlb-entries", "64", "per-thread data TLB for source=tlb-miss (4-way)"),
        ],
        build: |v| {
            Ok(Box::new(marathe::Marathe {
                source: marathe::Source::parse(v)?,
                k: v.u64("k")?.max(1),
                cache_kb: v.u64("cache-kb")?.max(1),
                tlb_entries: v.u64("tlb-entries")?.clamp(1, u32::MAX as u64) as u32,
            }))
        },
    },
    PolicyInfo {
        name: "replicate-time",
        source: "seed 003 (Marchetti et al.), section 4.2: time policy",
        summary: "home by first touch; a node whose mapping of a page lasted t ms gets a read copy the next time it maps it (writes invalidate copies and mappings)",
        params: &[p("t-ms", "10", "mapping lifetime that earns a copy")],
        build: |v| Ok(Box::new(replication::Replicate { rule: replication::Rule::Time(v.f64("t-ms")?) })),
    },
    PolicyInfo {
        name: "replicate-counter",
        source: "seed 003 (Marchetti et al.), section 4.2: counter policy",
        summary: "a node that made n references during a mapping gets a read copy the next time it maps the page",
        params: &[p("n", "64", "references during a mapping that earn a copy")],
        build: |v| Ok(Box::new(replication::Replicate { rule: replication::Rule::Counter(v.u64("n")? as u32) })),
    },
    PolicyInfo {
        name: "replicate-counter-interrupt",
        source: "seed 003 (Marchetti et al.), section 4.2: counter-interrupt policy",
        summary: "a node gets a read copy as soon as it has made n references since mapping the page",
        params: &[p("n", "64", "references since mapping that earn a copy")],
        build: |v| Ok(Box::new(replication::Replicate { rule: replication::Rule::Interrupt(v.u64("n")? as u32) })),
    },
    PolicyInfo {
        name: "ace",
        source: "seed 004 section 4.4.1: the ACE policy",
        summary: "pages start in global memory and are replicated to readers; a write leaves one local copy at the writer; after 4 invalidations a page is frozen in global memory for good",
        params: &[p("invalidations", "4", "invalidations allowed before freezing")],
        build: |v| Ok(Box::new(seed004::Ace { limit: v.u64("invalidations")? as u32, delay: 0 })),
    },
    PolicyInfo {
        name: "platinum",
        source: "seed 004 section 4.4.1: PLATINUM (Cox & Fowler)",
        summary: "replicate on read, migrate on write; freeze a page referenced by another node within t1 of an invalidation; a daemon defrosts every t2",
        params: &[p("t1-ms", "10", "freeze window after an invalidation"), p("t2-ms", "1000", "defrost period")],
        build: |v| Ok(Box::new(seed004::Platinum { t1_ms: v.f64("t1-ms")?, t2_ms: v.f64("t2-ms")? })),
    },
    PolicyInfo {
        name: "delay",
        source: "seed 004 section 4.4.1: the Delay policy",
        summary: "ACE, but a node new to a page is mapped remotely with a counter of c references; the ACE decision is made when it runs out",
        params: &[
            p("c", "100", "references before deciding"),
            p("invalidations", "4", "invalidations allowed before freezing"),
        ],
        build: |v| {
            Ok(Box::new(seed004::Ace { limit: v.u64("invalidations")? as u32, delay: v.u64("c")?.max(1) as u32 }))
        },
    },
];

pub fn find(name: &str) -> Option<&'static PolicyInfo> {
    POLICIES.iter().find(|p| p.name == name)
}

/// A policy or one of its settings that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("setting '{setting}': expected policy.key=value")]
    Malformed { setting: String },
    #[error("setting '{setting}': unknown policy '{policy}'")]
    UnknownPolicy { setting: String, policy: String },
    #[error("setting '{setting}': {policy} has no parameter '{key}' (it has: {known})")]
    UnknownParameter { setting: String, policy: &'static str, key: String, known: String },
    #[error("{policy}.{key} = '{value}': expected {expected}")]
    BadValue { policy: &'static str, key: String, value: String, expected: &'static str },
    #[error("{policy}.{key}: '{value}' is not {choices}")]
    NotOneOf { policy: &'static str, key: String, value: String, choices: &'static str },
}

/// `policy.key=value` settings, checked against the policies' parameters.
#[derive(Clone, Debug, Default)]
pub struct Settings(BTreeMap<(String, String), String>);

impl Settings {
    /// Parses one `policy.key=value`.
    pub fn add(&mut self, spec: &str) -> Result<(), PolicyError> {
        let malformed = || PolicyError::Malformed { setting: spec.to_string() };
        let (lhs, value) = spec.split_once('=').ok_or_else(malformed)?;
        let (policy, key) = lhs.split_once('.').ok_or_else(malformed)?;
        let info = find(policy)
            .ok_or_else(|| PolicyError::UnknownPolicy { setting: spec.to_string(), policy: policy.to_string() })?;
        if !info.params.iter().any(|p| p.key == key) {
            let known: Vec<&str> = info.params.iter().map(|p| p.key).collect();
            return Err(PolicyError::UnknownParameter {
                setting: spec.to_string(),
                policy: info.name,
                key: key.to_string(),
                known: if known.is_empty() { "none".to_string() } else { known.join(", ") },
            });
        }
        self.0.insert((policy.to_string(), key.to_string()), value.trim().to_string());
        Ok(())
    }
}

/// A policy's resolved parameter values.
pub struct Values<'a> {
    info: &'a PolicyInfo,
    settings: &'a Settings,
}

impl<'a> Values<'a> {
    pub fn text(&self, key: &str) -> &'a str {
        self.settings
            .0
            .get(&(self.info.name.to_string(), key.to_string()))
            .map(String::as_str)
            .or_else(|| self.info.params.iter().find(|p| p.key == key).map(|p| p.default))
            .unwrap_or("")
    }

    /// An error about `key`'s value.
    pub fn bad(&self, key: &str, expected: &'static str) -> PolicyError {
        PolicyError::BadValue {
            policy: self.info.name,
            key: key.to_string(),
            value: self.text(key).to_string(),
            expected,
        }
    }

    pub fn f64(&self, key: &str) -> Result<f64, PolicyError> {
        self.text(key)
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| self.bad(key, "a non-negative number"))
    }

    pub fn u64(&self, key: &str) -> Result<u64, PolicyError> {
        self.text(key).parse::<u64>().map_err(|_| self.bad(key, "a non-negative integer"))
    }
}

impl PolicyInfo {
    pub fn build(&self, settings: &Settings) -> Result<Box<dyn Policy>, PolicyError> {
        (self.build)(&Values { info: self, settings })
    }

    /// The value this policy will use for `key` under `settings`.
    pub fn value<'a>(&'a self, settings: &'a Settings, key: &str) -> &'a str {
        Values { info: self, settings }.text(key)
    }
}

/// Charges one reference.
#[inline]
pub(crate) fn charge(res: &mut Residence, r: Ref) {
    if r.write {
        res.write(r.node);
    } else {
        res.read(r.node);
    }
}

/// What a policy that starts at the first touch and only moves a page to nodes referencing
/// it does on a page only one node references: nothing, every reference local.
pub(crate) fn private(page: &Page) -> Option<Tally> {
    page.only_node().map(|_| Tally { local: page.len(), ..Tally::default() })
}

/// The page starting where its first reference comes from (free).
pub(crate) fn first_touch(page: &Page) -> Residence {
    Residence::new(node_bit(page.first().node))
}

#[cfg(test)]
mod tests;

/// SAMMU's TLB model as the `sammu` policy's parameters set it.
fn sammu_tlb(v: &Values) -> Result<SammuParams, PolicyError> {
    let entries = |key: &str| -> Result<usize, PolicyError> {
        v.text(key)
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 4)
            .ok_or_else(|| v.bad(key, "a number of TLB entries (at least 4)"))
    };
    let ac_bits = v
        .text("ac")
        .parse::<u32>()
        .ok()
        .filter(|b| (1..=32).contains(b))
        .ok_or_else(|| v.bad("ac", "a number of bits from 1 to 32"))?;
    Ok(SammuParams { l1_entries: entries("l1")?, l2_entries: entries("l2")?, ac_bits, ..SammuParams::default() })
}
