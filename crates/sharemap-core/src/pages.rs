//! Page usage: per page, how often each thread accessed it, and who touched it first.

use crate::index::{DenseIndex, RecentPerThread};
use std::fmt::Write as _;

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageEntry {
    pub first_touch: u32,
    /// Accesses by thread id.
    pub accesses: Vec<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct PageUsage {
    pub page_size: u64,
    shift: u32,
    index: DenseIndex,
    recent: RecentPerThread,
    /// Page number and entry of each page id.
    pages: Vec<(u64, PageEntry)>,
}

impl PageUsage {
    /// Pages of `page_size` bytes (a power of two).
    pub fn new(page_size: u64) -> Self {
        let page_size = page_size.max(1).next_power_of_two();
        PageUsage {
            page_size,
            shift: page_size.trailing_zeros(),
            index: DenseIndex::default(),
            recent: RecentPerThread::default(),
            pages: Vec::new(),
        }
    }

    #[inline]
    pub fn access(&mut self, thread: u32, addr: u64) {
        let page = addr >> self.shift;
        let t = thread as usize;
        let id = match self.recent.get(t, page) {
            Some(id) => id,
            None => {
                let (id, new) = self.index.id(page);
                if new {
                    self.pages.push((page, PageEntry { first_touch: thread, accesses: Vec::new() }));
                }
                self.recent.put(t, page, id);
                id
            }
        };
        let e = &mut self.pages[id as usize].1;
        if e.accesses.len() <= t {
            e.accesses.resize(t + 1, 0);
        }
        e.accesses[t] += 1;
    }

    /// Adds the usage of accesses that came after all of this one's (first touches stay).
    pub fn append(&mut self, later: PageUsage) {
        for (page, entry) in later.pages {
            let (id, new) = self.index.id(page);
            if new {
                self.pages.push((page, entry));
                continue;
            }
            let mine = &mut self.pages[id as usize].1;
            if mine.accesses.len() < entry.accesses.len() {
                mine.accesses.resize(entry.accesses.len(), 0);
            }
            mine.accesses.iter_mut().zip(&entry.accesses).for_each(|(m, l)| *m += l);
        }
    }

    /// Number of pages touched.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Pages in address order.
    pub fn sorted(&self) -> Vec<(u64, &PageEntry)> {
        let mut v: Vec<(u64, &PageEntry)> = self.pages.iter().map(|(p, e)| (*p, e)).collect();
        v.sort_unstable_by_key(|&(p, _)| p);
        v
    }

    /// numalize's page CSV: `page.address,alloc.thread,alloc.location,firsttouch.thread,
    /// firsttouch.location,structure.name,T0..`. Traces do not record allocations, so the
    /// allocating thread is given as the first-touch thread; structure names are empty.
    pub fn to_numalize_csv(&self, threads: usize, node_of_thread: impl Fn(u32) -> u32) -> String {
        let mut out = String::from(
            "page.address,alloc.thread,alloc.location,firsttouch.thread,firsttouch.location,structure.name",
        );
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

    /// Per-node access counts: `page.address,firsttouch.location,N0..` with `nodes` columns,
    /// each thread's accesses counted on its node.
    pub fn to_node_csv(&self, nodes: usize, node_of_thread: impl Fn(u32) -> u32) -> String {
        let mut out = String::from("page.address,firsttouch.location");
        for n in 0..nodes {
            let _ = write!(out, ",N{n}");
        }
        out.push('\n');
        let mut counts = vec![0u64; nodes];
        for (page, e) in self.sorted() {
            counts.fill(0);
            for (t, &a) in e.accesses.iter().enumerate() {
                if let Some(c) = counts.get_mut(node_of_thread(t as u32) as usize) {
                    *c += a;
                }
            }
            let _ = write!(out, "{:#x},{}", page * self.page_size, node_of_thread(e.first_touch));
            for c in &counts {
                let _ = write!(out, ",{c}");
            }
            out.push('\n');
        }
        out
    }
}

/// Serialises as the pages in address order: `[{page, first_touch, accesses}]`.
impl serde::Serialize for PageUsage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Row<'a> {
            page: u64,
            #[serde(flatten)]
            entry: &'a PageEntry,
        }
        serializer
            .collect_seq(self.sorted().into_iter().map(|(page, entry)| Row { page: page * self.page_size, entry }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_counts_add_up_the_threads_of_each_node() {
        let mut u = PageUsage::new(4096);
        // Threads 0, 1 on node 0, thread 2 on node 1; page 1 touched first by thread 2.
        for (t, a) in [(2, 0x1000), (0, 0x1008), (1, 0x1010), (1, 0x1018), (0, 0x2000)] {
            u.access(t, a);
        }
        let csv = u.to_node_csv(2, |t| u32::from(t == 2));
        assert_eq!(csv, "page.address,firsttouch.location,N0,N1\n0x1000,1,3,1\n0x2000,0,1,0\n");
    }
}
