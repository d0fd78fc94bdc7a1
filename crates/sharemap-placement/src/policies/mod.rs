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
use sharemap_core::plugin::{
    self, Caps, MAX_CACHE_KB, MAX_TLB_ENTRIES, ParamKind, Params, Plugin, choice, count, number, ranged,
};
use sharemap_decide::sammu::{self as sammu_tables, SammuParams};
use sharemap_decide::{carrefour, kmaf, numa_balancing};
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

pub trait Policy: Send + Sync + std::fmt::Debug {
    /// Runs the policy over one page's references.
    fn place_page(&self, page: &Page, ctx: &Context) -> Tally;

    /// What the pass that splits the trace by page must compute for this policy; `line` is
    /// the trace's cache-line size.
    fn prepass(&self, _line: u64) -> Prepass {
        Prepass::default()
    }

    /// Whether it can run on a machine of `nodes` NUMA nodes (a node it names must exist).
    fn check(&self, nodes: usize) -> Result<(), PolicyError> {
        let _ = nodes;
        Ok(())
    }

    /// For a policy driven by time: what it waits for (a scan's delay, a window, a daemon's
    /// period) and after how many ms of the trace's time scale it first comes. A trace that
    /// ends before it never sees that part of the policy, which `place` says.
    fn clock(&self) -> Option<(&'static str, f64)> {
        None
    }
}

/// Work done in trace order while the trace is split by page, for the policies that need it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prepass {
    /// Which accesses a profile sees (marks references as sampled).
    pub sampler: Option<SamplerKind>,
    /// SAMMU's TLB model: its statistics updates become the pages' TLB events.
    pub tlb: Option<SammuParams>,
    /// A per-thread TLB of this many entries (8-way LRU) whose evictions become the pages'
    /// events: where a node's mapping of a page ends (seed 003's replication policies).
    pub mappings: Option<u32>,
}

impl Prepass {
    /// Both passes' work in one, if they do not ask for different samplers or TLB models.
    fn with(self, other: Prepass) -> Option<Prepass> {
        let sampler = match (self.sampler, other.sampler) {
            (Some(a), Some(b)) if a != b => return None,
            (a, b) => a.or(b),
        };
        let tlb = match (self.tlb, other.tlb) {
            (Some(a), Some(b)) if a != b => return None,
            (a, b) => a.or(b),
        };
        let mappings = match (self.mappings, other.mappings) {
            (Some(a), Some(b)) if a != b => return None,
            (a, b) => a.or(b),
        };
        // Both kinds of event in one page's list would read as one another's.
        if tlb.is_some() && mappings.is_some() {
            return None;
        }
        Some(Prepass { sampler, tlb, mappings })
    }

    /// The passes a set of policies needs: each with the indices of the policies it serves.
    /// Policies that ask for different samplers (two variants of one policy) get passes of
    /// their own; policies that need nothing share the first.
    pub fn groups(policies: &[(String, Box<dyn Policy>)], line: u64) -> Vec<(Prepass, Vec<usize>)> {
        let mut groups: Vec<(Prepass, Vec<usize>)> = Vec::new();
        let mut plain = Vec::new();
        for (i, (_, p)) in policies.iter().enumerate() {
            let need = p.prepass(line);
            if need == Prepass::default() {
                plain.push(i);
                continue;
            }
            match groups.iter_mut().find_map(|g| g.0.with(need).map(|merged| (g, merged))) {
                Some((g, merged)) => {
                    g.0 = merged;
                    g.1.push(i);
                }
                None => groups.push((need, vec![i])),
            }
        }
        match groups.first_mut() {
            Some(first) => {
                first.1.extend(plain);
                first.1.sort_unstable();
            }
            None => groups.push((Prepass::default(), plain)),
        }
        groups
    }
}

/// How a registry row builds its policy from its parameters.
pub type BuildPolicy = fn(&Params) -> Result<Box<dyn Policy>, PolicyError>;

/// A registry row: how `sharemap policies` lists a policy and how settings build it.
pub type PolicyInfo = Plugin<BuildPolicy>;

/// The registry's name in errors.
pub const KIND: &str = "policy";

/// TLB entries of a 4-way model.
const AT_LEAST_4: ParamKind = ParamKind::Integer { min: 4, max: 1 << 24 };

