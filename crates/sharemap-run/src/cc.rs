//! The compiler driver behind `sharemap cc` / `sharemap c++`, drop-in compiler wrappers
//! (usable as CC= and CXX= in a Makefile) that build a program with sharemap's tracer: the
//! compiler's memory-access instrumentation, the runtime library, and libc's
//! memcpy/memmove/memset wrapped.
//!
//! clang (the default; `clang` or `clang-14`): ThreadSanitizer's instrumentation without
//! its runtime (`-fsanitize=thread -fno-sanitize-link-runtime`, function entry/exit off, reads
//! before writes kept). gcc (SHAREMAP_COMPILER=gcc): `-fsanitize=thread --param
//! tsan-instrument-func-entry-exit=0` when compiling, and never at link time (it would bring
//! libtsan): a command that compiles and links at once is split into the two steps. libc's
//! memcpy/memmove/memset are wrapped and recorded as ranges; gcc builds compile them as plain
//! calls (`-fno-builtin-...`), since gcc's instrumentation reports the ranges of some inline
//! expansions and not others.

use crate::program::Tools;
use sharemap::{Error, ErrorKind, Result};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A build refused, in words that name sharemap's option or the compiler.
fn refused(why: impl Into<String>) -> Error {
    Error::new(ErrorKind::Build, why)
}

/// An error of a build's own files (headers, temporaries).
fn io(what: &Path, e: std::io::Error) -> Error {
    refused(format!("{}: {e}", what.display()))
}

/// Headers written under the include directory beside the binary: (path, text).
const HEADERS: [(&str, &str); 7] = [
    ("sharemap.h", include_str!("../../sharemap-runtime/include/sharemap.h")),
    ("stm/stm.h", include_str!("../../sharemap-stm/include/stm/stm.h")),
    ("stm/wrappers.h", include_str!("../../sharemap-stm/include/stm/wrappers.h")),
    ("stm/mod_mem.h", include_str!("../../sharemap-stm/include/stm/mod_mem.h")),
    ("stm/mod_stats.h", include_str!("../../sharemap-stm/include/stm/mod_stats.h")),
    ("stm/mod_ab.h", include_str!("../../sharemap-stm/include/stm/mod_ab.h")),
    ("stm-tl2/stm.h", include_str!("../../sharemap-stm/include/stm-tl2/stm.h")),
];
const RUNTIME: &str = "libsharemap_rt.a";
/// The STM with the tracer runtime in it (`--stm`), and alone (`--stm --no-trace`).
const STM_TRACED: &str = "libsharemap_stm_traced.a";
const STM_PLAIN: &str = "libsharemap_stm.a";
/// What the runtime needs from the system (rustc's native-static-libs, less the driver's).
const RUNTIME_LIBS: [&str; 5] = ["-lpthread", "-ldl", "-lm", "-lrt", "-lutil"];
const WRAPPED: &str = "-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset";
/// The program's allocations go through the runtime, which records each with its call site
/// (C++'s operators too: a C program has no calls to them, and the runtime's references
/// to them are weak).
const ALLOCATIONS_WRAPPED: &str = "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign,--wrap=aligned_alloc,--wrap=mmap,--wrap=munmap,--wrap=_Znwm,--wrap=_Znam,--wrap=_ZdlPv,--wrap=_ZdaPv,--wrap=_ZdlPvm,--wrap=_ZdaPvm";
/// Under `--tx-only` libc's copies are not wrapped; the runtime's wrappers, linked but never
/// called, still name the `__real_` functions `--wrap` would have given: these forward them.
const UNWRAPPED_SHIM: &str = "#include <stddef.h>
void *memcpy(void *, const void *, size_t);
void *memmove(void *, const void *, size_t);
void *memset(void *, int, size_t);
void *__real_memcpy(void *d, const void *s, size_t n) { return memcpy(d, s, n); }
void *__real_memmove(void *d, const void *s, size_t n) { return memmove(d, s, n); }
void *__real_memset(void *d, int c, size_t n) { return memset(d, c, n); }
";
/// Keeps the runtime in a program that makes no traced access (the recorder finds it by
/// this symbol's marker, and the runtime attaches from a constructor next to it).
const KEEP_RUNTIME: &str = "-Wl,--undefined=SHAREMAP_RUNTIME_MARKER";
/// Keeps the constructor that hands the tracer to the STM.
const KEEP_STM_TRACER: &str = "-Wl,--undefined=sharemap_stm_traced_register";

