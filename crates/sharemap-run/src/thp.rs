//! Transparent huge pages and per-page plans. A plan homes 4 KiB pages, but where the
//! kernel backs a region with a huge page (2 MiB on x86-64), migrating any of its base pages
//! moves the whole huge page: of a region whose pages are planned on several nodes, only the
//! pages planned where the last migration went land. A run either splits huge pages away
//! (`prctl(PR_SET_THP_DISABLE)`, inherited by the program, for every configuration alike)
//! or places each region whole, on the node most of its planned pages want.

use sharemap::plan::Plan;
use std::collections::HashMap;

/// What a run with a plan does about transparent huge pages (`run --thp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Thp {
    /// Huge pages off for the program in every configuration (so the comparison stays
    /// like for like): each planned page lands on its own node.
    Split,
    /// Huge pages kept; each huge-page region placed whole on the node most of its planned
    /// pages want (ties: the lowest node).
    Regions,
    /// Nothing done: a region's pages planned on several nodes fight over one huge page.
    Keep,
}

impl Thp {
    pub fn parse(text: &str) -> Option<Thp> {
        match text {
            "split" => Some(Thp::Split),
            "regions" => Some(Thp::Regions),
            "keep" => Some(Thp::Keep),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Thp::Split => "split",
            Thp::Regions => "regions",
            Thp::Keep => "keep",
        }
    }
}

/// The host's transparent huge pages, from /sys/kernel/mm/transparent_hugepage.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HostThp {
    /// The selected mode: `always`, `madvise` or `never`.
    pub enabled: String,
    /// Bytes of one huge page (`hpage_pmd_size`).
    pub size: u64,
}

impl HostThp {
    /// None when the kernel has no transparent huge pages at all.
    pub fn read() -> Option<HostThp> {
        let dir = std::path::Path::new("/sys/kernel/mm/transparent_hugepage");
        let enabled = std::fs::read_to_string(dir.join("enabled")).ok()?;
        let size = std::fs::read_to_string(dir.join("hpage_pmd_size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(2 << 20);
        Some(HostThp { enabled: selected(&enabled)?.to_string(), size })
    }

    /// Whether a program may get huge pages here (`madvise`: where it asks for them).
    pub fn active(&self) -> bool {
        self.enabled != "never"
    }
}

/// The bracketed word of a sysfs choice line (`always [madvise] never`).
fn selected(line: &str) -> Option<&str> {
    line.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
}

/// How a run treats huge pages: `mode` when some configuration places pages by plan on a
/// host that may back them with huge pages, else nothing to do.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ThpHandling {
    pub mode: Thp,
    pub host: HostThp,
}

impl ThpHandling {
    pub fn new(mode: Thp, host: Option<HostThp>, plans: bool) -> Option<ThpHandling> {
        let host = host.filter(|h| h.active() && plans)?;
        Some(ThpHandling { mode, host })
    }

    /// Whether every run of the program has huge pages turned off.
    pub fn split(&self) -> bool {
        self.mode == Thp::Split
    }

    /// The huge-page size when plans are placed region by region.
    pub fn regions(&self) -> Option<u64> {
        (self.mode == Thp::Regions).then_some(self.host.size)
    }

