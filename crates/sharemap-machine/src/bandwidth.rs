//! How many bytes a NUMA node's memory and the links between nodes carry per second: what
//! decides a streaming program once its working set leaves the caches. The figures and
//! their sources: docs/machine.md.

use serde::Serialize;
use std::fs;

/// Where a machine's bandwidth figures come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BandwidthOrigin {
    /// The preset's, from its processor's memory channels and links (docs/machine.md).
    Preset,
    /// The host's firmware (ACPI HMAT, as Linux shows it under /sys/devices/system/node).
    Hmat,
    /// Not given by the description: `ASSUMED_GBPS_PER_CORE` per core of a node.
    Assumed,
    /// Set by the simulator's parameters (`--param mem-gbps=`, `link-gbps=`), one or both.
    Parameters,
}

impl BandwidthOrigin {
    pub fn label(self) -> &'static str {
        match self {
            BandwidthOrigin::Preset => "preset",
            BandwidthOrigin::Hmat => "the host's HMAT",
            BandwidthOrigin::Assumed => "assumed",
            BandwidthOrigin::Parameters => "--param",
        }
    }
}

/// Sustained bandwidths in GB/s (10^9 bytes a second); 0 means not a limit (a machine
/// whose model has no such bottleneck, such as seed 004's).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Bandwidth {
    /// One node's memory, whoever reads it.
    pub memory_gbps: f64,
    /// One direction of the link between two nodes.
    pub link_gbps: f64,
    pub origin: BandwidthOrigin,
}

/// Sustained memory bandwidth per core assumed when a description gives none. What decides a
/// mapping is when a node saturates: real nodes do when a third to a half of their cores
/// stream. The simulator runs a streaming thread at about 5 GB/s (its fixed cost per access;
/// a real core streams 8-15 GB/s alone), so 2 GB/s a core keeps that point; it is also the
/// Xeon X7550's own figure (docs/machine.md).
pub const ASSUMED_GBPS_PER_CORE: f64 = 2.0;
/// The link between two nodes, assumed as a share of one node's memory bandwidth (QPI, UPI
/// and Infinity Fabric links carry about half of what a socket's memory does).
pub const ASSUMED_LINK_SHARE: f64 = 0.5;

impl Bandwidth {
    /// The assumption for a node of `cores_per_node` cores.
    pub fn assumed(cores_per_node: usize) -> Bandwidth {
        let memory = ASSUMED_GBPS_PER_CORE * cores_per_node.max(1) as f64;
        Bandwidth { memory_gbps: memory, link_gbps: memory * ASSUMED_LINK_SHARE, origin: BandwidthOrigin::Assumed }
    }

    /// The two figures in words: "memory 16 GB/s a node, link 10 GB/s each way".
    pub fn figures(&self) -> String {
        let limit = |g: f64| if g > 0.0 { format!("{g} GB/s") } else { "no limit".into() };
        format!("memory {} a node, link {} each way", limit(self.memory_gbps), limit(self.link_gbps))
    }

    /// What one node's PUs can read from another node's memory (both its memory and the
    /// link are in the way), in GB/s; infinite when neither limits.
    pub fn between(&self, from: usize, to: usize) -> f64 {
        let limit = |g: f64| if g > 0.0 { g } else { f64::INFINITY };
        if from == to { limit(self.memory_gbps) } else { limit(self.memory_gbps).min(limit(self.link_gbps)) }
    }
}

/// The host's local read bandwidth from the firmware, when Linux shows it (the
/// `access0/initiators/read_bandwidth` of each node, in MB/s): the lowest over the nodes.
/// No link figures are given there: the link keeps its assumed share.
pub fn host_hmat(nodes: &[u32]) -> Option<f64> {
    let mut lowest: Option<f64> = None;
    for os in nodes {
        let text =
            fs::read_to_string(format!("/sys/devices/system/node/node{os}/access0/initiators/read_bandwidth")).ok()?;
        let mbps: f64 = text.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0)?;
        lowest = Some(lowest.map_or(mbps, |l| l.min(mbps)));
    }
    lowest.map(|mbps| mbps / 1000.0)
}
