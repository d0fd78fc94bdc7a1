//! The guest's entry point: a `VmRequest` (the guest's shape, and `run`'s thread map,
//! sharing and placement for the program) checked on the host before anything boots, then
//! the program run under `sharemap run --where` in the guest (`PreparedVm::boot`), which
//! reports what the guest kernel answered.

use super::{Guest, find_kernel, guest_command, is_variable_name, run_program};
use crate::thp::Thp;
use crate::{DataPlacement, Observed, Plan, Tools};
use serde::Serialize;
use sharemap::{Error, ErrorKind, Result, ThreadMap, TraceInput};
use sharemap_machine::Machine;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A program run in a multi-node guest, as `sharemap vm` takes it.
#[derive(Clone, Debug)]
pub struct VmRequest {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    pub nodes: usize,
    /// Virtual CPUs, spread evenly over the nodes.
    pub cpus: usize,
    /// Guest memory in MiB (None: 512 per node, 1024 at least).
    pub memory_mb: Option<usize>,
    /// Distance between two different nodes (a node to itself is 10).
    pub distance: u32,
    /// The guest kernel (None: `SHAREMAP_VM_KERNEL`, else the cached one).
    pub kernel: Option<PathBuf>,
    pub numa_balancing: bool,
    /// As `RunRequest`'s, applied in the guest on its logical PUs.
    pub thread_map: Option<String>,
    pub sharing: Option<PathBuf>,
    pub placement: Option<String>,
    pub thp: Option<Thp>,
    pub timeout: Duration,
    pub no_aslr: bool,
    /// Variables for the program in the guest: `KEY=VALUE`.
    pub env: Vec<String>,
}

impl VmRequest {
    /// Two nodes, four CPUs, nothing pinned or placed, ten minutes at most.
    pub fn new(command: Vec<OsString>) -> VmRequest {
        VmRequest {
            command,
            nodes: 2,
            cpus: 4,
            memory_mb: None,
            distance: 20,
            kernel: None,
            numa_balancing: false,
            thread_map: None,
            sharing: None,
            placement: None,
            thp: None,
            timeout: Duration::from_secs(600),
            no_aslr: false,
            env: Vec::new(),
        }
    }

    /// The guest's topology as `run` in it will see it: one package per node.
    pub fn topology(&self) -> Result<Machine> {
        let spec = format!("pack:{} numa:1 core:{} pu:1", self.nodes, self.cpus / self.nodes.max(1));
        Machine::from_spec(&spec).map_err(|e| Error::from(e).in_setting("nodes", spec))
    }

    /// Every setting and every file a setting names, checked on the host (the guest takes
    /// seconds to boot, and would name its own copies), and the guest's command and files.
    /// The kernel is looked for but not required yet: `PreparedVm::kernel` says.
    pub fn prepare(&self, tools: &Tools) -> Result<PreparedVm> {
        let (program, program_args) =
            self.command.split_first().ok_or_else(|| Error::new(ErrorKind::Program, "no program given after --"))?;
        let program = crate::resolve_program(Path::new(program))?;
        let guest = self.guest()?;
        let topology = self.topology()?;
        self.check_files(&topology)?;
        let env = self.variables()?;
        let sharemap = tools
            .sharemap
            .clone()
            .ok_or_else(|| Error::new(ErrorKind::Guest, "no sharemap binary to copy into the guest"))?;
        let library = tools.existing("libsharemap_pin.so")?;
        let (run_args, files) = self.run_args();
        let program_args = program_args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        Ok(PreparedVm {
            guest,
            kernel: find_kernel(self.kernel.as_deref()),
            program,
            program_args,
            run_args,
            files,
            env,
            sharemap,
            library,
        })
    }

