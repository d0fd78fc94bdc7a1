//! A multi-node guest: a real Linux kernel under QEMU with several NUMA nodes, booted from a
//! RAM disk this module writes (busybox, sharemap, a program and the libraries they load),
//! so that thread pinning and page placement can be checked by the kernel's own answers on
//! a host that has one node. Timings inside it mean nothing (QEMU emulates the CPUs).
//! docs/vm.md says how to get the kernel and what the guest holds.

mod request;

pub use request::{PreparedVm, VmReport, VmRequest};

use crate::Observed;
use sharemap::{Error, ErrorKind, Result};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The guest's shape and where its parts come from.
#[derive(Clone, Debug)]
pub struct Guest {
    /// An uncompressed kernel (vmlinux, PVH entry), as `fetch_kernel` extracts it.
    pub kernel: PathBuf,
    pub nodes: usize,
    /// Virtual CPUs, spread evenly over the nodes (one socket per node).
    pub cpus: usize,
    /// Guest memory in MiB, split evenly over the nodes.
    pub memory_mb: usize,
    /// The distance between two different nodes (a node to itself is 10).
    pub distance: u32,
    /// Kernel NUMA balancing on in the guest (off by default: it migrates pages on its own,
    /// and move_pages queries then miss pages it is scanning).
    pub numa_balancing: bool,
    /// The guest is stopped after this long.
    pub timeout: Duration,
}

impl Guest {
    pub fn new(kernel: PathBuf, nodes: usize, cpus: usize) -> Result<Guest> {
        if nodes == 0 || cpus == 0 || !cpus.is_multiple_of(nodes) {
            return Err(Error::new(
                ErrorKind::Guest,
                format!("{cpus} CPUs cannot be spread evenly over {nodes} nodes: give a multiple of the node count"),
            ));
        }
        if nodes > 64 || cpus > 255 {
            return Err(Error::new(ErrorKind::Guest, "at most 64 nodes and 255 CPUs"));
        }
        Ok(Guest {
            kernel,
            nodes,
            cpus,
            memory_mb: 512 * nodes.max(2),
            distance: 20,
            numa_balancing: false,
            timeout: Duration::from_secs(600),
        })
    }

    /// QEMU's arguments for this guest booting `initrd`, its init's verdict written to
    /// `verdict` (the guest's second serial port).
    fn qemu_args(&self, initrd: &Path, verdict: &Path) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |s: String| a.push(s);
        // KVM is used only when asked: on a nested host it is far slower than TCG.
        if std::env::var("SHAREMAP_VM_ACCEL").as_deref() == Ok("kvm") {
            push("-accel".into());
            push("kvm".into());
            push("-cpu".into());
            push("host".into());
        } else {
            push("-accel".into());
            push("tcg,thread=multi".into());
            push("-cpu".into());
            push("max".into());
        }
        let per_node = self.memory_mb / self.nodes;
        push("-m".into());
        push(format!("{}M", per_node * self.nodes));
        push("-smp".into());
        push(format!("{},sockets={},cores={},threads=1", self.cpus, self.nodes, self.cpus / self.nodes));
        for n in 0..self.nodes {
            push("-object".into());
            push(format!("memory-backend-ram,id=m{n},size={per_node}M"));
            push("-numa".into());
            push(format!("node,nodeid={n},memdev=m{n}"));
        }
        for n in 0..self.nodes {
            push("-numa".into());
            push(format!("cpu,node-id={n},socket-id={n}"));
        }
        for i in 0..self.nodes {
            for j in i + 1..self.nodes {
                push("-numa".into());
                push(format!("dist,src={i},dst={j},val={}", self.distance));
            }
        }
        for s in ["-bios", "/usr/share/qemu/qboot.rom", "-display", "none", "-serial", "stdio", "-monitor", "none"] {
            push(s.into());
        }
        push("-serial".into());
        push(format!("file:{}", verdict.display()));
        push("-no-reboot".into());
        push("-kernel".into());
        push(self.kernel.display().to_string());
        push("-initrd".into());
        push(initrd.display().to_string());
        push("-append".into());
        // lpj skips the delay-loop calibration, slow under emulation.
        // cryptomgr.notests skips the crypto self-tests: under emulation with many CPUs one of
        // them once held a CPU in a soft lockup for the whole timeout.
        push("console=ttyS0 quiet loglevel=1 lpj=4000000 cryptomgr.notests panic=-1 rdinit=/init".into());
        a
    }

    /// Boots the guest with `image` as its RAM disk and returns what the guest's init
    /// printed between its start and end markers, and the status its commands ended with.
    pub fn boot(&self, image: Image) -> Result<GuestOutput> {
        let qemu = which("qemu-system-x86_64").ok_or_else(|| {
            Error::new(
                ErrorKind::Guest,
                "qemu-system-x86_64 is not installed (Debian: apt-get install qemu-system-x86)",
            )
        })?;
        if !Path::new("/usr/share/qemu/qboot.rom").is_file() {
            return Err(Error::new(
                ErrorKind::Guest,
                "/usr/share/qemu/qboot.rom is missing (it comes with qemu-system-x86)",
            ));
        }
        let dir = tempfile::tempdir()?;
        // The RAM disk (tens of MB) goes on a signal too; QEMU dies with us.
        let _listed = sharemap_core::output::Listed::new(dir.path());
        let initrd = dir.path().join("initrd.cpio");
        std::fs::write(&initrd, image.finish())?;
        let verdict = dir.path().join("verdict");
        let parent = std::process::id() as i32;
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(qemu);
        // SAFETY: between fork and exec only prctl, getppid and raise run.
        unsafe { child.pre_exec(move || sharemap_core::output::die_with_parent(parent)) };
        let mut child = child
            .args(self.qemu_args(&initrd, &verdict))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = stdout.read_to_end(&mut out);
            out
        });
        let errors = std::thread::spawn(move || {
            let mut out = String::new();
            let _ = stderr.read_to_string(&mut out);
            out
        });
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if start.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let console = String::from_utf8_lossy(&reader.join().unwrap_or_default()).replace('\r', "");
        let errors = errors.join().unwrap_or_default();
        let Some(status) = status else {
            return Err(Error::new(
                ErrorKind::Guest,
                format!(
                    "it did not finish within {} s; its console ended with: {}",
                    self.timeout.as_secs(),
                    tail(&console)
                ),
            ));
        };
        if !status.success() {
            let why = errors.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            return Err(Error::new(ErrorKind::Guest, format!("QEMU failed ({status}): {why}")));
        }
        let verdict = std::fs::read_to_string(&verdict).unwrap_or_default().replace('\r', "");
        GuestOutput::parse(&console, &verdict)
    }
}

