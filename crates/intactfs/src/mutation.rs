//! Deliberate bugs, for proving that the crash simulation catches them (issue 12 item 3).
//!
//! Compiled in only with the `mutations` feature, and off until a test turns one on; without
//! the feature `active` is a constant `false` (the one switch of both engines:
//! `intactfs_types::mutations!`), so release builds carry none of this.

intactfs_types::mutations! {
    /// A known way to break the optimistic-commit protocol.
    pub enum Mutation {
        /// Recovery replays records without checking their data blocks' checksums.
        NoRecoveryChecksum = 1,
        /// Blocks freed by a commit are reused at once, before the commit is durable.
        EarlyReuse = 2,
        /// An atomic region's first write commits (durably) on its own, before the region does.
        RegionEarlyPage = 3,
        /// On a transactional device, blocks rewritten in place are written outside the
        /// commit's device transaction.
        InplacePlain = 4,
        /// A flush declares durable commits whose writes are not all done (deferred I/O: the
        /// group flush covers every prepared commit, not only the written prefix).
        FlushBeforeWritten = 5,
        /// A delta checkpoint leaves out the files whose blocks or size committed operations
        /// changed (`Map`, `SetSize`).
        DeltaMissesData = 6,
        /// A commit takes its operations from their streams (counting them committed) before
        /// it checks for room, and a refusal then returns without poisoning the mount: the
        /// operations are lost while later syncs report success (issue 25, finding 1).
        TakeBeforeRoom = 7,
    }
}
