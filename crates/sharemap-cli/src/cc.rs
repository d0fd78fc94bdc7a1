//! `sharemap cc` / `sharemap c++`: drop-in compiler wrappers (usable as CC= and CXX= in a
//! Makefile) that build a program with sharemap's tracer; sharemap-run's `cc` drives the
//! compiler, with the runtime libraries beside this binary.

use anyhow::{Result, anyhow};
use std::ffi::OsString;
use std::process::ExitCode;

pub fn wrap(args: &[OsString], cxx: bool) -> Result<ExitCode> {
    let exe = std::env::current_exe().map_err(|e| anyhow!("cannot locate the sharemap binary: {e}"))?;
    let tools = sharemap_run::Tools::beside(&exe);
    let code = sharemap_run::cc::build(args, cxx, &tools, &mut |note| eprintln!("sharemap cc: {note}"))
        .map_err(|e| anyhow!(e.why()))?;
    Ok(ExitCode::from(code as u8))
}
