//! "What is shared": `analyze`'s data objects, their lines by class and the code behind
//! them, as a table.

use sharemap::grouped;
use sharemap::shared::{ObjectKind, WhatIsShared};

/// Objects shown; the rest are in shared.csv and summary.json.
const SHOWN: usize = 10;

pub fn print(w: &WhatIsShared) {
    let l = &w.lines;
    let named = if w.named {
        format!("named from the program's symbols and {} allocation records", grouped(w.allocations))
    } else {
        "no allocation records or symbols in this trace: objects are address ranges (record a `sharemap cc` build to name them)".to_string()
    };
    println!("what is shared ({}-byte lines, {}-byte words; {named}):", w.line_size, w.word_size);
    println!(
        "  {} lines: {} truly shared, {} falsely shared, {} read-shared, {} private",
        grouped(l.total()),
        grouped(l.true_shared),
        grouped(l.false_shared),
        grouped(l.read_shared),
        grouped(l.private)
    );
    let shown: Vec<_> = w.objects.iter().filter(|o| o.lines.shared() > 0).take(SHOWN).collect();
    if shown.is_empty() {
        println!("  no line was touched by two threads");
        return;
    }
    let width = shown.iter().map(|o| o.name.chars().count()).max().unwrap_or(6).clamp(6, 48);
    println!(
        "  {:<width$} {:>7} {:>7} {:>11} {:>6} {:>6} {:>6} {:>7}  code on its shared lines (samples)",
        "object", "kind", "threads", "accesses", "true", "false", "read", "pages"
    );
    for o in &shown {
        let name: String = if o.name.chars().count() > width {
            o.name.chars().take(width - 1).chain(['…']).collect()
        } else {
            o.name.clone()
        };
        let code: Vec<String> = o.code.iter().map(|c| format!("{} ({})", c.site.describe(), c.samples)).collect();
        println!(
            "  {name:<width$} {:>7} {:>7} {:>11} {:>6} {:>6} {:>6} {:>7}  {}",
            kind(o.kind),
            o.threads,
            grouped(o.accesses),
            grouped(o.lines.true_shared),
            grouped(o.lines.false_shared),
            grouped(o.lines.read_shared),
            format!("{}/{}", o.shared_pages, o.pages),
            if code.is_empty() { "-".to_string() } else { code.join(", ") }
        );
    }
    let more = w.objects.iter().filter(|o| o.lines.shared() > 0).count().saturating_sub(shown.len());
    if more > 0 {
        println!("  ... and {more} more objects with shared lines (shared.csv)");
    }
    println!(
        "  (true: a word written by one thread and touched by another; false: threads writing different words of a line; read: read by several, written by none; pages: shared/touched; code from {} samples, one access in {} per thread)",
        grouped(w.samples),
        w.sample_period
    );
}

fn kind(k: ObjectKind) -> &'static str {
    match k {
        ObjectKind::Static => "static",
        ObjectKind::Heap => "heap",
        ObjectKind::Mapped => "mmap",
        ObjectKind::Stack => "stack",
        ObjectKind::Unknown => "range",
    }
}
