//! Which flag each kind of library error comes from: the one place where the command line
//! turns the facade's errors into words about its own flags, in general (`with_flag`) and
//! where a command knows more of where the error came from (`say`).

use anyhow::anyhow;
use sharemap::ErrorKind;
use std::path::Path;

/// The flag an error of this kind names, or None where the error's own words say it all
/// (a file, a spec, the program).
pub fn flag(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::ThreadMap => "--thread-map",
        ErrorKind::Cost => "--cost",
        ErrorKind::TimeScale => "--refs-per-ms",
        ErrorKind::MemoryBudget => "--memory-mb",
        ErrorKind::Policy => "--policy/--set",
        ErrorKind::MachineModel => "--machine",
        ErrorKind::Sharing => "--sharing",
        ErrorKind::PageSize => "--page-size",
        ErrorKind::CostModel => "--cost-model",
        ErrorKind::Mechanism | ErrorKind::NeedsRecording => "--mechanism",
        ErrorKind::Measurement => "--repeat",
        ErrorKind::DataPlacement => "--placement",
        ErrorKind::Exclude => "--exclude",
        ErrorKind::Window => "--roi/--phase/--window",
        ErrorKind::Claim => "--claim",
        ErrorKind::Trace
        | ErrorKind::Machine
        | ErrorKind::Spec
        | ErrorKind::Filters
        | ErrorKind::Mapping
        | ErrorKind::Program
        | ErrorKind::Record
        | ErrorKind::Build
        | ErrorKind::Pattern
        | ErrorKind::Guest
        | ErrorKind::GuestKernel
        | ErrorKind::Interrupted
        | ErrorKind::SampledTrace
        | ErrorKind::Results
        | ErrorKind::Io => return None,
        // A kind the facade added since: its own words, until it is given a flag here.
        _ => return None,
    })
}

/// The flag of a request's setting, by the request's field.
fn setting_flag(field: &str) -> Option<&'static str> {
    Some(match field {
        "vary" => "--vary",
        "values" => "--values",
        "window" => "--split",
        "settings" => "--set",
        "pages" => "--partition-pages",
        "repeat" => "--repeat",
        "thread_maps" | "thread_map" => "--thread-map",
        "mechanisms" | "mechanism_lists" => "--mechanism",
        "sharing" => "--sharing",
        "placement" => "--placement",
        "nodes" => "--nodes/--cpus",
        "memory_mb" => "--memory-mb",
        "distance" => "--distance",
        "timeout" => "--timeout",
        "env" => "--env",
        _ => return None,
    })
}

/// An error of a request's setting as its flag says it: `--flag VALUE: what is wrong`, the
/// value left out when none was given or the words begin with it (`bind:7: ...`).
fn of_setting(e: &sharemap::Error) -> Option<anyhow::Error> {
    let s = e.setting()?;
    let flag = setting_flag(s.field)?;
    let why = e.why();
    Some(if s.given.is_empty() {
        anyhow!("{flag}: {why}")
    } else if why.starts_with(&s.given) {
        anyhow!("{flag} {why}")
    } else {
        anyhow!("{flag} {}: {why}", s.given)
    })
}

/// The error as the command line says it: `--flag: what is wrong`, or the error's own words.
pub fn with_flag(e: sharemap::Error) -> anyhow::Error {
    match of_setting(&e) {
        Some(said) => said,
        None => by_kind(e),
    }
}

/// The error with the flag its kind names, whatever setting it came from.
fn by_kind(e: sharemap::Error) -> anyhow::Error {
    if let Some(size) = e.page_size() {
        return anyhow!("--page-size {size}: expected a power of two from 64 bytes to 1 GiB");
    }
    match flag(e.kind()) {
        Some(flag) => anyhow!("{flag}: {}", e.why()),
        None => anyhow::Error::new(e),
    }
}

