//! Report outputs besides text and JSON (`--html`, `--sarif`, `--junit` of `intact check`),
//! and `intact report` to render a saved JSON report.

use crate::Failure;
use intact_report::Context;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Clone, Default)]
pub struct Outputs {
    /// Write the report as one self-contained HTML file (summary per APM, each
    /// vulnerability with its source lines, example state, checker message and a protocol
    /// diagram).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the report as SARIF 2.1.0 (GitHub code scanning, editors).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Write the report as JUnit XML (one test case per APM and static vulnerability).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The source tree's root: SARIF names files under it relative to %SRCROOT% (for
    /// GitHub code scanning). Default: the git work tree of the first source file named.
    #[arg(long, value_name = "DIR")]
    pub source_root: Option<PathBuf>,
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 written; 2 the report or an output path is unusable; 3 internal error."
)]
pub struct ReportArgs {
    /// A JSON report written by `intact check --json`.
    pub report: PathBuf,
    /// The bundle the report was made from (for protocol diagrams and source lines).
    /// Default: the path in the report, as written or relative to the report's directory.
    #[arg(long, value_name = "DIR")]
    pub bundle: Option<PathBuf>,
    #[command(flatten)]
    pub outputs: Outputs,
}

impl Outputs {
    fn each(&self) -> Vec<(&'static str, &Path)> {
        let mut v = Vec::new();
        for (flag, p) in [
            ("--html", &self.html),
            ("--sarif", &self.sarif),
            ("--junit", &self.junit),
        ] {
            if let Some(p) = p {
                v.push((flag, p.as_path()));
            }
        }
        v
    }

    pub fn is_empty(&self) -> bool {
        self.each().is_empty()
    }

    /// Refuses paths that cannot be written before any work is done (nothing is created).
    pub fn check_writable(&self) -> Result<(), Failure> {
        for (flag, p) in self.each() {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !dir.is_dir() {
                return Err(Failure::input(format!(
                    "{flag} {}: the directory {} does not exist",
                    p.display(),
                    dir.display()
                )));
            }
            if p.is_dir() {
                return Err(Failure::input(format!(
                    "{flag} {}: is a directory",
                    p.display()
                )));
            }
            let probe = tempfile::Builder::new()
                .prefix(".intact-probe")
                .tempfile_in(&dir);
            if let Err(e) = probe {
                return Err(Failure::input(format!(
                    "{flag} {}: cannot write in {}: {e}",
                    p.display(),
                    dir.display()
                )));
            }
        }
        Ok(())
    }

    /// Renders and writes every requested output (each written to a temporary name, then
    /// renamed: a failure leaves no partial file).
    pub fn write(&self, report: &serde_json::Value) -> Result<(), Failure> {
        let bundle = report["bundle"].as_str().map(PathBuf::from);
        self.write_from(report, bundle)
    }

    /// As `write`, with the bundle found by the caller.
    pub fn write_from(
        &self,
        report: &serde_json::Value,
        bundle: Option<PathBuf>,
    ) -> Result<(), Failure> {
        if self.is_empty() {
            return Ok(());
        }
        let ops = bundle
            .as_ref()
            .and_then(|b| intact_bundle::Bundle::open(b).ok())
            .and_then(|b| b.ops().ok());
        let source = |loc: &str| read_source(loc, bundle.as_deref());
        let root = self.source_root(report)?;
        let ctx = Context {
            report,
            ops: ops.as_deref(),
            source: &source,
            source_root: root.as_deref(),
        };
        for (flag, p) in self.each() {
            let text = match flag {
                "--html" => intact_report::html::render(&ctx),
                "--sarif" => intact_report::sarif::render(&ctx),
                _ => intact_report::junit::render(&ctx),
            }
            .map_err(|e| Failure::internal(format!("{flag}: {e}")))?;
            let tmp = p.with_extension("partial");
            std::fs::write(&tmp, text)
                .and_then(|_| std::fs::rename(&tmp, p))
                .map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    Failure::input(format!("{flag} {}: {e}", p.display()))
                })?;
        }
        Ok(())
    }
}

