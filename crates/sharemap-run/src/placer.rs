//! A per-page placement plan applied to a real run: each planned page migrated to its node
//! once the program has touched it (a page does not exist before its first touch; the
//! program's own allocations are not intercepted, so its addresses stay as in the recording
//! the plan came from).

use serde::Serialize;
use sharemap::plan::Plan;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

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
    /// Touched planned pages that lie in transparent huge pages (None: the kernel's page
    /// flags could not be read, which needs root).
    pub in_huge_pages: Option<usize>,
    /// Why touched pages are off their node.
    pub off_node: OffNode,
}

/// Touched planned pages off their planned node, by cause (each page counted once, under
/// the first cause that applies).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct OffNode {
    /// Placed with their huge-page region, on the node most of its pages want (`--thp regions`).
    pub region: usize,
    /// In a huge page that went where other pages of it were planned.
    pub huge_page: usize,
    /// The kernel refused the last migration asked for them.
    pub refused: usize,
    /// The rest: touched after the placer's last look, or moved since (by the kernel's
    /// NUMA balancing, say).
    pub other: usize,
}

impl PlanOutcome {
    /// Counts `plan`'s pages by where they lie (`nodes`, move_pages' answers at the last
    /// exit): `placed` is the plan the placer followed (the same, or by region),
    /// `huge` whether each lies in a huge page, `refused` the pages whose last migration
    /// the kernel refused.
    pub(crate) fn count(
        &mut self,
        plan: &Plan,
        placed: &Plan,
        nodes: &[i32],
        huge: Option<&[bool]>,
        refused: &std::collections::HashSet<u64>,
    ) {
        self.planned = plan.pages.len();
        self.touched = nodes.iter().filter(|&&n| n >= 0).count();
        self.on_node = nodes.iter().zip(&plan.nodes).filter(|(n, want)| n == want).count();
        self.in_huge_pages = huge.map(|h| h.iter().zip(nodes).filter(|&(&h, &n)| h && n >= 0).count());
        let mut off = OffNode::default();
        for i in 0..plan.pages.len() {
            if nodes[i] < 0 || nodes[i] == plan.nodes[i] {
                continue;
            }
            if placed.nodes[i] != plan.nodes[i] {
                off.region += 1;
            } else if huge.is_some_and(|h| h[i]) {
                off.huge_page += 1;
            } else if refused.contains(&plan.pages[i]) {
                off.refused += 1;
            } else {
                off.other += 1;
            }
        }
        self.off_node = off;
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

/// Moves pages of process `pid` to nodes; how many moved, and the pages the kernel
/// refused (with the batch they came in when a whole call failed).
fn move_to(pid: i32, pages: &[u64], nodes: &[i32], refused: &mut Vec<u64>) -> u64 {
    let mut moved = 0;
    let mut status = vec![0i32; pages.len().min(BATCH)];
    for (chunk, want) in pages.chunks(BATCH).zip(nodes.chunks(BATCH)) {
        let status = &mut status[..chunk.len()];
        if move_pages(pid, chunk, Some(want), status).is_err() {
            refused.extend_from_slice(chunk);
            continue;
        }
        for ((s, w), &page) in status.iter().zip(want).zip(chunk) {
            if s == w { moved += 1 } else { refused.push(page) }
        }
    }
    moved
}

/// How many times one page is migrated at most: a page found off its node again after
/// that many moves is being moved back (it shares a huge page with pages planned
/// elsewhere, or the kernel balances it) and is left alone rather than fought over.
const MOVES_PER_PAGE: u8 = 3;

/// Applies a plan to a running process from a thread of ours: every `interval` it asks
/// where the pages not yet placed lie, and migrates those the program has touched.
pub struct Placer {
    stop: Arc<AtomicBool>,
    moved: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<HashSet<u64>>,
}

impl Placer {
    pub fn start(pid: i32, plan: Plan, interval: Duration) -> Placer {
        let stop = Arc::new(AtomicBool::new(false));
        let (moved, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (s, m, r) = (stop.clone(), moved.clone(), refused.clone());
        let thread = std::thread::spawn(move || {
            let (mut pages, mut nodes) = (plan.pages, plan.nodes);
            let mut moves = vec![0u8; pages.len()];
            // Pages whose last migration the kernel refused.
            let mut last_refused = HashSet::new();
            let mut refused_now = Vec::new();
            while !s.load(Ordering::Relaxed) && !pages.is_empty() {
                let now = query_nodes(pid, &pages);
                if now.iter().all(|&n| n == -libc::ESRCH) {
                    break;
                }
                let (mut go, mut to) = (Vec::new(), Vec::new());
                let mut keep = 0;
                for i in 0..pages.len() {
                    let misplaced = now[i] >= 0 && now[i] != nodes[i];
                    if misplaced {
                        go.push(pages[i]);
                        to.push(nodes[i]);
                        moves[i] += 1;
                    }
                    // Placed pages, and pages moved as often as a page may be, leave the
                    // watch; untouched and misplaced ones stay.
                    if now[i] != nodes[i] && moves[i] < MOVES_PER_PAGE {
                        pages[keep] = pages[i];
                        nodes[keep] = nodes[i];
                        moves[keep] = moves[i];
                        keep += 1;
                    }
                }
                pages.truncate(keep);
                nodes.truncate(keep);
                moves.truncate(keep);
                if go.is_empty() {
                    std::thread::sleep(interval);
                } else {
                    // Pages are being touched: look again at once.
                    refused_now.clear();
                    let mv = move_to(pid, &go, &to, &mut refused_now);
                    for page in &go {
                        last_refused.remove(page);
                    }
                    last_refused.extend(refused_now.iter().copied());
                    m.fetch_add(mv, Ordering::Relaxed);
                    r.fetch_add(refused_now.len() as u64, Ordering::Relaxed);
                }
            }
            last_refused
        });
        Placer { stop, moved, refused, thread }
    }

    /// Stops it; what it moved so far, and the pages whose last migration was refused.
    pub fn finish(self) -> (PlanOutcome, HashSet<u64>) {
        self.stop.store(true, Ordering::Relaxed);
        let refused_pages = self.thread.join().unwrap_or_default();
        let outcome = PlanOutcome {
            moved: self.moved.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            ..PlanOutcome::default()
        };
        (outcome, refused_pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
