//! Machines of the seed papers, as hwloc synthetic strings plus their cost parameters.
//! PU OS numbering follows Linux on such hosts: first hardware threads of every core, package
//! by package, then the second threads (hwloc's interleave syntax `step*count:...`).

use crate::bandwidth::{Bandwidth, BandwidthOrigin};
use crate::cost::CostParams;

pub struct Preset {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub description: &'static str,
    pub synthetic: &'static str,
    /// Cost parameters when the preset models a seed-004 machine (else derived from distances).
    pub cost: Option<fn(u64) -> CostParams>,
    /// Whether its last-level cache is inclusive (None: the machine has no such cache).
    pub llc_inclusive: Option<bool>,
    /// Whether each core's last private cache holds every line of its lower ones (None:
    /// not said, or a single private level).
    pub private_inclusive: Option<bool>,
    /// Sustained memory bandwidth of a node and of one direction of a link between two.
    pub bandwidth: Bandwidth,
}

const fn sustained(memory_gbps: f64, link_gbps: f64) -> Bandwidth {
    Bandwidth { memory_gbps, link_gbps, origin: BandwidthOrigin::Preset }
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "sammu-x7550",
        aliases: &["sammu", "xeon-x7550"],
        description: "SAMMU (seed 000) Table 1: 4 x Xeon X7550 (Nehalem-EX), 8 cores, 2-SMT, 18 MB L3, one NUMA node per package",
        synthetic: "pack:4 numa:1 l3:1(size=18MiB) l2:8(size=256KiB) l1d:1(size=32KiB) core:1 pu:2(indexes=2*8:16*4:1*2)",
        cost: None,
        // Nehalem-EX: the L3 holds every line of its cores' L1 and L2 (its core-valid bits);
        // the L2 holds some of the L1's lines, not all (neither inclusive nor exclusive).
        llc_inclusive: Some(true),
        private_inclusive: Some(false),
        // Four SMI channels of DDR3-1066 (34 GB/s peak) sustain about 16; a QPI link at
        // 6.4 GT/s carries 12.8 GB/s each way, about 10 sustained.
        bandwidth: sustained(16.0, 10.0),
    },
    Preset {
        name: "stmap-xeon",
        aliases: &["xeon-e5-4650"],
        description: "STMap (seed 002) Xeon: 8 x Xeon E5-4650, 12 2-HT cores each, 30 MB L3, one NUMA node per package",
        synthetic: "pack:8 numa:1 l3:1(size=30MiB) l2:12(size=256KiB) l1d:1(size=32KiB) core:1 pu:2(indexes=2*12:24*8:1*2)",
        cost: None,
        // Sandy Bridge-EP: an inclusive L3; the L2, as Nehalem's, not inclusive of the L1.
        llc_inclusive: Some(true),
        private_inclusive: Some(false),
        // Four channels of DDR3-1600 (51.2 GB/s peak) sustain about 35; QPI at 8 GT/s
        // carries 16 GB/s each way, about 12 sustained.
        bandwidth: sustained(35.0, 12.0),
    },
    Preset {
        name: "stmap-opteron",
        aliases: &["opteron-6276"],
        description: "STMap (seed 002) Opteron: 4 x Opteron 6276, 2 NUMA nodes (dies) per package, 6 MB L3 per die, 2 MB L2 and 64 KB L1i per module of 2 cores",
        synthetic: "pack:4 numa:2 l3:1(size=6MiB) l2:4(size=2MiB) l1i:1(size=64KiB) l1d:2(size=32KiB) core:1 pu:1",
        cost: None,
        // Bulldozer: the L3 is a victim cache of the L2s, not inclusive. Its L2 is shared by
        // the module's two cores: each core has one private level.
        llc_inclusive: Some(false),
        private_inclusive: None,
        // Two channels of DDR3-1600 per die (25.6 GB/s peak) sustain about 12; the
        // HyperTransport links between dies, 8 or 16 bits wide, about 6 sustained.
        bandwidth: sustained(12.0, 6.0),
    },
    Preset {
        name: "ace",
        aliases: &[],
        description: "Bolosky & Scott (seed 004) ACE-like: 8 processors with local memory plus global memory; g=2, r=5, G=2 x page words + 200, R=2G",
        synthetic: "numa:8 pu:1",
        cost: Some(CostParams::ace),
        llc_inclusive: None,
        private_inclusive: None,
        // Seed 004's cost model prices each reference: no bandwidth limit.
        bandwidth: sustained(0.0, 0.0),
    },
    Preset {
        name: "butterfly",
        aliases: &[],
        description: "Bolosky & Scott (seed 004) Butterfly-like: 8 processors with local memory, no global memory; r=15, R=3s/4 + 200",
        synthetic: "numa:8 pu:1",
        cost: Some(CostParams::butterfly),
        llc_inclusive: None,
        private_inclusive: None,
        bandwidth: sustained(0.0, 0.0),
    },
];

pub fn find(name: &str) -> Option<&'static Preset> {
    let n = name.to_ascii_lowercase();
    PRESETS.iter().find(|p| p.name == n || p.aliases.contains(&n.as_str()))
}
