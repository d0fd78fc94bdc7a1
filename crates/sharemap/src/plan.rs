//! Placement plans, the file format between `place` and `run`: the optimum's placement as
//! `place --placement` writes it (CSV `page,at,locations,page_size` or its JSON), and the
//! plan a real run applies, one home node per page, read from that file or a CSV
//! `page,node` of one's own.

use crate::{Error, ErrorKind, Result};
use serde::Serialize;
use sharemap_machine::Machine;
use sharemap_placement::cost;
use sharemap_placement::evaluate::Evaluation;
use sharemap_trace::output::{AtomicOutput, flush};
use std::io::Write;
use std::path::Path;

/// Pages (addresses, page-aligned) and the OS node each should lie on.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub pages: Vec<u64>,
    pub nodes: Vec<i32>,
}

impl Plan {
    /// Reads a plan file: `sharemap place --placement` output (CSV `page,at,locations[,page_size]`
    /// or its JSON), where a page's home is its first location (the optimum's initial
    /// placement, chosen knowing the whole run; of a replicated set the lowest node; pages
    /// kept only in global memory are left to the kernel), or a CSV `page,node` of one's own.
    /// Nodes are the machine's logical NUMA indices; pages must be of the host's page size.
    pub fn read(path: &Path, host: &Machine, page_size: u64) -> Result<Plan> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::new(ErrorKind::DataPlacement, format!("{}: {e}", path.display())))?;
        let at = |line: usize, why: String| {
            Error::new(ErrorKind::DataPlacement, format!("{}:{line}: {why}", path.display()))
        };
        // Each row with its line in the file (blank lines counted, as an editor counts them).
        let mut rows: Vec<(usize, u64, Option<usize>, Option<u64>)> = Vec::new();
        // `place` output gives a page's later homes in the rows after its first; a file of
        // one's own (`page,node`) gives one home per page.
        let mut own = false;
        if text.trim_start().starts_with('[') {
            #[derive(serde::Deserialize)]
            struct Row {
                page: String,
                locations: Vec<String>,
                page_size: Option<u64>,
            }
            let parsed: Vec<Row> = serde_json::from_str(&text).map_err(|e| at(e.line(), e.to_string()))?;
            for (i, row) in parsed.into_iter().enumerate() {
                let page = address(&row.page).ok_or_else(|| at(i + 1, format!("'{}' is not an address", row.page)))?;
                let home = row.locations.iter().find_map(|l| l.parse::<usize>().ok());
                rows.push((i + 1, page, home, row.page_size));
            }
        } else {
            let mut lines = text.lines().enumerate();
            let header = lines.next().map(|(_, h)| h.trim().to_string()).unwrap_or_default();
            let columns: Vec<&str> = header.split(',').map(str::trim).collect();
            own = columns == ["page", "node"];
            if !own && !columns.starts_with(&["page", "at", "locations"]) {
                return Err(at(1, format!("expected a header 'page,at,locations' or 'page,node', found '{header}'")));
            }
            let size_column = columns.iter().position(|c| *c == "page_size");
            for (i, line) in lines {
                if line.trim().is_empty() {
                    continue;
                }
                let fields: Vec<&str> = line.split(',').map(str::trim).collect();
                let page = fields
                    .first()
                    .and_then(|p| address(p))
                    .ok_or_else(|| at(i + 1, format!("'{}' is not an address", fields[0])))?;
                let locations = if own { fields.get(1) } else { fields.get(2) }
                    .ok_or_else(|| at(i + 1, "missing its node".to_string()))?;
                let home = locations.split(';').find_map(|l| l.parse::<usize>().ok());
                if own && home.is_none() {
                    return Err(at(i + 1, format!("'{locations}' is not a node")));
                }
                let size = match size_column.and_then(|c| fields.get(c)) {
                    Some(s) => Some(s.parse().map_err(|_| at(i + 1, format!("'{s}' is not a page size")))?),
                    None => None,
                };
                rows.push((i + 1, page, home, size));
            }
        }
        let mut plan = Plan { pages: Vec::new(), nodes: Vec::new() };
        let mut last = None;
        // Where each page was planned (its node, the line saying so).
        let mut planned: std::collections::HashMap<u64, (usize, usize)> = std::collections::HashMap::new();
        for (line, page, home, size) in rows {
            if let Some(size) = size.filter(|&s| s != page_size) {
                return Err(at(
                    line,
                    format!(
                        "the plan is for {size}-byte pages, the host's are {page_size} bytes: place the trace with --page-size {page_size}"
                    ),
                ));
            }
            if page % page_size != 0 {
                return Err(at(
                    line,
                    format!(
                        "page {page:#x} is not a multiple of the host's page size ({page_size} bytes): a plan for another page size"
                    ),
                ));
            }
            // A page's later rows are the optimum's later changes: its home is the first.
            if !own && last == Some(page) {
                continue;
            }
            last = Some(page);
            let Some(node) = home else { continue };
            if node >= host.numa_count() {
                return Err(at(
                    line,
                    format!("node {node} does not exist: the host has nodes 0-{}", host.numa_count() - 1),
                ));
            }
            // A page given again elsewhere in the file: the same home is said twice; another
            // is a contradiction, not a plan.
            match planned.get(&page) {
                Some(&(before, _)) if before == node => continue,
                Some(&(before, before_line)) => {
                    return Err(at(
                        line,
                        format!(
                            "page {page:#x} planned on node {node} here and on node {before} at line {before_line}"
                        ),
                    ));
                }
                None => {
                    planned.insert(page, (node, line));
                }
            }
            plan.pages.push(page);
            plan.nodes.push(host.numa_os_index(node) as i32);
        }
        if plan.pages.is_empty() {
            return Err(Error::new(ErrorKind::DataPlacement, format!("{}: the plan places no page", path.display())));
        }
        Ok(plan)
    }
}

