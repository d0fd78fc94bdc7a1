//! Mechanisms: who decides where threads run and where pages live, inside the simulation
//! and on its clock. A static one only says where things start; an online one also sees
//! every access and moves threads and pages as it goes. One mechanism is one `Mechanism`
//! impl plus one row of [`MECHANISMS`].

mod fixed;

use crate::model::Model;
use crate::sim::{FirstPlacement, Sim};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

/// What the whole trace says, for the mechanisms that know the future (the oracle) or
/// profile a run first.
#[derive(Clone, Debug)]
pub struct Profile {
    pub matrix: SharingMatrix,
    /// Per page: accesses by each thread.
    pub pages: Vec<(u64, Vec<u64>)>,
    pub page_size: u64,
}

pub struct Context<'a> {
    pub machine: &'a Machine,
    pub model: &'a Model,
    /// Threads of the trace.
    pub threads: usize,
    pub page_size: u64,
    pub seed: u64,
    /// Present when a mechanism in the run asked for it.
    pub profile: Option<&'a Profile>,
}

/// Where a run starts.
pub struct Start {
    /// The PU of each thread (threads beyond go to `t mod PUs`).
    pub pus: Vec<usize>,
    /// How pages without a home get one at their first access.
    pub placement: FirstPlacement,
    /// Pages placed before the run: (page, node).
    pub homes: Vec<(u64, usize)>,
}

pub trait Mechanism: Send {
    fn start(&mut self, ctx: &Context) -> Result<Start, String>;

    /// Whether it wants `after_access` (static mechanisms cost nothing per access).
    fn online(&self) -> bool {
        false
    }

    /// After each access of the run, with its latency: may move threads and pages.
    fn after_access(&mut self, _sim: &mut Sim, _thread: usize, _addr: u64, _write: bool, _ns: f64) {}
}

/// A registry row: how `sharemap simulate --mechanism` names and lists a mechanism.
pub struct MechanismInfo {
    pub name: &'static str,
    pub source: &'static str,
    pub summary: &'static str,
    /// Needs the whole trace's profile before the run.
    pub needs_profile: bool,
    pub build: fn(seed: u64) -> Box<dyn Mechanism>,
}

pub const MECHANISMS: &[MechanismInfo] = &[
    MechanismInfo {
        name: "os",
        source: "the baseline of seed 000 (SAMMU) section 4",
        summary: "thread i on PU i in hwloc's logical order, pages on the node of their first touch",
        needs_profile: false,
        build: |_| Box::new(fixed::Os),
    },
    MechanismInfo {
        name: "random",
        source: "seed 000 (SAMMU) section 4.3",
        summary: "a random thread mapping and each page on a random node (seeded)",
        needs_profile: false,
        build: |seed| Box::new(fixed::Random { seed }),
    },
    MechanismInfo {
        name: "oracle",
        source: "seed 000 (SAMMU) section 4.3",
        summary: "the whole trace's sharing mapped by sharemap's default algorithm; each page from the start on the node that accesses it most",
        needs_profile: true,
        build: |_| Box::new(fixed::Oracle),
    },
];

pub fn find(name: &str) -> Option<&'static MechanismInfo> {
    MECHANISMS.iter().find(|m| m.name == name)
}

/// The mechanisms of a comma list, or all of them.
pub fn parse_list(list: &str) -> Result<Vec<&'static MechanismInfo>, String> {
    if list.trim() == "all" {
        return Ok(MECHANISMS.iter().collect());
    }
    let mut out: Vec<&'static MechanismInfo> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let m = find(name).ok_or_else(|| {
            let names: Vec<&str> = MECHANISMS.iter().map(|m| m.name).collect();
            format!("unknown mechanism '{name}' (known: {}, or all)", names.join(", "))
        })?;
        if !out.iter().any(|o| o.name == m.name) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err("no mechanism named".into());
    }
    Ok(out)
}
