//! The names a recording's addresses have in the program: its static variables (binutils'
//! `nm`) and the source locations of the code addresses its allocation and access sites name
//! (binutils' `addr2line`, from the DWARF line tables when the program was built with `-g`,
//! else the enclosing function from the symbol table). Both tools come with the compiler
//! `sharemap cc` drives, and they read the binary the way the toolchain that wrote it does.

use sharemap::trace::{CodeSite, ProgramInfo, StaticObject};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// A defined symbol as `nm -S` lists it.
pub(crate) struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    /// nm's type letter: `b`/`B` bss, `d`/`D` data, `r`/`R` read-only data, ...
    pub kind: char,
}

/// Every defined, sized symbol of `program`, names demangled.
pub(crate) fn symbols(program: &Path) -> Result<Vec<Symbol>, String> {
    let out = Command::new("nm")
        .args(["-S", "--defined-only", "--demangle"])
        .arg(program)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("running nm on {}: {e} (binutils has it)", program.display()))?;
    if !out.status.success() {
        return Err(format!("nm cannot read the symbols of {}", program.display()));
    }
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            // VALUE SIZE TYPE NAME, the name possibly with spaces (demangled C++).
            let mut f = l.splitn(4, ' ');
            let (value, size, kind, name) = (f.next()?, f.next()?, f.next()?, f.next()?);
            let kind = kind.chars().next().filter(|_| kind.len() == 1)?;
            Some(Symbol { name: name.to_string(), value: hex(value)?, size: hex(size)?, kind })
        })
        .collect())
}

/// What `program`, loaded at `base`, says about a recording: its static variables at their
/// run-time addresses and the source location of each of `sites` (run-time code addresses:
/// return addresses, so the call is the instruction before).
pub(crate) fn program_info(program: &Path, base: u64, sites: &[u64]) -> Result<ProgramInfo, String> {
    let statics = symbols(program)?
        .into_iter()
        .filter(|s| s.size > 0 && "bBdDrRgGsSvV".contains(s.kind))
        .map(|s| StaticObject { name: s.name, addr: s.value.wrapping_add(base), size: s.size })
        .collect();
    let code = if sites.is_empty() { Vec::new() } else { locations(program, base, sites)? };
    Ok(ProgramInfo { statics, code })
}

/// `addr2line` on every site at once: per address, its chain of inlined frames, of which
/// the program's own is kept (see `own_frame`).
fn locations(program: &Path, base: u64, sites: &[u64]) -> Result<Vec<CodeSite>, String> {
    let mut child = Command::new("addr2line")
        .args(["-a", "-i", "-f", "-C", "-e"])
        .arg(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("running addr2line on {}: {e} (binutils has it)", program.display()))?;
    let mut input = String::with_capacity(sites.len() * 12);
    for &pc in sites {
        input.push_str(&format!("{:#x}\n", pc.wrapping_sub(base).wrapping_sub(1)));
    }
    let mut stdin = child.stdin.take().expect("piped");
    // Written from a thread of its own: addr2line answers while it reads, and a pipe holds
    // only so much of either side.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(|e| format!("addr2line: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(format!("addr2line cannot read {}", program.display()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let answers = answers(&text);
    if answers.len() != sites.len() {
        return Err(format!("addr2line gave {} answers to {} addresses", answers.len(), sites.len()));
    }
    Ok(sites.iter().zip(answers).map(|(&pc, frames)| own_frame(pc, &frames)).collect())
}

/// `addr2line -a -i -f` output cut per address: each answer starts with the address (`0x`),
/// then (function, place) pairs from the innermost inlined frame out.
fn answers(text: &str) -> Vec<Vec<(&str, &str)>> {
    let mut out: Vec<Vec<(&str, &str)>> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !line.starts_with("0x") {
            continue;
        }
        let mut frames = Vec::new();
        while lines.peek().is_some_and(|l| !l.starts_with("0x")) {
            let function = lines.next().unwrap_or("??");
            frames.push((function, lines.next().unwrap_or("??:0")));
        }
        out.push(frames);
    }
    out
}

/// The frame that names the program's own code: the innermost whose file is not a system
/// header or library source (a vector's `new` inlined from libstdc++ is named by the line
/// of the program that grew the vector), with the function it is in; else the innermost.
fn own_frame(pc: u64, frames: &[(&str, &str)]) -> CodeSite {
    let system = |place: &str| place.starts_with("/usr/") || place.starts_with("??");
    let chosen = frames.iter().position(|f| !system(f.1)).unwrap_or(0);
    match frames.get(chosen) {
        Some(&(function, place)) => site(pc, function, place),
        None => site(pc, "??", "??:0"),
    }
}

/// One frame: `??` stands for what is not known; the place may end in a discriminator.
fn site(pc: u64, function: &str, place: &str) -> CodeSite {
    let place = place.split(" (discriminator").next().unwrap_or(place);
    let (file, line) = place.rsplit_once(':').unwrap_or((place, "0"));
    CodeSite {
        pc,
        function: if function == "??" { String::new() } else { function.to_string() },
        file: if file == "??" { String::new() } else { file.to_string() },
        line: line.trim().parse().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_with_what_is_not_known_left_empty() {
        let s = site(0x40, "main", "/src/a.c:12 (discriminator 3)");
        assert_eq!((s.function.as_str(), s.file.as_str(), s.line), ("main", "/src/a.c", 12));
        let s = site(0x40, "??", "??:0");
        assert_eq!((s.function.as_str(), s.file.as_str(), s.line), ("", "", 0));
        let s = site(0x40, "f", "??:?");
        assert_eq!((s.function.as_str(), s.file.as_str(), s.line), ("f", "", 0));
    }

    #[test]
    fn the_programs_own_frame_is_kept_from_an_inlined_chain() {
        let text = "0x0000000000001234\nstd::vector<int>::push_back(int const&)\n/usr/include/c++/12/bits/stl_vector.h:1287\nmain\n/src/v.cpp:9\n0x0000000000001300\n??\n??:0\n0x0000000000001400\nwork\n/src/w.c:3 (discriminator 1)\n";
        let a = answers(text);
        assert_eq!(a.len(), 3);
        let s = own_frame(1, &a[0]);
        assert_eq!((s.function.as_str(), s.file.as_str(), s.line), ("main", "/src/v.cpp", 9));
        assert_eq!(own_frame(2, &a[1]).describe(), "0x2");
        assert_eq!(own_frame(3, &a[2]).describe(), "w.c:3 (work)");
        assert_eq!(own_frame(4, &[]).describe(), "0x4");
    }
}
