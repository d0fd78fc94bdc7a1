//! hwloc XML topologies (`lstopo --of xml`), versions 1.x and 2.x.

use crate::topology::{CacheKind, ObjType, Tree};
use crate::{MachineError, MachineErrorKind};

/// Parsed tree plus the NUMA distance matrix when the file has one (OS-index order).
pub struct XmlTopology {
    pub tree: Tree,
    pub distances: Option<(Vec<u32>, Vec<Vec<u64>>)>,
}

pub fn parse(text: &str, origin: &str) -> Result<XmlTopology, MachineError> {
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(text, options).map_err(|e| {
        let pos = e.pos();
        MachineError::new(MachineErrorKind::Xml, format!("{origin}:{}:{}: not valid XML: {e}", pos.row, pos.col))
    })?;
    let top = doc.root_element();
    if top.tag_name().name() != "topology" {
        return Err(MachineError::new(
            MachineErrorKind::Xml,
            format!("{origin}: not an hwloc topology (root element <{}>)", top.tag_name().name()),
        ));
    }
    let machine = top
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "object")
        .ok_or_else(|| MachineError::new(MachineErrorKind::Xml, format!("{origin}: no <object> in the topology")))?;
    let mut tree = Tree::default();
    add_object(&mut tree, machine, None, 0, origin)?;
    if tree.objs.iter().filter(|o| o.ty == ObjType::Pu).count() > crate::MAX_PUS {
        return Err(MachineError::new(MachineErrorKind::Xml, format!("{origin}: more than {} PUs", crate::MAX_PUS)));
    }
    if tree.objs.iter().all(|o| o.ty != ObjType::Pu) {
        return Err(MachineError::new(MachineErrorKind::Xml, format!("{origin}: the topology has no PU")));
    }
    let distances = parse_distances(top, origin)?;
    Ok(XmlTopology { tree, distances })
}

/// An attribute that must fit 32 bits (an OS index): a larger one is refused, not wrapped.
fn attr_u32(node: roxmltree::Node, name: &str, origin: &str) -> Result<Option<u32>, MachineError> {
    match attr_u64(node, name, origin)? {
        Some(v) if v > u32::MAX as u64 => {
            let pos = node.document().text_pos_at(node.range().start);
            Err(MachineError::new(
                MachineErrorKind::Xml,
                format!("{origin}:{}: attribute {name}=\"{v}\" is out of range (at most {})", pos.row, u32::MAX),
            ))
        }
        v => Ok(v.map(|v| v as u32)),
    }
}

fn attr_u64(node: roxmltree::Node, name: &str, origin: &str) -> Result<Option<u64>, MachineError> {
    match node.attribute(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            let pos = node.document().text_pos_at(node.range().start);
            MachineError::new(
                MachineErrorKind::Xml,
                format!("{origin}:{}: attribute {name}=\"{v}\" is not a number", pos.row),
            )
        }),
    }
}

fn obj_type(node: roxmltree::Node, origin: &str) -> Result<Option<ObjType>, MachineError> {
    let ty = node.attribute("type").unwrap_or("");
    let cache = |default_level: Option<u8>| -> Result<Option<ObjType>, MachineError> {
        let level = match default_level {
            Some(l) => l,
            None => attr_u64(node, "depth", origin)?.unwrap_or(1) as u8,
        };
        let kind = match attr_u64(node, "cache_type", origin)?.unwrap_or(0) {
            1 => CacheKind::Data,
            2 => CacheKind::Instruction,
            _ => CacheKind::Unified,
        };
        Ok(Some(ObjType::Cache { level, kind }))
    };
    Ok(match ty {
        "Machine" | "System" => Some(ObjType::Machine),
        "Package" | "Socket" => Some(ObjType::Package),
        "Die" => Some(ObjType::Die),
        "Group" => Some(ObjType::Group),
        "Core" => Some(ObjType::Core),
        "PU" => Some(ObjType::Pu),
        "Cache" => cache(None)?,
        t if t.starts_with('L') && t.ends_with("Cache") => {
            let level = t[1..2].parse::<u8>().ok();
            match level {
                Some(l) => cache(Some(l))?,
                None => None,
            }
        }
        _ => None,
    })
}