    /// One line for the user: what was found and what was done.
    pub fn describe(&self) -> String {
        let found = format!("transparent huge pages are '{}' here ({} KiB)", self.host.enabled, self.host.size >> 10);
        match self.mode {
            Thp::Split => format!(
                "{found}: turned off for the program in every configuration (prctl PR_SET_THP_DISABLE), so each \
                 planned page lands on its own node; --thp regions keeps them"
            ),
            Thp::Regions => format!(
                "{found}: each {} KiB region of a plan is placed whole, on the node most of its planned pages want",
                self.host.size >> 10
            ),
            Thp::Keep => format!(
                "{found} and kept (--thp keep): a huge page holding pages planned on several nodes lands on one of them"
            ),
        }
    }
}

/// Turns huge pages off for the calling process and what it executes (between fork and
/// exec: one system call).
pub fn disable_in_child() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The plan with each page's node replaced by its region's: the node most of the region's
/// planned pages want (ties: the lowest node).
pub fn by_region(plan: &Plan, region: u64) -> Plan {
    let mut votes: HashMap<u64, HashMap<i32, usize>> = HashMap::new();
    for (&page, &node) in plan.pages.iter().zip(&plan.nodes) {
        *votes.entry(page / region).or_default().entry(node).or_default() += 1;
    }
    let winner: HashMap<u64, i32> = votes
        .into_iter()
        .map(|(r, nodes)| {
            let best = nodes.into_iter().max_by_key(|&(node, n)| (n, std::cmp::Reverse(node))).expect("a vote");
            (r, best.0)
        })
        .collect();
    Plan { pages: plan.pages.clone(), nodes: plan.pages.iter().map(|p| winner[&(p / region)]).collect() }
}

/// Whether each page of process `pid` lies in a transparent huge page, from its page map
/// and the kernel's page flags (root only: None when either cannot be read).
pub fn in_huge_pages(pid: i32, pages: &[u64]) -> Option<Vec<bool>> {
    use std::os::unix::fs::FileExt;
    let map = std::fs::File::open(format!("/proc/{pid}/pagemap")).ok()?;
    let flags = std::fs::File::open("/proc/kpageflags").ok()?;
    // SAFETY: sysconf has no preconditions.
    let base = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let mut word = [0u8; 8];
    let mut out = Vec::with_capacity(pages.len());
    let mut frames_seen = false;
    for &page in pages {
        if map.read_exact_at(&mut word, page / base * 8).is_err() {
            out.push(false);
            continue;
        }
        let entry = u64::from_le_bytes(word);
        let present = entry >> 63 & 1 == 1;
        let frame = entry & ((1 << 55) - 1);
        if !present || frame == 0 {
            out.push(false);
            continue;
        }
        frames_seen = true;
        // KPF_THP: the frame belongs to a transparent huge page.
        const KPF_THP: u64 = 22;
        let huge = flags.read_exact_at(&mut word, frame * 8).is_ok() && u64::from_le_bytes(word) >> KPF_THP & 1 == 1;
        out.push(huge);
    }
    // Frame numbers read as zero without CAP_SYS_ADMIN: then nothing can be told.
    (frames_seen || pages.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_goes_where_most_of_its_pages_want() {
        let region = 2 << 20;
        // Region 0: three pages on node 1, one on node 0; region 1: a tie, the lowest node wins.
        let plan = Plan { pages: vec![0, 4096, 8192, 12288, region, region + 4096], nodes: vec![0, 1, 1, 1, 3, 2] };
        let placed = by_region(&plan, region);
        assert_eq!(placed.pages, plan.pages);
        assert_eq!(placed.nodes, vec![1, 1, 1, 1, 2, 2]);
    }

    #[test]
    fn the_selected_mode_is_read() {
        assert_eq!(selected("always [madvise] never\n"), Some("madvise"));
        assert_eq!(selected("[always] madvise never"), Some("always"));
        assert_eq!(selected("always madvise never"), None);
        let host = |enabled: &str| Some(HostThp { enabled: enabled.into(), size: 2 << 20 });
        assert!(ThpHandling::new(Thp::Split, host("never"), true).is_none());
        assert!(ThpHandling::new(Thp::Split, host("madvise"), false).is_none());
        assert_eq!(ThpHandling::new(Thp::Regions, host("always"), true).unwrap().regions(), Some(2 << 20));
    }

    /// A huge page of our own, asked for with madvise, is told from a base page (as root,
    /// where the host has transparent huge pages and one is free).
    #[test]
    fn huge_pages_are_told_from_base_pages() {
        let size = 2usize << 20;
        // SAFETY: a fresh anonymous mapping, twice a huge page so that one aligned region fits.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(raw, libc::MAP_FAILED);
        let aligned = (raw as usize).div_ceil(size) * size;
        // SAFETY: the aligned region lies within the mapping.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
            std::ptr::write_bytes(aligned as *mut u8, 1, size);
        }
        // The second half, asked not to be huge, holds a base page.
        let small = aligned as u64 + size as u64 - 4096 * 2;
        let plain = if aligned == raw as usize { aligned + size } else { raw as usize };
        // SAFETY: `plain` is a page-aligned part of the mapping outside the huge region.
        unsafe {
            libc::madvise(plain as *mut libc::c_void, 4096, libc::MADV_NOHUGEPAGE);
            std::ptr::write_bytes(plain as *mut u8, 1, 4096);
        }
        let pages = [aligned as u64, small, plain as u64];
        let seen = in_huge_pages(std::process::id() as i32, &pages);
        let huge_here = HostThp::read().is_some_and(|h| h.active() && h.size == size as u64);
        match seen {
            // Not root: nothing can be told, and nothing is claimed.
            // SAFETY: geteuid has no preconditions.
            None => assert_ne!(unsafe { libc::geteuid() }, 0, "root reads page flags"),
            Some(seen) => {
                assert!(!seen[2], "a page asked not to be huge is not: {seen:?}");
                if huge_here {
                    assert!(seen[0] && seen[1], "a region asked to be huge is: {seen:?}");
                }
            }
        }
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(raw, 2 * size) };
    }
}
