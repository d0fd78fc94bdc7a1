//! sharemap's burst-sampling pass for clang: `plugin/burst.cpp`, built by this crate's build
//! script into `libsharemap_burst.so` beside the `sharemap` binary (when LLVM 14's headers
//! are installed: `llvm-14-dev`, which scripts/setup installs). `sharemap cc --burst` loads
//! it with `-fpass-plugin`. docs/source-tracer.md describes the scheme.

/// The plugin's file name, beside the `sharemap` binary or where scripts/install puts it.
pub const PLUGIN: &str = "libsharemap_burst.so";

/// Why the build left the plugin out, when it did (no LLVM 14 headers, or no C++ compiler).
pub const MISSING_WHY: Option<&str> = option_env!("SHAREMAP_BURST_MISSING");
