//! What a simulation run is made of: the workload's size, the device and log, and the
//! configurations the CI test and long runs rotate through, by seed.

use crate::Tunables;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// Calls in the workload.
    pub calls: usize,
    pub device_len: u64,
    pub inodes: u64,
    pub log_entries: u64,
    pub images_per_point: u64,
    pub exhaustive_up_to: usize,
    /// Transactions open at once, at most.
    pub max_open: usize,
    /// Crash the recovery of every n-th distinct image at each of its fences (0: never).
    pub recovery_crash_every: u64,
    /// Checkpoint after recovering every n-th distinct image (0: never).
    pub checkpoint_after_every: u64,
    pub tunables: Tunables,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            calls: 60,
            device_len: 768 << 10,
            inodes: 48,
            log_entries: 192,
            images_per_point: 3,
            exhaustive_up_to: 32,
            max_open: 3,
            recovery_crash_every: 8,
            checkpoint_after_every: 4,
            tunables: Tunables {
                log_fill_pct: 50,
                free_blocks_pct: 10,
                max_pending: 3,
                ..Tunables::default()
            },
        }
    }
}

/// The configurations the CI test and long runs rotate through, by seed: the default; a
/// small log (64 entries: checkpoints in nearly every commit, transactions that run out of
/// log) with more exhaustive points; four transactions open at once and longer workloads.
/// Half the triples of seeds (`seed / 3 % 4` is 2 or 3) run with background checkpoints
/// ([`with_background`]); the others checkpoint inline, as every seed did before (a
/// background seed's workload calls are the same, with units between them).
pub fn mixed(seed: u64) -> SimConfig {
    let cfg = mixed_inline(seed);
    if (seed / 3) % 4 >= 2 {
        with_background(cfg)
    } else {
        cfg
    }
}

/// `cfg` with background checkpoints: commits leave checkpoints to units the workload runs
/// as calls of their own between other calls (transactions open across them), two blocks a
/// unit so that a unit's fences fall between more calls. Every committed block is due
/// (`max_pending` 0) and a quarter of the log counts as low, so that a 60-call workload has
/// many units to run.
pub fn with_background(cfg: SimConfig) -> SimConfig {
    SimConfig {
        tunables: Tunables {
            background_checkpoints: true,
            checkpoint_unit: 2,
            max_pending: 0,
            log_fill_pct: 25,
            ..cfg.tunables
        },
        ..cfg
    }
}

fn mixed_inline(seed: u64) -> SimConfig {
    let base = match seed % 3 {
        0 => SimConfig::default(),
        1 => SimConfig {
            log_entries: 64,
            exhaustive_up_to: 128,
            ..Default::default()
        },
        _ => SimConfig {
            max_open: 4,
            calls: 90,
            tunables: Tunables {
                log_fill_pct: 70,
                free_blocks_pct: 10,
                max_pending: 5,
                ..Tunables::default()
            },
            ..Default::default()
        },
    };
    SimConfig { seed, ..base }
}
