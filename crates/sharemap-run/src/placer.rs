//! A per-page placement plan applied to a real run: each planned page migrated to its node
//! once the program has touched it (a page does not exist before its first touch; the
//! program's own allocations are not intercepted, so its addresses stay as in the recording
//! the plan came from).

use crate::timeline::Schedule;
use serde::Serialize;
use sharemap::plan::Plan;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a plan fared in one run, by the kernel's answers at the program's last exit.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
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
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
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

/// The program's threads by creation order, as the tracer learns them, and the CPUs the
/// last remap gave them (None: no remap yet, the threads are the scheduler's).
#[derive(Debug, Default)]
pub(crate) struct Threads {
    /// Thread ids by creation order (0: not started yet).
    tids: Vec<i32>,
    cpus: Option<Vec<usize>>,
}

impl Threads {
    /// A thread has started: after a remap it goes where the remap put its number.
    pub(crate) fn started(&mut self, order: usize, tid: i32) {
        if self.tids.len() <= order {
            self.tids.resize(order + 1, 0);
        }
        self.tids[order] = tid;
        if let Some(&cpu) = self.cpus.as_ref().and_then(|c| c.get(order)) {
            pin(tid, cpu);
        }
    }

    /// Every started thread to its CPU in `cpus` (by creation order; threads beyond it are
    /// left where they are), and threads started later too.
    fn remap(&mut self, cpus: Vec<usize>) {
        for (&tid, &cpu) in self.tids.iter().zip(&cpus) {
            if tid > 0 {
                pin(tid, cpu);
            }
        }
        self.cpus = Some(cpus);
    }
}

/// Pins thread `tid` to `cpu`; a thread that has gone is left alone.
fn pin(tid: i32, cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays within it for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// How far a schedule got before the program ended.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    pub remaps_applied: usize,
    pub moves_due: usize,
}

/// Applies a schedule to a running process from a thread of ours: each remap at its time,
/// each page move from its time on. Every `interval` it asks where the pages whose move is
/// due lie, and migrates those the program has touched. A plan applied from the start is a
/// schedule of moves all at zero.
pub struct Placer {
    stop: Arc<AtomicBool>,
    moved: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<(HashSet<u64>, Progress)>,
}

/// The longest a placer sleeps waiting for its next step, so that it stops soon after asked.
const WAIT: Duration = Duration::from_millis(10);

impl Placer {
    pub fn start(pid: i32, plan: Plan, interval: Duration) -> Placer {
        let moves = plan.pages.into_iter().zip(plan.nodes).map(|(p, n)| (Duration::ZERO, p, n)).collect();
        let schedule = Schedule { remaps: Vec::new(), moves };
        Placer::follow(pid, schedule, Arc::new(Mutex::new(Threads::default())), interval)
    }

    /// Follows `schedule` from now (the program's start), remapping the threads `threads`
    /// knows.
    pub(crate) fn follow(pid: i32, schedule: Schedule, threads: Arc<Mutex<Threads>>, interval: Duration) -> Placer {
        let stop = Arc::new(AtomicBool::new(false));
        let (moved, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (s, m, r) = (stop.clone(), moved.clone(), refused.clone());
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut remaps = schedule.remaps.into_iter().peekable();
            let mut moves = schedule.moves.into_iter().peekable();
            let mut progress = Progress::default();
            // Pages whose move is due and not yet seen done: their node and the moves made.
            let mut watch: BTreeMap<u64, (i32, u8)> = BTreeMap::new();
            // Pages whose last migration the kernel refused.
            let mut last_refused = HashSet::new();
            let (mut pages, mut go, mut to, mut refused_now) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            while !s.load(Ordering::Relaxed) {
                let now = start.elapsed();
                while let Some((_, cpus)) = remaps.next_if(|r| r.0 <= now) {
                    threads.lock().unwrap_or_else(|e| e.into_inner()).remap(cpus);
                    progress.remaps_applied += 1;
                }
                while let Some((_, page, node)) = moves.next_if(|m| m.0 <= now) {
                    watch.insert(page, (node, 0));
                    progress.moves_due += 1;
                }
                if watch.is_empty() {
                    let next = [remaps.peek().map(|r| r.0), moves.peek().map(|m| m.0)].into_iter().flatten().min();
                    match next {
                        Some(at) => std::thread::sleep(at.saturating_sub(now).min(WAIT)),
                        None => break,
                    }
                    continue;
                }
                pages.clear();
                pages.extend(watch.keys().copied());
                let status = query_nodes(pid, &pages);
                if status.iter().all(|&n| n == -libc::ESRCH) {
                    break;
                }
                go.clear();
                to.clear();
                for (&page, &now) in pages.iter().zip(&status) {
                    let entry = watch.get_mut(&page).expect("watched");
                    let node = entry.0;
                    if now >= 0 && now != node {
                        go.push(page);
                        to.push(node);
                        entry.1 += 1;
                    }
                    // Placed pages, and pages moved as often as a page may be, leave the
                    // watch; untouched and misplaced ones stay.
                    if now == node || entry.1 >= MOVES_PER_PAGE {
                        watch.remove(&page);
                    }
                }
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
            (last_refused, progress)
        });
        Placer { stop, moved, refused, thread }
    }

    /// Stops it; what it moved so far, the pages whose last migration was refused, and how
    /// far its schedule got.
    pub fn finish(self) -> (PlanOutcome, HashSet<u64>, Progress) {
        self.stop.store(true, Ordering::Relaxed);
        let (refused_pages, progress) = self.thread.join().unwrap_or_default();
        let outcome = PlanOutcome {
            moved: self.moved.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            ..PlanOutcome::default()
        };
        (outcome, refused_pages, progress)
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
