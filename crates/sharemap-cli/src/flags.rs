//! Which flag each kind of library error comes from: the one place where the command line
//! turns the facade's errors into words about its own flags.

use anyhow::anyhow;
use sharemap::ErrorKind;

/// The flag an error of this kind names, or None where the error's own words say it all
/// (a file, a spec, the program).
pub fn flag(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::ThreadMap => "--thread-map",
        ErrorKind::Cost => "--cost",
        ErrorKind::TimeScale => "--refs-per-ms",
        ErrorKind::MemoryBudget => "--memory-mb",
        ErrorKind::Policy | ErrorKind::PolicySetting => "--policy/--set",
        ErrorKind::MachineModel => "--machine",
        ErrorKind::Vary => "--vary",
        ErrorKind::Values => "--values",
        ErrorKind::Window => "--window",
        ErrorKind::Sharing => "--sharing",
        ErrorKind::PageSize => "--page-size",
        ErrorKind::CostModel => "--cost-model",
        ErrorKind::Mechanism | ErrorKind::NeedsRecording => "--mechanism",
        ErrorKind::DataPlacement => "--placement",
        ErrorKind::Exclude => "--exclude",
        ErrorKind::Claim => "--claim",
        ErrorKind::Trace
        | ErrorKind::Machine
        | ErrorKind::Spec
        | ErrorKind::Filters
        | ErrorKind::Mapping
        | ErrorKind::Program
        | ErrorKind::Record
        | ErrorKind::Pattern
        | ErrorKind::Guest
        | ErrorKind::GuestKernel
        | ErrorKind::Interrupted
        | ErrorKind::SampledTrace
        | ErrorKind::Io => return None,
    })
}

/// The error as the command line says it: `--flag: what is wrong`, or the error's own words.
pub fn with_flag(e: sharemap::Error) -> anyhow::Error {
    if let Some(size) = e.page_size() {
        return anyhow!("--page-size {size}: expected a power of two from 64 bytes to 1 GiB");
    }
    match flag(e.kind()) {
        Some(flag) => anyhow!("{flag}: {}", e.why()),
        None => anyhow::Error::new(e),
    }
}
