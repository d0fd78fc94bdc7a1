//! What the partition pass must compute for the chosen policies, from their parameters:
//! marathe's profile source (which accesses are sampled) and sammu's TLB model.

use super::{Settings, find};
use crate::partition::{SamplerKind, TlbModel};
use sharemap_detect::sammu::SammuParams;

/// Whether `spec` (a comma list of policy names, or `all`) runs `name`.
fn wants(spec: &str, name: &str) -> bool {
    spec.trim() == "all" || spec.split(',').any(|s| s.trim() == name)
}

/// The profile source marathe needs (accesses missing a cache or a TLB), if any; `line` is
/// the trace's line size.
pub fn sampler(spec: &str, settings: &Settings, line: u64) -> Result<Option<SamplerKind>, String> {
    if !wants(spec, "marathe") {
        return Ok(None);
    }
    let info = find("marathe").expect("marathe is registered");
    let num = |key: &str| -> Result<u64, String> {
        info.value(settings, key).parse().map_err(|_| format!("marathe.{key}: expected an integer"))
    };
    Ok(match info.value(settings, "source") {
        "cache-miss" => Some(SamplerKind::CacheMiss { size: num("cache-kb")? * 1024, ways: 8, line: line.max(1) }),
        "tlb-miss" => Some(SamplerKind::TlbMiss { entries: num("tlb-entries")? as u32, ways: 4 }),
        _ => None,
    })
}

/// SAMMU's TLB model, when the `sammu` policy runs on TLB events; `core_of_thread` gives
/// each thread's core (asked only then).
pub fn tlb_model(
    spec: &str,
    settings: &Settings,
    core_of_thread: impl FnOnce() -> Vec<usize>,
) -> Result<Option<TlbModel>, String> {
    let info = find("sammu").expect("sammu is registered");
    if !wants(spec, "sammu") || info.value(settings, "events") != "tlb" {
        return Ok(None);
    }
    let entries = |key: &str| -> Result<usize, String> {
        info.value(settings, key)
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 4)
            .ok_or_else(|| format!("sammu.{key}: expected a number of TLB entries (at least 4)"))
    };
    let ac_bits = info
        .value(settings, "ac")
        .parse::<u32>()
        .ok()
        .filter(|b| (1..=32).contains(b))
        .ok_or("sammu.ac: expected a number of bits from 1 to 32")?;
    let params =
        SammuParams { l1_entries: entries("l1")?, l2_entries: entries("l2")?, ac_bits, ..SammuParams::default() };
    Ok(Some(TlbModel { params, core_of_thread: core_of_thread() }))
}
