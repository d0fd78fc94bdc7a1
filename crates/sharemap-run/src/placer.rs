//! A per-page placement plan applied to a real run: each planned page migrated to its node
//! once the program has touched it (a page does not exist before its first touch; the
//! program's own allocations are not intercepted, so its addresses stay as in the recording
//! the plan came from).

use serde::Serialize;
use sharemap::plan::Plan;
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
}

impl PlanOutcome {
    pub(crate) fn count(&mut self, plan: &Plan, nodes: &[i32]) {
        self.planned = plan.pages.len();
        self.touched = nodes.iter().filter(|&&n| n >= 0).count();
        self.on_node = nodes.iter().zip(&plan.nodes).filter(|(n, want)| n == want).count();
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
