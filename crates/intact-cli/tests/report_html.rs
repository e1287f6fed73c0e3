//! The HTML report (`intact check --html`, `intact report --html`) of the bundled key-value
//! store example (examples/kvstore): what the files hold, and how a real browser (headless
//! Chromium) renders them.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The example recorded and checked under default and ext4-o, with a checker that wraps
/// examples/kvstore/check.py and puts markup around its message (`<b>&"…"</b>`), so that
/// escaping is tested on real output.
struct Kv {
    tmp: tempfile::TempDir,
    bundle: PathBuf,
    json: PathBuf,
    html: PathBuf,
    report: serde_json::Value,
}

impl Kv {
    fn new() -> Kv {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = common::record_kv(tmp.path());
        let checker = tmp.path().join("check.sh");
        std::fs::write(
            &checker,
            format!(
                "#!/bin/bash\nerr=$(python3 {} \"$1\" \"$2\" 2>&1 >/dev/null); st=$?\n[ $st -ne 0 ] && printf '<b>&\"%s\"</b>\\n' \"$err\" >&2\nexit $st\n",
                repo().join("examples/kvstore/check.py").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &checker,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let json = tmp.path().join("r.json");
        let html = tmp.path().join("r.html");
        let out = intact()
            .arg("check")
            .arg(&bundle)
            .arg("--checker")
            .arg(&checker)
            .args(["--apm", "default,ext4-o", "-q", "--json"])
            .arg(&json)
            .arg("--html")
            .arg(&html)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        Kv {
            tmp,
            bundle,
            json,
            html,
            report,
        }
    }

    fn statics(&self) -> &Vec<serde_json::Value> {
        self.report["static"].as_array().unwrap()
    }

    /// `intact report JSON --html OUT`.
    fn report_html(&self, out: &Path) -> String {
        let o = intact()
            .arg("report")
            .arg(&self.json)
            .arg("--html")
            .arg(out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::read_to_string(out).unwrap()
    }
}

/// Nothing in the page is fetched from elsewhere: no URL, no `src=`, no stylesheet link,
/// no CSS `url()` other than the SVG's own markers (`url(#…)`).
fn assert_self_contained(h: &str, what: &str) {
    assert!(h.starts_with("<!DOCTYPE html>"), "{what}");
    for needle in [
        "http://", "https://", "src=", "<link", "@import", "<iframe", "<object", "<embed",
    ] {
        assert!(!h.contains(needle), "{what} contains {needle:?}");
    }
    assert_eq!(
        h.matches("url(").count(),
        h.matches("url(#").count(),
        "{what}: url() other than SVG markers"
    );
}

/// What every rendering must show, whatever wrote it.
fn assert_shows(kv: &Kv, h: &str, what: &str) {
    let statics = kv.statics();
    assert_eq!(
        statics.len(),
        3,
        "the example has three static vulnerabilities: {:#}",
        kv.report
    );
    assert_eq!(
        h.matches("<svg").count(),
        statics.len(),
        "{what}: one diagram per static vulnerability"
    );
    assert_eq!(
        h.matches("<section class=\"vuln\"").count(),
        statics.len(),
        "{what}"
    );
    for s in statics {
        let msg = s["example"]["checker_message"].as_str().unwrap();
        assert!(msg.starts_with("<b>&\""), "the wrapper's markup: {msg}");
        assert!(
            h.contains(&html_escape(msg)),
            "{what}: the escaped checker message {msg:?}"
        );
        assert!(
            h.contains(&html_escape(s["example"]["description"].as_str().unwrap())),
            "{what}"
        );
        for l in s["locations"].as_array().unwrap() {
            assert!(
                h.contains(&html_escape(l.as_str().unwrap())),
                "{what}: location {l}"
            );
        }
    }
    assert!(
        !h.contains("<b>&\""),
        "{what}: the checker's markup reached the page unescaped"
    );
    // The highlighted operations' labels: the torn append (#1), the safe rename (#3: the
    // table.tmp append reordered behind the log's truncate).
    let safe = statics
        .iter()
        .find(|s| s["categories"] == serde_json::json!(["safe_rename"]))
        .expect("a safe rename");
    assert_eq!(safe["calls"][0]["op"], 5);
    for label in [">torn<", ">reordered<", ">persisted<"] {
        assert!(h.contains(label), "{what}: label {label}");
    }
    assert!(
        h.contains("ordering: safe rename") && h.contains("atomicity: appends and truncates"),
        "{what}"
    );
    // The source lines of the safe rename's data write (kv.c:49), highlighted.
    assert!(
        h.contains("<span class=\"line hit\"><span class=\"ln\">49</span>    write(tmp, buf, n);"),
        "{what}"
    );
    // The APM table: default exposes all three, ext4-o none.
    assert!(
        h.contains("<td><b>default</b><br><small>ALICE")
            && h.contains("<td><b>ext4-o</b><br><small>ext4, data=ordered"),
        "{what}"
    );
}

/// `intact check --html` and `intact report --html` write the same kind of page; without
/// the bundle the diagrams come from the report's calls and say so.
#[test]
fn html_from_check_and_from_a_saved_report() {
    let kv = Kv::new();
    let h1 = std::fs::read_to_string(&kv.html).unwrap();
    assert_self_contained(&h1, "check --html");
    assert_shows(&kv, &h1, "check --html");
    // With the bundle: the whole protocol, one lane per file, the renamed file's lane.
    assert!(
        h1.contains("table.tmp → table")
            && h1.contains("The whole update protocol (10 logical operations"),
        "{h1}"
    );
    assert!(!h1.contains("The bundle is not available"));

    let h2 = kv.report_html(&kv.tmp.path().join("again.html"));
    assert_self_contained(&h2, "report --html");
    assert_shows(&kv, &h2, "report --html");
    assert!(
        h2.contains("table.tmp → table"),
        "the bundle named in the report is still there"
    );

    std::fs::rename(&kv.bundle, kv.tmp.path().join("moved")).unwrap();
    let h3 = kv.report_html(&kv.tmp.path().join("gone.html"));
    assert_self_contained(&h3, "report --html, bundle gone");
    assert_shows(&kv, &h3, "report --html, bundle gone");
    assert!(h3.contains("The bundle is not available"), "{h3}");
    assert!(!h3.contains("The whole update protocol"));
}

/// Runs a command in its own process group; kills the group after `secs`.
fn run_with_timeout(cmd: &mut Command, secs: u64) -> Result<Output, String> {
    use std::os::unix::process::CommandExt;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    let watchdog = std::thread::spawn(move || {
        let start = Instant::now();
        while !d.load(std::sync::atomic::Ordering::SeqCst) {
            if start.elapsed() > Duration::from_secs(secs) {
                let _ = Command::new("kill")
                    .args(["-KILL", &format!("-{pid}")])
                    .status();
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    });
    let out = child.wait_with_output().map_err(|e| e.to_string());
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    if watchdog.join().unwrap_or(false) {
        return Err(format!("timed out after {secs} s"));
    }
    out
}

/// Chromium, installed with apt-get when missing (as root). Err: why not.
fn chromium() -> Result<PathBuf, String> {
    let find = || {
        ["chromium", "chromium-browser"].iter().find_map(|n| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(n))
                    .find(|c| c.is_file())
            })
        })
    };
    if find().is_none() {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if !root {
            return Err(
                "chromium is not installed and this is not root (apt-get install -y chromium)"
                    .into(),
            );
        }
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        eprintln!("installing chromium (apt-get install -y chromium) for the browser test");
        let installed = apt(&["install", "-y", "-qq", "chromium"])
            || (apt(&["update", "-qq"]) && apt(&["install", "-y", "-qq", "chromium"]));
        if !installed {
            return Err("apt-get install -y chromium failed".into());
        }
    }
    let bin = find().ok_or("chromium is not on PATH after installing it")?;
    let v = Command::new(&bin)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    if !v.status.success() {
        return Err(format!(
            "{} --version failed: {}",
            bin.display(),
            String::from_utf8_lossy(&v.stderr)
        ));
    }
    Ok(bin)
}

/// Headless Chromium renders the page: a screenshot is written and is a real picture (a
/// blank 1280x2000 page is about 10 KB, the report some 250 KB); the DOM the browser
/// built holds every diagram and vulnerability, so no unescaped text broke the markup
/// (an unclosed tag or a stray `<!--` from a checker would swallow what follows); and the
/// page logged nothing to the console (it has no script, so any console line, which
/// Chromium prints as `…:CONSOLE…` with --enable-logging=stderr, means a blocked
/// resource, a CSP or parse complaint). Skips, saying why, when Chromium cannot be
/// installed or started.
#[test]
fn html_in_a_real_browser() {
    let bin = match chromium() {
        Ok(b) => b,
        Err(why) => {
            common::cannot_run("html_in_a_real_browser", &why);
            return;
        }
    };
    let kv = Kv::new();
    let home = kv.tmp.path().join("browser");
    std::fs::create_dir(&home).unwrap();
    let url = format!("file://{}", kv.html.display());
    // Chromium's profile, caches and temporary files all go into the test's directory.
    let browser = |args: &[String]| {
        let mut c = Command::new(&bin);
        c.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("TMPDIR", &home);
        c.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ]);
        c.arg(format!(
            "--user-data-dir={}",
            home.join("profile").display()
        ));
        // Anything fetched over the network would fail (and show in the console).
        c.arg("--host-resolver-rules=MAP * ~NOTFOUND");
        c.args(args);
        run_with_timeout(&mut c, 120)
    };
    let start = Instant::now();

    let png = kv.tmp.path().join("shot.png");
    let out = match browser(&[
        format!("--screenshot={}", png.display()),
        "--window-size=1280,2000".into(),
        url.clone(),
    ]) {
        Ok(o) => o,
        Err(e) => {
            common::cannot_run(
                "html_in_a_real_browser",
                &format!("chromium could not run: {e}"),
            );
            return;
        }
    };
    if !png.exists() && !out.status.success() {
        common::cannot_run(
            "html_in_a_real_browser",
            &format!(
                "chromium could not run: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        );
        return;
    }
    let bytes = std::fs::read(&png).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), (1280, 2000));
    assert!(
        bytes.len() > 50_000,
        "the screenshot is nearly empty ({} bytes)",
        bytes.len()
    );

    let out = browser(&[
        "--enable-logging=stderr".into(),
        "--v=0".into(),
        "--dump-dom".into(),
        url,
    ])
    .expect("chromium ran once already");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let n = kv.statics().len();
    assert_eq!(
        dom.matches("<svg").count(),
        n,
        "every diagram is in the DOM"
    );
    assert_eq!(dom.matches("<section class=\"vuln\"").count(), n);
    assert_eq!(
        dom.matches("class=\"role\"").count(),
        std::fs::read_to_string(&kv.html)
            .unwrap()
            .matches("class=\"role\"")
            .count()
    );
    assert!(
        dom.contains(">reordered<") && dom.contains("&lt;b&gt;&amp;\""),
        "labels and the escaped message are text in the DOM"
    );
    assert!(dom.contains("<footer>"), "the page was parsed to its end");
    let err = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    eprintln!("browser checks took {:.1} s", start.elapsed().as_secs_f64());
}