/// Where a command met an error, with what it knows that the facade's words do not say.
pub enum At<'a> {
    /// `analyze` reading `trace`.
    Analyze { trace: &'a Path },
    /// Loading the sharing of a trace or matrix file (`map`, `report`).
    Sharing,
    /// `place`, `sweep`, `filter`: the `--sharing` given, for the trace.
    Place { sharing: &'a str, trace: &'a Path },
    /// A `run --mechanism` spec becoming a configuration.
    Mechanism { spec: &'a str },
    /// `run` setting up its configurations.
    Run,
    /// `vm` checking the guest and what its run reads.
    Vm,
    /// Writing `output` (`gen`).
    Writing { output: &'a Path },
    /// `convert --partition-pages` (Parquet).
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    Partition,
    /// `record`.
    Record,
}

/// The error as the command `at` says it.
pub fn say(e: sharemap::Error, at: At<'_>) -> anyhow::Error {
    let kind = e.kind();
    match at {
        At::Analyze { trace } => match kind {
            ErrorKind::Detection => with_flag(e),
            ErrorKind::PageSize => anyhow!("{}: {e}", trace.display()),
            _ => anyhow::Error::new(e),
        },
        At::Sharing | At::Record => match kind {
            ErrorKind::Exclude => anyhow!("--exclude {}", e.why()),
            ErrorKind::Sharing | ErrorKind::Record => anyhow!(e.why()),
            _ => anyhow::Error::new(e),
        },
        At::Place { sharing, trace } => match kind {
            ErrorKind::Sharing => anyhow!("--sharing {sharing}: {} ({})", e.why(), trace.display()),
            // Policy names and options say what is wrong in their own words.
            ErrorKind::Policy if e.setting().is_none() => anyhow!(e.why()),
            _ => with_flag(e),
        },
        At::Mechanism { spec } => match kind {
            ErrorKind::NeedsRecording => anyhow!("--mechanism: {} (--recording)", e.why()),
            // What the mechanism read (its recording) says where it failed itself.
            ErrorKind::Trace | ErrorKind::Machine | ErrorKind::Spec | ErrorKind::Io => {
                anyhow!("--mechanism {spec}: {e}")
            }
            ErrorKind::PageSize if e.page_size().is_some() => anyhow!("--mechanism {spec}: {e}"),
            _ => anyhow!("--mechanism: {}", e.why()),
        },
        At::Run => run_error(e),
        At::Vm => vm_error(e),
        At::Writing { output } => match kind {
            ErrorKind::Io => anyhow!("writing {}: {e}", output.display()),
            _ => anyhow::Error::new(e),
        },
        At::Partition => with_flag(e),
    }
}

/// A `run` error: by the request's setting it came from, else by its kind.
fn run_error(e: sharemap::Error) -> anyhow::Error {
    let kind = e.kind();
    match e.setting().map(|s| (s.field, s.given.clone())) {
        Some(("mechanisms", spec)) => say(e, At::Mechanism { spec: &spec }),
        Some(("mechanism_lists", _)) => anyhow!("--mechanism {}", e.why()),
        Some(("repeat", n)) => anyhow!("--repeat {n}: {}", e.why()),
        Some(("thread_maps", map)) if kind != ErrorKind::ThreadMap => anyhow!("--thread-map {map}: {e}"),
        Some(("placement", placement)) => anyhow!("--placement {placement}: {e}"),
        Some(("sharing", _)) => say(e, At::Sharing),
        _ => match kind {
            // The thread map's own words name the value (`'bogus' is not a PU number`).
            ErrorKind::ThreadMap | ErrorKind::DataPlacement | ErrorKind::Mechanism => by_kind(e),
            ErrorKind::Program => anyhow!(e.why()),
            _ => anyhow!(e),
        },
    }
}

/// A `vm` error: the flag of the setting it came from, with the value given.
fn vm_error(e: sharemap::Error) -> anyhow::Error {
    let kind = e.kind();
    match e.setting().map(|s| (setting_flag(s.field), s.given.clone())) {
        Some((Some(flag), given)) if given.is_empty() => anyhow!("{flag}: {e}"),
        // Words that start with the value given say it themselves (`bind:7: ...`).
        Some((Some(flag), given)) if e.why().starts_with(&given) => anyhow!("{flag} {}", e.why()),
        Some((Some(flag), given)) => anyhow!("{flag} {given}: {}", e.why()),
        _ => match kind {
            ErrorKind::Guest | ErrorKind::Program => anyhow!(e.why()),
            _ => anyhow!(e),
        },
    }
}
