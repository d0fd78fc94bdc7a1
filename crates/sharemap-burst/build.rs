//! Builds the LLVM pass plugin (plugin/burst.cpp) against LLVM 14's headers with the
//! system's C++ compiler, into the profile's directory beside the `sharemap` binary. Without
//! the headers the build goes on, and `sharemap cc --burst` says what is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=plugin/burst.cpp");
    println!("cargo:rerun-if-env-changed=SHAREMAP_LLVM_CONFIG");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<crate>-<hash>/out: the binary is three up.
    let profile_dir = out.ancestors().nth(3).expect("OUT_DIR has the usual depth").to_path_buf();
    match build(&out) {
        Ok(so) => {
            let dest = profile_dir.join("libsharemap_burst.so");
            let tmp = profile_dir.join(".libsharemap_burst.so.tmp");
            std::fs::copy(&so, &tmp).and_then(|_| std::fs::rename(&tmp, &dest)).expect("copy the plugin");
        }
        Err(why) => {
            println!("cargo:warning=sharemap cc --burst will not work: {why}");
            println!("cargo:rustc-env=SHAREMAP_BURST_MISSING={why}");
        }
    }
}

fn build(out: &Path) -> Result<PathBuf, String> {
    let config = std::env::var("SHAREMAP_LLVM_CONFIG").unwrap_or_else(|_| "llvm-config-14".into());
    let flags = Command::new(&config)
        .arg("--cxxflags")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .ok_or_else(|| format!("{config} not found: install llvm-14-dev (scripts/setup does)"))?;
    let flags = String::from_utf8_lossy(&flags.stdout).to_string();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let so = out.join("libsharemap_burst.so");
    // LLVM is built without RTTI: a plugin with it would need typeinfo LLVM does not have.
    // Exceptions off too, as LLVM's flags say; warnings from LLVM's own headers left out.
    let status = Command::new(&cxx)
        .args(flags.split_whitespace())
        .args(["-fno-rtti", "-fPIC", "-shared", "-O2", "-Wno-unused-parameter", "-std=c++17", "-o"])
        .arg(&so)
        .arg("plugin/burst.cpp")
        .status()
        .map_err(|e| format!("{cxx}: {e}"))?;
    if !status.success() {
        return Err(format!("{cxx} failed on plugin/burst.cpp"));
    }
    Ok(so)
}
