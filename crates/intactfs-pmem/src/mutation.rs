//! Deliberate bugs, for proving that the crash simulation catches them (issue 14 item 4).
//!
//! Compiled in only with the `mutations` feature, and off until a test turns one on; without
//! the feature `active` is a constant `false` (the one switch of both engines:
//! `intactfs_types::mutations!`), so normal builds carry none of this.

intactfs_types::mutations! {
    /// A known way to break the logging protocol.
    pub enum Mutation {
        /// A log entry's valid flag is stored together with its body, before a fence made the
        /// body persistent (002 §III-D wants the flag last).
        ValidFlagFirst = 1,
        /// The commit path omits the fence between the redo entries (written whole) and the
        /// commit record's valid flag: the commit record may persist while a redo entry does
        /// not, or is torn (fence A since format 6, fence B before).
        SkipFence = 2,
        /// Mount leaves the orphans a crash left (files unlinked while open) in use: their
        /// inodes and blocks leak (recovery step 6 skipped).
        KeepOrphansAtMount = 3,
        /// Unlink frees an open file at once (the behaviour before issue 26): reads through
        /// an open descriptor fail.
        FreeOpenFileAtUnlink = 4,
        /// symlink stores its target block without persisting it before the create's batch
        /// names it: a crash may leave a link whose target is lost (zeros).
        SymlinkTargetNotPersisted = 5,
        /// A checkpoint names a new indirect block (any level of the pointer trees) before its
        /// zeros are persistent: a crash may leave stale pointers below a persisted one.
        IndirectNotPersisted = 6,
        /// setxattr stores the new attribute block without persisting it before the batch
        /// names it: a crash may leave a pointer to a block of zeros (format 4).
        XattrBlockNotPersisted = 7,
        /// fallocate stores the zeros of a new block without persisting them before the batch
        /// names it: a crash may leave the block's stale content readable.
        FallocZerosNotPersisted = 8,
        /// A call's undo entries (written whole, format 6) are not fenced before the words
        /// they cover change in place: a crash may persist a change whose undo entry is torn
        /// or missing, which recovery cannot undo.
        SkipUndoFence = 9,
        /// Commit lets a checkpoint install its blocks before its commit record is durable
        /// (between fences A and B): a crash may leave data of an uncommitted transaction in
        /// home blocks, which recovery cannot undo (the order a background checkpointer must
        /// keep: a block is installed only after its commit is durable).
        CheckpointBeforeCommit = 10,
    }
}
