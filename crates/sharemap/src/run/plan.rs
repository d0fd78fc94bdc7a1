//! A per-page placement plan for a real run: one home node per page, applied by migrating
//! each planned page to its node once the program has touched it (a page does not exist
//! before its first touch; the program's own allocations are not intercepted, so its
//! addresses stay as in the recording the plan came from).

use crate::{Error, Result};
use serde::Serialize;
use sharemap_machine::Machine;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Pages (addresses, page-aligned) and the OS node each should lie on.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub pages: Vec<u64>,
    pub nodes: Vec<i32>,
}

/// How a plan fared in one run, by the kernel's answers at the program's last exit.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PlanOutcome {
    pub planned: usize,
    /// Planned pages the run touched (present in memory at its end).
    pub touched: usize,
    /// Touched planned pages on their planned node.
    pub on_node: usize,
    /// Pages migrated to their node during the run, and migrations the kernel refused.
    pub moved: u64,
    pub refused: u64,
}

impl PlanOutcome {
    pub(crate) fn count(&mut self, plan: &Plan, nodes: &[i32]) {
        self.planned = plan.pages.len();
        self.touched = nodes.iter().filter(|&&n| n >= 0).count();
        self.on_node = nodes.iter().zip(&plan.nodes).filter(|(n, want)| n == want).count();
    }
}

impl Plan {
    /// Reads a plan file: `sharemap place --placement` output (CSV `page,at,locations[,page_size]`
    /// or its JSON), where a page's home is its first location (the optimum's initial
    /// placement, chosen knowing the whole run; of a replicated set the lowest node; pages
    /// kept only in global memory are left to the kernel), or a CSV `page,node` of one's own.
    /// Nodes are the machine's logical NUMA indices; pages must be of the host's page size.
    pub fn read(path: &Path, host: &Machine, page_size: u64) -> Result<Plan> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::setting("data placement", format!("{}: {e}", path.display())))?;
        let at =
            |line: usize, why: String| Error::setting("data placement", format!("{}:{line}: {why}", path.display()));
        let mut rows: Vec<(u64, Option<usize>, Option<u64>)> = Vec::new();
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
                rows.push((page, home, row.page_size));
            }
        } else {
            let mut lines = text.lines().enumerate();
            let header = lines.next().map(|(_, h)| h.trim().to_string()).unwrap_or_default();
            let columns: Vec<&str> = header.split(',').map(str::trim).collect();
            let own = columns == ["page", "node"];
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
                rows.push((page, home, size));
            }
        }
        let mut plan = Plan { pages: Vec::new(), nodes: Vec::new() };
        let mut last = None;
        for (i, (page, home, size)) in rows.into_iter().enumerate() {
            if let Some(size) = size.filter(|&s| s != page_size) {
                return Err(at(
                    i + 2,
                    format!(
                        "the plan is for {size}-byte pages, the host's are {page_size} bytes: place the trace with --page-size {page_size}"
                    ),
                ));
            }
            if page % page_size != 0 {
                return Err(at(
                    i + 2,
                    format!(
                        "page {page:#x} is not a multiple of the host's page size ({page_size} bytes): a plan for another page size"
                    ),
                ));
            }
            // A page's later rows are the optimum's later changes: its home is the first.
            if last == Some(page) {
                continue;
            }
            last = Some(page);
            let Some(node) = home else { continue };
            if node >= host.numa_count() {
                return Err(at(
                    i + 2,
                    format!("node {node} does not exist: the host has nodes 0-{}", host.numa_count() - 1),
                ));
            }
            plan.pages.push(page);
            plan.nodes.push(host.numa_os_index(node) as i32);
        }
        if plan.pages.is_empty() {
            return Err(Error::setting("data placement", format!("{}: the plan places no page", path.display())));
        }
        Ok(plan)
    }
}

/// The optimum reduced to one home node per page, from a recording, for the live host with
/// threads placed as `threads` maps them: a page's home is where the optimum puts it first
/// (its initial placement, chosen knowing the whole run; of a replicated set the lowest
/// node). Pages it keeps only in global memory are left to the kernel.
pub fn optimal_plan(trace: &Path, threads: crate::ThreadMap, page_size: u64, host: &Machine) -> Result<Plan> {
    let mut source = crate::open(trace, None)?;
    let setup = crate::Setup {
        machine: "live".into(),
        page_size: Some(page_size),
        thread_map: threads,
        ..crate::Setup::default()
    };
    let situation = crate::Situation::resolve(&setup, &mut source)?;
    let mut source = crate::open(trace, None)?;
    let opts = crate::PlaceOptions { placement: true, ..Default::default() };
    let placed = crate::place(&mut source, &situation, "first-touch", &opts)?;
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
        return Err(Error::setting("data placement", format!("{}: the optimum places no page", trace.display())));
    }
    Ok(plan)
}

