//! `sharemap report` in a real browser: headless Chromium loads the page from disk with the
//! network cut off, and the test checks its DOM (every section, every image decoded, no
//! error) and that its screenshot is not blank.

mod common;
use common::{ok, p, s, sharemap};
use std::path::Path;
use std::process::Command;

const SECTIONS: [&str; 10] =
    ["advice", "machine", "trace", "sharing", "shared", "pages", "mapping", "placement", "simulation", "runs"];

/// Chromium, or None (the test then says why it skipped, unless scripts/test requires it).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    if found.is_none() {
        common::skip(common::Need::Browser, "chromium is not installed (scripts/setup installs it)");
    }
    found
}

/// Headless Chromium on a local file with every network request failing.
fn browse(chromium: &str, file: &Path, args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"])
        .args(["--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"])
        .args(args)
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap()
}

/// A report of a generated trace with measured runs, checked in the browser.
#[test]
fn the_report_loads_in_a_browser_with_every_section_and_image() {
    let dir = tempfile::tempdir().unwrap();
    let trace = p(&dir, "pc.trace");
    ok(&["gen", "phase-change", "--threads", "8", "--accesses", "200k", "-o", s(&trace)]);
    let runs = p(&dir, "runs.csv");
    std::fs::write(&runs, "configuration,run,seconds\nos,1,1.00\nos,2,1.04\nos,3,1.02\nsharemap,1,0.80\nsharemap,2,0.83\nsharemap,3,0.81\n")
        .unwrap();
    let html = p(&dir, "report.html");
    let out = ok(&["report", s(&trace), "-m", "sammu-x7550", "--runs", s(&runs), "-o", s(&html)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("10 sections: advice, machine"));
    let text = std::fs::read_to_string(&html).unwrap();
    // Self-contained: nothing fetched from elsewhere, no script at all.
    for outside in ["src=\"http", "href=\"http", "<link", "<script", "url("] {
        assert!(!text.contains(outside), "the report refers outside itself: {outside}");
    }
    for id in SECTIONS {
        assert!(text.contains(&format!("<section id=\"{id}\">")), "section {id} missing");
    }
    // The answer first: advise's verdict, the candidates and the command that checks them.
    let advice = text.split("<section id=\"machine\">").next().unwrap();
    assert!(advice.contains("What to use") && advice.contains("Check it: sharemap simulate"), "advice section");
    assert!(advice.contains("spread+interleave"), "every candidate in the advice table");
    // The measured runs' verdict is the one their intervals give.
    assert!(text.contains("sharemap 20.3% faster (intervals apart)"), "runs' reading");

    let Some(chromium) = chromium() else { return };
    // The page itself: loads with no console error, and its screenshot is not blank.
    let shot = p(&dir, "report.png");
    let out = browse(chromium, &html, &["--window-size=1100,3000", &format!("--screenshot={}", shot.display())]);
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let (pixels, width) = decode_png(&shot);
    let non_white = pixels.iter().filter(|p| p[..3] != [255, 255, 255]).count();
    let colours: std::collections::HashSet<[u8; 3]> = pixels.iter().map(|p| [p[0], p[1], p[2]]).collect();
    assert!(width >= 1000, "screenshot {width} pixels wide");
    assert!(non_white * 20 > pixels.len(), "screenshot mostly blank: {non_white} of {} pixels", pixels.len());
    assert!(colours.len() > 200, "screenshot has {} colours: not the plots", colours.len());

    // The DOM: a probe added to a copy of the page reports what the browser made of it.
    let probe = p(&dir, "probe.html");
    let catch = "<script>window.__errors=[];addEventListener('error',e=>__errors.push(String(e.message||(e.target&&e.target.src))),true);</script>";
    let report = "<script>addEventListener('load',async()=>{const imgs=[...document.images];let ok=0;\
                  for(const i of imgs){try{await i.decode();if(i.naturalWidth>0)ok++}catch(e){}}\
                  const r=document.createElement('pre');r.id='probe';\
                  r.textContent=JSON.stringify({images:imgs.length,decoded:ok,errors:__errors,\
                  sections:[...document.querySelectorAll('section')].map(s=>s.id),\
                  readings:[...document.querySelectorAll('section .reading')].filter(p=>p.textContent.trim().length>20).length});\
                  document.body.appendChild(r)});</script>";
    std::fs::write(
        &probe,
        text.replacen("<head>", &format!("<head>{catch}"), 1).replacen("</body>", &format!("{report}</body>"), 1),
    )
    .unwrap();
    let out = browse(chromium, &probe, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let found = dom
        .split("<pre id=\"probe\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| panic!("the probe did not run: {}", String::from_utf8_lossy(&out.stderr)));
    let found: serde_json::Value = serde_json::from_str(&found.replace("&quot;", "\"")).unwrap();
    let ids: Vec<&str> = found["sections"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(ids, SECTIONS);
    assert_eq!(found["readings"], SECTIONS.len(), "every section has a reading");
    assert_eq!(found["images"], 4, "sharing, pages, simulation, runs: {found}");
    assert_eq!(found["decoded"], found["images"], "every image decoded: {found}");
    assert_eq!(found["errors"].as_array().unwrap().len(), 0, "{found}");
}

/// RGBA pixels of a PNG and its width.
fn decode_png(path: &Path) -> (Vec<[u8; 4]>, u32) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| match channels {
            4 => [c[0], c[1], c[2], c[3]],
            3 => [c[0], c[1], c[2], 255],
            _ => [c[0], c[0], c[0], 255],
        })
        .collect();
    (pixels, info.width)
}

/// A runs file that is not what `run --csv` writes is refused with its line, before the trace is read.
#[test]
fn a_bad_runs_file_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let runs = p(&dir, "runs.csv");
    let html = p(&dir, "report.html");
    for (text, says) in [
        ("configuration,seconds\n", "line 1: expected the header configuration,run,seconds"),
        ("configuration,run,seconds\nos,1,1.0\nos,2,fast\n", "line 3: 'fast' is not a time"),
        ("configuration,run,seconds\nos,1,-1\n", "line 2: '-1' is not a time in seconds"),
        ("configuration,run,seconds\n", "no runs"),
    ] {
        std::fs::write(&runs, text).unwrap();
        let out = sharemap(&["report", "no-such.trace", "--runs", s(&runs), "-o", s(&html)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{text:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!html.exists());
    }
}
