//! `sharemap machine`: the modelled machine, as text or JSON.

use anyhow::{Result, anyhow};
use sharemap::Machine;
use sharemap::machine::{ASSUMED_GBPS_PER_CORE, BandwidthOrigin, PRESETS};
use std::process::ExitCode;

pub fn run(spec: Option<&str>, json: bool, list: bool) -> Result<ExitCode> {
    if list {
        for p in PRESETS {
            let aliases =
                if p.aliases.is_empty() { String::new() } else { format!(" (also {})", p.aliases.join(", ")) };
            println!("{}{aliases}\n    {}\n    {}", p.name, p.description, p.synthetic);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let m = Machine::from_spec(spec.unwrap_or_default()).map_err(|e| anyhow!(e))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&m.summary())?);
    } else {
        print!("{}", describe(&m));
    }
    Ok(ExitCode::SUCCESS)
}

/// The bandwidth table: where the figures come from, then what each node reads from each.
fn bandwidth_lines(m: &Machine) -> Vec<String> {
    let b = m.bandwidth;
    if b.memory_gbps <= 0.0 && b.link_gbps <= 0.0 {
        return vec![format!("bandwidth  no limit ({}: the model prices each reference)", b.origin.label())];
    }
    let basis = match b.origin {
        BandwidthOrigin::Assumed => format!(
            "assumed, {ASSUMED_GBPS_PER_CORE} GB/s a core; `simulate --param mem-gbps=X --param link-gbps=Y` set them"
        ),
        o => o.label().to_string(),
    };
    let mut out = vec![format!("bandwidth  ({basis}): {}; GB/s a node's PUs read from each node", b.figures())];
    for row in m.bandwidth_table().iter().take(16) {
        let cells: Vec<String> =
            row.iter().take(16).map(|g| g.map_or_else(|| "-".into(), |g| format!("{g:>5.1}"))).collect();
        out.push(format!("  {}", cells.join(" ")));
    }
    out
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// A compact description of a machine (used by `machine` and `demo`).
pub fn describe(m: &Machine) -> String {
    let s = m.summary();
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    line(format!("machine    {} — {}", s.name, s.description));
    if let Some(syn) = &s.synthetic {
        line(format!("synthetic  {syn}"));
    }
    line(format!("size       {} PUs, {} cores, {} packages, {} NUMA nodes", s.pus, s.cores, s.packages, s.numa_nodes));
    line("levels".into());
    for l in &s.levels {
        let cache = l.cache_size.map(|c| format!(" ({})", size(c))).unwrap_or_default();
        line(format!("  {:<10} x{:<5} ({} per parent){cache}", l.r#type, l.count, l.arity));
    }
    let os: Vec<String> = s.pu_os_index.iter().take(32).map(|x| x.to_string()).collect();
    let more = if s.pus > 32 { " ..." } else { "" };
    line(format!("PU OS index by logical index: {}{more}", os.join(" ")));
    line("NUMA nodes".into());
    for (i, n) in s.numa.iter().enumerate() {
        let mem = n.memory.map(size).unwrap_or_else(|| "?".into());
        let first = n.pus.first().copied().unwrap_or(0);
        let last = n.pus.last().copied().unwrap_or(0);
        line(format!("  L#{i} P#{:<3} memory {mem:<7} PUs L#{first}-L#{last} ({})", n.os_index, n.pus.len()));
    }
    line(format!("distances ({}; latency model: local {} ns x distance/10)", s.distance_origin, s.local_latency_ns));
    for row in s.distances.iter().take(16) {
        line(format!("  {}", row.iter().take(16).map(|d| format!("{d:>3}")).collect::<Vec<_>>().join(" ")));
    }
    for l in bandwidth_lines(m) {
        line(l);
    }
    let c = s.cost;
    let global = match (c.g, c.big_g) {
        (Some(g), Some(gg)) => format!(", global memory g={g} G={gg}"),
        _ => ", no global memory".into(),
    };
    line(format!("cost (Bolosky & Scott, seed 004; 4 KiB pages)  local 1, r={:.2}, R={:.1}{global}", c.r, c.big_r));
    out
}