/// Every policy, in the order `--policy all` reports them.
/// Seed 003's counters count cache fills: the references that miss a per-thread cache of
/// this size (its 16 KB per processor), found in the partition pass. 0 counts references.
const FILLS_KB: Param = ranged(
    "fills-kb",
    "16",
    0,
    MAX_CACHE_KB,
    "per-thread cache (KiB, 8-way, the trace's lines) whose misses are the cache fills counted; 0: count every reference",
);

fn tlb_of(v: &Params) -> u32 {
    v.integer("tlb") as u32
}

/// The partition pass's work for a policy counting fills in a `kb`-KiB per-thread cache.
pub(crate) fn fills_prepass(kb: u64, line: u64) -> Prepass {
    if kb == 0 {
        return Prepass::default();
    }
    let sampler = SamplerKind::CacheMiss { size: kb * 1024, ways: 8, line: line.max(1), loads_only: false };
    Prepass { sampler: Some(sampler), ..Prepass::default() }
}

/// Seed 003's mappings are TLB entries: its machine's 128 (table 1). 0: a mapping lasts
/// until another node writes the page.
const MAPPING_TLB: Param = ranged(
    "tlb",
    "128",
    0,
    MAX_TLB_ENTRIES,
    "entries of the per-thread TLB (8-way LRU) that holds a node's mappings: one ends when its entry is evicted, or when another node writes; 0: only the write ends it",
);