/// The optimum reduced to one home node per page, from a recording, for the live host with
/// threads placed as `threads` maps them: a page's home is where the optimum puts it first
/// (its initial placement, chosen knowing the whole run; of a replicated set the lowest
/// node). Pages it keeps only in global memory are left to the kernel.
pub fn optimal_plan(trace: &Path, threads: crate::ThreadMap, page_size: u64, host: &Machine) -> Result<Plan> {
    let session = crate::Session::new(crate::TraceInput::file(trace), host.clone(), 1);
    let setup = crate::Setup { page_size: Some(page_size), thread_map: threads, ..crate::Setup::default() };
    let request = crate::PlaceRequest { setup, keep_placement: true, ..crate::PlaceRequest::new("first-touch") };
    let placed = session.place(&request)?;
    let mut plan = Plan { pages: Vec::new(), nodes: Vec::new() };
    let mut last = None;
    for &(page, _, set) in &placed.evaluation.placement {
        if last == Some(page) {
            continue;
        }
        last = Some(page);
        let local = set & !sharemap_placement::cost::GLOBAL_BIT;
        if local != 0 {
            plan.pages.push(page * page_size);
            plan.nodes.push(host.numa_os_index(local.trailing_zeros() as usize) as i32);
        }
    }
    if plan.pages.is_empty() {
        return Err(Error::new(ErrorKind::DataPlacement, format!("{}: the optimum places no page", trace.display())));
    }
    Ok(plan)
}

