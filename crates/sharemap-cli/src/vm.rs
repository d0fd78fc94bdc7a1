//! `sharemap vm`: a program run inside a multi-node guest kernel under QEMU, reporting where
//! its threads ran and its pages lay (a way to check a mapping without a NUMA machine).
//! sharemap-run's `VmRequest` checks and runs it; this is its flags and its rendering.

use anyhow::{Result, anyhow};
use sharemap_run::vm::VmRequest;
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

impl VmArgs {
    /// The library's request for these flags.
    fn request(&self) -> VmRequest {
        VmRequest {
            command: self.command.clone(),
            nodes: self.nodes,
            cpus: self.cpus,
            memory_mb: self.memory_mb,
            distance: self.distance,
            kernel: self.kernel.clone(),
            numa_balancing: self.numa_balancing,
            thread_map: self.thread_map.clone(),
            sharing: self.sharing.clone(),
            placement: self.placement.clone(),
            thp: self.thp.as_deref().and_then(sharemap_run::thp::Thp::parse),
            timeout: std::time::Duration::from_secs(self.timeout),
            no_aslr: self.no_aslr,
            env: self.env.clone(),
        }
    }
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
    let tools = sharemap_run::Tools::beside(&std::env::current_exe()?);
    let prepared = args.request().prepare(&tools).map_err(|e| crate::flags::say(e, crate::flags::At::Vm))?;
    if args.dry_run {
        let guest = &prepared.guest;
        println!(
            "guest   {} NUMA nodes, {} CPUs, {} MiB, distance {}, NUMA balancing {}, timeout {} s",
            guest.nodes,
            guest.cpus,
            guest.memory_mb,
            guest.distance,
            if guest.numa_balancing { "on" } else { "off" },
            args.timeout
        );
        match &prepared.kernel {
            Ok(k) => println!("kernel  {}", k.display()),
            Err(e) => println!("kernel  none: {e}"),
        }
        println!("runs    {}", prepared.script().map_err(|e| anyhow!(e))?);
        for (from, at) in &prepared.files {
            println!("copies  {} as {at}", from.display());
        }
        println!("(dry run: nothing booted)");
        return Ok(ExitCode::SUCCESS);
    }
    if let Err(e) = &prepared.kernel {
        return Err(anyhow!("{e}"));
    }
    eprintln!(
        "sharemap: booting a guest with {} NUMA nodes and {} CPUs under QEMU (emulated: timings inside it mean nothing)",
        args.nodes, args.cpus
    );
    let report = prepared.boot().map_err(|e| anyhow!(e))?;
    print!("{}", report.output);
    Ok(ExitCode::from(report.status.clamp(0, 255) as u8))
}
