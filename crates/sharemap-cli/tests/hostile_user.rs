//! A second, unprivileged user prepares names in a directory both can write (a sticky one,
//! as /tmp, and a plain shared one): links to root's files, a FIFO, a cache directory of
//! their own. Root then runs sharemap naming those places; nothing root owns may change,
//! and each refusal is one line naming the place. Needs root and `useradd`: without them
//! the test says why and passes.

mod common;
use common::{p, s};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const USER: &str = "sharemap-hostile";

/// One test at a time: each may create the user and remove it when it ends.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The second user (uid, gid, whether this test created it), created if missing; None
/// (after saying why) where that cannot be.
fn hostile_user() -> Option<(u32, u32, bool)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        common::skip(common::Need::Root, "it runs sharemap as root and makes a second user: run it as root");
        return None;
    }
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, USER])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok())
    };
    if let (Some(uid), Some(gid)) = (id("-u"), id("-g")) {
        return Some((uid, gid, false));
    }
    let made = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        common::skip(common::Need::Root, &format!("useradd could not create {USER}"));
        return None;
    }
    Some((id("-u")?, id("-g")?, true))
}

/// Removes the user this test created, however the test ends.
struct Created(bool);

impl Drop for Created {
    fn drop(&mut self) {
        if self.0 {
            let _ = Command::new("userdel").arg(USER).status();
        }
    }
}

/// Runs `program args` as the hostile user (std drops root's supplementary groups).
fn as_user((uid, gid): (u32, u32), program: &str, args: &[&Path]) {
    let st = Command::new(program).args(args).uid(uid).gid(gid).status().unwrap();
    assert!(st.success(), "{program} {args:?} as {USER}");
}

fn sharemap(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sharemap"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Every file under `dir` with its content (or link target), to compare before and after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let m = std::fs::symlink_metadata(&path).unwrap();
        if m.is_dir() {
            out.extend(snapshot(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap_or_default(), m.mode()));
        }
    }
    out.sort();
    out
}

/// A refusal: failed, with one line naming `place` and saying why.
fn refused(out: &Output, place: &Path, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(why)).collect();
    assert!(!out.status.success(), "it wrote: {err}");
    assert!(lines.len() == 1 && lines[0].contains(s(place)), "one line naming {}: {err}", place.display());
}

