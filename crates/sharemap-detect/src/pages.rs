//! Page usage: per page, how often each thread accessed it, and who touched it first.

use rustc_hash::FxHashMap;
use std::fmt::Write as _;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageEntry {
    pub first_touch: u32,
    /// Accesses by thread id.
    pub accesses: Vec<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct PageUsage {
    pub page_size: u64,
    pub pages: FxHashMap<u64, PageEntry>,
}

impl PageUsage {
    pub fn new(page_size: u64) -> Self {
        PageUsage { page_size, pages: FxHashMap::default() }
    }

    #[inline]
    pub fn access(&mut self, thread: u32, addr: u64) {
        let e = self.pages.entry(addr / self.page_size).or_insert_with(|| PageEntry { first_touch: thread, accesses: Vec::new() });
        let t = thread as usize;
        if e.accesses.len() <= t {
            e.accesses.resize(t + 1, 0);
        }
        e.accesses[t] += 1;
    }

    /// Pages in address order.
    pub fn sorted(&self) -> Vec<(u64, &PageEntry)> {
        let mut v: Vec<(u64, &PageEntry)> = self.pages.iter().map(|(&p, e)| (p, e)).collect();
        v.sort_unstable_by_key(|&(p, _)| p);
        v
    }

    /// numalize's page CSV: `page.address,alloc.thread,alloc.location,firsttouch.thread,
    /// firsttouch.location,structure.name,T0..`. Traces do not record allocations, so the
    /// allocating thread is given as the first-touch thread; structure names are empty.
    pub fn to_numalize_csv(&self, threads: usize, node_of_thread: impl Fn(u32) -> u32) -> String {
        let mut out = String::from("page.address,alloc.thread,alloc.location,firsttouch.thread,firsttouch.location,structure.name");
        for t in 0..threads {
            let _ = write!(out, ",T{t}");
        }
        out.push('\n');
        for (page, e) in self.sorted() {
            let node = node_of_thread(e.first_touch);
            let _ = write!(out, "{:#x},{},{node},{},{node},", page * self.page_size, e.first_touch, e.first_touch);
            for t in 0..threads {
                let _ = write!(out, ",{}", e.accesses.get(t).copied().unwrap_or(0));
            }
            out.push('\n');
        }
        out
    }
}
