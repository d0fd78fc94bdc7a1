//! One error type for the facade: what went wrong, in words that name no command-line flag
//! (the CLI adds which flag or file it came from).

use sharemap_core::{PageSizeError, PlacementError, SpecError};
use sharemap_detect::DetectError;
use sharemap_machine::MachineError;
use sharemap_trace::TraceError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a trace (exit status 2 for corruption).
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{0}")]
    Machine(#[from] MachineError),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    PageSize(#[from] PageSizeError),
    /// A setting and what is wrong with it ("thread placement: PU 9 does not exist").
    #[error("{what}: {why}")]
    Setting { what: &'static str, why: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    pub fn setting(what: &'static str, why: impl Into<String>) -> Error {
        Error::Setting { what, why: why.into() }
    }

    /// The command line's exit status: 2 for a corrupt trace, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Trace(t) => t.exit_code(),
            _ => 1,
        }
    }
}

impl From<DetectError> for Error {
    fn from(e: DetectError) -> Error {
        match e {
            DetectError::Spec(s) => Error::Spec(s),
            DetectError::Trace(t) => Error::Trace(t),
            DetectError::PageSize(p) => Error::PageSize(p),
        }
    }
}

impl From<PlacementError> for Error {
    fn from(e: PlacementError) -> Error {
        Error::setting("thread placement", e.to_string())
    }
}
