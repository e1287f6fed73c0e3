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
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 written; 2 the report or an output path is unusable; 3 internal error."
)]
pub struct ReportArgs {
    /// A JSON report written by `intact check --json`.
    pub report: PathBuf,
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
        if self.is_empty() {
            return Ok(());
        }
        let bundle = report["bundle"].as_str().map(PathBuf::from);
        let ops = bundle
            .as_ref()
            .and_then(|b| intact_bundle::Bundle::open(b).ok())
            .and_then(|b| b.ops().ok());
        let source = |loc: &str| read_source(loc, bundle.as_deref());
        let ctx = Context {
            report,
            ops: ops.as_deref(),
            source: &source,
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
    a.outputs.write(&v)?;
    Ok(0)
}