/// Held while a test runs: the user it may have created, then the lock.
type Held = (Created, std::sync::MutexGuard<'static, ()>);

/// The second user for one test at a time (removed when the guard drops if the test made
/// it), or None after saying why there is none.
fn hostile() -> Option<(Held, (u32, u32))> {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (uid, gid, created) = hostile_user()?;
    // The user goes before the lock is released (fields drop in order).
    Some(((Created(created), one), (uid, gid)))
}

/// Root's own directory (0755) with a file in it, which nothing the tests run may touch.
fn root_files(d: &tempfile::TempDir) -> (PathBuf, PathBuf) {
    let root_only = p(d, "root-only");
    std::fs::create_dir(&root_only).unwrap();
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = root_only.join("precious.conf");
    std::fs::write(&victim, "precious\n").unwrap();
    (root_only, victim)
}

#[test]
fn another_user_cannot_choose_where_root_writes() {
    let Some((_held, (uid, gid))) = hostile() else { return };
    let user = (uid, gid);
    let d = tempfile::tempdir().unwrap();
    // Root's own things, which nothing below may touch.
    let (root_only, victim) = root_files(&d);
    let victim_dir = root_only.join("cron.d");
    std::fs::create_dir(&victim_dir).unwrap();
    let before = snapshot(&root_only);
    let trace = p(&d, "small.trace");
    common::ok(&["gen", "neighbor", "--threads", "4", "--accesses", "5k", "-o", s(&trace)]);
    let stm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/stm/pairs.c");
    let pairs = p(&d, "pairs");
    common::ok(&["cc", "--stm", "--no-trace", "-O2", s(&stm), "-o", s(&pairs), "-pthread"]);

    // A sticky shared directory (as /tmp) and a plain shared one.
    for (name, mode) in [("sticky", 0o1777), ("shared", 0o777)] {
        let shared = p(&d, name);
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
        let link = |to: &Path, name: &str| {
            let at = shared.join(name);
            as_user(user, "ln", &[Path::new("-s"), to, &at]);
            at
        };
        // Outputs through a link: a trace, an analysis directory, a CSV of run times, the
        // STM's matrix.
        let out = link(&victim, "out.trace");
        refused(&sharemap(&["gen", "neighbor", "--accesses", "1k", "-o", s(&out)], &[]), &out, "owned by another user");
        let analysis = link(&victim_dir, "analysis");
        let o = sharemap(&["analyze", s(&trace), "--machine", "numa:2 pu:4", "-o", s(&analysis)], &[]);
        refused(&o, &analysis, "owned by another user");
        let times = link(&victim, "times.csv");
        let o = sharemap(&["run", "--repeat", "2", "--csv", s(&times), "--", "/bin/true"], &[]);
        refused(&o, &times, "owned by another user");
        let matrix = link(&victim, "matrix.csv");
        let o = Command::new(&pairs).args(["4", "2000", "1"]).env("SHAREMAP_STMAP_MATRIX", &matrix).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("owned by another user") && err.contains(s(&matrix)), "the STM says so: {err}");
        // A chain: a link of root's own leading to one of the user's.
        let theirs = link(&victim, "theirs");
        let mine = shared.join("mine.trace");
        std::os::unix::fs::symlink(&theirs, &mine).unwrap();
        let o = sharemap(&["gen", "neighbor", "--accesses", "1k", "-o", s(&mine)], &[]);
        refused(&o, &theirs, "owned by another user");
        // A FIFO of theirs: root's output is not handed to them (nor does sharemap block).
        let fifo = shared.join("fifo.trace");
        as_user(user, "mkfifo", &[&fifo]);
        refused(&sharemap(&["gen", "neighbor", "--accesses", "1k", "-o", s(&fifo)], &[]), &fifo, "FIFO owned by");
        // The guest kernel's cache in a directory of theirs, or a link of theirs: refused
        // before anything is downloaded.
        let cache = shared.join("cache");
        as_user(user, "mkdir", &[&cache]);
        let o = sharemap(&["vm", "--fetch-kernel"], &[("XDG_CACHE_HOME", s(&cache))]);
        refused(&o, &cache, "refusing to keep a kernel there");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("fetching"), "nothing said of fetching");
        // Nor does a dry run advise fetching into it.
        let o = sharemap(&["vm", "--dry-run", "--", "/bin/true"], &[("XDG_CACHE_HOME", s(&cache))]);
        let plan = String::from_utf8_lossy(&o.stdout);
        assert!(plan.contains("none can be fetched into the cache") && !plan.contains("--fetch-kernel"), "{plan}");
        let cache_link = link(&victim_dir, "cache-link");
        let o = sharemap(&["vm", "--fetch-kernel"], &[("XDG_CACHE_HOME", s(&cache_link))]);
        refused(&o, &cache_link, "refusing to keep a kernel there");
    }
    // A link of theirs on the *parent* path, to root's own directory: every output under it
    // is refused, naming the link (in a sticky directory; in an open one the directory
    // itself is refused first).
    for (name, mode, why) in
        [("sticky-parent", 0o1777, "owned by another user"), ("open-parent", 0o777, "owned by another user")]
    {
        let shared = p(&d, name);
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
        let evil = shared.join("evil");
        as_user(user, "ln", &[Path::new("-s"), &root_only, &evil]);
        let under = |n: &str| evil.join(n);
        let (t, a, h, c, part, plan, csv, sw, m, demo) = (
            under("out.trace"),
            under("analysis"),
            under("report.html"),
            under("converted.csv"),
            under("parts"),
            under("plan.csv"),
            under("times.csv"),
            under("sweep.csv"),
            under("matrix.csv"),
            under("demo"),
        );
        let cases: Vec<(Vec<&str>, &Path)> = vec![
            (vec!["gen", "sor", "--threads", "2", "--accesses", "2k", "-o", s(&t)], &t),
            (vec!["analyze", s(&trace), "--machine", "numa:2 pu:4", "-o", s(&a)], &a),
            (vec!["report", s(&trace), "--machine", "numa:2 pu:4", "-o", s(&h)], &h),
            (vec!["convert", s(&trace), s(&c)], &c),
            (vec!["convert", s(&trace), s(&part), "--partition-pages", "4"], &part),
            (vec!["place", s(&trace), "--policy", "first-touch", "--placement", s(&plan)], &plan),
            (vec!["run", "--repeat", "2", "--csv", s(&csv), "--", "/bin/true"], &csv),
            (vec!["sweep", s(&trace), "--vary", "G", "--values", "500,1000", "-o", s(&sw)], &sw),
            (vec!["demo", "--accesses", "2k", "--dir", s(&demo)], &demo),
        ];
        for (args, out) in cases {
            let o = sharemap(&args, &[]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{args:?} wrote under {}: {err}", evil.display());
            assert!(
                err.lines().any(|l| l.contains(why) && l.contains(s(&evil))),
                "{args:?}: one line naming {} ({}): {err}",
                evil.display(),
                out.display()
            );
        }
        let o = Command::new(&pairs).args(["4", "2000", "1"]).env("SHAREMAP_STMAP_MATRIX", &m).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why) && err.contains(s(&evil)), "the STM says so: {err}");
    }
    // A directory every user may write and that is not sticky: another user could swap
    // what is written there, so nothing is.
    let open = p(&d, "shared");
    let o = sharemap(&["gen", "sor", "--threads", "2", "--accesses", "2k", "-o", s(&open.join("plain.trace"))], &[]);
    refused(&o, &open, "writable by every user and not sticky");
    // Root's own links are still followed, so an output can be a link the user made.
    let own = p(&d, "own.trace");
    let target = p(&d, "target.trace");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &own).unwrap();
    common::ok(&["gen", "neighbor", "--accesses", "1k", "-o", s(&own)]);
    assert!(std::fs::symlink_metadata(&own).unwrap().file_type().is_symlink());
    assert!(std::fs::read(&target).unwrap().starts_with(b"SHAR"), "written through root's own link");
    assert_eq!(snapshot(&root_only), before, "root's files changed");
}