/// sharemap's own options, taken out of the compiler's arguments.
#[derive(Clone, Copy, Default)]
struct Options {
    /// Link sharemap's STM (TinySTM's API); `tl2`: TL2's STM_* macros first on the path.
    stm: bool,
    tl2: bool,
    /// No tracer: a plain build (with the STM).
    no_trace: bool,
    /// The STM's transactional loads and stores alone, no compiler instrumentation: what an
    /// STM sees (STMap's view), not the program's other accesses.
    tx_only: bool,
    /// Burst-sampled instrumentation (clang): microseconds per burst and between bursts.
    burst: Option<(u64, u64)>,
}

/// `--burst` alone: windows of 1 µs, one in every 10 µs (docs/source-tracer.md gives the
/// measurements behind it: more, shorter windows see more of the pages for fewer accesses).
pub const DEFAULT_BURST: (u64, u64) = (1, 9);

fn take_options(args: &[OsString]) -> Result<(Options, Vec<OsString>)> {
    let mut o = Options::default();
    let mut rest = Vec::new();
    let mut iter = args.iter().peekable();
    while let Some(a) = iter.next() {
        match a.to_str() {
            Some("--stm") => o.stm = true,
            Some("--stm-tl2") => (o.stm, o.tl2) = (true, true),
            Some("--no-trace") => o.no_trace = true,
            Some("--tx-only") => o.tx_only = true,
            Some("--burst") => {
                // A setting may follow as its own word: digits, with a colon.
                let next = iter.peek().and_then(|n| n.to_str()).filter(|n| n.starts_with(|c: char| c.is_ascii_digit()));
                o.burst = Some(match next {
                    Some(text) => {
                        let setting = sharemap::trace::Burst::parse_setting(text).ok_or_else(|| burst_error(text))?;
                        iter.next();
                        setting
                    }
                    None => DEFAULT_BURST,
                });
            }
            Some(s) if s.starts_with("--burst=") => {
                let text = &s["--burst=".len()..];
                o.burst = Some(sharemap::trace::Burst::parse_setting(text).ok_or_else(|| burst_error(text))?);
            }
            _ => rest.push(a.clone()),
        }
    }
    if o.no_trace && !o.stm {
        return Err(refused("--no-trace builds a plain program with sharemap's STM: give --stm or --stm-tl2 with it"));
    }
    if o.tx_only && (!o.stm || o.no_trace) {
        return Err(refused(
            "--tx-only records the STM's transactional accesses alone: give --stm or --stm-tl2 with it, and not --no-trace",
        ));
    }
    if o.burst.is_some() && o.stm {
        return Err(refused(
            "--burst samples the compiler's instrumentation; --stm records through the STM: give one of them",
        ));
    }
    Ok((o, rest))
}

fn burst_error(text: &str) -> Error {
    refused(format!(
        "--burst {text}: expected ON:OFF, microseconds per burst and between bursts (OFF at least 1, each at most {}), or 0 for no bursts",
        sharemap::trace::MAX_BURST
    ))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Clang,
    Gcc,
}

/// The burst-sampling pass plugin, beside the binary; or why it was not built.
fn burst_plugin(tools: &Tools) -> Result<PathBuf> {
    if let Some(why) = sharemap_burst::MISSING_WHY {
        return Err(refused(format!("--burst: {} was not built ({why})", sharemap_burst::PLUGIN)));
    }
    tools.existing(sharemap_burst::PLUGIN)
}