pub static POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "first-touch",
        source: "Linux default (as simulate's os); Marchetti et al. (seed 003) with after-init=1",
        summary: "the page lives on the node that touches it first, as Linux places it; with after-init=1, the first node to touch it after the trace's init-done annotation (seed 003)",
        params: &[plugin::switch(
            "after-init",
            "0",
            "honour the init-done annotation: the first node to touch a page after it becomes its home",
        )],
        caps: Caps::PER_PAGE,
        build: |v| Ok(Box::new(simple::FirstTouch { after_init: v.switch("after-init") })),
    },
    PolicyInfo {
        name: "first-n-fills",
        source: "Marchetti et al. (seed 003), section 3.2",
        summary: "first touch, then the first node to make n cache fills (after init-done, if annotated) becomes the home",
        params: &[ranged("n", "16", 1, U32, "cache fills that make a node the page's home"), FILLS_KB],
        caps: Caps::PER_PAGE,
        build: |v| Ok(Box::new(simple::FirstNFills { n: u32_of(v, "n"), fills_kb: v.integer("fills-kb") })),
    },
    PolicyInfo {
        name: "round-robin",
        source: "Marchetti et al.'s (seed 003) baseline; numactl-style spreading",
        summary: "the k-th page touched (in trace order) lives on node k mod nodes",
        params: &[],
        caps: Caps::NONE,
        build: |_| Ok(Box::new(simple::Static(simple::Spread::ByTouch))),
    },
    PolicyInfo {
        name: "interleave",
        source: "numactl --interleave=all",
        summary: "page number mod nodes",
        params: &[],
        caps: Caps::PER_PAGE,
        build: |_| Ok(Box::new(simple::Static(simple::Spread::ByNumber))),
    },
    PolicyInfo {
        name: "random",
        source: "Bolosky & Scott's (seed 004) random static placement baseline",
        summary: "each page on a node drawn from a hash of its number and --seed",
        params: &[],
        caps: Caps::PER_PAGE,
        build: |_| Ok(Box::new(simple::Static(simple::Spread::Random))),
    },
    PolicyInfo {
        name: "bind",
        source: "numactl --membind",
        summary: "every page on one node",
        params: &[ranged("node", "0", 0, u16::MAX as u64, "the node")],
        caps: Caps::PER_PAGE,
        build: |v| Ok(Box::new(simple::Static(simple::Spread::Bind(v.integer("node") as u16)))),
    },
    PolicyInfo {
        name: "next-touch",
        source: "affinity-on-next-touch (madvise-style), marked at every annotation",
        summary: "first touch; after each annotation (init-done, phase-change, roi-begin) the next node to touch a page gets it",
        params: &[],
        caps: Caps::MOVES,
        build: |_| Ok(Box::new(simple::NextTouch { phases_only: false })),
    },
    PolicyInfo {
        name: "migrate-on-phase",
        source: "Marchetti et al. (seed 003), section 4.2",
        summary: "first touch honouring init-done; placements are forgotten at phase-change annotations and the next node to touch a page gets it",
        params: &[],
        caps: Caps::MOVES,
        build: |_| Ok(Box::new(simple::NextTouch { phases_only: true })),
    },
    PolicyInfo {
        name: "numa-balancing",
        source: "Linux automatic NUMA balancing (kernel/sched/fair.c defaults)",
        summary: "every scan period the scanner marks scan-size MB of pages in address order; the next access faults, and the page migrates to the faulting node if the previous fault came from that node too (two-stage filter)",
        params: &[numa_balancing::SCAN_DELAY_MS, numa_balancing::SCAN_PERIOD_MS, numa_balancing::SCAN_SIZE_MB],
        caps: Caps::MOVES,
        build: |v| {
            Ok(Box::new(kernel::NumaBalancing {
                delay_ms: v.number("scan-delay-ms"),
                period_ms: v.number("scan-period-ms"),
                size_mb: v.number("scan-size-mb"),
            }))
        },
    },
    PolicyInfo {
        name: "sammu",
        source: "SAMMU (seed 000), section 3.3: NUMA counters",
        summary: "saturating per-node counters, +1 for the node of a TLB event and -1 for the others; migrate when NC[n] - NC[home] >= NT; TLB events from SAMMU's per-core TLB model run over the trace (statistics updates: evictions and saturations with AC >= AT)",
        params: &[
            Param { doc: "bits of each NUMA counter", ..sammu_tables::NC },
            Param { doc: "migration threshold NT", ..sammu_tables::NT },
            choice(
                "events",
                "tlb",
                &["tlb", "proxy"],
                "tlb: SAMMU's TLB model (per-core L1 64x4, L2 512x4, SMT siblings sharing) drives the counters; proxy: events guessed from the page's own accesses (gap, burst)",
            ),
            // The model's sets are 4-way: at least one set of entries.
            Param { doc: "L1 data TLB entries (4-way) of the TLB model", kind: AT_LEAST_4, ..sammu_tables::L1 },
            Param { doc: "L2 TLB entries (4-way) of the TLB model", kind: AT_LEAST_4, ..sammu_tables::L2 },
            Param {
                doc: "bits of the TLB model's access counters AC and thresholds AT (seed 000: 32; fewer bits saturate sooner, giving events on working sets that stay in the TLBs)",
                ..sammu_tables::AC
            },
            count(
                "gap",
                "1000",
                "proxy: a node's access this many references after its previous one counts as a TLB eviction event",
            ),
            ranged(
                "burst",
                "256",
                1,
                U32,
                "proxy: accesses of one residency that count as an access-counter saturation event",
            ),
        ],
        caps: Caps::MOVES,
        build: |v| {
            let proxy = v.text("events") == "proxy";
            Ok(Box::new(kernel::Sammu {
                max: ((1u32 << v.integer("nc")) - 1) as u16,
                threshold: v.integer("nt") as u16,
                proxy,
                tlb: if proxy { None } else { Some(SammuParams::from_params(v)) },
                gap: v.integer("gap"),
                burst: v.integer("burst") as u32,
            }))
        },
    },
    PolicyInfo {
        name: "kmaf",
        source: "kMAF (kernel Memory Affinity Framework)",
        summary: "counts page faults per node (first access per node per window); migrates to the node with most faults when max > 2 x (second + 1)",
        params: &[kmaf::WINDOW_MS],
        caps: Caps::MOVES,
        build: |v| Ok(Box::new(kernel::Kmaf { window_ms: v.number("window-ms") })),
    },
    PolicyInfo {
        name: "carrefour",
        source: "Carrefour (Dashti et al., ASPLOS 2013)",
        summary: "per epoch and page: migrate if one node makes >= share of the accesses, replicate if read-only and shared, else interleave",
        params: &[carrefour::EPOCH_MS, carrefour::SHARE, carrefour::MIN_ACCESSES],
        caps: Caps::MOVES,
        build: |v| {
            Ok(Box::new(kernel::Carrefour {
                epoch_ms: v.number("epoch-ms"),
                share: v.number("share"),
                min_accesses: v.integer("min-accesses") as u32,
            }))
        },
    },
    PolicyInfo {
        name: "marathe",
        source: "Marathe & Mueller (seed 001): hardware profile-guided placement",
        summary: "a profile of sampled accesses places each page, for the whole run, on the node with the most samples (unsampled pages: first touch)",
        params: &sharemap_decide::marathe::PROFILE,
        caps: Caps::NONE,
        build: |v| Ok(Box::new(marathe::Marathe { source: sharemap_decide::marathe::Source::from_params(v) })),
    },
    PolicyInfo {
        name: "replicate-time",
        source: "Marchetti et al. (seed 003), section 4.2: time policy",
        summary: "home by first touch; a node whose mapping of a page (a TLB entry) lasted t ms gets a read copy the next time it maps it (writes invalidate copies and mappings)",
        params: &[number("t-ms", "10", "mapping lifetime that earns a copy"), MAPPING_TLB],
        caps: Caps::MOVES,
        build: |v| {
            Ok(Box::new(replication::Replicate {
                rule: replication::Rule::Time(v.number("t-ms")),
                fills_kb: 0,
                tlb: tlb_of(v),
            }))
        },
    },
    PolicyInfo {
        name: "replicate-counter",
        source: "Marchetti et al. (seed 003), section 4.2: counter policy",
        summary: "a node that made n cache fills during a mapping (a TLB entry's stay) gets a read copy the next time it maps the page",
        params: &[ranged("n", "64", 0, U32, "cache fills during a mapping that earn a copy"), FILLS_KB, MAPPING_TLB],
        caps: Caps::MOVES_PER_PAGE,
        build: |v| {
            Ok(Box::new(replication::Replicate {
                rule: replication::Rule::Counter(u32_of(v, "n")),
                fills_kb: v.integer("fills-kb"),
                tlb: tlb_of(v),
            }))
        },
    },
    PolicyInfo {
        name: "replicate-counter-interrupt",
        source: "Marchetti et al. (seed 003), section 4.2: counter-interrupt policy",
        summary: "a node gets a read copy as soon as it has made n cache fills since mapping the page",
        params: &[ranged("n", "64", 0, U32, "cache fills since mapping that earn a copy"), FILLS_KB, MAPPING_TLB],
        caps: Caps::MOVES_PER_PAGE,
        build: |v| {
            Ok(Box::new(replication::Replicate {
                rule: replication::Rule::Interrupt(u32_of(v, "n")),
                fills_kb: v.integer("fills-kb"),
                tlb: tlb_of(v),
            }))
        },
    },
    PolicyInfo {
        name: "ace",
        source: "Bolosky & Scott (seed 004) section 4.4.1: the ACE policy",
        summary: "pages start in global memory and are replicated to readers; a write leaves one local copy at the writer; after 4 invalidations a page is frozen in global memory for good",
        params: &[ranged("invalidations", "4", 0, U32, "invalidations allowed before freezing")],
        caps: Caps::MOVES_PER_PAGE,
        build: |v| Ok(Box::new(seed004::Ace { limit: u32_of(v, "invalidations"), delay: 0 })),
    },
    PolicyInfo {
        name: "platinum",
        source: "Bolosky & Scott (seed 004) section 4.4.1: PLATINUM (Cox & Fowler)",
        summary: "replicate on read, migrate on write; freeze a page referenced by another node within t1 of an invalidation; a daemon defrosts every t2",
        params: &[
            number("t1-ms", "10", "freeze window after an invalidation"),
            number("t2-ms", "1000", "defrost period"),
        ],
        caps: Caps::MOVES,
        build: |v| Ok(Box::new(seed004::Platinum { t1_ms: v.number("t1-ms"), t2_ms: v.number("t2-ms") })),
    },
    PolicyInfo {
        name: "delay",
        source: "Bolosky & Scott (seed 004) section 4.4.1: the Delay policy",
        summary: "ACE, but a node new to a page is mapped remotely with a counter of c references; the ACE decision is made when it runs out",
        params: &[
            ranged("c", "100", 0, U32, "references before deciding"),
            ranged("invalidations", "4", 0, U32, "invalidations allowed before freezing"),
        ],
        caps: Caps::MOVES_PER_PAGE,
        build: |v| Ok(Box::new(seed004::Ace { limit: u32_of(v, "invalidations"), delay: u32_of(v, "c").max(1) })),
    },
];

