//! What a simulation run is made of: the workload's size and mix, the device, and the
//! configurations the CI tests and long runs rotate through, by seed.

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub streams: u64,
    /// Calls in the workload (including syncs).
    pub calls: usize,
    pub device_blocks: u64,
    pub journal_blocks: u64,
    /// Crash images drawn at each crash point.
    pub images_per_point: u64,
    /// Only every n-th crash point (1: all of them).
    pub point_stride: usize,
    pub dirty_limit: u64,
    /// At a crash point that allows at most this many distinct images, check every one
    /// of them instead of sampling.
    pub exhaustive_up_to: usize,
    /// A stream whose fsync is an osync (`StreamFlags::fsync_as_osync`): ordered, not
    /// acknowledged durable. The last stream of several is always IGNORE_FSYNC.
    pub osync_stream: Option<u64>,
    /// Extra weight (against 115 for all other calls), half of it small overwrites in the
    /// first blocks of a file, half osyncs: with a small device, copy on write then cycles
    /// through the free space, so blocks freed by osync commits are reused within the
    /// workload, often before a flush made those commits durable.
    pub overwrite_share: u64,
    /// Weight (against the others) of atomic-region events: begin a region when none is
    /// open, else commit it (3 in 5) or abort it. While a region is open, half the calls
    /// are the region's. 0: no regions.
    pub region_share: u64,
    /// Run on the transactional-flash twin ([`TxSimDevice`]): durable commits are device
    /// transactions that rewrite a file's blocks in place; crash images also come from
    /// inside a device commit.
    pub txflash: bool,
    /// Deferred commit I/O (`Fs::set_deferred_io`), driven by the workload as the FUSE
    /// daemon's threads would: prepared commits wait in a pool and are written later, in
    /// any order (often the newest first); group flushes (`Fs::flush_written`) come at
    /// random moments, and a durability call is acknowledged only once a flush made the
    /// durable ticket reach the written ticket it returned with (see [`concurrent`]).
    pub concurrent: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            streams: 3,
            calls: 70,
            device_blocks: 384,
            journal_blocks: 24,
            images_per_point: 3,
            point_stride: 1,
            dirty_limit: 48 << 10,
            exhaustive_up_to: 0,
            osync_stream: None,
            overwrite_share: 0,
            region_share: 0,
            txflash: false,
            concurrent: false,
        }
    }
}

/// The configurations the CI test and the long run rotate through, by seed: journal of 24
/// blocks (frequent checkpoints) or 4 (transactions overflow it and commit by checkpoint;
/// small crash points checked exhaustively), 1, 3 or 5 streams; in the 3-stream/24-block and
/// 5-stream configurations one stream's fsync is an osync. The fifth is space pressure: a
/// 64-block device, 200 calls, most of them overwrites and osyncs, so the next-fit
/// allocator cycles through the free space and reuses freed blocks while osync'd commits
/// are not yet durable (the block-reuse rule of optimistic commit), and calls meet ENOSPC.
pub fn mixed(seed: u64) -> SimConfig {
    let base = match seed % 5 {
        0 => SimConfig {
            streams: 3,
            journal_blocks: 24,
            osync_stream: Some(1),
            ..Default::default()
        },
        1 => SimConfig {
            streams: 3,
            journal_blocks: 4,
            exhaustive_up_to: 256,
            ..Default::default()
        },
        2 => SimConfig {
            streams: 1,
            journal_blocks: 24,
            ..Default::default()
        },
        3 => SimConfig {
            streams: 5,
            journal_blocks: 12,
            calls: 104,
            osync_stream: Some(2),
            ..Default::default()
        },
        _ => SimConfig {
            streams: 3,
            device_blocks: 64,
            journal_blocks: 24,
            osync_stream: Some(1),
            overwrite_share: 300,
            calls: 200,
            ..Default::default()
        },
    };
    SimConfig { seed, ..base }
}

/// The configurations with atomic regions (CFS): [`mixed`]'s, with region events.
pub fn with_regions(seed: u64) -> SimConfig {
    SimConfig {
        region_share: 12,
        ..mixed(seed)
    }
}

/// The [`with_regions`] configurations on the transactional-flash device.
pub fn on_txflash(seed: u64) -> SimConfig {
    SimConfig {
        txflash: true,
        ..with_regions(seed)
    }
}

/// Concurrent commits: [`mixed`]'s configurations with deferred I/O, the workload writing
/// and flushing the prepared commits as the FUSE daemon's threads would; every other ten
/// seeds (seed / 5 odd) with atomic regions as in [`with_regions`].
pub fn concurrent(seed: u64) -> SimConfig {
    let base = if (seed / 5) % 2 == 1 {
        with_regions(seed)
    } else {
        mixed(seed)
    };
    SimConfig {
        concurrent: true,
        ..base
    }
}
