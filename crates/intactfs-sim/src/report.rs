//! What a simulation run reports, summed over runs.

intactfs_device::counters! {
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct SimReport {
        pub calls: usize,
        pub device_ops: usize,
        pub crash_points: usize,
        pub images: u64,
        pub commits: usize,
        pub checkpoints: u64,
        /// Checkpoints written as a delta of the changed inodes (the rest: a new base).
        pub delta_checkpoints: u64,
        pub merges: u64,
        /// Images that recovered to the newest commit allowed, and to an older one.
        pub newest: u64,
        pub older: u64,
        /// Crash points where every allowed image was checked.
        pub exhaustive_points: usize,
        /// osync calls (and fsyncs of a FSYNC_AS_OSYNC stream), dsync calls, `Fs::flush` calls.
        pub osyncs: u64,
        pub dsyncs: u64,
        pub flushes: u64,
        /// Commits the engine wrote without a flush (`Stats::optimistic_commits`).
        pub optimistic_commits: u64,
        /// Images that recovered to a commit below the newest osync'd one (an osync that
        /// returned before the crash point): optimistic commits a crash lost.
        pub lost_osync: u64,
        /// Device writes to a data-area block the workload had written before: freed space
        /// reused (copy on write never writes a block twice otherwise).
        pub reused_blocks: u64,
        /// Calls the engine refused for lack of space (the model has no limit).
        pub nospace: u64,
        /// Hole punches (fallocate PUNCH_HOLE | KEEP_SIZE) the engine carried out (also those of
        /// regions aborted later).
        pub punches: u64,
        /// Atomic regions committed and aborted, and the calls made inside them.
        pub regions_committed: u64,
        pub regions_aborted: u64,
        pub region_calls: u64,
        /// Writes of other streams to a file added to a region, which the engine routed into it.
        pub added_writes: u64,
        /// Commits made as device transactions (txflash), and blocks rewritten in place.
        pub tx_commits: u64,
        pub inplace_blocks: u64,
        /// Concurrent commits (deferred I/O): prepared commits the workload wrote itself (not
        /// a drain inside the engine), and those of them written while an earlier commit was
        /// not yet written (out of sequence order).
        pub commits_performed: u64,
        pub out_of_order: u64,
        /// Group flushes (`Fs::flush_written`) the workload issued, those issued while some
        /// prepared commit was not yet written, those that acknowledged at least one waiting
        /// durability call and at least two, and the calls they acknowledged.
        pub group_flushes: u64,
        pub inflight_flushes: u64,
        pub acking_flushes: u64,
        pub multi_flushes: u64,
        pub group_acked: u64,
        /// Durability calls that returned before they were durable (acknowledged later, by a
        /// group flush or by a flush inside a later call).
        pub waited_calls: u64,
    }
}

impl std::fmt::Display for SimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} crash points ({} checked exhaustively), {} crash images, {} commits ({} optimistic), {} checkpoints ({} deltas), {} stream merges, {} osyncs, {} dsyncs, {} flushes, {} hole punches, {} blocks reused, {} ENOSPC, {} images recovered to an older allowed commit ({} lost an osync'd commit)",
            self.crash_points,
            self.exhaustive_points,
            self.images,
            self.commits,
            self.optimistic_commits,
            self.checkpoints,
            self.delta_checkpoints,
            self.merges,
            self.osyncs,
            self.dsyncs,
            self.flushes,
            self.punches,
            self.reused_blocks,
            self.nospace,
            self.older,
            self.lost_osync
        )?;
        if self.regions_committed + self.regions_aborted > 0 {
            write!(f, ", {} atomic regions committed and {} aborted ({} calls inside, {} of them other streams' writes to an added file)", self.regions_committed, self.regions_aborted, self.region_calls, self.added_writes)?;
        }
        if self.tx_commits > 0 {
            write!(
                f,
                ", {} device-transaction commits ({} blocks rewritten in place)",
                self.tx_commits, self.inplace_blocks
            )?;
        }
        if self.commits_performed + self.group_flushes > 0 {
            write!(
                f,
                ", {} deferred commits written by the workload ({} out of order), {} durability calls acknowledged after they returned, {} group flushes ({} with commits still unwritten; {} acknowledged {} durability calls, {} of them 2 or more)",
                self.commits_performed,
                self.out_of_order,
                self.waited_calls,
                self.group_flushes,
                self.inflight_flushes,
                self.acking_flushes,
                self.group_acked,
                self.multi_flushes
            )?;
        }
        Ok(())
    }
}

/// A long run sums these, with the crash images each checked.
impl intactfs_types::longrun::CountsImages for SimReport {
    fn images(&self) -> u64 {
        self.images
    }
}
