//! The model's parameters that the machine does not give, their defaults (docs/simulator.md
//! gives the sources), and their names for `simulate --param KEY=VALUE`.

use serde::Serialize;

/// What the model does not read from the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// Work between two memory accesses, in ns (the fixed cost of each access).
    pub access_ns: f64,
    /// Hit latency of a cache level (index: level - 1), in ns.
    pub level_ns: [f64; 4],
    /// Ways of a cache level when the machine does not say (index: level - 1; 0: fully
    /// associative).
    pub level_ways: [u32; 4],
    /// Line size when the machine does not say.
    pub line: u32,
    /// First-level data TLB: entries and ways; second level (0 entries: none).
    pub tlb: (u32, u32),
    pub tlb2: (u32, u32),
    /// Latency added by a second-level TLB hit, and by a page walk.
    pub tlb2_ns: f64,
    pub walk_ns: f64,
    /// A cache-to-cache transfer beyond the latency of the cache the two cores share.
    pub snoop_ns: f64,
    /// Local DRAM latency; a remote node's is this times the machine's distance over 10.
    pub dram_ns: f64,
    /// Moving a thread to another core (its caches then start cold by themselves).
    pub thread_migration_ns: f64,
    /// Copying a page, per byte, and the TLB shootdown that goes with it.
    pub copy_ns_per_byte: f64,
    pub shootdown_ns: f64,
    /// 1: as Linux, a read of a page never written maps the shared zero page (node 0's) and
    /// does not place the page; its first write does. 0: the first access of any kind places
    /// it. 2 (auto): 1 for a recording of a whole program (tracer or Valgrind, every access),
    /// 0 otherwise (a generated or imported trace may begin after its data was written).
    pub zero_page: u32,
    /// 1: the last-level shared caches are inclusive (evicting a line there evicts it from
    /// every core under them, a modified copy written back); 0: not (they evict alone);
    /// 2 (auto): as the machine says (a preset), else 0.
    pub llc_inclusive: u32,
    /// 1: a core's last private cache holds every line of its lower ones (evicting a line
    /// there evicts it from them); 0: not (a line stays in the core while any of its
    /// private levels holds it); 2 (auto): as the machine says (a preset), else 1.
    pub private_inclusive: u32,
    /// Sustained bandwidth of a node's memory and of one direction of a link between two
    /// nodes, in GB/s: 0 no limit; `AS_THE_MACHINE` (the default) the machine's figures.
    pub mem_gbps: f64,
    pub link_gbps: f64,
    /// Misses a core keeps in flight on a sequential stream (its hardware prefetcher and
    /// line fill buffers): such a line from DRAM costs its latency over this. 1: none.
    pub mlp: u32,
}

/// A bandwidth parameter not set: the machine's figure applies.
pub const AS_THE_MACHINE: f64 = -1.0;

impl Default for Params {
    fn default() -> Params {
        Params {
            access_ns: 1.0,
            level_ns: [1.5, 4.0, 15.0, 40.0],
            level_ways: [8, 8, 16, 16],
            line: 64,
            tlb: (64, 4),
            tlb2: (512, 4),
            tlb2_ns: 3.0,
            walk_ns: 25.0,
            snoop_ns: 10.0,
            dram_ns: sharemap_machine::LOCAL_LATENCY_NS,
            thread_migration_ns: 5_000.0,
            copy_ns_per_byte: 0.25,
            shootdown_ns: 2_000.0,
            zero_page: 2,
            llc_inclusive: 2,
            private_inclusive: 2,
            mem_gbps: AS_THE_MACHINE,
            link_gbps: AS_THE_MACHINE,
            // Each access waits for its own data, as the model was calibrated against the
            // papers' findings (docs/simulator.md); 10, an Intel core's line fill buffers,
            // models its prefetcher.
            mlp: 1,
        }
    }
}

/// Where a named parameter lives.
enum Field {
    Ns(fn(&mut Params) -> &mut f64),
    Count(fn(&mut Params) -> &mut u32),
    Gbps(fn(&mut Params) -> &mut f64),
}

