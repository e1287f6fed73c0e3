//! Errors of engine calls: POSIX refusals carry the errno the FUSE layer will return,
//! `Corrupt` names the damaged structure of an image mount refused, `Internal` is a broken
//! invariant (a bug in this crate), `Device` a failure of the persistent memory itself.

use intactfs_device::PmemError;

#[derive(Debug, thiserror::Error)]
pub enum PmemFsError {
    #[error("no such file or directory{}", ctx(.0))]
    NotFound(String),
    #[error("file exists{}", ctx(.0))]
    Exists(String),
    #[error("not a directory{}", ctx(.0))]
    NotDir(String),
    #[error("is a directory{}", ctx(.0))]
    IsDir(String),
    #[error("directory not empty{}", ctx(.0))]
    NotEmpty(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("file name of {0} bytes is longer than 255 bytes")]
    NameTooLong(usize),
    #[error("operation not permitted: {0}")]
    NotPermitted(String),
    #[error("too many links: {0}")]
    TooManyLinks(String),
    #[error("no space left on device: {0}")]
    NoSpace(String),
    #[error("file too large: {0}")]
    TooBig(String),
    /// Another open transaction owns an object the call would change (no isolation between
    /// transactions: the engine refuses rather than interleave two writers, 002 §III-A).
    #[error("busy: {0}")]
    Busy(String),
    #[error("damaged persistent-memory file system: {0}")]
    Corrupt(String),
    #[error("persistent memory: {0}")]
    Device(#[from] PmemError),
    #[error("internal error (a bug in intactfs-pmem): {0}")]
    Internal(String),
}

fn ctx(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

impl PmemFsError {
    /// The errno a POSIX layer returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            PmemFsError::NotFound(_) => 2,
            PmemFsError::Exists(_) => 17,
            PmemFsError::NotDir(_) => 20,
            PmemFsError::IsDir(_) => 21,
            PmemFsError::NotEmpty(_) => 39,
            PmemFsError::Invalid(_) => 22,
            PmemFsError::NameTooLong(_) => 36,
            PmemFsError::NotPermitted(_) => 1,
            PmemFsError::TooManyLinks(_) => 31,
            PmemFsError::NoSpace(_) => 28,
            PmemFsError::TooBig(_) => 27,
            PmemFsError::Busy(_) => 16,
            PmemFsError::Corrupt(_) | PmemFsError::Device(_) | PmemFsError::Internal(_) => 5,
        }
    }
}

pub type Result<T, E = PmemFsError> = std::result::Result<T, E>;
