//! Where a run's threads ran and its pages lay, by the kernel's own answers: the program is
//! traced (ptrace) only to stop each thread as it exits, when `/proc` still describes it;
//! the last thread's stop, before the address space goes, is when pages are counted
//! (`/proc/TID/numa_maps`, through that thread) and a plan's pages queried (`move_pages`). A plan is applied
//! meanwhile from outside the program, by migrating each planned page the program has
//! touched to its node (see `Placer`), so nothing is added to the program's address space.

use crate::counters::{Counter, Counts, Open};
use crate::placer::{Placer, PlanOutcome, Threads, query_nodes};
use crate::timeline::{Schedule, TimelineOutcome};
use serde::Serialize;
use sharemap::plan::Plan;
use sharemap::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// One thread as the kernel saw it when it exited.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct ThreadSeen {
    /// Creation order: 0 for the main thread, then in the order the kernel created threads
    /// (the order `pthread_create` numbers them, unless two threads create at once).
    pub order: usize,
    pub tid: i32,
    /// The CPU it last ran on (`/proc/PID/task/TID/stat`, field 39).
    pub last_cpu: Option<usize>,
    /// The CPUs it was allowed (its affinity, `Cpus_allowed_list`).
    pub allowed: Vec<usize>,
}

/// What the kernel said about one run.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Observed {
    pub threads: Vec<ThreadSeen>,
    /// Resident pages per NUMA node (OS numbering), from numa_maps at the last exit: all,
    /// and those of anonymous mappings (heap, stacks, anonymous mmap: the program's data,
    /// where shared libraries' pages are wherever the page cache holds them).
    pub pages_per_node: Vec<(usize, u64)>,
    pub anonymous_per_node: Vec<(usize, u64)>,
    /// Why the pages could not be seen, when they could not (then both lists are empty
    /// because nothing was read, not because nothing was resident).
    pub pages_unseen: Option<String>,
    pub plan: Option<PlanOutcome>,
    /// How far a replayed mechanism's timeline got.
    pub timeline: Option<TimelineOutcome>,
    /// The counters asked for, read at the last exit (None: none could be opened).
    pub counts: Option<Counts>,
    /// Why a counter could not be opened (the first refusal).
    pub counters_refused: Option<String>,
}

/// A traced run's end: the wait status of the program and what was seen.
pub struct TracedExit {
    pub status: std::process::ExitStatus,
    pub observed: Observed,
}