/// Runs `sharemap args` while the second user, in a directory of theirs, waits for the
/// temporary `.NAME.*.partial` to appear and swaps it for a link to `to`. Tries up to
/// three times for the swap to land while sharemap runs; returns sharemap's output, or
/// None when the swap never came in time (sharemap was too quick).
fn raced(user: (u32, u32), theirs: &Path, name: &str, to: &Path, args: &[&str]) -> Option<Output> {
    for _ in 0..3 {
        let script = format!(
            "cd '{dir}' || exit 1; for i in $(seq 1 20000); do for f in .{name}.*.partial; do \
             if [ -e \"$f\" ]; then mv \"$f\" moved-$$ && ln -s '{to}' \"$f\" && exit 0; fi; done; done; exit 1",
            dir = theirs.display(),
            to = to.display()
        );
        let mut swapper = Command::new("sh").args(["-c", &script]).uid(user.0).gid(user.1).spawn().unwrap();
        let out = sharemap(args, &[]);
        let _ = swapper.kill();
        let swapped = swapper.wait().unwrap().success();
        if swapped {
            return Some(out);
        }
        for e in std::fs::read_dir(theirs).unwrap() {
            let _ = std::fs::remove_file(e.unwrap().path());
        }
    }
    None
}

/// The second user swaps root's temporaries, in a directory of theirs, while root writes:
/// root writes nothing of theirs choosing, and never reports success for an output it did
/// not write (the data is kept under a new name where it can be).
#[test]
fn another_user_cannot_swap_what_root_writes() {
    let Some((_held, (uid, gid))) = hostile() else { return };
    let user = (uid, gid);
    let d = tempfile::tempdir().unwrap();
    let (root_only, victim) = root_files(&d);
    let before = snapshot(&root_only);
    let theirs = p(&d, "theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(uid), Some(gid)).unwrap();
    let trace = p(&d, "big.trace");
    common::ok(&["gen", "neighbor", "--threads", "8", "--accesses", "4M", "-o", s(&trace)]);

    // An analysis directory: the staging directory swapped for a link to root's directory.
    let dest = theirs.join("analysis");
    let args = ["analyze", s(&trace), "--machine", "numa:2 pu:8", "-o", s(&dest)];
    match raced(user, &theirs, "analysis", &root_only, &args) {
        Some(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success() && err.contains("not written"), "analyze reported success: {err}");
            assert!(!dest.join("comm.csv").exists());
        }
        None => eprintln!("skipped the analysis race: the swap never came while analyze ran"),
    }
    assert_eq!(snapshot(&root_only), before, "root wrote into its own directory through their swap");

    // A trace: the temporary file swapped for a link to root's file.
    let dest = theirs.join("out.trace");
    let args = ["gen", "neighbor", "--threads", "8", "--accesses", "20M", "-o", s(&dest)];
    match raced(user, &theirs, "out.trace", &victim, &args) {
        Some(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "gen reported success: {err}");
            assert!(err.contains("not written") && !err.contains("sharemap: wrote"), "{err}");
            assert!(std::fs::symlink_metadata(&dest).is_err(), "their link left at the name: {err}");
        }
        None => eprintln!("skipped the trace race: the swap never came while gen ran"),
    }
    assert_eq!(snapshot(&root_only), before, "root's file changed");
}
