use sharemap_placement::testing::pages_of;
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams, PATTERNS};
fn main() {
    let only: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(4_000_000);
    for p in PATTERNS.iter().filter(|p| only.is_empty() || only.iter().any(|o| o == p.name)) {
        let mut sink = VecSink::default();
        generate::run(p, &GenParams::new(64, n, 1), &mut sink).unwrap();
        let pages = pages_of(&sink.accesses, 4096, 64);
        let (mut refs, mut writes, mut shared_refs, mut shared_writes, mut shared_pages, mut wruns) = (0, 0, 0, 0, 0, 0usize);
        let mut nodes_hist = [0usize; 6];
        for (_, r) in &pages {
            refs += r.len();
            let w = r.iter().filter(|x| x.write).count();
            writes += w;
            let mut set = std::collections::HashSet::new();
            r.iter().for_each(|x| { set.insert(x.node); });
            if set.len() > 1 { shared_pages += 1; shared_refs += r.len(); shared_writes += w;
                // writes whose node differs from previous write's node or with other-node reads between
                let mut last_w: Option<u16> = None; let mut other = false;
                for x in r { if x.write { if last_w != Some(x.node) || other { wruns += 1; } last_w = Some(x.node); other = false; } else if Some(x.node) != last_w { other = true; } }
            }
            let b = match set.len() { 1 => 0, 2 => 1, 3..=4 => 2, 5..=16 => 3, 17..=63 => 4, _ => 5 };
            nodes_hist[b] += 1;
        }
        println!("{:<18} pages {:>6} refs {} writes {} | shared pages {} refs {} writes {} full-steps~{} | nodes/page 1,2,3-4,5-16,17-63,64: {:?}", p.name, pages.len(), refs, writes, shared_pages, shared_refs, shared_writes, wruns, nodes_hist);
    }
}