fn tail(console: &str) -> String {
    let lines: Vec<&str> = console.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

// The init's verdict goes to the guest's second serial port, which it opens first and then
// removes: the commands (and the program) neither hold it nor find it, so nothing they print
// or do can fake the verdict. The console's markers only delimit what the commands printed.
const VERDICT_PORT: &str = "/dev/ttyS1";
const BEGIN: &str = "sharemap-guest: begin";
const INCOMPLETE: &str = "sharemap-guest: incomplete";
const COMPLETE: &str = "/opt/sharemap/.complete";
const STATUS: &str = "sharemap-guest: status ";
const END: &str = "sharemap-guest: end";
/// Where the guest's `sharemap run` leaves what the kernel answered (JSON), which the init
/// passes on its verdict port after this marker.
pub const OBSERVED: &str = "/tmp/.sharemap-observed.json";
const OBSERVED_MARK: &str = "sharemap-guest: observed";

/// What the guest's commands printed (stdout and stderr, in order) and how they ended.
#[derive(Clone, Debug)]
pub struct GuestOutput {
    pub output: String,
    pub status: i32,
    /// What the guest's `sharemap run` observed (threads' CPUs, pages per node, a plan's
    /// outcome), when it ran one.
    pub observed: Option<Observed>,
}

impl GuestOutput {
    /// Reads the verdict (from the init's own port) and what the commands printed (from
    /// the console, between the init's first begin marker and its last end marker).
    fn parse(console: &str, verdict: &str) -> Result<GuestOutput> {
        let said = |line: &str| verdict.lines().any(|l| l.trim() == line);
        if said(INCOMPLETE) {
            return Err(Error::new(
                ErrorKind::Guest,
                "its RAM disk did not fit in its memory (the kernel unpacked part of it): give it more memory",
            ));
        }
        let begun = console.find(BEGIN).map(|at| &console[at + BEGIN.len()..]);
        let printed = begun.map_or("", |rest| rest.strip_prefix('\n').unwrap_or(rest));
        let printed = printed.rfind(END).map_or(printed, |end| &printed[..end]);
        if !said(BEGIN) {
            return Err(Error::new(ErrorKind::Guest, format!("its init never started; console: {}", tail(console))));
        }
        let status = verdict.lines().find_map(|l| l.trim().strip_prefix(STATUS.trim_end()));
        let Some(status) = status.and_then(|s| s.trim().parse().ok()) else {
            return Err(Error::new(
                ErrorKind::Guest,
                format!("it stopped before its commands ended (no verdict from its init): {}", tail(printed)),
            ));
        };
        let mut lines = verdict.lines().skip_while(|l| l.trim() != OBSERVED_MARK).skip(1);
        let observed = match lines.next() {
            Some(json) => Some(
                serde_json::from_str(json)
                    .map_err(|e| Error::new(ErrorKind::Guest, format!("what its run observed does not read: {e}")))?,
            ),
            None => None,
        };
        Ok(GuestOutput { output: printed.to_string(), status, observed })
    }
}

/// A RAM disk: an uncompressed cpio archive in the "newc" format the kernel unpacks, every
/// file owned by root.
pub struct Image {
    bytes: Vec<u8>,
    dirs: std::collections::BTreeSet<String>,
    files: std::collections::BTreeSet<String>,
    inode: u32,
}

impl Default for Image {
    fn default() -> Self {
        Image::new()
    }
}

impl Image {
    pub fn new() -> Image {
        Image { bytes: Vec::new(), dirs: Default::default(), files: Default::default(), inode: 1 }
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        let name = name.trim_start_matches('/');
        let header = format!(
            "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
            self.inode,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.inode += 1;
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    /// Makes `path`'s parent directories.
    fn parents(&mut self, path: &str) {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        for i in 1..parts.len() {
            let dir = parts[..i].join("/");
            if self.dirs.insert(dir.clone()) {
                self.entry(&dir, 0o040755, &[]);
            }
        }
    }

    pub fn dir(&mut self, path: &str) {
        self.parents(&format!("{}/x", path.trim_end_matches('/')));
    }

    /// A file (a path given twice keeps its first contents).
    pub fn file(&mut self, path: &str, data: &[u8], executable: bool) {
        if !self.files.insert(path.trim_start_matches('/').to_string()) {
            return;
        }
        self.parents(path);
        self.entry(path, if executable { 0o100755 } else { 0o100644 }, data);
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        self.parents(path);
        self.entry(path, 0o120777, target.as_bytes());
    }

    /// A host program at `at` in the guest (without its debugging sections), with the shared
    /// libraries it loads (as the host's dynamic loader resolves them, at the same paths).
    pub fn host_program(&mut self, path: &Path, at: &str) -> Result<()> {
        let data =
            without_debug_info(path).map_err(|e| Error::new(ErrorKind::Guest, format!("{}: {e}", path.display())))?;
        self.file(at, &data, true);
        for lib in libraries(path)? {
            let name = lib.display().to_string();
            if !self.files.contains(name.trim_start_matches('/')) {
                let data =
                    std::fs::read(&lib).map_err(|e| Error::new(ErrorKind::Guest, format!("{}: {e}", lib.display())))?;
                self.file(&name, &data, true);
            }
        }
        Ok(())
    }

    /// sharemap and its run actor, at `GUEST_SHAREMAP` and beside it.
    pub fn sharemap(&mut self, sharemap: &Path, library: &Path) -> Result<()> {
        self.host_program(sharemap, GUEST_SHAREMAP)?;
        let actor = format!("{}/libsharemap_pin.so", GUEST_SHAREMAP.rsplit_once('/').expect("a path").0);
        self.host_program(library, &actor)
    }

    fn finish(mut self) -> Vec<u8> {
        // Last: the init script checks it, as the kernel unpacks what fits in memory only.
        self.file(COMPLETE, b"", false);
        self.entry("TRAILER!!!", 0, &[]);
        self.bytes
    }
}

/// The shared libraries a program loads, by `ldd` (none for a static one).
fn libraries(path: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(path).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let target = line.split("=>").nth(1).unwrap_or(line).trim();
        if let Some(p) = target.split_whitespace().next().filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
            // The loader is found by its path in the program's header, often through a link.
            if let Ok(real) = std::fs::canonicalize(p)
                && real != Path::new(p)
            {
                libs.push(real);
            }
        }
    }
    Ok(libs)
}

/// The init script around `commands`: mounts what the kernel's answers come from, sets NUMA
/// balancing, prints the markers the host reads, and powers off.
pub fn init_script(commands: &str, numa_balancing: bool) -> String {
    format!(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s /bin\n\
         export PATH=/bin:/usr/bin:/sbin\n\
         mkdir -p /proc /sys /dev /tmp\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         mount -t devtmpfs dev /dev 2>/dev/null\n\
         mount -t tmpfs tmp /tmp\n\
         mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm\n\
         echo {} > /proc/sys/kernel/numa_balancing 2>/dev/null\n\
         cd /tmp\n\
         exec 3>{VERDICT_PORT} && rm -f {VERDICT_PORT}\n\
         [ -e {COMPLETE} ] || {{ echo '{INCOMPLETE}' >&3; poweroff -f; }}\n\
         echo '{BEGIN}'; echo '{BEGIN}' >&3\n\
         set -o pipefail\n\
         (\n{commands}\n) 3>&- 2>&1 | cat\n\
         status=$?\n\
         echo '{END}'; echo \"{STATUS}$status\" >&3\n\
         [ -f {OBSERVED} ] && {{ echo '{OBSERVED_MARK}'; cat {OBSERVED}; echo; }} >&3\n\
         poweroff -f\n",
        u8::from(numa_balancing)
    )
}

/// An image with busybox as /init's shell, and the init script.
pub fn base_image(commands: &str, numa_balancing: bool) -> Result<Image> {
    let busybox =
        ["/bin/busybox", "/usr/bin/busybox"].into_iter().map(Path::new).find(|p| p.is_file()).ok_or_else(|| {
            Error::new(ErrorKind::Guest, "busybox is not installed (Debian: apt-get install busybox-static)")
        })?;
    if !libraries(busybox)?.is_empty() {
        return Err(Error::new(ErrorKind::Guest, "busybox is linked dynamically: install busybox-static"));
    }
    let mut image = Image::new();
    image.file("bin/busybox", &std::fs::read(busybox)?, true);
    image.file("init", init_script(commands, numa_balancing).as_bytes(), true);
    Ok(image)
}

/// Where sharemap and its run actor are put in the guest.
pub const GUEST_SHAREMAP: &str = "/opt/sharemap/sharemap";

/// Runs `sharemap run --where RUN_ARGS -- PROGRAM ARGS` in the guest (this sharemap binary
/// and its actor `library` copied in, with the program and the libraries each loads) and
/// returns what it printed: where each thread ran, the pages per node, the plan's outcome.
/// `files` are copied in too (host path, guest path): a plan or a recording the run reads;
/// `env` is set for the run and the program (`OMP_NUM_THREADS=4`).
#[allow(clippy::too_many_arguments)]
pub fn run_program(
    guest: &Guest,
    sharemap: &Path,
    library: &Path,
    program: &Path,
    run_args: &[String],
    args: &[String],
    files: &[(PathBuf, String)],
    env: &[(String, String)],
) -> Result<GuestOutput> {
    let program = std::fs::canonicalize(program)
        .map_err(|e| Error::new(ErrorKind::Program, format!("cannot run {}: {e}", program.display())))?;
    let command = guest_command(&program, run_args, args, env)?;
    let guest_program = guest_program_path(&program);
    let mut image = base_image(&command, guest.numa_balancing)?;
    image.sharemap(sharemap, library)?;
    image.host_program(&program, &guest_program)?;
    for (from, at) in files {
        let data = std::fs::read(from).map_err(|e| Error::new(ErrorKind::Guest, format!("{}: {e}", from.display())))?;
        image.file(at, &data, false);
    }
    guest.boot(image)
}

/// Where `program` is put in the guest: /opt/sharemap/bin (the guest's /tmp is a fresh tmpfs).
fn guest_program_path(program: &Path) -> String {
    let name = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "program".into());
    format!("/opt/sharemap/bin/{name}")
}