/// The include directory beside the libraries, with sharemap.h and the STM's headers in it.
fn include_dir(tools: &Tools) -> Result<PathBuf> {
    let include = tools.dir.join("include");
    for (name, text) in HEADERS {
        let header = include.join(name);
        if std::fs::read_to_string(&header).ok().as_deref() == Some(text) {
            continue;
        }
        let dir = header.parent().unwrap_or(&include);
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        // Another build may write it at the same time: whole, through an exclusive temporary.
        sharemap::trace::write_whole(&header, text.as_bytes())?;
    }
    Ok(include)
}

/// The compiler to run: SHAREMAP_COMPILER=gcc|clang (default clang), or a path.
fn compiler(cxx: bool) -> Result<(OsString, Family)> {
    let choice = std::env::var("SHAREMAP_COMPILER").unwrap_or_else(|_| "clang".into());
    let (names, family): (&[&str], Family) = match (choice.as_str(), cxx) {
        ("clang", false) => (&["clang", "clang-14"], Family::Clang),
        ("clang", true) => (&["clang++", "clang++-14"], Family::Clang),
        ("gcc", false) => (&["gcc"], Family::Gcc),
        ("gcc", true) => (&["g++"], Family::Gcc),
        (other, _) => {
            let family = if Path::new(other).file_name().is_some_and(|n| n.to_string_lossy().contains("clang")) {
                Family::Clang
            } else {
                Family::Gcc
            };
            return Ok((other.into(), family));
        }
    };
    for name in names {
        if Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(((*name).into(), family));
        }
    }
    Err(refused(format!(
        "{} not found (scripts/setup installs clang; or set SHAREMAP_COMPILER=gcc)",
        names.join(" or ")
    )))
}

fn is_source(arg: &OsStr) -> bool {
    let s = arg.to_string_lossy();
    !s.starts_with('-') && [".c", ".cc", ".cpp", ".cxx", ".C", ".c++", ".i", ".ii"].iter().any(|e| s.ends_with(e))
}

/// Whether the command only compiles (or preprocesses): no link step.
fn compile_only(args: &[OsString]) -> bool {
    args.iter().any(|a| matches!(a.to_str(), Some("-c" | "-S" | "-E" | "-M" | "-MM")))
}

fn instrument_flags(family: Family) -> Vec<OsString> {
    match family {
        // ThreadSanitizer's instrumentation (not its runtime) gives atomic read-modify-writes
        // too, which sanitizer coverage does not see; its pass drops a read that a write to
        // the same place follows unless told not to.
        Family::Clang => [
            "-fsanitize=thread",
            "-fno-sanitize-link-runtime",
            "-mllvm",
            "-tsan-instrument-func-entry-exit=0",
            "-mllvm",
            "-tsan-instrument-read-before-write=1",
        ]
        .map(OsString::from)
        .to_vec(),
        // gcc reports the builtin memcpy/memset it expands inline only sometimes: as plain
        // calls they all reach the runtime's wrappers.
        Family::Gcc => [
            "-fsanitize=thread",
            "--param",
            "tsan-instrument-func-entry-exit=0",
            "-fno-builtin-memcpy",
            "-fno-builtin-memmove",
            "-fno-builtin-memset",
        ]
        .map(OsString::from)
        .to_vec(),
    }
}

fn run(cmd: &OsStr, args: &[OsString]) -> Result<i32> {
    run_with(cmd, args, None)
}

/// Runs the compiler; `burst` is handed to the pass plugin (`SHAREMAP_BURST=ON:OFF`).
fn run_with(cmd: &OsStr, args: &[OsString], burst: Option<(u64, u64)>) -> Result<i32> {
    let mut command = Command::new(cmd);
    command.args(args);
    if let Some((on, off)) = burst {
        command.env("SHAREMAP_BURST", format!("{on}:{off}"));
    }
    let status = command.status().map_err(|e| refused(format!("cannot run {}: {e}", cmd.to_string_lossy())))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(1)))
}

