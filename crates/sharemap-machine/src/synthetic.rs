//! hwloc synthetic topology strings (`lstopo -i "pack:2 core:4 pu:2"`): parsing with hwloc's
//! normalisation rules, and export in the canonical form `lstopo --of synthetic` prints.
//!
//! Rules reproduced from hwloc 2 (checked against lstopo by the tests):
//! - `numa:1` attaches one NUMA node to each object of the previous level (or to the root);
//!   `numa:K` with K > 1 becomes a `Group:K` level with one NUMA node each;
//!   without any NUMA level, one NUMA node is attached to the root;
//!   `[numa(attrs)]` attaches a NUMA node (memory child) to the previous level explicitly.
//! - A Group with the same PUs as its parent (count 1) disappears; so does a Group whose
//!   objects have a single child, which takes its place, unless that child is a PU and the
//!   Group carries NUMA nodes (a PU cannot hold memory).
//! - A NUMA node is attached to the topmost object covering the same PUs.
//! - Sizes: plain bytes or with kB/MB/GB (powers of 1000) or KiB/MiB/GiB (powers of 1024);
//!   caches default to hwloc's sizes, `numa:` nodes to 1 GiB.

use crate::topology::{CacheKind, ObjType, Tree};
use crate::{MachineError, MachineErrorKind};

const DEFAULT_NUMA_MEMORY: u64 = 1 << 30;
use crate::MAX_PUS;

#[derive(Clone, Debug, PartialEq)]
struct NumaSpec {
    memory: Option<u64>,
    indexes: Option<Indexes>,
}

#[derive(Clone, Debug, PartialEq)]
enum Indexes {
    List(Vec<u32>),
    /// hwloc's interleave form `s1*n1:s2*n2...`.
    Interleave(Vec<(u64, u64)>),
}

#[derive(Clone, Debug, PartialEq)]
struct LevelSpec {
    ty: ObjType,
    count: u32,
    cache_size: Option<u64>,
    indexes: Option<Indexes>,
    /// NUMA nodes attached to each object of this level.
    numa: Vec<NumaSpec>,
}

fn err(spec: &str, col: usize, what: impl std::fmt::Display) -> MachineError {
    MachineError::new(
        MachineErrorKind::Synthetic,
        format!("bad synthetic topology \"{spec}\" at column {}: {what}", col + 1),
    )
}

/// Object type from an hwloc type name (case-insensitive, common abbreviations).
fn parse_type(name: &str) -> Option<Result<ObjType, &'static str>> {
    let n = name.to_ascii_lowercase();
    let t = match n.as_str() {
        "package" | "pack" | "socket" | "sock" => ObjType::Package,
        "die" => ObjType::Die,
        "group" => ObjType::Group,
        "core" => ObjType::Core,
        "pu" => ObjType::Pu,
        "machine" => return Some(Err("a Machine level is not allowed (the root is implicit)")),
        _ => {
            let rest = n.strip_prefix('l')?;
            let level = rest.chars().next()?.to_digit(10)? as u8;
            if !(1..=5).contains(&level) {
                return None;
            }
            let kind = match rest[1..].trim_end_matches("cache") {
                "" | "u" => CacheKind::Unified,
                "d" => CacheKind::Data,
                "i" => CacheKind::Instruction,
                _ => return None,
            };
            ObjType::Cache { level, kind }
        }
    };
    Some(Ok(t))
}

fn is_numa_name(name: &str) -> bool {
    matches!(name.to_ascii_lowercase().as_str(), "numa" | "numanode" | "node")
}