/// Whether `name` can name a shell variable (a letter or `_`, then letters, digits, `_`).
pub fn is_variable_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The shell command the guest's init runs: `sharemap run --where RUN_ARGS -- PROGRAM ARGS`
/// with `env` set, every word quoted.
pub fn guest_command(program: &Path, run_args: &[String], args: &[String], env: &[(String, String)]) -> Result<String> {
    let guest_program = guest_program_path(program);
    let mut command = String::new();
    for (key, value) in env {
        if !is_variable_name(key) {
            return Err(Error::new(ErrorKind::Guest, format!("--env {key}=...: '{key}' is not a variable name")));
        }
        command.push_str(&format!("{key}={} ", quote(value)));
    }
    command.push_str(&format!("{GUEST_SHAREMAP} run --where --observed-to {OBSERVED}"));
    for a in run_args.iter().chain([&"--".to_string()]) {
        command.push(' ');
        command.push_str(&quote(a));
    }
    for a in std::iter::once(&guest_program).chain(args) {
        command.push(' ');
        command.push_str(&quote(a));
    }
    Ok(command)
}

/// A binary's bytes without its debugging sections (a fraction of its size, and the RAM
/// disk lives in the guest's memory), by binutils' strip; as it is where strip is missing.
fn without_debug_info(path: &Path) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("stripped");
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&out)
        .arg(path)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    Ok(std::fs::read(if stripped { &out } else { path })?)
}