/// Every parameter `set` knows: name, place, what it is.
const FIELDS: &[(&str, Field, &str)] = &[
    ("access_ns", Field::Ns(|p| &mut p.access_ns), "fixed cost of each access"),
    ("l1_ns", Field::Ns(|p| &mut p.level_ns[0]), "L1 hit latency"),
    ("l2_ns", Field::Ns(|p| &mut p.level_ns[1]), "L2 hit latency"),
    ("l3_ns", Field::Ns(|p| &mut p.level_ns[2]), "L3 hit latency"),
    ("l4_ns", Field::Ns(|p| &mut p.level_ns[3]), "L4 hit latency"),
    ("l1_ways", Field::Count(|p| &mut p.level_ways[0]), "L1 ways unless the machine says (0: fully associative)"),
    ("l2_ways", Field::Count(|p| &mut p.level_ways[1]), "L2 ways unless the machine says"),
    ("l3_ways", Field::Count(|p| &mut p.level_ways[2]), "L3 ways unless the machine says"),
    ("l4_ways", Field::Count(|p| &mut p.level_ways[3]), "L4 ways unless the machine says"),
    ("line", Field::Count(|p| &mut p.line), "line size in bytes unless the machine says"),
    ("tlb_entries", Field::Count(|p| &mut p.tlb.0), "first-level TLB entries"),
    ("tlb_ways", Field::Count(|p| &mut p.tlb.1), "first-level TLB ways (0: fully associative)"),
    ("tlb2_entries", Field::Count(|p| &mut p.tlb2.0), "second-level TLB entries (0: none)"),
    ("tlb2_ways", Field::Count(|p| &mut p.tlb2.1), "second-level TLB ways"),
    ("tlb2_ns", Field::Ns(|p| &mut p.tlb2_ns), "second-level TLB hit latency"),
    ("walk_ns", Field::Ns(|p| &mut p.walk_ns), "page walk latency"),
    ("snoop_ns", Field::Ns(|p| &mut p.snoop_ns), "cache-to-cache transfer beyond the shared cache's latency"),
    ("dram_ns", Field::Ns(|p| &mut p.dram_ns), "local DRAM latency (remote: times distance / 10)"),
    ("thread_migration_ns", Field::Ns(|p| &mut p.thread_migration_ns), "cost of moving a thread"),
    ("copy_ns_per_byte", Field::Ns(|p| &mut p.copy_ns_per_byte), "page copy cost per byte"),
    ("shootdown_ns", Field::Ns(|p| &mut p.shootdown_ns), "TLB shootdown of a page move"),
    (
        "llc_inclusive",
        Field::Count(|p| &mut p.llc_inclusive),
        "1: the last-level caches are inclusive (an eviction there evicts the line from the cores under them); 0: not; 2: as the machine (a preset) says, else 0",
    ),
    (
        "private_inclusive",
        Field::Count(|p| &mut p.private_inclusive),
        "1: each core's last private cache is inclusive of its lower ones; 0: not (a line stays in the core while any private level holds it); 2: as the machine (a preset) says, else 1",
    ),
    (
        "mem_gbps",
        Field::Gbps(|p| &mut p.mem_gbps),
        "a node's memory bandwidth in GB/s (0: no limit; default: the machine's)",
    ),
    (
        "link_gbps",
        Field::Gbps(|p| &mut p.link_gbps),
        "bandwidth of one direction of a link between two nodes in GB/s (0: no limit; default: the machine's)",
    ),
    ("mlp", Field::Count(|p| &mut p.mlp), "misses a core overlaps on a sequential stream from DRAM (1: none)"),
    (
        "zero_page",
        Field::Count(|p| &mut p.zero_page),
        "1: reads of a never-written page hit the shared zero page and do not place it (Linux); 0: any first access places it; 2: 1 for whole-program recordings, else 0",
    ),
];

/// Parameters that are switches: 0 off, 1 on, 2 auto (as the trace or the machine says).
const SWITCHES: [&str; 3] = ["zero_page", "llc_inclusive", "private_inclusive"];

impl Params {
    /// The names `set` knows, each with what it is, as the command line writes them:
    /// hyphens between words, as in every spec's keys (`dram-ns`; `set` takes `dram_ns` too).
    pub fn keys() -> impl Iterator<Item = (String, &'static str)> {
        FIELDS.iter().map(|(name, _, what)| (name.replace('_', "-"), *what))
    }

