//! sharemap's software transactional memory, `libsharemap_stm`: a word-based STM with the C
//! API of TinySTM 1.0.5 (headers in `include/stm`, TL2's macro layer in `include/stm-tl2`),
//! and STMap (seed 002) built in: sharing detection on the load/store path, online thread
//! mapping, and data mapping (docs/stm.md).
//!
//! Design, as the best word-based STMs (TinySTM's write-back, encounter-time locking; LSA's
//! snapshot extension):
//! - a **global version clock**, advanced by each committing writer;
//! - a **lock array** of versioned locks, an address hashed to one: unlocked it holds the
//!   version (clock value) of the last commit that wrote under it; locked, its owner;
//! - **writes** lock at encounter (a second writer aborts at once, so no work is wasted on
//!   a doomed transaction) and are buffered (write-back): memory changes only at commit;
//! - **reads** are checked against the transaction's snapshot: a location newer than the
//!   snapshot extends it when every read so far is still valid, else the transaction aborts.
//!   Every value a transaction sees belongs to one consistent snapshot (opacity).

pub mod access;
pub mod capi;
pub mod core;
pub mod hooks;
pub mod mem;
pub mod stats;
pub mod stmap;
pub mod thread;
pub mod wrappers;

pub use crate::core::{Abort, Tx, Word};

#[cfg(test)]
mod soundness {
    /// Exported functions that take a raw pointer but never dereference it: they store it
    /// for the caller (specific data, the callbacks' argument) or ignore it.
    const KEEP_ONLY: [&str; 3] = ["stm_register", "stm_set_specific", "stm_set_parameter"];

    /// Every exported C function that takes a raw pointer from its caller is `unsafe`: a
    /// Rust program linking the crate cannot reach a dereference without an `unsafe` block.
    #[test]
    fn exported_functions_taking_pointers_are_unsafe() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![];
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        let mut unsound = Vec::new();
        let mut seen = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (at, _) in text.match_indices("extern \"C\" fn ") {
                let head = &text[at..];
                let name = head["extern \"C\" fn ".len()..].split(['(', '<']).next().unwrap().trim().to_string();
                let params = &head[..head.find(')').unwrap()];
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let before = text[line_start..at].trim();
                if before != "pub" && !before.starts_with("pub ") {
                    continue; // not exported (a callback type, a private helper)
                }
                seen += 1;
                let takes_pointer = params.contains("*const") || params.contains("*mut");
                if takes_pointer && !before.contains("unsafe") && !KEEP_ONLY.contains(&name.as_str()) {
                    unsound.push(format!("{}: {name}", f.display()));
                }
            }
        }
        assert!(seen > 40, "found only {seen} exported functions: the scan is broken");
        assert!(unsound.is_empty(), "safe exported functions taking pointers: {unsound:?}");
    }
}
