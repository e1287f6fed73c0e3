//! Which engine an image needs: the block engine ([`crate::mount`]) or the
//! persistent-memory engine ([`crate::pmem`]), both served by the one server
//! ([`crate::server`]). Its own module, above both, so that neither imports the other.

use crate::mount::{MountConfig, MountError, Unmounted};

/// What an image's mount recovered: the block engine's report or the pmem engine's.
pub enum Recovered<'a> {
    Block(&'a intactfs::MountReport),
    Pmem(&'a intactfs_pmem::MountReport),
}

/// What a mount ended with, by image kind.
pub enum Served {
    Block(Unmounted),
    Pmem(crate::pmem::PmemUnmounted),
}

/// Mounts `cfg.image` with the engine its kind needs: a pmem image (superblock magic
/// `INTPMEM1`) with [`crate::pmem`], any other with the block engine ([`crate::mount::run`]).
pub fn serve(cfg: &MountConfig, ready: impl FnOnce(Recovered)) -> Result<Served, MountError> {
    crate::mount::check_uring_built(cfg.uring)?;
    if crate::pmem::is_pmem_image(&cfg.image) {
        crate::pmem::run(cfg, |r| ready(Recovered::Pmem(r))).map(Served::Pmem)
    } else {
        crate::mount::run(cfg, |r| ready(Recovered::Block(r))).map(Served::Block)
    }
}