impl Outputs {
    /// `--source-root` made absolute, or the default: the git work tree holding the first
    /// absolute source path of the report (none when git or the tree is absent).
    fn source_root(&self, report: &serde_json::Value) -> Result<Option<String>, Failure> {
        if let Some(r) = &self.source_root {
            let abs = std::fs::canonicalize(r)
                .map_err(|e| Failure::input(format!("--source-root {}: {e}", r.display())))?;
            return Ok(Some(
                abs.to_string_lossy().trim_end_matches('/').to_string(),
            ));
        }
        let first = report["static"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|st| st["locations"].as_array().into_iter().flatten())
            .filter_map(|l| l.as_str()?.split(':').next())
            .find(|p| p.starts_with('/'));
        Ok(first.and_then(|p| git_toplevel(Path::new(p).parent()?)))
    }
}

fn git_toplevel(dir: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let top = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !top.trim().is_empty()).then(|| top.trim().to_string())
}

/// The source file a location names (`path:line:function`): as given (relative to the
/// working directory), or relative to the bundle's parent directory.
fn read_source(loc: &str, bundle: Option<&Path>) -> Option<String> {
    let path = loc.split(':').next()?;
    if path.is_empty() {
        return None;
    }
    let mut candidates = vec![PathBuf::from(path)];
    if let Some(parent) = bundle.and_then(|b| b.parent()) {
        candidates.push(parent.join(path));
    }
    candidates
        .into_iter()
        .find_map(|c| std::fs::read_to_string(c).ok())
}

pub fn report(a: ReportArgs) -> Result<u8, Failure> {
    if a.outputs.is_empty() {
        return Err(Failure::input(
            "name at least one output: --html FILE, --sarif FILE or --junit FILE",
        ));
    }
    if a.report.is_dir() {
        let what = if a.report.join("bundle.json").exists() {
            "a bundle directory"
        } else {
            "a directory"
        };
        return Err(Failure::input(format!(
            "{}: {what}; `intact report` renders the JSON report of a check: write one with `intact check BUNDLE --json r.json`, then `intact report r.json --html r.html`",
            a.report.display()
        )));
    }
    let text = std::fs::read_to_string(&a.report)
        .map_err(|e| Failure::input(format!("{}: {e}", a.report.display())))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Failure::input(format!(
            "{}: not a JSON report: {e} (write one with `intact check --json FILE`)",
            a.report.display()
        ))
    })?;
    if v["schema"] != intact_report::SCHEMA {
        return Err(Failure::input(format!(
            "{}: schema {}, expected {:?} (write one with `intact check --json FILE`)",
            a.report.display(),
            v["schema"],
            intact_report::SCHEMA
        )));
    }
    a.outputs.check_writable()?;
    let bundle = find_bundle(&a, &v);
    a.outputs.write_from(&v, bundle)?;
    Ok(0)
}

/// The bundle for a saved report: `--bundle`, else the report's path as written (relative
/// to the working directory of `intact check`) or relative to the report's own directory.
/// Without it the outputs lose their diagrams, so say so rather than shrink them silently.
fn find_bundle(a: &ReportArgs, v: &serde_json::Value) -> Option<PathBuf> {
    let named = a
        .bundle
        .clone()
        .or_else(|| v["bundle"].as_str().map(PathBuf::from))?;
    let beside = a.report.parent().map(|d| d.join(&named));
    let found = std::iter::once(named.clone())
        .chain(beside.filter(|_| named.is_relative()))
        .find(|c| intact_bundle::Bundle::open(c).is_ok());
    if found.is_none() {
        eprintln!(
            "intact: warning: the bundle {} cannot be opened: the outputs have no protocol diagrams; name it with --bundle DIR",
            named.display()
        );
    }
    found
}