/// Most CPU objects read (PUs, cores, caches...): enough for MAX_PUS PUs with their cores
/// and caches.
const MAX_OBJECTS: usize = 16 * crate::MAX_PUS;

/// Deepest nesting of objects read; hwloc trees of real machines are under 20 levels.
const MAX_DEPTH: usize = 64;

fn add_object(
    tree: &mut Tree,
    node: roxmltree::Node,
    parent: Option<usize>,
    depth: usize,
    origin: &str,
) -> Result<(), MachineError> {
    if depth > MAX_DEPTH {
        let pos = node.document().text_pos_at(node.range().start);
        return Err(MachineError::new(
            MachineErrorKind::Xml,
            format!("{origin}:{}: objects nested more than {MAX_DEPTH} levels deep", pos.row),
        ));
    }
    if tree.objs.len() > MAX_OBJECTS {
        return Err(MachineError::new(MachineErrorKind::Xml, format!("{origin}: more than {MAX_OBJECTS} objects")));
    }
    let ty = node.attribute("type").unwrap_or("");
    if ty == "NUMANode" {
        let holder = parent.ok_or_else(|| {
            MachineError::new(MachineErrorKind::Xml, format!("{origin}: a NUMANode cannot be the root"))
        })?;
        let os = attr_u32(node, "os_index", origin)?.unwrap_or(tree.numa.len() as u32);
        tree.attach_numa(holder, os, attr_u64(node, "local_memory", origin)?);
        // hwloc 1.x nests normal objects under NUMA nodes: keep walking its children.
        for child in node.children().filter(|n| n.is_element() && n.tag_name().name() == "object") {
            add_object(tree, child, Some(holder), depth + 1, origin)?;
        }
        return Ok(());
    }
    let Some(t) = obj_type(node, origin)? else {
        // I/O, Misc and memory-side caches are not part of the CPU tree.
        return Ok(());
    };
    let id = if let Some(parent) = parent.filter(|_| t == ObjType::Machine) {
        parent
    } else {
        let id = tree.add(t, parent);
        tree.objs[id].os_index = attr_u32(node, "os_index", origin)?;
        if t.is_cache() {
            tree.objs[id].cache_size = attr_u64(node, "cache_size", origin)?;
            tree.objs[id].cache_line = attr_u64(node, "cache_linesize", origin)?.filter(|&l| l > 0).map(|l| l as u32);
            // hwloc: -1 fully associative, 0 unknown.
            tree.objs[id].cache_ways = match node.attribute("cache_associativity").map(str::trim) {
                Some("-1") => Some(0),
                _ => attr_u64(node, "cache_associativity", origin)?
                    .filter(|&w| w > 0)
                    .map(|w| w.min(u32::MAX as u64) as u32),
            };
        }
        id
    };
    for child in node.children().filter(|n| n.is_element() && n.tag_name().name() == "object") {
        add_object(tree, child, Some(id), depth + 1, origin)?;
    }
    Ok(())
}

/// hwloc 2 `<distances2 type="NUMANode">` with `<indexes>` and `<u64values>`.
/// NUMA nodes' OS indexes in matrix order, and the matrix.
type Distances = (Vec<u32>, Vec<Vec<u64>>);

fn parse_distances(top: roxmltree::Node, origin: &str) -> Result<Option<Distances>, MachineError> {
    for d in top.descendants().filter(|n| n.has_tag_name("distances2")) {
        if d.attribute("type") != Some("NUMANode") {
            continue;
        }
        let nb = attr_u64(d, "nbobjs", origin)?.unwrap_or(0) as usize;
        let text = |tag: &str| -> String {
            d.children().filter(|c| c.has_tag_name(tag)).filter_map(|c| c.text()).collect::<Vec<_>>().join(" ")
        };
        let idx: Vec<u32> = text("indexes").split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let vals: Vec<u64> = text("u64values").split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if nb == 0 || idx.len() != nb || vals.len() != nb * nb {
            return Err(MachineError::new(
                MachineErrorKind::Xml,
                format!(
                    "{origin}: malformed NUMA distance matrix ({nb} objects, {} indexes, {} values)",
                    idx.len(),
                    vals.len()
                ),
            ));
        }
        let matrix = vals.chunks(nb).map(|r| r.to_vec()).collect();
        return Ok(Some((idx, matrix)));
    }
    Ok(None)
}