fn address(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Writes the optimal placement, one row per change: CSV (`page,at,locations,page_size`) or
/// JSON by the file's extension. The page size lets `run --placement` refuse a plan for
/// other pages. Written to a temporary file, then renamed over `path`.
pub fn write_placement(path: &Path, eval: &Evaluation, page_size: u64) -> Result<()> {
    write_placement_to(AtomicOutput::create(path)?, eval, page_size)
}

/// `write_placement` into an output already created.
pub(crate) fn write_placement_to(out: AtomicOutput, eval: &Evaluation, page_size: u64) -> Result<()> {
    let path = out.path().to_path_buf();
    let path = path.as_path();
    let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let mut w = out.writer()?;
    if json {
        #[derive(Serialize)]
        struct Row {
            page: String,
            at: u64,
            locations: Vec<String>,
            page_size: u64,
        }
        let rows: Vec<Row> = eval
            .placement
            .iter()
            .map(|&(page, at, set)| Row {
                page: format!("{:#x}", page * page_size),
                at,
                locations: cost::set_label(set).split(';').map(str::to_string).collect(),
                page_size,
            })
            .collect();
        serde_json::to_writer_pretty(&mut w, &rows).map_err(std::io::Error::from)?;
        writeln!(w)?;
    } else {
        writeln!(w, "page,at,locations,page_size")?;
        for &(page, at, set) in &eval.placement {
            writeln!(w, "{:#x},{at},{},{page_size}", page * page_size, cost::set_label(set))?;
        }
    }
    flush(&mut w, path)?;
    drop(w);
    out.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn plans_are_read_from_place_output_and_own_files() {
        let host = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
        let f = write("page,at,locations\n0x1000,0,1\n0x1000,50,0\n0x2000,0,0;1\n0x3000,0,global\n");
        let plan = Plan::read(f.path(), &host, 4096).unwrap();
        assert_eq!(plan, Plan { pages: vec![0x1000, 0x2000], nodes: vec![1, 0] });
        let f = write("[{\"page\":\"0x5000\",\"at\":0,\"locations\":[\"1\"],\"page_size\":4096}]");
        assert_eq!(Plan::read(f.path(), &host, 4096).unwrap().pages, vec![0x5000]);
        let f = write("page,node\n0x4000,1\n");
        assert_eq!(Plan::read(f.path(), &host, 4096).unwrap().nodes, vec![1]);
    }

    #[test]
    fn bad_plans_say_where() {
        let host = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
        let e = |text: &str| Plan::read(write(text).path(), &host, 4096).unwrap_err().to_string();
        assert!(
            e("page,node\n0x1800,1\n").contains(":2: page 0x1800 is not a multiple"),
            "{}",
            e("page,node\n0x1800,1\n")
        );
        assert!(e("page,at,locations,page_size\n0x2000,0,1,8192\n").contains("8192-byte pages"));
        assert!(e("page,node\n0x1000,5\n").contains("node 5 does not exist"));
        assert!(e("address,node\n").contains(":1: expected a header"));
        assert!(e("page,node\nzz,1\n").contains(":2: 'zz' is not an address"));
        assert!(e("page,node\n").contains("places no page"));
        // Lines as an editor counts them, blank ones included.
        assert!(e("page,node\n\n0x1000,1\n\n0x1800,1\n").contains(":5: page 0x1800"));
        // A page given twice: once more on the same node is the same plan; on another, refused.
        let f = write("page,node\n0x1000,1\n0x2000,0\n0x1000,1\n");
        assert_eq!(Plan::read(f.path(), &host, 4096).unwrap().pages, vec![0x1000, 0x2000]);
        assert!(
            e("page,node\n0x1000,1\n0x1000,0\n")
                .contains(":3: page 0x1000 planned on node 0 here and on node 1 at line 2")
        );
    }

    proptest::proptest! {
        /// A plan written as `page,node` reads back as it was (page-aligned, nodes of the
        /// host), and any text at all gives a plan or an error, never a panic.
        #[test]
        fn plans_round_trip_and_any_text_is_answered(
            pages in proptest::collection::btree_map(0u64..1 << 36, 0usize..2, 1..50),
            junk in "[ -~\n]{0,300}",
            header in proptest::sample::select(vec!["page,node", "page,at,locations", "page,at,locations,page_size"]),
        ) {
            let host = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
            let rows: Vec<String> = pages.iter().map(|(p, n)| format!("{:#x},{n}", p * 4096)).collect();
            let f = write(&format!("page,node\n{}\n", rows.join("\n")));
            let plan = Plan::read(f.path(), &host, 4096).unwrap();
            proptest::prop_assert_eq!(plan.pages, pages.keys().map(|p| p * 4096).collect::<Vec<_>>());
            proptest::prop_assert_eq!(plan.nodes, pages.values().map(|&n| n as i32).collect::<Vec<_>>());
            let f = write(&format!("{header}\n{junk}"));
            let _ = Plan::read(f.path(), &host, 4096);
        }
    }
}