    /// The value of a named parameter.
    pub fn value(&self, key: &str) -> Option<f64> {
        let key = key.replace('-', "_");
        let (_, field, _) = FIELDS.iter().find(|(name, _, _)| *name == key)?;
        let mut copy = self.clone();
        Some(match field {
            Field::Ns(place) | Field::Gbps(place) => *place(&mut copy),
            Field::Count(place) => *place(&mut copy) as f64,
        })
    }

    /// Sets one parameter from `KEY=VALUE` (`simulate --param`). Latencies are
    /// non-negative ns; counts are whole numbers (a line size a power of two of at least 8
    /// bytes, a first-level TLB at least one entry).
    pub fn set(&mut self, setting: &str) -> Result<(), ParamError> {
        let Some((key, value)) = setting.split_once('=') else {
            return Err(ParamError::new(
                ParamErrorKind::Syntax,
                setting,
                format!("parameter '{setting}': expected KEY=VALUE"),
            ));
        };
        let (typed, value) = (key.trim(), value.trim());
        // One key style with the specs' (hyphens); the older underscores still read.
        let key = typed.replace('-', "_");
        let key = key.as_str();
        let Some((_, field, _)) = FIELDS.iter().find(|(name, _, _)| *name == key) else {
            let known: Vec<String> = Self::keys().map(|(name, _)| name).collect();
            let hint = sharemap_core::did_you_mean(&typed.replace('_', "-"), known.iter().map(String::as_str));
            let key = typed;
            let message = format!("parameter '{key}': unknown ({hint}known: {})", known.join(", "));
            return Err(ParamError::new(ParamErrorKind::Unknown, key, message));
        };
        let shown = typed.replace('_', "-");
        match field {
            // Up to a second per event: beyond, simulated clocks lose their precision (and
            // reach infinity), and no machine is that slow.
            Field::Ns(place) => match value.parse::<f64>() {
                Ok(v) if v.is_finite() && (0.0..=MAX_NS).contains(&v) => *place(self) = v,
                _ => {
                    return Err(value_error(
                        key,
                        format!("parameter {shown}={value}: expected a number of ns from 0 to {MAX_NS:e}"),
                    ));
                }
            },
            Field::Gbps(place) => match value.parse::<f64>() {
                Ok(v) if v.is_finite() && (0.0..=MAX_GBPS).contains(&v) => *place(self) = v,
                _ => {
                    return Err(value_error(
                        key,
                        format!("parameter {shown}={value}: expected GB/s from 0 (no limit) to {MAX_GBPS:e}"),
                    ));
                }
            },
            Field::Count(place) => {
                let v = value.parse::<u32>().map_err(|_| {
                    value_error(
                        key,
                        format!("parameter {shown}={value}: expected a whole number from 0 to {}", u32::MAX),
                    )
                })?;
                if key == "line" && (!v.is_power_of_two() || v < 8) {
                    return Err(value_error(
                        key,
                        format!("parameter line={value}: expected a power of two, 8 or more"),
                    ));
                }
                if SWITCHES.contains(&key) && v > 2 {
                    return Err(value_error(
                        key,
                        format!("parameter {shown}={value}: expected 0 (off), 1 (on) or 2 (auto)"),
                    ));
                }
                if key == "mlp" && v == 0 {
                    return Err(value_error(key, format!("parameter mlp={value}: at least 1 (no overlap)")));
                }
                if key == "tlb_entries" && v == 0 {
                    return Err(value_error(
                        key,
                        format!("parameter tlb_entries={value}: a TLB has at least one entry"),
                    ));
                }
                *place(self) = v;
            }
        }
        Ok(())
    }
}