/// Libraries another STM would be linked from: TinySTM's (`-lstm`, its Makefiles'
/// `-L../../lib -lstm`) and TL2's (`-ltl2`, STAMP's Makefile.stm).
const FOREIGN_STMS: [&str; 2] = ["stm", "tl2"];

/// With `--stm`, the arguments without the STM libraries sharemap's STM replaces, each named
/// on stderr: linked too, one of them would provide the transactional functions in its
/// place (an archive given before sharemap's is searched first), or fail to be found.
fn without_foreign_stm(args: Vec<OsString>, notes: &mut dyn FnMut(String)) -> Vec<OsString> {
    let foreign = |name: &str| FOREIGN_STMS.contains(&name);
    let is_foreign_file = |a: &str| {
        let file = Path::new(a).file_name().and_then(|f| f.to_str()).unwrap_or("");
        FOREIGN_STMS.iter().any(|n| [format!("lib{n}.a"), format!("lib{n}.so")].iter().any(|f| f == file))
    };
    let mut kept = Vec::with_capacity(args.len());
    let mut iter = args.into_iter().peekable();
    while let Some(a) = iter.next() {
        let text = a.to_string_lossy().into_owned();
        if text == "-o" {
            // The output is never dropped, whatever its name.
            kept.push(a);
            kept.extend(iter.next());
            continue;
        }
        let dropped = if text == "-l" && iter.peek().is_some_and(|n| foreign(&n.to_string_lossy())) {
            let name = iter.next().unwrap_or_default();
            Some(format!("-l {}", name.to_string_lossy()))
        } else if text.strip_prefix("-l").is_some_and(foreign)
            || (!text.starts_with('-') && is_foreign_file(&text) && Path::new(&text).exists())
        {
            Some(text.clone())
        } else {
            None
        };
        match dropped {
            Some(what) => notes(format!("{what} not linked: sharemap's STM takes its place")),
            None => kept.push(a),
        }
    }
    kept
}

/// The object forwarding the runtime's `__real_` names to libc, compiled in `dir`.
fn unwrapped_shim(cc: &OsStr, dir: &Path) -> Result<OsString> {
    let src = dir.join("sharemap-unwrapped.c");
    let obj = dir.join("sharemap-unwrapped.o");
    std::fs::write(&src, UNWRAPPED_SHIM).map_err(|e| io(&src, e))?;
    let args: Vec<OsString> = ["-x", "c", "-O2", "-fno-builtin", "-c"]
        .iter()
        .map(OsString::from)
        .chain([src.into(), "-o".into(), obj.clone().into()])
        .collect();
    if run(cc, &args)? != 0 {
        return Err(refused("--tx-only: the compiler could not build the forwarding of memcpy, memmove and memset"));
    }
    Ok(obj.into_os_string())
}