/// Parses "32kB", "18MiB", "1073741824".
pub fn parse_size(s: &str) -> Option<u64> {
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let value: u64 = s[..digits].parse().ok()?;
    let mult: u64 = match s[digits..].to_ascii_lowercase().as_str() {
        "" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    value.checked_mul(mult)
}

fn parse_indexes(s: &str) -> Option<Indexes> {
    if s.contains('*') {
        let loops = s
            .split(':')
            .map(|p| {
                let (a, b) = p.split_once('*')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect::<Option<Vec<(u64, u64)>>>()?;
        Some(Indexes::Interleave(loops))
    } else {
        s.split(',').map(|x| x.trim().parse().ok()).collect::<Option<Vec<u32>>>().map(Indexes::List)
    }
}

/// OS indexes in logical order for `total` objects.
fn resolve_indexes(ix: &Indexes, total: u64) -> Result<Vec<u32>, MachineError> {
    match ix {
        Indexes::List(v) => {
            if v.len() as u64 != total {
                return Err(MachineError::new(
                    MachineErrorKind::Synthetic,
                    format!("{} indexes given for {total} objects", v.len()),
                ));
            }
            let mut seen = v.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != v.len() {
                return Err(MachineError::new(MachineErrorKind::Synthetic, "duplicate indexes"));
            }
            Ok(v.clone())
        }
        Indexes::Interleave(loops) => {
            let width: u64 = loops.iter().map(|&(_, n)| n).product();
            if width != total || loops.iter().any(|&(s, n)| s == 0 || n == 0) {
                return Err(MachineError::new(
                    MachineErrorKind::Synthetic,
                    format!("index interleaving covers {width} objects instead of {total}"),
                ));
            }
            // Walking OS indexes 0.., loop k advances the logical index by its step s_k.
            let mut logical_to_os = vec![u32::MAX; total as usize];
            for os in 0..total {
                let (mut rest, mut logical) = (os, 0u64);
                for &(step, n) in loops {
                    logical += (rest % n) * step;
                    rest /= n;
                }
                let slot = logical_to_os
                    .get_mut(logical as usize)
                    .ok_or_else(|| MachineError::new(MachineErrorKind::Synthetic, "index interleaving out of range"))?;
                if *slot != u32::MAX {
                    return Err(MachineError::new(
                        MachineErrorKind::Synthetic,
                        "index interleaving maps two objects to one index",
                    ));
                }
                *slot = os as u32;
            }
            Ok(logical_to_os)
        }
    }
}

struct Attrs {
    size: Option<u64>,
    memory: Option<u64>,
    indexes: Option<Indexes>,
}

fn parse_attrs(spec: &str, col: usize, body: &str) -> Result<Attrs, MachineError> {
    let mut a = Attrs { size: None, memory: None, indexes: None };
    for item in body.split_whitespace() {
        let (k, v) =
            item.split_once('=').ok_or_else(|| err(spec, col, format!("attribute '{item}' is not key=value")))?;
        match k.to_ascii_lowercase().as_str() {
            "size" => a.size = Some(parse_size(v).ok_or_else(|| err(spec, col, format!("bad size '{v}'")))?),
            "memory" => a.memory = Some(parse_size(v).ok_or_else(|| err(spec, col, format!("bad memory size '{v}'")))?),
            "indexes" => {
                a.indexes = Some(parse_indexes(v).ok_or_else(|| err(spec, col, format!("bad indexes '{v}'")))?)
            }
            _ => return Err(err(spec, col, format!("unknown attribute '{k}'"))),
        }
    }
    Ok(a)
}

/// Parses and normalises a synthetic string into a tree.
pub fn parse(spec: &str) -> Result<Tree, MachineError> {
    let (root_numa, levels) = parse_levels(spec)?;
    build(spec, root_numa, levels)
}

fn parse_levels(spec: &str) -> Result<(Vec<NumaSpec>, Vec<LevelSpec>), MachineError> {
    let bytes = spec.as_bytes();
    let mut i = 0;
    let mut root_numa: Vec<NumaSpec> = Vec::new();
    let mut levels: Vec<LevelSpec> = Vec::new();
    let mut numa_level_seen = false;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if bytes[i] == b'[' {
            let close = spec[i..].find(']').ok_or_else(|| err(spec, start, "'[' without ']'"))? + i;
            let inner = &spec[i + 1..close];
            let (name, attrs) = split_attrs(spec, start, inner)?;
            if !is_numa_name(name) {
                return Err(err(spec, start, format!("only NUMA nodes can be attached in brackets, not '{name}'")));
            }
            let a = parse_attrs(spec, start, attrs.unwrap_or(""))?;
            let n = NumaSpec { memory: a.memory, indexes: a.indexes };
            match levels.last_mut() {
                Some(l) if l.ty == ObjType::Pu => {
                    return Err(err(spec, start, "a NUMA node cannot be attached to a PU"));
                }
                Some(l) => l.numa.push(n),
                None => root_numa.push(n),
            }
            numa_level_seen = true;
            i = close + 1;
            continue;
        }
        // type:count(attrs)
        let mut j = i;
        let mut depth = 0;
        while j < bytes.len() && (depth > 0 || !bytes[j].is_ascii_whitespace()) {
            match bytes[j] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        let token = &spec[i..j];
        i = j;
        let (head, attrs) = split_attrs(spec, start, token)?;
        let (name, count) =
            head.split_once(':').ok_or_else(|| err(spec, start, format!("expected type:count, got '{head}'")))?;
        let count: u32 = count.parse().map_err(|_| err(spec, start, format!("bad count '{count}'")))?;
        if count == 0 {
            return Err(err(spec, start, "a level cannot have 0 objects"));
        }
        if levels.last().is_some_and(|l| l.ty == ObjType::Pu) {
            return Err(err(spec, start, "nothing can follow the PU level"));
        }
        let a = parse_attrs(spec, start, attrs.unwrap_or(""))?;
        if is_numa_name(name) {
            if numa_level_seen {
                return Err(err(spec, start, "several NUMA levels"));
            }
            numa_level_seen = true;
            let n = NumaSpec { memory: Some(a.memory.unwrap_or(DEFAULT_NUMA_MEMORY)), indexes: a.indexes };
            if count == 1 {
                match levels.last_mut() {
                    Some(l) => l.numa.push(n),
                    None => root_numa.push(n),
                }
            } else {
                levels.push(LevelSpec { ty: ObjType::Group, count, cache_size: None, indexes: None, numa: vec![n] });
            }
            continue;
        }
        let ty = match parse_type(name) {
            Some(Ok(t)) => t,
            Some(Err(why)) => return Err(err(spec, start, why)),
            None => return Err(err(spec, start, format!("unknown object type '{name}'"))),
        };
        if a.memory.is_some() {
            return Err(err(spec, start, "memory= applies to NUMA nodes only"));
        }
        let cache_size = match ty {
            ObjType::Cache { level, .. } => Some(a.size.unwrap_or(ObjType::default_cache_size(level))),
            _ if a.size.is_some() => return Err(err(spec, start, "size= applies to caches only")),
            _ => None,
        };
        levels.push(LevelSpec { ty, count, cache_size, indexes: a.indexes, numa: Vec::new() });
    }
    match levels.last() {
        None => return Err(err(spec, 0, "no levels")),
        Some(l) if l.ty != ObjType::Pu => {
            return Err(err(spec, spec.len().saturating_sub(1), "the last level must be PU"));
        }
        _ => {}
    }
    levels
        .iter()
        .try_fold(1u64, |acc, l| acc.checked_mul(l.count as u64).filter(|&x| x <= MAX_PUS as u64))
        .ok_or_else(|| err(spec, 0, format!("more than {MAX_PUS} PUs")))?;
    if !numa_level_seen {
        root_numa.push(NumaSpec { memory: Some(DEFAULT_NUMA_MEMORY), indexes: None });
    }
    normalise(&mut root_numa, &mut levels);
    Ok((root_numa, levels))
}

fn split_attrs<'a>(spec: &str, col: usize, token: &'a str) -> Result<(&'a str, Option<&'a str>), MachineError> {
    match token.find('(') {
        None => Ok((token, None)),
        Some(open) => {
            if !token.ends_with(')') {
                return Err(err(spec, col, format!("unbalanced parentheses in '{token}'")));
            }
            Ok((&token[..open], Some(&token[open + 1..token.len() - 1])))
        }
    }
}

fn normalise(root_numa: &mut Vec<NumaSpec>, levels: &mut Vec<LevelSpec>) {
    loop {
        let mut changed = false;
        for i in 0..levels.len() {
            if levels[i].ty != ObjType::Group {
                continue;
            }
            if levels[i].count == 1 {
                let g = levels.remove(i);
                parent_numa(root_numa, levels, i).extend(g.numa);
                changed = true;
                break;
            }
            let next = &levels[i + 1];
            if next.count == 1 && (next.ty != ObjType::Pu || levels[i].numa.is_empty()) {
                let g = levels.remove(i);
                let child = &mut levels[i];
                child.count = g.count;
                let mut numa = g.numa;
                numa.append(&mut child.numa);
                child.numa = numa;
                changed = true;
                break;
            }
        }
        for i in 0..levels.len() {
            if levels[i].count == 1 && !levels[i].numa.is_empty() {
                let moved = std::mem::take(&mut levels[i].numa);
                parent_numa(root_numa, levels, i).extend(moved);
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

fn parent_numa<'a>(root: &'a mut Vec<NumaSpec>, levels: &'a mut [LevelSpec], i: usize) -> &'a mut Vec<NumaSpec> {
    if i == 0 { root } else { &mut levels[i - 1].numa }
}

fn build(spec: &str, root_numa: Vec<NumaSpec>, levels: Vec<LevelSpec>) -> Result<Tree, MachineError> {
    let mut tree = Tree::default();
    let root = tree.add(ObjType::Machine, None);
    let mut frontier = vec![root];
    // Attaches `specs` to each object; returns the new nodes when an indexes= applies.
    let attach = |tree: &mut Tree, objs: &[usize], specs: &[NumaSpec]| -> Vec<usize> {
        let mut ids = Vec::new();
        for &o in objs {
            for s in specs {
                ids.push(tree.numa.len());
                tree.attach_numa(o, 0, s.memory);
            }
        }
        ids
    };
    let mut numa_index_specs: Vec<(Vec<usize>, &Option<Indexes>)> = Vec::new();
    let ids = attach(&mut tree, &frontier, &root_numa);
    if let Some(s) = root_numa.first() {
        numa_index_specs.push((ids, &s.indexes));
    }
    for level in &levels {
        let mut next = Vec::with_capacity(frontier.len() * level.count as usize);
        for &p in &frontier {
            for _ in 0..level.count {
                let o = tree.add(level.ty, Some(p));
                tree.objs[o].cache_size = level.cache_size;
                next.push(o);
            }
        }
        if let Some(ix) = &level.indexes {
            let os = resolve_indexes(ix, next.len() as u64)
                .map_err(|e| err(spec, 0, format!("{} indexes: {e}", level.ty.hwloc_name())))?;
            for (o, i) in next.iter().zip(os) {
                tree.objs[*o].os_index = Some(i);
            }
        }
        let ids = attach(&mut tree, &next, &level.numa);
        if let Some(s) = level.numa.first() {
            numa_index_specs.push((ids, &s.indexes));
        }
        frontier = next;
    }
    // NUMA OS indexes: logical order unless an indexes= attribute says otherwise.
    for (i, n) in tree.numa.iter_mut().enumerate() {
        n.os_index = i as u32;
    }
    for (ids, ix) in numa_index_specs {
        if let Some(ix) = ix {
            let os =
                resolve_indexes(ix, ids.len() as u64).map_err(|e| err(spec, 0, format!("NUMANode indexes: {e}")))?;
            for (id, i) in ids.iter().zip(os) {
                tree.numa[*id].os_index = i;
            }
        }
    }
    Ok(tree)
}

/// Canonical synthetic string of a symmetric tree, as hwloc prints it (PU and NUMA OS
/// indexes that differ from the logical order are printed as explicit lists).
pub fn export(tree: &Tree, levels: &[crate::Level]) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let root = &tree.objs[0];
    push_numa(tree, &root.memory, &mut parts);
    let mut parent_count = 1usize;
    for level in levels {
        let first = &tree.objs[*level.objs.first()?];
        let arity = level.objs.len() / parent_count;
        // Symmetric: every object of the parent level has `arity` children of this type.
        if level.objs.len() % parent_count != 0 || level.objs.iter().any(|&o| tree.objs[o].ty != first.ty) {
            return None;
        }
        let mut attrs = Vec::new();
        if let Some(size) = first.cache_size {
            if level.objs.iter().any(|&o| tree.objs[o].cache_size != Some(size)) {
                return None;
            }
            attrs.push(format!("size={size}"));
        }
        let os: Vec<u32> =
            level.objs.iter().enumerate().map(|(i, &o)| tree.objs[o].os_index.unwrap_or(i as u32)).collect();
        if first.ty == ObjType::Pu && os.iter().enumerate().any(|(i, &x)| x != i as u32) {
            attrs.push(format!(
                "indexes={}",
                interleave_form(&os).unwrap_or_else(|| os.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","))
            ));
        }
        let attrs = if attrs.is_empty() { String::new() } else { format!("({})", attrs.join(" ")) };
        parts.push(format!("{}:{}{}", first.ty.hwloc_name(), arity, attrs));
        let per_obj = first.memory.len();
        if level.objs.iter().any(|&o| tree.objs[o].memory.len() != per_obj) {
            return None;
        }
        push_numa(tree, &first.memory, &mut parts);
        parent_count = level.objs.len();
    }
    Some(parts.join(" "))
}

/// hwloc's `step*count:...` form of a logical -> OS permutation, when one exists.
fn interleave_form(logical_to_os: &[u32]) -> Option<String> {
    let total = logical_to_os.len();
    let mut logical_of_os = vec![usize::MAX; total];
    for (l, &o) in logical_to_os.iter().enumerate() {
        *logical_of_os.get_mut(o as usize)? = l;
    }
    // Each loop runs while the logical index advances by a constant step.
    let mut loops: Vec<(u64, u64)> = Vec::new();
    let mut width = 1usize;
    while width < total {
        let step = logical_of_os[width].checked_sub(logical_of_os[0])?;
        let mut count = 1;
        while width * (count + 1) <= total && logical_of_os[width * count] == logical_of_os[0] + step * count {
            count += 1;
        }
        if count < 2 || !total.is_multiple_of(width * count) {
            return None;
        }
        loops.push((step as u64, count as u64));
        width *= count;
    }
    let form = loops.iter().map(|(s, n)| format!("{s}*{n}")).collect::<Vec<_>>().join(":");
    (resolve_indexes(&Indexes::Interleave(loops), total as u64).ok()? == logical_to_os).then_some(form)
}

fn push_numa(tree: &Tree, nodes: &[usize], parts: &mut Vec<String>) {
    for &n in nodes {
        match tree.numa[n].memory {
            Some(m) => parts.push(format!("[NUMANode(memory={m})]")),
            None => parts.push("[NUMANode]".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_hwloc_units() {
        assert_eq!(parse_size("32kB"), Some(32_000));
        assert_eq!(parse_size("18MB"), Some(18_000_000));
        assert_eq!(parse_size("30MiB"), Some(30 << 20));
        assert_eq!(parse_size("64GiB"), Some(64 << 30));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("12XB"), None);
    }

    #[test]
    fn interleaved_indexes_match_hwloc_example() {
        // hwloc prints "2*4:1*2" for the explicit list 0,4,1,5,2,6,3,7.
        let ix = parse_indexes("2*4:1*2").unwrap();
        assert_eq!(resolve_indexes(&ix, 8).unwrap(), vec![0, 4, 1, 5, 2, 6, 3, 7]);
        assert!(resolve_indexes(&parse_indexes("1*2:2*2").unwrap(), 8).is_err());
        assert_eq!(interleave_form(&[0, 4, 1, 5, 2, 6, 3, 7]).as_deref(), Some("2*4:1*2"));
        assert_eq!(interleave_form(&[0, 2, 4, 6, 1, 3, 5, 7]).as_deref(), Some("4*2:1*4"));
        assert_eq!(interleave_form(&[1, 0, 3, 2]), None);
    }
}