/// A word for the guest's shell, single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Where fetched kernels are kept: `$XDG_CACHE_HOME/sharemap`, else `$HOME/.cache/sharemap`,
/// else the user's home (the password database's) `.cache/sharemap`; never a shared place
/// such as /tmp, where another user could prepare the name. Relative variables are ignored,
/// as the XDG specification says.
pub fn cache_dir() -> Result<PathBuf> {
    cache_dir_with(&|name| std::env::var_os(name))
}

/// `cache_dir` with the environment given.
fn cache_dir_with(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf> {
    let absolute = |name: &str| var(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(dir) = absolute("XDG_CACHE_HOME") {
        return Ok(dir.join("sharemap"));
    }
    let home = absolute("HOME").or_else(home_of_user).ok_or_else(|| {
        Error::new(
            ErrorKind::GuestKernel,
            "no private cache directory for the guest kernel: set XDG_CACHE_HOME or HOME (or give --kernel)",
        )
    })?;
    Ok(home.join(".cache/sharemap"))
}

/// The effective user's home directory in the password database.
fn home_of_user() -> Option<PathBuf> {
    let mut buf = vec![0u8; 16384];
    // SAFETY: passwd is plain data; getpwuid_r writes it and its strings into buf.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found = std::ptr::null_mut();
    // SAFETY: every pointer names memory of the size given, alive across the call.
    let r = unsafe { libc::getpwuid_r(libc::geteuid(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if r != 0 || found.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into buf, NUL-terminated by getpwuid_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    let dir = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    dir.is_absolute().then_some(dir)
}

/// Checks that a private `dir` can be kept (or made) there without making anything: nothing
/// on the way another user owns or may rename entries of, and `dir`, if it exists, private.
fn check_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| Error::new(ErrorKind::GuestKernel, format!("{}: {why}", dir.display()));
    // Nothing on the way that another user owns, or may rename entries of (a directory
    // writable by others and not sticky): either would let them choose, or swap, where the
    // kernel is kept.
    let mut walked = PathBuf::new();
    for part in dir.components() {
        walked.push(part);
        let Ok(m) = std::fs::symlink_metadata(&walked) else { break };
        if let Some(uid) = sharemap_core::output::foreign_owner(&m) {
            return Err(refuse(format!(
                "{} is owned by another user (uid {uid}): refusing to keep a kernel there",
                walked.display()
            )));
        }
        if m.is_dir() && m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 {
            return Err(refuse(format!(
                "{} is writable by others (mode {:o}): refusing to keep a kernel there",
                walked.display(),
                m.mode() & 0o7777
            )));
        }
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) => is_private(dir, &m),
        Err(_) => Ok(()),
    }
}

/// Whether an existing `dir` is private: a directory, not a link, ours, writable by nobody else.
fn is_private(dir: &Path, m: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| Error::new(ErrorKind::GuestKernel, format!("{}: {why}", dir.display()));
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.is_dir() {
        return Err(refuse("not a directory (a link?): refusing to keep a kernel there".into()));
    }
    if m.uid() != me {
        return Err(refuse(format!("owned by uid {}, not {me}: refusing to keep a kernel there", m.uid())));
    }
    if m.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "writable by others (mode {:o}): refusing to keep a kernel there",
            m.mode() & 0o777
        )));
    }
    Ok(())
}

