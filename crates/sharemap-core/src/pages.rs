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

    /// The id of `page`, made (first touched by `thread`) if new.
    fn page_id(&mut self, page: u64, thread: u32) -> u32 {
        let (id, new) = self.index.id(page);
        if new {
            self.pages.push((page, PageEntry { first_touch: thread, accesses: Vec::new() }));
        }
        id
    }

    /// `n` more accesses by `thread` to page `id`.
    fn add(&mut self, id: u32, thread: u32, n: u64) {
        let e = &mut self.pages[id as usize].1;
        let t = thread as usize;
        if e.accesses.len() <= t {
            e.accesses.resize(t + 1, 0);
        }
        e.accesses[t] += n;
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
        self.to_numalize_csv_named(threads, node_of_thread, |_| None)
    }

    /// numalize's page format with `structure.name` filled in: the name of the data each page
    /// (by number) holds, when known (quoted where it holds a comma or a quote).
    pub fn to_numalize_csv_named(
        &self,
        threads: usize,
        node_of_thread: impl Fn(u32) -> u32,
        name_of_page: impl Fn(u64) -> Option<String>,
    ) -> String {
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
            if let Some(name) = name_of_page(page) {
                if name.contains([',', '"', '\n', '\r']) {
                    let _ = write!(out, "\"{}\"", name.replace('"', "\"\""));
                } else {
                    out.push_str(&name);
                }
            }
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

/// Builds a [`PageUsage`] from accesses at the cost of an L1 increment for most of them:
/// each thread's last two pages keep their counts here until the thread moves on, and only
/// then go to the page's entry (two dependent loads, often cache misses, per access before).
#[derive(Clone, Debug)]
pub struct PageCounter {
    usage: PageUsage,
    /// Per thread: its last two pages and which of the two it used last.
    slots: Vec<([Pending; 2], u8)>,
}

/// A page a thread is using and its accesses not yet in the page's entry.
#[derive(Clone, Copy, Debug)]
struct Pending {
    page: u64,
    id: u32,
    count: u64,
}

const NO_SLOT: Pending = Pending { page: u64::MAX, id: 0, count: 0 };

impl PageCounter {
    pub fn new(page_size: u64) -> Self {
        PageCounter { usage: PageUsage::new(page_size), slots: Vec::new() }
    }

    pub fn page_size(&self) -> u64 {
        self.usage.page_size
    }

    #[inline]
    pub fn access(&mut self, thread: u32, addr: u64) {
        let page = addr >> self.usage.shift;
        let t = thread as usize;
        if let Some((s, last)) = self.slots.get_mut(t) {
            for (k, slot) in s.iter_mut().enumerate() {
                if slot.page == page {
                    slot.count += 1;
                    *last = k as u8;
                    return;
                }
            }
        }
        self.enter(thread, page);
    }

    /// Thread `thread` comes to `page`, not among its last two: the older one's counts go to
    /// its entry and `page` takes its place.
    #[cold]
    #[inline(never)]
    fn enter(&mut self, thread: u32, page: u64) {
        let t = thread as usize;
        if t >= self.slots.len() {
            self.slots.resize(t + 1, ([NO_SLOT; 2], 1));
        }
        let (s, last) = &mut self.slots[t];
        let victim = 1 - *last as usize;
        let old = s[victim];
        if old.page != u64::MAX {
            self.usage.add(old.id, thread, old.count);
        }
        let id = self.usage.page_id(page, thread);
        self.slots[t].0[victim] = Pending { page, id, count: 1 };
        self.slots[t].1 = victim as u8;
    }

    /// The page usage of every access so far.
    pub fn finish(mut self) -> PageUsage {
        self.flush();
        self.usage
    }

    /// Adds the usage of accesses that came after all of this one's.
    pub fn append(&mut self, later: PageCounter) {
        self.flush();
        self.usage.append(later.finish());
    }

    fn flush(&mut self) {
        for (t, (s, _)) in self.slots.iter_mut().enumerate() {
            for slot in s.iter_mut() {
                if slot.page != u64::MAX && slot.count > 0 {
                    self.usage.add(slot.id, t as u32, slot.count);
                    slot.count = 0;
                }
            }
        }
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
    use proptest::prelude::*;

    proptest! {
        /// The counter gives what counting every access in its page's entry gives, also when
        /// the accesses are split in two counters and appended.
        #[test]
        fn the_counter_counts_what_each_access_counts(
            accesses in prop::collection::vec((0u32..5, 0u64..12 * 4096), 0..500),
            cut in 0usize..500,
        ) {
            let mut direct = PageUsage::new(4096);
            accesses.iter().for_each(|&(t, a)| direct.access(t, a));
            let mut whole = PageCounter::new(4096);
            accesses.iter().for_each(|&(t, a)| whole.access(t, a));
            let cut = cut.min(accesses.len());
            let (mut first, mut second) = (PageCounter::new(4096), PageCounter::new(4096));
            accesses[..cut].iter().for_each(|&(t, a)| first.access(t, a));
            accesses[cut..].iter().for_each(|&(t, a)| second.access(t, a));
            first.append(second);
            let trim = |u: &PageUsage| -> Vec<(u64, PageEntry)> {
                u.sorted().into_iter().map(|(p, e)| (p, e.clone())).collect()
            };
            let expect = trim(&direct);
            prop_assert_eq!(&trim(&whole.finish()), &expect);
            prop_assert_eq!(&trim(&first.finish()), &expect);
        }
    }

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
