//! Linux's automatic NUMA balancing (kernel/sched/fair.c `task_numa_work`, mm/memory.c
//! `do_numa_page`, the two-stage filter of `should_numa_migrate_memory`). After
//! `scan-delay-ms`, every `scan-period-ms` the scanner marks the next `scan-size-mb` of the
//! program's pages in address order, wrapping; pages never touched are not mapped, so not
//! marked. The next access to a marked page is a hinting fault; the page migrates to the
//! faulting node when the page's previous hinting fault came from that node too.

use sharemap_core::plugin::{Param, number, positive};

/// numa_balancing_scan_delay_ms.
pub const SCAN_DELAY_MS: Param =
    number("scan-delay-ms", "1000", "numa_balancing_scan_delay_ms: first scan after the start");
/// numa_balancing_scan_period_min_ms.
pub const SCAN_PERIOD_MS: Param =
    positive("scan-period-ms", "1000", "numa_balancing_scan_period_min_ms: time between scans");
/// numa_balancing_scan_size_mb.
pub const SCAN_SIZE_MB: Param =
    positive("scan-size-mb", "256", "numa_balancing_scan_size_mb: address space marked per scan");
/// What a hinting fault costs the faulting thread (simulated time only).
pub const FAULT_US: Param = positive("fault-us", "1", "cost of a hinting fault");

/// Pages one scan marks: `scan-size-mb` of pages of `page_size` bytes, at least one.
pub fn pages_per_scan(size_mb: f64, page_size: u64) -> u64 {
    ((size_mb * 1048576.0) / page_size.max(1) as f64).max(1.0).min(u64::MAX as f64 / 2.0) as u64
}

/// Whether scan number `scan` (from 0) marks the page of address rank `rank` among `pages`
/// pages when each scan marks `per_scan` of them, continuing where the previous one stopped.
pub fn marks(scan: u64, rank: u64, pages: u64, per_scan: u64) -> bool {
    if per_scan >= pages {
        return true;
    }
    let start = (scan as u128 * per_scan as u128 % pages as u128) as u64;
    (rank + pages - start) % pages < per_scan
}

/// The two-stage filter of one page: the node of its last hinting fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TwoStageFilter {
    last: Option<u16>,
}

impl TwoStageFilter {
    /// A hinting fault from `node`; `there` says whether the page already lives on `node`.
    /// True when the page migrates to `node`.
    pub fn fault(&mut self, node: u16, there: bool) -> bool {
        let again = self.last.replace(node) == Some(node);
        again && !there
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_moves_on_the_second_fault_in_a_row_from_a_node() {
        let mut f = TwoStageFilter::default();
        assert!(!f.fault(1, false), "a first fault only records the node");
        assert!(!f.fault(0, false));
        assert!(f.fault(0, false));
        assert!(!f.fault(0, true), "already there");
    }

    #[test]
    fn scans_cover_every_page_once_per_round() {
        for (pages, per_scan) in [(10u64, 3u64), (7, 7), (5, 9), (12, 4)] {
            let rounds = pages.div_ceil(per_scan.min(pages));
            for rank in 0..pages {
                let marked = (0..rounds).filter(|&s| marks(s, rank, pages, per_scan)).count();
                assert!(marked >= 1, "{pages}/{per_scan}: page {rank} never marked");
            }
        }
        assert_eq!(pages_per_scan(1.0, 4096), 256);
        assert_eq!(pages_per_scan(0.0, 4096), 1);
    }
}