    /// The guest these settings ask for, its kernel not looked for yet.
    fn guest(&self) -> Result<Guest> {
        let bad = |field: &'static str, given: String, why: String| {
            Error::new(ErrorKind::Guest, why).in_setting(field, given)
        };
        let mut guest = Guest::new(PathBuf::new(), self.nodes, self.cpus)?;
        if let Some(mb) = self.memory_mb {
            if mb < 64 * self.nodes {
                return Err(bad("memory_mb", mb.to_string(), "give at least 64 MiB per node".into()));
            }
            if let Some(host_mb) = sharemap::meminfo("MemTotal").map(|b| b >> 20)
                && mb as u64 > host_mb
            {
                return Err(bad("memory_mb", mb.to_string(), format!("more than this host's {host_mb} MiB")));
            }
            guest.memory_mb = mb;
        }
        if self.distance <= 10 || self.distance > 255 {
            return Err(bad(
                "distance",
                self.distance.to_string(),
                "expected a remote distance between 11 and 255 (a node to itself is 10)".into(),
            ));
        }
        if self.timeout.is_zero() {
            return Err(bad("timeout", "0".into(), "give the guest at least one second".into()));
        }
        guest.distance = self.distance;
        guest.numa_balancing = self.numa_balancing;
        guest.timeout = self.timeout;
        Ok(guest)
    }

    /// The thread map, sharing and placement, read as the guest's `run` will read them, on
    /// the guest's topology.
    fn check_files(&self, guest: &Machine) -> Result<()> {
        let matrix = |path: &Path| sharemap::map::load_sharing(&TraceInput::file(path), &()).map(|s| s.matrix);
        let sharing = match &self.sharing {
            // A file that does not read is said by its own words, after the setting's name.
            Some(path) => Some(matrix(path).map_err(|e| e.in_setting("sharing", ""))?),
            None => None,
        };
        if let Some(map) = &self.thread_map {
            let in_map = |e: Error| e.in_setting("thread_map", map.clone());
            if let Some(path) = map.strip_prefix("trace:").or_else(|| map.strip_prefix("matrix:")) {
                matrix(Path::new(path)).map_err(|e| e.in_setting("thread_map", ""))?;
            } else if map.trim() != "os" {
                let parsed = ThreadMap::parse(map).map_err(in_map)?;
                crate::map_threads(&parsed, guest, sharing.as_ref(), 1).map_err(|e| in_map(in_guest(e)))?;
            }
        }
        if let Some(placement) = &self.placement {
            let in_placement = |e: Error| e.in_setting("placement", placement.clone());
            if let Some(trace) = placement.strip_prefix("optimal:").or_else(|| placement.strip_prefix("marathe:")) {
                TraceInput::file(trace).open().map_err(in_placement)?;
            } else if Path::new(placement).is_file() {
                // A plan is for the guest's nodes and its 4 KiB pages.
                Plan::read(Path::new(placement), guest, 4096).map_err(|e| in_placement(in_guest(e)))?;
            } else {
                DataPlacement::parse(placement, guest).map_err(|e| in_placement(in_guest(e)))?;
            }
        }
        Ok(())
    }

    fn variables(&self) -> Result<Vec<(String, String)>> {
        self.env
            .iter()
            .map(|kv| {
                let bad = |why: String| Error::new(ErrorKind::Guest, why).in_setting("env", kv.clone());
                let (k, v) = kv.split_once('=').ok_or_else(|| bad("expected KEY=VALUE".into()))?;
                if !is_variable_name(k) {
                    return Err(bad(format!("'{k}' is not a variable name")));
                }
                Ok((k.to_string(), v.to_string()))
            })
            .collect()
    }

    /// `run`'s arguments in the guest, and the files they name, copied in: (host path,
    /// guest path).
    fn run_args(&self) -> (Vec<String>, Vec<(PathBuf, String)>) {
        let mut run_args = Vec::new();
        let mut files = Vec::new();
        // A file a setting names is copied into the guest, and the setting names the copy.
        let mut guest_file = |spec: &str, prefix: &str| -> String {
            let path = Path::new(&spec[prefix.len()..]);
            if !path.is_file() {
                return spec.to_string();
            }
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let at = format!("/opt/sharemap/files/{}-{name}", files.len());
            files.push((path.to_path_buf(), at.clone()));
            format!("{prefix}{at}")
        };
        if let Some(map) = &self.thread_map {
            let prefix = ["trace:", "matrix:"].into_iter().find(|p| map.starts_with(p)).unwrap_or("");
            run_args.extend(["--thread-map".to_string(), guest_file(map, prefix)]);
        }
        if let Some(sharing) = &self.sharing {
            run_args.extend(["--sharing".to_string(), guest_file(&sharing.display().to_string(), "")]);
        }
        if let Some(placement) = &self.placement {
            let prefix = ["optimal:", "marathe:"].into_iter().find(|p| placement.starts_with(p)).unwrap_or("");
            run_args.extend(["--placement".to_string(), guest_file(placement, prefix)]);
        }
        if self.no_aslr {
            run_args.push("--no-aslr".into());
        }
        if let Some(thp) = self.thp {
            run_args.extend(["--thp".to_string(), thp.name().to_string()]);
        }
        (run_args, files)
    }
}

/// A check made on the guest's topology, speaking of the guest (the checks are `run`'s,
/// which speak of the machine they run on as the host).
fn in_guest(e: Error) -> Error {
    let why = e.why().replace("the host has", "the guest has").replace("the host's", "the guest's");
    Error::new(e.kind(), why)
}

/// A guest request checked, with what the guest will run.
#[derive(Debug)]
pub struct PreparedVm {
    pub guest: Guest,
    /// The guest kernel, or why none was found.
    pub kernel: Result<PathBuf>,
    pub program: PathBuf,
    pub program_args: Vec<String>,
    /// `sharemap run`'s arguments in the guest.
    pub run_args: Vec<String>,
    /// Files copied into the guest: (host path, guest path).
    pub files: Vec<(PathBuf, String)>,
    pub env: Vec<(String, String)>,
    sharemap: PathBuf,
    library: PathBuf,
}

/// What the guest's run printed and answered.
#[derive(Clone, Debug, Serialize)]
pub struct VmReport {
    /// What its commands printed (the program's output, `run --where`'s lines).
    pub output: String,
    /// The program's exit status in the guest.
    pub status: i32,
    /// Where its threads ran and its pages lay, as the guest kernel told `run`.
    pub observed: Option<Observed>,
}

impl PreparedVm {
    /// The shell command the guest's init runs.
    pub fn script(&self) -> Result<String> {
        guest_command(&self.program, &self.run_args, &self.program_args, &self.env)
    }

    /// Boots the guest and runs the program in it (needs the kernel).
    pub fn boot(mut self) -> Result<VmReport> {
        self.guest.kernel = self.kernel?;
        let out = run_program(
            &self.guest,
            &self.sharemap,
            &self.library,
            &self.program,
            &self.run_args,
            &self.program_args,
            &self.files,
            &self.env,
        )?;
        Ok(VmReport { output: out.output, status: out.status, observed: out.observed })
    }
}
