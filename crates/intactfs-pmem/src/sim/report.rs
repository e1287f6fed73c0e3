//! What a simulation run reports, summed over runs.

intactfs_device::counters! {
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct SimReport {
        pub workloads: u64,
        pub calls: u64,
        pub crash_points: u64,
        pub exhaustive_points: u64,
        pub images: u64,
        /// Images recovered (the others were identical to one already checked in the run).
        pub distinct_images: u64,
        /// Images that recovered to the state after the call in progress committed, and before.
        pub newest: u64,
        pub older: u64,
        /// Images taken at fences inside recovery, and recovered again.
        pub recovery_crash_images: u64,
        pub checkpoint_after_recovery: u64,
        pub tx_committed: u64,
        pub tx_aborted: u64,
        pub legacy_calls: u64,
        /// Calls made while at least two transactions were open.
        pub interleaved_calls: u64,
        pub expected_errors: u64,
        pub ebusy: u64,
        pub nospace: u64,
        pub checkpoints: u64,
        /// Background checkpoint units run as calls; those that installed blocks while
        /// transactions were open, and the crash images taken during those.
        pub background_units: u64,
        pub background_units_open: u64,
        pub background_unit_images: u64,
        pub blocks_checkpointed: u64,
        pub pointer_swaps: u64,
        pub redo_entries: u64,
        pub undo_entries: u64,
        /// Redo entries of dropped files invalidated at the drop's commit, never installed.
        pub entries_retired: u64,
        /// Opens and releases; files unlinked (or replaced) while open; orphans freed by their
        /// last release (or by the end of the transaction that owned them).
        pub opens: u64,
        /// Hard links made; RENAME_EXCHANGE renames done.
        pub links: u64,
        pub exchanges: u64,
        /// Symbolic links and special files (FIFOs, sockets, devices) made.
        pub symlinks: u64,
        pub specials: u64,
        /// Writes that succeeded beyond format 2's largest file (the triple-indirect tree).
        pub far_writes: u64,
        /// Extended-attribute sets that succeeded (format 4).
        pub xattr_sets: u64,
        /// fallocate calls that succeeded (allocations and punches).
        pub fallocates: u64,
        pub orphans_made: u64,
        /// Of those, directories removed while open.
        pub dir_orphans_made: u64,
        pub orphans_freed: u64,
    }
}

impl std::fmt::Display for SimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} workloads, {} calls ({} legacy, {} interleaved with 2+ open transactions, {} expected errors of which {} EBUSY, {} ENOSPC), \
             {} transactions committed, {} aborted; {} crash points ({} exhaustive), {} crash images ({} distinct recovered: {} to the newest state, {} to the one before), \
             {} images crashed inside recovery, {} checkpoints after recovery; {} hard links, {} exchanges, {} symlinks, {} special files, {} writes past 1 GiB, {} attribute sets, {} fallocates, {} opens, {} files unlinked while open ({} directories removed while open), {} freed by their last release; engine: {} checkpoints, {} blocks checkpointed, {} pointer swaps, {} redo entries ({} retired with their file), {} undo entries; \
             {} background checkpoint units ({} installed blocks while transactions were open, {} crash images taken in those)",
            self.workloads,
            self.calls,
            self.legacy_calls,
            self.interleaved_calls,
            self.expected_errors,
            self.ebusy,
            self.nospace,
            self.tx_committed,
            self.tx_aborted,
            self.crash_points,
            self.exhaustive_points,
            self.images,
            self.distinct_images,
            self.newest,
            self.older,
            self.recovery_crash_images,
            self.checkpoint_after_recovery,
            self.links,
            self.exchanges,
            self.symlinks,
            self.specials,
            self.far_writes,
            self.xattr_sets,
            self.fallocates,
            self.opens,
            self.orphans_made,
            self.dir_orphans_made,
            self.orphans_freed,
            self.checkpoints,
            self.blocks_checkpointed,
            self.pointer_swaps,
            self.redo_entries,
            self.entries_retired,
            self.undo_entries,
            self.background_units,
            self.background_units_open,
            self.background_unit_images
        )
    }
}

/// A long run sums these, with the crash images each checked.
impl intactfs_types::longrun::CountsImages for SimReport {
    fn images(&self) -> u64 {
        self.images
    }
}
