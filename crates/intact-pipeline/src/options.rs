//! What a check is asked to do, shared by the local run ([`crate::check`]) and the work
//! units ([`crate::units`]), which must agree on it.

use std::path::PathBuf;

/// The exploration strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Explore {
    /// ALICE's strategy (thesis §3.3): prefixes, per-call atomicity, pairwise reordering.
    Alice,
    /// Every set of micro-operations the APM allows, up to `max_states` distinct states.
    Exhaustive,
    /// `samples` random allowed sets, reproducible with `seed`.
    Random,
}

impl Explore {
    /// The name the report and work units carry (as `--explore` spells it).
    pub fn name(&self) -> &'static str {
        match self {
            Explore::Alice => "alice",
            Explore::Exhaustive => "exhaustive",
            Explore::Random => "random",
        }
    }
}

/// How to explore and check a bundle (the `intact check` flags of the same names).
#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub explore: Explore,
    /// Bound on distinct states per APM for [`Explore::Exhaustive`], and on alice's
    /// micro-operation reordering states.
    pub max_states: usize,
    /// Durability vulnerabilities: one per missing sync, or one per call site.
    pub group: intact_report::Grouping,
    /// Sampled states per APM for [`Explore::Random`].
    pub samples: u64,
    pub seed: u64,
    /// Checkers run in parallel (`None`: all cores).
    pub jobs: Option<usize>,
    /// One checker process per state, or one warm checker server per worker.
    pub protocol: intact_runner::Protocol,
    /// Per-run time limit of the checker.
    pub timeout_secs: f64,
    /// Save every failing state under this directory.
    pub keep_failing: Option<PathBuf>,
    /// Save each static vulnerability's example state under this directory.
    pub keep_examples: Option<PathBuf>,
    /// Frame patterns added to the bundle's when choosing source lines.
    pub frame_skip: Vec<String>,
    pub frame_keep: Vec<String>,
    /// Where crash states are built (`None`: /dev/shm when writable, else the temp dir).
    pub scratch: Option<PathBuf>,
    /// Write work units instead of running the checker (docs/distributed.md).
    pub emit_states: Option<PathBuf>,
    /// Take every verdict from this directory instead of running the checker.
    pub from_verdicts: Option<PathBuf>,
}

impl CheckOptions {
    /// With `emit_states`: the options without the outputs, which only the report step
    /// writes (`keep_failing`, `keep_examples`).
    pub fn emit_view(&self) -> Option<CheckOptions> {
        self.emit_states.as_ref()?;
        let mut v = self.clone();
        v.keep_failing = None;
        v.keep_examples = None;
        Some(v)
    }
}

/// The flag that names the checker in messages (here, below both `check` and `units`,
/// which name it).
pub fn checker_flag(protocol: intact_runner::Protocol) -> &'static str {
    match protocol {
        intact_runner::Protocol::PerProcess => "--checker",
        intact_runner::Protocol::Server => "--checker-server",
    }
}