/// Makes `dir` (and its parents) if missing, itself with mode 0700, once `check_private`
/// allows it, and checks what is there then.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let refuse = |why: String| Error::new(ErrorKind::GuestKernel, format!("{}: {why}", dir.display()));
    check_private(dir)?;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| refuse(format!("cannot make its parent: {e}")))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refuse(format!("cannot make it: {e}"))),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| refuse(e.to_string()))?;
    is_private(dir, &m)
}

/// The directory the fetched kernel is kept in, made private (mode 0700) and checked: what
/// `fetch_kernel` writes to, checked before anything is downloaded.
pub fn kernel_cache() -> Result<PathBuf> {
    let dir = cache_dir()?;
    private_dir(&dir)?;
    Ok(dir)
}

/// The SHA-256 of a file, in hex.
fn sha256_of(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The cached kernel, checked against the SHA-256 recorded when it was fetched: a kernel
/// someone changed since is refused.
fn checked_cached_kernel(dir: &Path) -> Result<PathBuf> {
    let kernel = dir.join("vmlinux");
    let refuse = |why: String| Error::new(ErrorKind::GuestKernel, format!("{}: {why}", kernel.display()));
    private_dir(dir)?;
    let recorded = std::fs::read_to_string(dir.join("vmlinux.sha256")).map_err(|_| {
        refuse("no checksum recorded beside it: fetch it again with `sharemap vm --fetch-kernel`".into())
    })?;
    let now = sha256_of(&kernel).map_err(|e| refuse(e.to_string()))?;
    if recorded.split_whitespace().next() != Some(now.as_str()) {
        return Err(refuse(
            "it is not the kernel that was fetched (its SHA-256 changed): fetch it again with `sharemap vm --fetch-kernel`"
                .into(),
        ));
    }
    Ok(kernel)
}

/// The guest kernel: the one given, else `$SHAREMAP_VM_KERNEL`, else the fetched one
/// (checked against its recorded SHA-256 at every boot).
pub fn find_kernel(given: Option<&Path>) -> Result<PathBuf> {
    let named = given.map(Path::to_path_buf).or_else(|| std::env::var_os("SHAREMAP_VM_KERNEL").map(PathBuf::from));
    let chosen = match named {
        Some(path) => path,
        None => {
            let dir = cache_dir()?;
            if dir.join("vmlinux").is_file() {
                return checked_cached_kernel(&dir);
            }
            // Advise fetching only where the fetched kernel could be kept.
            check_private(&dir).map_err(|e| {
                Error::new(
                    ErrorKind::Guest,
                    format!(
                        "no guest kernel, and none can be fetched into the cache ({}): give --kernel or SHAREMAP_VM_KERNEL",
                        e.why()
                    ),
                )
            })?;
            dir.join("vmlinux")
        }
    };
    if chosen.is_file() {
        return Ok(chosen);
    }
    Err(Error::new(
        ErrorKind::Guest,
        format!(
            "no guest kernel at {}: run `sharemap vm --fetch-kernel` (Debian's cloud kernel, about 27 MB) or give --kernel",
            chosen.display()
        ),
    ))
}

/// Downloads Debian's cloud kernel package (`apt-get download`, nothing is installed),
/// extracts its kernel and decompresses it to `cache_dir()/vmlinux`. Needs apt-get,
/// dpkg-deb and lz4.
pub fn fetch_kernel() -> Result<PathBuf> {
    let fail = |why: String| Error::new(ErrorKind::GuestKernel, why);
    // Where it will be kept, checked first: nothing is downloaded for a place refused.
    let dir = kernel_cache()?;
    let depends = run_text(Command::new("apt-cache").args(["depends", "linux-image-cloud-amd64"]))
        .map_err(|e| fail(format!("apt-cache: {e}")))?;
    let package = depends
        .lines()
        .find_map(|l| l.trim().strip_prefix("Depends: ").filter(|p| p.starts_with("linux-image-")))
        .ok_or_else(|| {
            fail("apt does not know linux-image-cloud-amd64 (a Debian amd64 host, after apt-get update)".into())
        })?
        .to_string();
    let work = tempfile::tempdir()?;
    run_text(Command::new("apt-get").args(["download", "-q", &package]).current_dir(work.path()))
        .map_err(|e| fail(format!("apt-get download {package}: {e}")))?;
    let deb = std::fs::read_dir(work.path())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| fail(format!("apt-get download {package} left no package")))?;
    // The package as Debian's index describes it (its SHA256 fields, one per version known).
    let show = run_text(Command::new("apt-cache").args(["show", &package]))
        .map_err(|e| fail(format!("apt-cache show {package}: {e}")))?;
    let got = sha256_of(&deb)?;
    if !show.lines().filter_map(|l| l.strip_prefix("SHA256: ")).any(|sum| sum.trim() == got) {
        return Err(fail(format!("{}: its SHA-256 is not the one apt's index gives for {package}", deb.display())));
    }
    // Files rather than pipes: tar and lz4 stop reading early, which must not end us.
    let tar = work.path().join("data.tar");
    let status =
        Command::new("dpkg-deb").arg("--fsys-tarfile").arg(&deb).stdout(std::fs::File::create(&tar)?).status()?;
    if !status.success() {
        return Err(fail(format!("dpkg-deb cannot read {}", deb.display())));
    }
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .args(["--wildcards", "./boot/vmlinuz-*"])
        .current_dir(work.path())
        .status()?;
    if !status.success() {
        return Err(fail(format!("{} holds no ./boot/vmlinuz-*", deb.display())));
    }
    let vmlinuz = std::fs::read_dir(work.path().join("boot"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .next()
        .ok_or_else(|| fail("no kernel in the package".into()))?;
    let compressed = std::fs::read(&vmlinuz)?;
    // The x86 bzImage carries the kernel as an LZ4 legacy frame: find its magic.
    let magic = [0x02, 0x21, 0x4c, 0x18];
    let at = compressed
        .windows(4)
        .position(|w| w == magic)
        .ok_or_else(|| fail(format!("{} is not LZ4-compressed", vmlinuz.display())))?;
    let payload = work.path().join("payload.lz4");
    std::fs::write(&payload, &compressed[at..])?;
    // lz4 complains of the bytes after the frame; the kernel before them is whole.
    let out = Command::new("lz4")
        .arg("-dc")
        .arg(&payload)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| fail(format!("lz4: {e} (Debian: apt-get install lz4)")))?;
    let vmlinux = out.stdout;
    if !vmlinux.starts_with(b"\x7fELF") {
        return Err(fail("the decompressed kernel is not an ELF file".into()));
    }
    // Each file whole, through an exclusive temporary of a random name; the checksum last,
    // so that a kernel without its own checksum is never taken.
    let target = dir.join("vmlinux");
    let write = |name: &str, bytes: &[u8]| {
        sharemap::trace::write_whole(&dir.join(name), bytes).map_err(|e| fail(e.to_string()))
    };
    let _ = std::fs::remove_file(dir.join("vmlinux.sha256"));
    write("vmlinux", &vmlinux)?;
    write("vmlinux.package", format!("{package} {got}\n").as_bytes())?;
    write("vmlinux.sha256", format!("{}  vmlinux\n", sha256_of(&target)?).as_bytes())?;
    Ok(target)
}

/// A command's output, or the last line of what it said on failing.
fn run_text(cmd: &mut Command) -> std::io::Result<String> {
    let out = cmd.output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(std::io::Error::other(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed").to_string()))
    }
}

#[cfg(test)]
mod tests {
    /// The kernel cache is private: never /tmp when HOME is unset, made 0700, refused when it
    /// is a link, another user's or writable by others; a cached kernel changed since its
    /// checksum was recorded is refused.
    #[test]
    fn the_kernel_cache_is_private_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| std::ffi::OsString::from(v))
        };
        assert_eq!(
            cache_dir_with(&env(&[("XDG_CACHE_HOME", "/x/cache"), ("HOME", "/h")])).unwrap(),
            Path::new("/x/cache/sharemap")
        );
        assert_eq!(
            cache_dir_with(&env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])).unwrap(),
            Path::new("/h/.cache/sharemap")
        );
        // No HOME: the password database's home, whatever it is, and never a shared place.
        if let Ok(dir) = cache_dir_with(&env(&[])) {
            assert!(dir.ends_with(".cache/sharemap") && !dir.starts_with("/tmp"), "{}", dir.display());
        }

        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("a/b/sharemap");
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let open = scratch.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&open).unwrap_err().to_string().contains("writable by others"));
        let link = scratch.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(private_dir(&link).unwrap_err().to_string().contains("not a directory"));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = scratch.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            assert!(private_dir(&theirs).unwrap_err().to_string().contains("owned by another user (uid 65534)"));
            // Below a directory of theirs: refused before anything is made there.
            let below = theirs.join("sharemap");
            assert!(private_dir(&below).unwrap_err().to_string().contains("owned by another user (uid 65534)"));
            assert!(!below.exists());
        }

        std::fs::write(dir.join("vmlinux"), b"a kernel").unwrap();
        assert!(checked_cached_kernel(&dir).unwrap_err().to_string().contains("no checksum recorded"));
        let sum = sha256_of(&dir.join("vmlinux")).unwrap();
        std::fs::write(dir.join("vmlinux.sha256"), format!("{sum}  vmlinux\n")).unwrap();
        assert_eq!(checked_cached_kernel(&dir).unwrap(), dir.join("vmlinux"));
        std::fs::write(dir.join("vmlinux"), b"another kernel").unwrap();
        assert!(checked_cached_kernel(&dir).unwrap_err().to_string().contains("SHA-256 changed"));
        // The checksum itself: SHA-256 of "abc".
        std::fs::write(scratch.path().join("abc"), b"abc").unwrap();
        assert_eq!(
            sha256_of(&scratch.path().join("abc")).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    use super::*;

    #[test]
    fn guests_spread_cpus_evenly() {
        assert!(Guest::new("k".into(), 2, 3).unwrap_err().to_string().contains("evenly"));
        let g = Guest::new("k".into(), 2, 4).unwrap();
        let args = g.qemu_args(Path::new("i"), Path::new("v")).join(" ");
        assert!(args.contains("-smp 4,sockets=2,cores=2,threads=1"), "{args}");
        assert!(args.contains("cpu,node-id=1,socket-id=1") && args.contains("dist,src=0,dst=1,val=20"), "{args}");
    }

    /// The archive as the newc format lays it out: a 110-byte header, the name padded to 4,
    /// the data padded to 4, and a trailer.
    #[test]
    fn images_are_newc_archives() {
        let mut image = Image::new();
        image.file("a/b", b"xyz", false);
        let bytes = image.finish();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("070701"));
        // a (dir), a/b, the completion marker and its two directories, TRAILER!!!
        assert_eq!(text.matches("070701").count(), 6);
        assert!(text.contains("opt/sharemap/.complete\0"));
        assert_eq!(&bytes[6 + 8..6 + 16], b"000041ED");
        assert!(text.contains("a/b\0") && text.contains("xyz") && text.ends_with("TRAILER!!!\0\0\0\0"));
        assert_eq!(bytes.len() % 4, 0);
    }

    #[test]
    fn the_verdict_comes_from_the_inits_port_not_the_console() {
        let verdict = "sharemap-guest: begin\nsharemap-guest: status 3\n";
        let console = "noise\nsharemap-guest: begin\nhello\nsharemap-guest: end\n[ 1.0] reboot\n";
        let out = GuestOutput::parse(console, verdict).unwrap();
        assert_eq!((out.output.as_str(), out.status), ("hello\n", 3));
        // The program prints the markers: its output, not a verdict.
        let console =
            "sharemap-guest: begin\nsharemap-guest: incomplete\nsharemap-guest: status 0\nsharemap-guest: end\n";
        let verdict = "sharemap-guest: begin\nsharemap-guest: status 5\n";
        let out = GuestOutput::parse(console, verdict).unwrap();
        assert_eq!(out.status, 5);
        assert_eq!(out.output, "sharemap-guest: incomplete\nsharemap-guest: status 0\n");
        // It claims success, then the guest goes down before the init's verdict.
        let console = "sharemap-guest: begin\nsharemap-guest: status 0\n";
        let err = GuestOutput::parse(console, "sharemap-guest: begin\n").unwrap_err().to_string();
        assert!(err.contains("stopped before its commands ended"), "{err}");
        assert!(GuestOutput::parse("panic", "").unwrap_err().to_string().contains("never started"));
        let err = GuestOutput::parse("", "sharemap-guest: incomplete\n").unwrap_err().to_string();
        assert!(err.contains("did not fit"), "{err}");
    }

    /// What the guest's run observed comes back as its JSON on the verdict port, read as
    /// written; a console line that looks like it is the program's output, nothing more.
    #[test]
    fn the_guests_observation_round_trips() {
        let observed = Observed {
            threads: vec![crate::ThreadSeen { order: 1, tid: 7, last_cpu: Some(2), allowed: vec![2] }],
            pages_per_node: vec![(0, 10), (1, 3)],
            ..Observed::default()
        };
        let json = serde_json::to_string(&observed).unwrap();
        let console = format!("sharemap-guest: begin\n{OBSERVED_MARK}\n{{}}\nsharemap-guest: end\n");
        let verdict = format!("sharemap-guest: begin\nsharemap-guest: status 0\n{OBSERVED_MARK}\n{json}\n");
        let back = GuestOutput::parse(&console, &verdict).unwrap().observed.unwrap();
        assert_eq!(back.threads, observed.threads);
        assert_eq!(back.pages_per_node, observed.pages_per_node);
        let none = GuestOutput::parse(&console, "sharemap-guest: begin\nsharemap-guest: status 0\n").unwrap();
        assert!(none.observed.is_none());
        let bad = format!("sharemap-guest: begin\nsharemap-guest: status 0\n{OBSERVED_MARK}\n{{\"threads\": 3}}\n");
        assert!(GuestOutput::parse(&console, &bad).unwrap_err().to_string().contains("does not read"));
    }
}