fn address(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// move_pages: move pages mapped by this process only (<linux/mempolicy.h>).
const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// How many pages one move_pages call handles.
const BATCH: usize = 4096;

/// One move_pages call over at most `BATCH` pages: with `nodes`, moves them there; without,
/// only reports where they lie. Each page's status (its node, or a negative errno) goes to
/// `status`; the call's own errno when it fails as a whole.
fn move_pages(pid: i32, pages: &[u64], nodes: Option<&[i32]>, status: &mut [i32]) -> std::result::Result<(), i32> {
    let ptrs: Vec<*const libc::c_void> = pages.iter().map(|&p| p as *const libc::c_void).collect();
    let (nodes, flags) = match nodes {
        Some(n) => (n.as_ptr(), MPOL_MF_MOVE),
        None => (std::ptr::null::<i32>(), 0),
    };
    // SAFETY: one pointer, one status slot (and one node when moving) per page.
    let r = unsafe {
        libc::syscall(libc::SYS_move_pages, pid, ptrs.len(), ptrs.as_ptr(), nodes, status.as_mut_ptr(), flags)
    };
    if r < 0 { Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)) } else { Ok(()) }
}

/// The node each page lies on in process `pid`, or a negative errno (-ENOENT: not
/// present, never touched; -EFAULT: not mapped; -ESRCH: the process is gone).
pub fn query_nodes(pid: i32, pages: &[u64]) -> Vec<i32> {
    let mut status = vec![-libc::EFAULT; pages.len()];
    for (chunk, out) in pages.chunks(BATCH).zip(status.chunks_mut(BATCH)) {
        if let Err(errno) = move_pages(pid, chunk, None, out) {
            out.fill(-errno);
        }
    }
    status
}

/// Moves pages of process `pid` to nodes; how many moved and how many the kernel refused.
fn move_to(pid: i32, pages: &[u64], nodes: &[i32]) -> (u64, u64) {
    let (mut moved, mut refused) = (0, 0);
    let mut status = vec![0i32; pages.len().min(BATCH)];
    for (chunk, want) in pages.chunks(BATCH).zip(nodes.chunks(BATCH)) {
        let status = &mut status[..chunk.len()];
        if move_pages(pid, chunk, Some(want), status).is_err() {
            refused += chunk.len() as u64;
            continue;
        }
        for (s, w) in status.iter().zip(want) {
            if s == w { moved += 1 } else { refused += 1 }
        }
    }
    (moved, refused)
}

/// Applies a plan to a running process from a thread of ours: every `interval` it asks
/// where the pages not yet placed lie, and migrates those the program has touched.
pub struct Placer {
    stop: Arc<AtomicBool>,
    moved: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Placer {
    pub fn start(pid: i32, plan: Plan, interval: Duration) -> Placer {
        let stop = Arc::new(AtomicBool::new(false));
        let (moved, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (s, m, r) = (stop.clone(), moved.clone(), refused.clone());
        let thread = std::thread::spawn(move || {
            let (mut pages, mut nodes) = (plan.pages, plan.nodes);
            while !s.load(Ordering::Relaxed) && !pages.is_empty() {
                let now = query_nodes(pid, &pages);
                if now.iter().all(|&n| n == -libc::ESRCH) {
                    break;
                }
                let (mut go, mut to) = (Vec::new(), Vec::new());
                let mut keep = 0;
                for i in 0..pages.len() {
                    if now[i] >= 0 && now[i] != nodes[i] {
                        go.push(pages[i]);
                        to.push(nodes[i]);
                    }
                    // Placed pages leave the watch; untouched and misplaced ones stay.
                    if now[i] != nodes[i] {
                        pages[keep] = pages[i];
                        nodes[keep] = nodes[i];
                        keep += 1;
                    }
                }
                pages.truncate(keep);
                nodes.truncate(keep);
                if go.is_empty() {
                    std::thread::sleep(interval);
                } else {
                    // Pages are being touched: look again at once.
                    let (mv, rf) = move_to(pid, &go, &to);
                    m.fetch_add(mv, Ordering::Relaxed);
                    r.fetch_add(rf, Ordering::Relaxed);
                }
            }
        });
        Placer { stop, moved, refused, thread }
    }

    /// Stops it; what it moved so far.
    pub fn finish(self) -> PlanOutcome {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        PlanOutcome {
            moved: self.moved.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            ..PlanOutcome::default()
        }
    }
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

    /// Our own pages: a touched page is found on a node, an untouched one is not present.
    #[test]
    fn pages_of_a_process_are_queried() {
        let page = 4096;
        let mut buf = vec![0u8; 3 * page];
        let base = (buf.as_mut_ptr() as u64).div_ceil(page as u64) * page as u64;
        // SAFETY: base is within buf, which is still alive.
        unsafe { std::ptr::write_volatile(base as *mut u8, 1) };
        // SAFETY: a fresh anonymous mapping, never touched, unmapped below.
        let fresh = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let status = query_nodes(std::process::id() as i32, &[base, fresh as u64]);
        assert!(status[0] >= 0, "{status:?}");
        assert_eq!(status[1], -libc::ENOENT);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(fresh, page) };
    }
}