/// Starts `cmd` traced and waits for it, observing each thread's exit and counting
/// `counters` over all its threads; with a plan, a placer migrates the plan's touched pages
/// every `interval` until the program ends. With a schedule, the placer follows it instead
/// (remapping threads and moving pages at their times, page by page whatever `regions`
/// says) and `plan` is what is counted at the end.
pub fn run_traced(
    cmd: &mut Command,
    plan: Option<&Plan>,
    schedule: Option<Schedule>,
    interval: std::time::Duration,
    regions: Option<u64>,
    counters: &[Counter],
) -> Result<TracedExit> {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only the ptrace system call runs.
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    // The child stops with SIGTRAP once exec has succeeded.
    let status = wait(pid, libc::__WALL)?;
    if !libc::WIFSTOPPED(status) {
        return Err(Error::new(ErrorKind::Program, "it ended before it started"));
    }
    // Traced from exec by PTRACE_TRACEME, a program stopped by SIGSTOP or Ctrl-Z could only
    // be resumed; one taken by PTRACE_SEIZE stays stopped (PTRACE_LISTEN) as it would
    // without sharemap. So it is handed over before its first instruction: detached into a
    // SIGSTOP, seized while stopped, then continued.
    let cannot = |e: std::io::Error| {
        // SAFETY: killing our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        Error::new(ErrorKind::Program, format!("cannot observe it (ptrace: {e})"))
    };
    // Exec reported as an event (else the kernel sends the tracee a SIGTRAP for each).
    let options =
        libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_TRACEEXEC | libc::PTRACE_O_EXITKILL;
    // SAFETY: plain ptrace requests and signals on our stopped child.
    unsafe {
        if libc::ptrace(libc::PTRACE_DETACH, pid, 0, libc::SIGSTOP as libc::c_long) != 0 {
            return Err(cannot(std::io::Error::last_os_error()));
        }
        let status = wait(pid, libc::WUNTRACED)?;
        if !libc::WIFSTOPPED(status) {
            return Err(Error::new(ErrorKind::Program, "it ended before it started"));
        }
        if libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options as libc::c_long) != 0 {
            return Err(cannot(std::io::Error::last_os_error()));
        }
    }
    // Opened before it runs: the counts start with the program's first instruction.
    let (open, refused) = Open::on(pid, counters);
    // SAFETY: continuing our own child; the SIGCONT's delivery is not passed on to it.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let mut own_sigcont = true;
    // The plan the placer follows: each page's own node, or its huge-page region's.
    let with_schedule = schedule.is_some();
    let placed = plan.map(|p| match regions {
        Some(size) if !with_schedule => crate::thp::by_region(p, size),
        _ => p.clone(),
    });
    let threads = Arc::new(Mutex::new(Threads::default()));
    threads.lock().unwrap_or_else(|e| e.into_inner()).started(0, pid);
    let placer = match schedule {
        Some(s) => Some(Placer::follow(pid, s, threads.clone(), interval)),
        None => placed.clone().map(|p| Placer::start(pid, p, interval)),
    };
    let mut tracer =
        Tracer { pid, threads: HashMap::new(), seen: Vec::new(), exited: 0, observed: Observed::default() };
    // Until the last thread's exit is seen and its pages read.
    tracer.observed.pages_unseen = Some("the last thread's exit was not seen".into());
    tracer.threads.insert(pid, Thread { order: 0, started: true, exited: false });
    tracer.observed.counters_refused = refused;
    let mut placer = placer;
    let status = loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status of any of our (traced) children.
        let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if tid < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::from(e));
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            if tid == pid {
                break status;
            }
            continue;
        }
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        let mut inject = 0;
        match event {
            libc::PTRACE_EVENT_CLONE => {
                let mut new: libc::c_ulong = 0;
                // SAFETY: the message of a clone stop is the new thread's id.
                unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, tid, 0, &mut new as *mut libc::c_ulong) };
                tracer.known(new as i32);
            }
            libc::PTRACE_EVENT_EXIT => {
                let last = tracer.exiting(tid);
                if last {
                    let counts = open.read();
                    if counts.values.iter().any(|v| v.1.is_some()) {
                        tracer.observed.counts = Some(counts);
                    }
                    let finished = placer.take().map(Placer::finish);
                    // Through this thread, the last alive: the group leader (/proc/PID) may have
                    // left its memory behind already (a program that ends while other threads run,
                    // or whose main thread called pthread_exit), and then shows none.
                    tracer.see_pages(tid);
                    if let Some((_, _, progress)) = &finished
                        && with_schedule
                    {
                        tracer.observed.timeline = Some(TimelineOutcome::reached(*progress));
                    }
                    if let (Some(plan), Some(placed), Some((mut outcome, refused, _))) = (plan, &placed, finished) {
                        let nodes = query_nodes(tid, &plan.pages);
                        let huge = crate::thp::in_huge_pages(tid, &plan.pages);
                        outcome.count(plan, placed, &nodes, huge.as_deref(), &refused);
                        tracer.observed.plan = Some(outcome);
                    }
                }
            }
            libc::PTRACE_EVENT_STOP => {
                // A new thread's first stop as it is attached, a group stop (SIGSTOP, SIGTSTP,
                // SIGTTIN, SIGTTOU: the thread stays stopped until a SIGCONT, which reports
                // again), or the report of that SIGCONT.
                if !tracer.threads.get(&tid).is_some_and(|t| t.started) {
                    tracer.known(tid);
                    let thread = tracer.threads.get_mut(&tid).expect("known");
                    thread.started = true;
                    threads.lock().unwrap_or_else(|e| e.into_inner()).started(thread.order, tid);
                }
                if matches!(signal, libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU) {
                    // SAFETY: keeps a tracee in its group stop.
                    unsafe { libc::ptrace(libc::PTRACE_LISTEN, tid, 0, 0) };
                    continue;
                }
            }
            0 if tid == pid && signal == libc::SIGCONT && own_sigcont => own_sigcont = false,
            0 => inject = signal,
            _ => {}
        }
        // SAFETY: resumes a stopped tracee, delivering the signal it stopped for.
        unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, inject as libc::c_long) };
    };
    if let Some(p) = placer.take() {
        // The program ended without its last exit seen: what was moved, nothing counted.
        let (outcome, _, progress) = p.finish();
        tracer.observed.plan = Some(outcome);
        if with_schedule {
            tracer.observed.timeline = Some(TimelineOutcome::reached(progress));
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let mut observed = tracer.observed;
    observed.threads = tracer.seen;
    observed.threads.sort_by_key(|t| t.order);
    drop(child);
    Ok(TracedExit { status: std::process::ExitStatus::from_raw(status), observed })
}

struct Thread {
    order: usize,
    /// Its first (attach) stop has been seen.
    started: bool,
    exited: bool,
}

struct Tracer {
    pid: i32,
    threads: HashMap<i32, Thread>,
    seen: Vec<ThreadSeen>,
    exited: usize,
    observed: Observed,
}

impl Tracer {
    fn known(&mut self, tid: i32) {
        let order = self.threads.len();
        self.threads.entry(tid).or_insert(Thread { order, started: false, exited: false });
    }

    /// Reads the resident pages per node through thread `tid` (or its process), or says why
    /// they could not be read: a live address space always has some resident page, so a
    /// read giving none saw nothing.
    fn see_pages(&mut self, tid: i32) {
        let paths = [format!("/proc/{tid}/numa_maps"), format!("/proc/{}/task/{tid}/numa_maps", self.pid)];
        let mut why = String::new();
        for path in &paths {
            let read = std::fs::read_to_string(path).map(|maps| (numa_maps_totals(&maps), maps));
            match read {
                Ok((totals, maps)) if !totals.is_empty() => {
                    self.observed.pages_per_node = totals;
                    let anonymous: Vec<&str> = maps.lines().filter(|l| !l.contains(" file=")).collect();
                    self.observed.anonymous_per_node = numa_maps_totals(&anonymous.join("\n"));
                    self.observed.pages_unseen = None;
                    return;
                }
                Ok(_) => why = format!("{path} listed no resident page: the address space was already released"),
                Err(e) => why = format!("{path}: {e}"),
            }
        }
        self.observed.pages_per_node.clear();
        self.observed.anonymous_per_node.clear();
        self.observed.pages_unseen = Some(why);
    }

    /// Records an exiting thread; whether it is the last one alive.
    fn exiting(&mut self, tid: i32) -> bool {
        self.known(tid);
        let thread = self.threads.get_mut(&tid).expect("known");
        if !thread.exited {
            thread.exited = true;
            self.exited += 1;
            let (last_cpu, allowed) = thread_facts(self.pid, tid);
            self.seen.push(ThreadSeen { order: thread.order, tid, last_cpu, allowed });
        }
        self.exited == self.threads.len()
    }
}

fn wait(pid: i32, flags: i32) -> Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        if unsafe { libc::waitpid(pid, &mut status, flags) } == pid {
            return Ok(status);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::from(e));
        }
    }
}