/// The largest latency or cost a parameter takes, in ns (one second).
const MAX_NS: f64 = 1e9;
/// The largest bandwidth, in GB/s (a petabyte a second: far beyond any memory).
const MAX_GBPS: f64 = 1e6;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key reaches its own field: setting it changes the serialised parameters in
    /// exactly one place, to the value given.
    #[test]
    fn each_key_sets_its_field_alone() {
        let flat = |p: &Params| -> Vec<f64> {
            fn walk(v: &serde_json::Value, out: &mut Vec<f64>) {
                match v {
                    serde_json::Value::Number(n) => out.push(n.as_f64().unwrap()),
                    serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                    serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
                    _ => {}
                }
            }
            let mut out = Vec::new();
            walk(&serde_json::to_value(p).unwrap(), &mut out);
            out
        };
        let base = flat(&Params::default());
        let mut touched = std::collections::HashSet::new();
        for (key, _) in Params::keys() {
            let mut p = Params::default();
            // A switch (off, on, auto) takes 0-2 only.
            let switch = SWITCHES.contains(&key.replace('-', "_").as_str());
            if switch {
                assert!(p.set(&format!("{key}=3")).is_err(), "{key}=3");
            }
            let v = if switch { 0.0 } else { 4096.0 };
            p.set(&format!("{key}={v}")).unwrap();
            let now = flat(&p);
            let changed: Vec<usize> = (0..base.len()).filter(|&i| base[i] != now[i]).collect();
            assert_eq!(changed.len(), 1, "{key} changed {changed:?}");
            assert_eq!(now[changed[0]], v, "{key}");
            assert!(touched.insert(changed[0]), "{key} shares its field with another key");
            assert_eq!(p.value(&key), Some(v), "{key}");
            assert_eq!(Params::default().value(&key), Some(base[changed[0]]), "{key}");
            // The older spelling with underscores sets the same field.
            let mut q = Params::default();
            q.set(&format!("{}={v}", key.replace('-', "_"))).unwrap();
            assert_eq!(flat(&q), now, "{key}");
        }
        assert_eq!(touched.len(), base.len(), "a parameter no key reaches");
    }

    /// Keys are written as the specs' are: hyphens between words, in the list, the hints and
    /// the errors.
    #[test]
    fn keys_are_written_with_hyphens() {
        assert!(Params::keys().all(|(k, _)| !k.contains('_')));
        let e = Params::default().set("dram-nss=3").unwrap_err().to_string();
        assert!(e.contains("did you mean 'dram-ns'?") && !e.contains("dram_ns"), "{e}");
        let e = Params::default().set("walk_ns=-1").unwrap_err().to_string();
        assert!(e.contains("walk-ns=-1"), "{e}");
    }

    #[test]
    fn bad_settings_are_refused_with_their_reason() {
        let mut p = Params::default();
        use ParamErrorKind::{Syntax, Unknown, Value};
        for (bad, says, kind, key) in [
            ("walk_ns", "KEY=VALUE", Syntax, "walk_ns"),
            ("nope=1", "unknown", Unknown, "nope"),
            ("walk_ns=-1", "from 0 to 1e9", Value, "walk_ns"),
            ("walk_ns=inf", "from 0 to 1e9", Value, "walk_ns"),
            ("dram_ns=1e308", "from 0 to 1e9", Value, "dram_ns"),
            ("tlb_entries=4294967296", "from 0 to 4294967295", Value, "tlb_entries"),
            ("l2_ways=2.5", "whole number", Value, "l2_ways"),
            ("line=48", "power of two", Value, "line"),
            ("tlb_entries=0", "at least one", Value, "tlb_entries"),
            ("mlp=0", "at least 1", Value, "mlp"),
            ("mem_gbps=-1", "GB/s from 0", Value, "mem_gbps"),
            ("link_gbps=nan", "GB/s from 0", Value, "link_gbps"),
        ] {
            let e = p.set(bad).unwrap_err();
            assert!(e.to_string().contains(says), "{bad}: {e}");
            assert_eq!((e.kind, e.key.as_str()), (kind, key), "{bad}");
        }
        p.set(" walk_ns = 40 ").unwrap();
        assert_eq!(p.walk_ns, 40.0);
    }
}

/// A model parameter that cannot be set: which key (the whole setting when it has no `=`),
/// what kind of problem, and the message naming both.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    pub key: String,
    pub kind: ParamErrorKind,
    message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParamErrorKind {
    /// Not `KEY=VALUE`.
    Syntax,
    /// No parameter of that name.
    Unknown,
    /// A value the parameter does not take.
    Value,
}

impl ParamError {
    fn new(kind: ParamErrorKind, key: &str, message: String) -> ParamError {
        ParamError { key: key.to_string(), kind, message }
    }
}

fn value_error(key: &str, message: String) -> ParamError {
    ParamError::new(ParamErrorKind::Value, key, message)
}
