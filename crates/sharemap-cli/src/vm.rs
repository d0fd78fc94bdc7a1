//! `sharemap vm`: a program run inside a multi-node guest kernel under QEMU, reporting where
//! its threads ran and its pages lay (a way to check a mapping without a NUMA machine).

use anyhow::{Result, anyhow, bail};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// `sharemap vm`'s flags.
#[derive(clap::Args)]
pub struct VmArgs {
    /// NUMA nodes of the guest
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Virtual CPUs, spread evenly over the nodes
    #[arg(long, default_value_t = 4)]
    pub cpus: usize,
    /// Guest memory in MiB, split evenly over the nodes (default 512 per node, 1024 at least)
    #[arg(long)]
    pub memory_mb: Option<usize>,
    /// Distance between two different nodes (ACPI SLIT; a node to itself is 10)
    #[arg(long, default_value_t = 20)]
    pub distance: u32,
    /// The guest kernel (an uncompressed vmlinux); default $SHAREMAP_VM_KERNEL, else the
    /// one --fetch-kernel keeps in ~/.cache/sharemap
    #[arg(long)]
    pub kernel: Option<PathBuf>,
    /// Download Debian's cloud kernel into the cache first (apt-get download, lz4)
    #[arg(long)]
    pub fetch_kernel: bool,
    /// Leave the guest kernel's NUMA balancing on (off by default: it moves pages itself)
    #[arg(long)]
    pub numa_balancing: bool,
    /// As `sharemap run --thread-map`, applied in the guest (logical PUs of the guest)
    #[arg(long = "thread-map")]
    pub thread_map: Option<String>,
    /// As `sharemap run --sharing`: the sharing a --thread-map algorithm maps onto the guest
    #[arg(long)]
    pub sharing: Option<PathBuf>,
    /// As `sharemap run --placement`, applied in the guest
    #[arg(long)]
    pub placement: Option<String>,
    /// As `sharemap run --thp`: what a plan does about the guest's transparent huge pages
    /// (split, regions or keep)
    #[arg(long, value_parser = ["split", "regions", "keep"])]
    pub thp: Option<String>,
    /// Stop the guest after this many seconds
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Address-space randomisation off in the guest run (for a plan from a recording made
    /// with `record --no-aslr`)
    #[arg(long)]
    pub no_aslr: bool,
    /// Set this variable for the program in the guest (repeatable), e.g. OMP_NUM_THREADS=4
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Check every flag and file, print the guest and the command it would run, and stop
    /// without booting
    #[arg(long)]
    pub dry_run: bool,
    /// The program and its arguments, after --
    #[arg(last = true)]
    pub command: Vec<OsString>,
}

/// Every flag, and every file a flag names, checked on the host before the guest boots, so
/// that a bad one is named as the user gave it, in one line, at once (the guest takes
/// seconds to boot, and would name its own copy). `guest` is the guest's topology.
fn check_inputs(args: &VmArgs, guest: &sharemap::Machine) -> Result<()> {
    let matrix = |path: &std::path::Path, flag: &str| -> Result<()> {
        let input = crate::map::Input { path, from: None, exclude: None };
        crate::map::load_matrix(&input).map(|_| ()).map_err(|e| anyhow!("{flag}: {e}"))
    };
    let sharing = match &args.sharing {
        Some(path) => {
            matrix(path, "--sharing")?;
            let input = crate::map::Input { path, from: None, exclude: None };
            Some(crate::map::load_matrix(&input).map_err(|e| anyhow!("--sharing: {e}"))?.matrix)
        }
        None => None,
    };
    if let Some(map) = &args.thread_map {
        if let Some(path) = map.strip_prefix("trace:").or_else(|| map.strip_prefix("matrix:")) {
            matrix(std::path::Path::new(path), "--thread-map")?;
        } else if map.trim() != "os" {
            // As the guest's `run` will read it, on the guest's topology.
            let parsed = sharemap::ThreadMap::parse(map).map_err(|e| anyhow!("--thread-map {map}: {}", e.why()))?;
            sharemap_run::map_threads(&parsed, guest, sharing.as_ref(), 1)
                .map_err(|e| anyhow!("--thread-map {map}: {}", in_guest(&e)))?;
        }
    }
    if let Some(placement) = &args.placement {
        if let Some(trace) = placement.strip_prefix("optimal:").or_else(|| placement.strip_prefix("marathe:")) {
            let input = crate::trace_cmds::input(std::path::Path::new(trace), None, None)?;
            input.open().map_err(|e| anyhow!("--placement {placement}: {e}"))?;
        } else if std::path::Path::new(placement).is_file() {
            // A plan is for the guest's nodes and its 4 KiB pages.
            sharemap_run::Plan::read(std::path::Path::new(placement), guest, 4096)
                .map_err(|e| anyhow!("--placement: {}", in_guest(&e)))?;
        } else {
            sharemap_run::DataPlacement::parse(placement, guest)
                .map_err(|e| anyhow!("--placement {}", in_guest(&e)))?;
        }
    }
    Ok(())
}

/// A check made on the guest's topology, speaking of the guest (the checks are `run`'s,
/// which speak of the machine they run on as the host).
fn in_guest(e: &sharemap::Error) -> String {
    e.why().replace("the host has", "the guest has").replace("the host's", "the guest's")
}

/// The guest `vm`'s flags ask for, its kernel not looked for yet.
fn guest_of(args: &VmArgs) -> Result<sharemap_run::vm::Guest> {
    let mut guest =
        sharemap_run::vm::Guest::new(PathBuf::new(), args.nodes, args.cpus).map_err(|e| anyhow!("{}", e.why()))?;
    if let Some(mb) = args.memory_mb {
        if mb < 64 * args.nodes {
            bail!("--memory-mb {mb}: give at least 64 MiB per node");
        }
        let host_mb = sharemap::meminfo("MemTotal").map(|b| b >> 20);
        if let Some(host_mb) = host_mb
            && mb as u64 > host_mb
        {
            bail!("--memory-mb {mb}: more than this host's {host_mb} MiB");
        }
        guest.memory_mb = mb;
    }
    if args.distance <= 10 || args.distance > 255 {
        bail!("--distance {}: expected a remote distance between 11 and 255 (a node to itself is 10)", args.distance);
    }
    if args.timeout == 0 {
        bail!("--timeout 0: give the guest at least one second");
    }
    guest.distance = args.distance;
    guest.numa_balancing = args.numa_balancing;
    guest.timeout = std::time::Duration::from_secs(args.timeout);
    Ok(guest)
}

pub fn run(args: VmArgs) -> Result<ExitCode> {
    if args.fetch_kernel {
        // The cache is checked before anything is said or downloaded.
        let cache = sharemap_run::vm::kernel_cache().map_err(|e| anyhow!("{}", e.why()))?;
        eprintln!(
            "sharemap: fetching Debian's cloud kernel into {} (apt-get download; nothing is installed)",
            cache.display()
        );
        let path = sharemap_run::vm::fetch_kernel().map_err(|e| anyhow!(e))?;
        eprintln!("sharemap: guest kernel at {}", path.display());
        if args.command.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let (program, program_args) = args.command.split_first().ok_or_else(|| anyhow!("no program given after --"))?;
    let program = sharemap_run::resolve_program(std::path::Path::new(program)).map_err(|e| anyhow!("{}", e.why()))?;
    let mut guest = guest_of(&args)?;
    let topology = format!("pack:{} numa:1 core:{} pu:1", args.nodes, args.cpus / args.nodes);
    let topology = sharemap::Machine::from_spec(&topology).map_err(|e| anyhow!("--nodes/--cpus: {e}"))?;
    check_inputs(&args, &topology)?;
    let env = args
        .env
        .iter()
        .map(|kv| {
            let (k, v) = kv.split_once('=').ok_or_else(|| anyhow!("--env {kv}: expected KEY=VALUE"))?;
            if !sharemap_run::vm::is_variable_name(k) {
                bail!("--env {kv}: '{k}' is not a variable name");
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    let kernel = sharemap_run::vm::find_kernel(args.kernel.as_deref());
    if !args.dry_run {
        guest.kernel = kernel.as_ref().map_err(|e| anyhow!("{e}"))?.clone();
    }
    let exe = std::env::current_exe()?;
    let library = sharemap_run::Tools::beside(&exe).existing("libsharemap_pin.so").map_err(|e| anyhow!(e.why()))?;
    let mut run_args = Vec::new();
    let mut files = Vec::new();
    // A file a flag names is copied into the guest, and the flag names the copy.
    let mut guest_file = |spec: &str, prefix: &str| -> String {
        let path = std::path::Path::new(&spec[prefix.len()..]);
        if !path.is_file() {
            return spec.to_string();
        }
        let at =
            format!("/opt/sharemap/files/{}-{}", files.len(), path.file_name().unwrap_or_default().to_string_lossy());
        files.push((path.to_path_buf(), at.clone()));
        format!("{prefix}{at}")
    };
    if let Some(map) = &args.thread_map {
        let prefix = ["trace:", "matrix:"].into_iter().find(|p| map.starts_with(p)).unwrap_or("");
        let map = guest_file(map, prefix);
        run_args.extend(["--thread-map".to_string(), map]);
    }
    if let Some(sharing) = &args.sharing {
        let sharing = guest_file(&sharing.display().to_string(), "");
        run_args.extend(["--sharing".to_string(), sharing]);
    }
    if let Some(placement) = &args.placement {
        let prefix = ["optimal:", "marathe:"].into_iter().find(|p| placement.starts_with(p)).unwrap_or("");
        let placement = guest_file(placement, prefix);
        run_args.extend(["--placement".to_string(), placement]);
    }
    if args.no_aslr {
        run_args.push("--no-aslr".into());
    }
    if let Some(thp) = &args.thp {
        run_args.extend(["--thp".to_string(), thp.clone()]);
    }
    let program_args: Vec<String> = program_args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    if args.dry_run {
        println!(
            "guest   {} NUMA nodes, {} CPUs, {} MiB, distance {}, NUMA balancing {}, timeout {} s",
            guest.nodes,
            guest.cpus,
            guest.memory_mb,
            guest.distance,
            if guest.numa_balancing { "on" } else { "off" },
            args.timeout
        );
        match &kernel {
            Ok(k) => println!("kernel  {}", k.display()),
            Err(e) => println!("kernel  none: {e}"),
        }
        let script =
            sharemap_run::vm::guest_command(&program, &run_args, &program_args, &env).map_err(|e| anyhow!(e))?;
        println!("runs    {script}");
        for (from, at) in &files {
            println!("copies  {} as {at}", from.display());
        }
        println!("(dry run: nothing booted)");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "sharemap: booting a guest with {} NUMA nodes and {} CPUs under QEMU (emulated: timings inside it mean nothing)",
        args.nodes, args.cpus
    );
    let out = sharemap_run::vm::run_program(&guest, &exe, &library, &program, &run_args, &program_args, &files, &env)
        .map_err(|e| anyhow!(e))?;
    print!("{}", out.output);
    Ok(ExitCode::from(out.status.clamp(0, 255) as u8))
}