pub fn find(name: &str) -> Option<&'static PolicyInfo> {
    plugin::find(POLICIES, name)
}

/// The largest count a policy keeps in 32 bits.
const U32: u64 = u32::MAX as u64;

/// A whole-number parameter that a policy counts in 32 bits (its range keeps it there).
fn u32_of(v: &Params, key: &str) -> u32 {
    v.integer(key) as u32
}

/// A policy or one of its settings that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("setting '{setting}': expected policy.key=value")]
    Malformed { setting: String },
    #[error("setting '{setting}': unknown policy '{policy}' ({hint}policies: sharemap list policies)")]
    UnknownPolicy { setting: String, policy: String, hint: String },
    #[error("setting '{setting}': {policy} has no parameter '{key}' ({hint}it has: {known})")]
    UnknownParameter { setting: String, policy: &'static str, key: String, hint: String, known: String },
    #[error("{policy}.{key} = '{value}': expected {expected} ({what})")]
    BadValue { policy: &'static str, key: String, value: String, expected: String, what: &'static str },
    #[error("{policy}.{key}: '{value}' is not {choices}")]
    NotOneOf { policy: &'static str, key: String, value: String, choices: String },
    /// A value the machine cannot honour (a node it does not have).
    #[error("{policy}.{key}={value}: {why}")]
    Machine { policy: &'static str, key: &'static str, value: String, why: String },
}

/// `policy.key=value` settings, checked against the policies' parameters.
#[derive(Clone, Debug, Default)]
pub struct Settings(BTreeMap<String, Vec<(String, Option<String>)>>);

impl Settings {
    /// Parses one `policy.key=value`.
    pub fn add(&mut self, spec: &str) -> Result<(), PolicyError> {
        let malformed = || PolicyError::Malformed { setting: spec.to_string() };
        let (lhs, value) = spec.split_once('=').ok_or_else(malformed)?;
        let (policy, key) = lhs.split_once('.').ok_or_else(malformed)?;
        let info = find(policy).ok_or_else(|| PolicyError::UnknownPolicy {
            setting: spec.to_string(),
            policy: policy.to_string(),
            hint: sharemap_core::did_you_mean(policy, POLICIES.iter().map(|p| p.name)),
        })?;
        let key = sharemap_core::plugin::renamed(KIND, info.name, key).unwrap_or(key);
        if !info.params.iter().any(|p| p.key == key) {
            let known: Vec<&str> = info.params.iter().map(|p| p.key).collect();
            return Err(PolicyError::UnknownParameter {
                setting: spec.to_string(),
                policy: info.name,
                key: key.to_string(),
                hint: sharemap_core::did_you_mean(key, known.iter().copied()),
                known: if known.is_empty() { "none".to_string() } else { known.join(", ") },
            });
        }
        let layer = self.0.entry(policy.to_string()).or_default();
        layer.retain(|(k, _)| k != key);
        layer.push((key.to_string(), Some(value.trim().to_string())));
        Ok(())
    }

    /// The settings of one policy, in the order given.
    fn of(&self, policy: &str) -> &[(String, Option<String>)] {
        self.0.get(policy).map_or(&[], Vec::as_slice)
    }
}

/// The policy of a row with its defaults, then `settings`, then `options` (a spec's, which
/// win).
pub fn build(
    row: &'static PolicyInfo,
    settings: &Settings,
    options: &[(String, Option<String>)],
) -> Result<Box<dyn Policy>, PolicyError> {
    let mut params = Params::defaults(KIND, row.name, row.params);
    for (key, value) in settings.of(row.name).iter().chain(options) {
        params.set(key, value.as_deref()).map_err(|_| match (row.params.iter().find(|p| p.key == key), value) {
            (Some(Param { kind: ParamKind::Choice(words), .. }), Some(value)) => {
                let (last, rest) = words.split_last().expect("a choice has words");
                PolicyError::NotOneOf {
                    policy: row.name,
                    key: key.clone(),
                    value: value.clone(),
                    choices: if rest.is_empty() { last.to_string() } else { format!("{} or {last}", rest.join(", ")) },
                }
            }
            (Some(p), Some(value)) => PolicyError::BadValue {
                policy: row.name,
                key: key.clone(),
                value: value.clone(),
                expected: p.kind.expected(),
                what: p.doc,
            },
            _ => PolicyError::UnknownParameter {
                setting: format!("{}.{key}", row.name),
                policy: row.name,
                key: key.clone(),
                hint: sharemap_core::did_you_mean(key, row.params.iter().map(|p| p.key)),
                known: row.params.iter().map(|p| p.key).collect::<Vec<_>>().join(", "),
            },
        })?;
    }
    (row.build)(&params)
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