/// A thread's last CPU and its allowed CPUs, from /proc.
fn thread_facts(pid: i32, tid: i32) -> (Option<usize>, Vec<usize>) {
    let dir = format!("/proc/{pid}/task/{tid}");
    let last_cpu = std::fs::read_to_string(format!("{dir}/stat")).ok().and_then(|s| {
        // Fields after the command name (which may hold spaces) start at field 3.
        let rest = &s[s.rfind(')')? + 2..];
        rest.split_whitespace().nth(39 - 3)?.parse().ok()
    });
    let allowed = std::fs::read_to_string(format!("{dir}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| cpu_list(v.trim()))))
        .unwrap_or_default();
    (last_cpu, allowed)
}

/// `0-3,8,10-11` as numbers.
pub fn cpu_list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => out.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => out.extend(a..=b),
            _ => {}
        }
    }
    out
}

/// Numbers as `0-3,8,10-11`.
pub fn cpu_ranges(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// Resident pages per node of numa_maps lines (their `N<node>=<pages>` fields).
pub(crate) fn numa_maps_totals(text: &str) -> Vec<(usize, u64)> {
    let mut per_node: Vec<(usize, u64)> = Vec::new();
    for field in text.split_whitespace() {
        let Some((node, pages)) = field.strip_prefix('N').and_then(|f| f.split_once('=')) else { continue };
        let (Ok(node), Ok(pages)) = (node.parse::<usize>(), pages.parse::<u64>()) else { continue };
        match per_node.iter_mut().find(|(n, _)| *n == node) {
            Some((_, p)) => *p += pages,
            None => per_node.push((node, pages)),
        }
    }
    per_node.sort();
    per_node
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run_traced` waits for any child (`waitpid(-1)`: its tracees' threads are not known
    /// ahead), so tests that run it or start other children take turns.
    static CHILDREN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn cpu_lists_and_numa_maps_are_read() {
        assert_eq!(cpu_list("0-3,8,10-11"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(cpu_list("1"), vec![1]);
        assert_eq!(cpu_ranges(&cpu_list("0-3,8,10-11")), "0-3,8,10-11");
        let maps = "7f00 default anon=3 dirty=3 N0=2 N1=1 kernelpagesize_kB=4\n\
                    7f10 interleave:0-1 file=/lib/x.so mapped=5 N1=5 kernelpagesize_kB=4\n";
        assert_eq!(numa_maps_totals(maps), vec![(0, 2), (1, 6)]);
    }

    /// Pages that could not be read are said to be unseen, never reported as none resident.
    #[test]
    fn pages_that_cannot_be_read_are_unseen_not_none() {
        let tracer =
            |pid| Tracer { pid, threads: HashMap::new(), seen: Vec::new(), exited: 0, observed: Observed::default() };
        let me = std::process::id() as i32;
        let mut live = tracer(me);
        live.see_pages(me);
        assert!(live.observed.pages_unseen.is_none() && !live.observed.pages_per_node.is_empty());
        // A thread id no process has (above the kernel's pid_max limit).
        let mut gone = tracer(me);
        gone.see_pages(i32::MAX);
        let why = gone.observed.pages_unseen.expect("unseen");
        assert!(why.contains("numa_maps") && gone.observed.pages_per_node.is_empty(), "{why}");
    }

    /// The kernel's own answers for a program whose threads we know: `sh` running a
    /// subshell pipeline has one thread (the main one), allowed every CPU we may use.
    #[test]
    fn a_traced_program_is_seen_to_exit() {
        let _turn = turn();
        let out = run_traced(
            Command::new("sh").args(["-c", "exit 3"]),
            None,
            None,
            std::time::Duration::from_millis(10),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.observed.threads.len(), 1);
        assert_eq!(out.observed.threads[0].order, 0);
        assert!(out.observed.threads[0].last_cpu.is_some());
        assert_eq!(out.observed.threads[0].allowed, crate::config::allowed_cpus().unwrap());
        assert!(out.observed.pages_per_node.iter().map(|p| p.1).sum::<u64>() > 0);
        // A program that replaces itself (exec) runs on, its status passed through.
        let out = run_traced(
            Command::new("sh").args(["-c", "exec sh -c 'exit 4'"]),
            None,
            None,
            std::time::Duration::from_millis(10),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(out.status.code(), Some(4));
    }

    /// Counters cover every thread: two threads each first-touch 500 pages (huge pages
    /// off), so the program takes about 1000 page faults more than the same program touching
    /// nothing (start-up's own faults vary by a few between runs).
    #[test]
    fn counters_count_every_thread() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("touch.c");
        std::fs::write(
            &src,
            "#include <pthread.h>\n#include <stdlib.h>\n#include <sys/mman.h>\n\
             static char *buf; static long pages;\n\
             static void *touch(void *a) { long h = (long)a; for (long p = h * pages / 2; p < (h + 1) * pages / 2; p++) buf[p * 4096] = 1; return 0; }\n\
             int main(int argc, char **argv) { pages = atol(argv[1]);\n\
               buf = mmap(0, 1000 * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n\
               madvise(buf, 1000 * 4096L, MADV_NOHUGEPAGE);\n\
               pthread_t t[2]; for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, touch, (void *)i);\n\
               for (int i = 0; i < 2; i++) pthread_join(t[i], 0); return 0; }\n",
        )
        .unwrap();
        let bin = dir.path().join("touch");
        let built = Command::new("gcc").args(["-O1", "-pthread", "-o"]).arg(&bin).arg(&src).status();
        assert!(built.is_ok_and(|s| s.success()), "gcc");
        let faults = |pages: &str| {
            let out = run_traced(
                Command::new(&bin).arg(pages),
                None,
                None,
                std::time::Duration::from_millis(10),
                None,
                &[crate::counters::PAGE_FAULTS],
            )
            .unwrap();
            assert!(out.status.success());
            out.observed.counts.expect("page faults are a software event").get("page-faults").unwrap()
        };
        let (base, full) = (faults("0"), faults("1000"));
        assert!(full >= base + 990 && full <= base + 1100, "{base} alone, {full} with 1000 pages touched");
    }

    /// A timeline's remaps reach the program's threads at their time, those started before
    /// and after alike: a program whose main thread starts one thread at once and another
    /// after 300 ms, all spinning until 600 ms, remapped at 100 ms; every thread ends allowed
    /// its CPU alone. Its page moves come due as scheduled.
    #[test]
    fn a_timelines_remaps_pin_every_thread_at_their_time() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("spin.c");
        std::fs::write(
            &src,
            "#include <pthread.h>\n#include <time.h>\n#include <unistd.h>\n\
             static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }\n\
             static double start; static volatile long sink;\n\
             static void *spin(void *a) { while (now() - start < 0.6) sink++; return a; }\n\
             int main(void) { start = now(); pthread_t a, b;\n\
               pthread_create(&a, 0, spin, 0); usleep(300000); pthread_create(&b, 0, spin, 0);\n\
               spin(0); pthread_join(a, 0); pthread_join(b, 0); return 0; }\n",
        )
        .unwrap();
        let bin = dir.path().join("spin");
        let built = Command::new("gcc").args(["-O1", "-pthread", "-o"]).arg(&bin).arg(&src).status();
        assert!(built.is_ok_and(|s| s.success()), "gcc");
        // The late thread wants another CPU than its creator's, which it would inherit.
        let allowed = crate::config::allowed_cpus().unwrap();
        let (first, last) = (allowed[0], *allowed.last().unwrap());
        let cpus = vec![first, last, last];
        let mut page = vec![0u8; 8192];
        let addr = (page.as_mut_ptr() as u64).div_ceil(4096) * 4096;
        let schedule = Schedule {
            remaps: vec![(std::time::Duration::from_millis(100), cpus.clone())],
            moves: vec![(std::time::Duration::from_millis(50), addr, 0), (std::time::Duration::from_secs(60), addr, 0)],
        };
        let out =
            run_traced(&mut Command::new(&bin), None, Some(schedule), std::time::Duration::from_millis(1), None, &[])
                .unwrap();
        assert!(out.status.success());
        assert_eq!(out.observed.threads.len(), 3);
        for t in &out.observed.threads {
            assert_eq!(t.allowed, vec![cpus[t.order]], "thread {} of {:?}", t.order, out.observed.threads);
        }
        let reached = out.observed.timeline.unwrap();
        assert_eq!((reached.remaps_applied, reached.moves_due), (1, 1));
    }
}
