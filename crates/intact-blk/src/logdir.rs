//! The directory `intact blk record` writes: `meta.json`, `blocks.log`, `initial.img`
//! (the image right after mkfs, sparse), `stdout` (what the workload printed, for the
//! checker contract).

use crate::fskind::FsKind;
use crate::log::{BlockLog, Counts};
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "intact-blk-log/1";

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Workload {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub ok: bool,
    pub seconds: f64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    pub schema: String,
    pub fs: FsKind,
    pub size: u64,
    /// The mkfs command line (the image path in it is the recorder's scratch file).
    pub mkfs: Vec<String>,
    pub mount_options: String,
    pub command: Vec<String>,
    pub workload: Workload,
    pub counts: Counts,
    pub epochs: usize,
    /// blake3 of the device when recording ended: the "final" crash image must equal it.
    pub final_hash: String,
    pub intact_version: String,
    pub kernel: String,
    pub created_unix: u64,
}

pub struct LogDir {
    pub dir: PathBuf,
    pub meta: Meta,
    pub log: std::sync::Arc<BlockLog>,
    pub stdout: Vec<u8>,
}

pub fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

impl LogDir {
    pub fn initial(&self) -> PathBuf {
        self.dir.join("initial.img")
    }

    pub fn open(dir: &Path) -> Result<LogDir, String> {
        let hint = "(a block log is the directory `intact blk record --out DIR` writes)";
        if !dir.is_dir() {
            return Err(format!("{}: not a directory {hint}", dir.display()));
        }
        let mp = dir.join("meta.json");
        if !mp.exists() && dir.join("bundle.json").exists() {
            return Err(format!(
                "{}: an explorer bundle (written by `intact record`), not a block log; check it with `intact check {}`, or record a block log with `intact blk record`",
                dir.display(),
                dir.display()
            ));
        }
        let text =
            std::fs::read_to_string(&mp).map_err(|e| format!("{}: {e} {hint}", mp.display()))?;
        let meta: Meta = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not valid block-log metadata: {e} {hint}", mp.display()))?;
        if meta.schema != SCHEMA {
            return Err(format!(
                "{}: schema {:?}, this intact reads {SCHEMA:?}; record it again",
                mp.display(),
                meta.schema
            ));
        }
        let log = std::sync::Arc::new(
            BlockLog::open(&dir.join("blocks.log")).map_err(|e| e.to_string())?,
        );
        let initial = dir.join("initial.img");
        let len = std::fs::metadata(&initial)
            .map_err(|e| format!("{}: {e} {hint}", initial.display()))?
            .len();
        if len != log.device_size || meta.size != len {
            return Err(format!("{}: {len} bytes, but the log is of a {}-byte device and the metadata says {}; the log directory is damaged", initial.display(), log.device_size, meta.size));
        }
        if hex(&log.final_hash) != meta.final_hash || log.counts() != meta.counts {
            return Err(format!("{}: metadata and blocks.log disagree (final hash or counts); the log directory is damaged", dir.display()));
        }
        let sp = dir.join("stdout");
        let stdout = std::fs::read(&sp).map_err(|e| format!("{}: {e} {hint}", sp.display()))?;
        Ok(LogDir {
            dir: dir.to_path_buf(),
            meta,
            log,
            stdout,
        })
    }
}
