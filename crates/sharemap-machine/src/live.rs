//! The host's own topology: hwloc's `lstopo --of xml` when installed, else Linux sysfs.

use crate::topology::{CacheKind, ObjType, Tree};
use crate::{MachineError, MachineErrorKind};
use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

/// The host as hwloc XML text, if an lstopo binary is available.
pub fn lstopo_xml() -> Option<String> {
    for bin in ["lstopo-no-graphics", "lstopo"] {
        if let Ok(out) = Command::new(bin).args(["--of", "xml", "-"]).output()
            && out.status.success()
        {
            return String::from_utf8(out.stdout).ok();
        }
    }
    None
}

fn read(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Parses a Linux cpu list such as "0-3,8,10-11".
pub fn parse_cpulist(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// Builds the tree from /sys: package, caches (by their shared CPU lists), core, PU.
pub fn from_sysfs() -> Result<Tree, MachineError> {
    let online = read("/sys/devices/system/cpu/online").and_then(|s| parse_cpulist(&s)).ok_or_else(|| {
        MachineError::new(
            MachineErrorKind::Unreadable,
            "live: cannot read /sys/devices/system/cpu/online (install hwloc for lstopo)",
        )
    })?;
    // For each CPU, the key of its group at each level, outermost first.
    let mut keys: BTreeMap<u32, Vec<(ObjType, String, Option<u64>)>> = BTreeMap::new();
    for &cpu in &online {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}");
        let mut k =
            vec![(ObjType::Package, read(&format!("{base}/topology/physical_package_id")).unwrap_or_default(), None)];
        let mut caches = Vec::new();
        for idx in 0..8 {
            let c = format!("{base}/cache/index{idx}");
            let Some(level) = read(&format!("{c}/level")).and_then(|l| l.parse::<u8>().ok()) else { break };
            let kind = match read(&format!("{c}/type")).as_deref() {
                Some("Data") => CacheKind::Data,
                Some("Instruction") => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let size = read(&format!("{c}/size"))
                .and_then(|s| crate::synthetic::parse_size(&s.replace('K', "KiB").replace('M', "MiB")));
            caches.push((level, kind, read(&format!("{c}/shared_cpu_list")).unwrap_or_default(), size));
        }
        caches.sort_by(|a, b| b.0.cmp(&a.0).then((a.1 as u8).cmp(&(b.1 as u8))));
        for (level, kind, shared, size) in caches {
            k.push((ObjType::Cache { level, kind }, shared, size));
        }
        k.push((ObjType::Core, read(&format!("{base}/topology/thread_siblings_list")).unwrap_or_default(), None));
        k.push((ObjType::Pu, cpu.to_string(), None));
        keys.insert(cpu, k);
    }
    let depth = keys.values().map(|k| k.len()).min().unwrap_or(0);
    let mut tree = Tree::default();
    let root = tree.add(ObjType::Machine, None);
    let mut index: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for (&cpu, k) in &keys {
        let mut parent = root;
        let mut path = Vec::new();
        for (d, (ty, key, size)) in k.iter().enumerate().take(depth) {
            let ty = if d == depth - 1 { ObjType::Pu } else { *ty };
            path.push(format!("{ty:?}={key}"));
            parent = *index.entry(path.clone()).or_insert_with(|| {
                let id = tree.add(ty, Some(parent));
                tree.objs[id].cache_size = *size;
                if ty == ObjType::Pu {
                    tree.objs[id].os_index = Some(cpu);
                }
                id
            });
        }
    }
    // NUMA nodes: attach each to the lowest object holding all its CPUs.
    let mut nodes: Vec<(u32, Vec<u32>)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/sys/devices/system/node") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(n) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) {
                let cpus = read(&format!("/sys/devices/system/node/{name}/cpulist"))
                    .and_then(|s| parse_cpulist(&s))
                    .unwrap_or_default();
                nodes.push((n, cpus));
            }
        }
    }
    nodes.sort();
    for (os, cpus) in nodes {
        let holder = lowest_common_holder(&tree, &cpus);
        tree.attach_numa(holder, os, None);
    }
    Ok(tree)
}

fn lowest_common_holder(tree: &Tree, cpus: &[u32]) -> usize {
    let pus: Vec<usize> = tree
        .objs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.ty == ObjType::Pu && o.os_index.is_some_and(|x| cpus.contains(&x)))
        .map(|(i, _)| i)
        .collect();
    let ancestors = |o: usize| {
        let mut v = tree.ancestors(o);
        v.reverse();
        v
    };
    let Some(&first) = pus.first() else { return 0 };
    let mut common = ancestors(first);
    common.pop(); // never the PU itself
    for &p in &pus[1..] {
        let a = ancestors(p);
        let n = common.iter().zip(&a).take_while(|(x, y)| x == y).count();
        common.truncate(n);
    }
    *common.last().unwrap_or(&0)
}