/// Builds as the compiler would with `args` (sharemap's own options among them: `--stm`,
/// `--stm-tl2`, `--no-trace`, `--tx-only`, `--burst[=ON:OFF]`), C++ when `cxx`, with the
/// runtime libraries of `tools`; `notes` hears what is changed in the command (a foreign STM
/// dropped, vector widths the tracer does not see) before the compiler runs. The
/// compiler's exit status (128 + a signal that ended it).
pub fn build(args: &[OsString], cxx: bool, tools: &Tools, notes: &mut dyn FnMut(String)) -> Result<i32> {
    let (options, args) = take_options(args)?;
    let args = if options.stm && !compile_only(&args) { without_foreign_stm(args, notes) } else { args };
    let args = &args[..];
    let (cc, family) = compiler(cxx)?;
    let include = include_dir(tools)?;
    let mut includes: Vec<OsString> = vec![format!("-I{}", include.display()).into()];
    if options.tl2 {
        includes.push(format!("-I{}", include.join("stm-tl2").display()).into());
    }
    if options.stm {
        includes.push(format!("-I{}", include.join("stm").display()).into());
    }
    if options.no_trace {
        // A plain build against the STM: the compiler as it is, the library at link time.
        let link: Vec<OsString> = if compile_only(args) {
            Vec::new()
        } else {
            std::iter::once(tools.existing(STM_PLAIN)?.into_os_string())
                .chain(["-lpthread", "-ldl", "-lm"].map(OsString::from))
                .collect()
        };
        let all: Vec<OsString> = includes.into_iter().chain(args.iter().cloned()).chain(link).collect();
        return run(&cc, &all);
    }
    let lib = tools.existing(if options.stm { STM_TRACED } else { RUNTIME })?;
    for a in args {
        let s = a.to_string_lossy();
        if s.starts_with("-mavx") || s == "-march=native" {
            notes(format!(
                "{s}: 32-byte vector loads and stores are not traced (the instrumentation sees up to 16 bytes)"
            ));
        }
    }
    let mut compile: Vec<OsString> = match options.burst {
        Some(_) if family == Family::Gcc => {
            return Err(refused(
                "--burst needs clang (the sampling is an LLVM pass plugin); gcc builds record every access",
            ));
        }
        Some(_) => vec![format!("-fpass-plugin={}", burst_plugin(tools)?.display()).into()],
        // The STM records its own loads and stores; the program is compiled as it is.
        None if options.tx_only => Vec::new(),
        None => instrument_flags(family),
    };
    compile.extend(includes);
    let keep_stm = options.stm.then(|| OsString::from(KEEP_STM_TRACER));
    // libc's copies are the program's accesses, not the STM's: unwrapped under --tx-only.
    let shim_dir = tempfile::tempdir().map_err(|e| refused(format!("temporary directory: {e}")))?;
    let wrapped = if options.tx_only && !compile_only(args) {
        unwrapped_shim(&cc, shim_dir.path())?
    } else {
        OsString::from(WRAPPED)
    };
    let link: Vec<OsString> = [lib.into_os_string(), wrapped, ALLOCATIONS_WRAPPED.into(), KEEP_RUNTIME.into()]
        .into_iter()
        .chain(keep_stm)
        .chain(RUNTIME_LIBS.iter().map(OsString::from))
        .collect();
    if compile_only(args) {
        let all: Vec<OsString> = compile.into_iter().chain(args.iter().cloned()).collect();
        return run_with(&cc, &all, options.burst);
    }
    let sources: Vec<&OsString> = args.iter().filter(|a| is_source(a)).collect();
    if family == Family::Clang || sources.is_empty() {
        // clang links no sanitizer runtime when told not to: one command does both.
        let flags = if sources.is_empty() { Vec::new() } else { compile };
        let all: Vec<OsString> = flags.into_iter().chain(args.iter().cloned()).chain(link).collect();
        return run_with(&cc, &all, options.burst);
    }
    // gcc: compile each source to an object first, then link without -fsanitize=thread.
    let tmp = tempfile::tempdir().map_err(|e| refused(format!("temporary directory: {e}")))?;
    let mut objects = Vec::new();
    let mut skip_next = false;
    let options: Vec<OsString> = args
        .iter()
        .filter(|a| {
            // Drop the sources and `-o OUT` from the per-source compile commands.
            if std::mem::take(&mut skip_next) {
                return false;
            }
            if a.to_str() == Some("-o") {
                skip_next = true;
                return false;
            }
            !is_source(a)
        })
        .cloned()
        .collect();
    for (k, src) in sources.iter().enumerate() {
        let obj = tmp.path().join(format!("{k}.o"));
        let mut cmd: Vec<OsString> = compile.clone();
        cmd.extend(options.iter().cloned());
        cmd.extend(["-c".into(), (*src).clone(), "-o".into(), obj.clone().into_os_string()]);
        let code = run(&cc, &cmd)?;
        if code != 0 {
            return Ok(code);
        }
        objects.push(obj.into_os_string());
    }
    let mut sources_left = objects.into_iter();
    let linked: Vec<OsString> = args
        .iter()
        .map(|a| if is_source(a) { sources_left.next().unwrap_or_default() } else { a.clone() })
        .chain(link)
        .collect();
    run(&cc, &linked)
}
