//! The errors of embedded calls: each names what was being done and carries an errno for
//! the C ABI and Python (the values the same call gets on a mount).

use intactfs_device::{LockError, PmemError};
use intactfs_types::FsError;
use std::path::Path;

pub type Result<T, E = EmbedError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A mount or another program holds the image (EBUSY), or it cannot be locked.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The image file cannot be made, opened, mapped or written back.
    #[error("{what}: {source}")]
    Image { what: String, source: PmemError },
    /// The engine refused a call.
    #[error("{what}: {source}")]
    Fs { what: String, source: FsError },
    #[error("descriptor {0} is not open")]
    BadFd(i32),
    /// A change through a descriptor open read-only (EBADF, as on a mount).
    #[error("descriptor {0} is not open for writing")]
    NotWritable(i32),
    #[error("{path}: {why}")]
    Invalid { path: String, why: String },
    #[error("every descriptor number was handed out (2^31 opens)")]
    TooManyFds,
}

impl EmbedError {
    pub(crate) fn image(what: String, source: PmemError) -> Self {
        EmbedError::Image { what, source }
    }

    pub(crate) fn fs(what: String, source: FsError) -> Self {
        EmbedError::Fs { what, source }
    }

    pub(crate) fn invalid(path: &Path, why: &str) -> Self {
        EmbedError::Invalid {
            path: path.display().to_string(),
            why: why.to_string(),
        }
    }

    /// The errno a C or Python caller sees.
    pub fn errno(&self) -> i32 {
        match self {
            EmbedError::Lock(LockError::InUse(_)) => libc::EBUSY,
            EmbedError::Lock(LockError::Io { source, .. }) => {
                source.raw_os_error().unwrap_or(libc::EIO)
            }
            EmbedError::Image { source, .. } => match source {
                PmemError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
                PmemError::BadSize { .. } | PmemError::Damaged { .. } => libc::EINVAL,
                _ => libc::EIO,
            },
            EmbedError::Fs { source, .. } => source.errno(),
            EmbedError::BadFd(_) | EmbedError::NotWritable(_) => libc::EBADF,
            EmbedError::Invalid { .. } => libc::EINVAL,
            EmbedError::TooManyFds => libc::EMFILE,
        }
    }
}
