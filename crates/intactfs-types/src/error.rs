//! The one error type of engine calls, and its errno mapping (the FUSE layer returns the
//! errno). POSIX refusals carry what was refused where the engine knows it; `Corrupt` names
//! the damaged structure; `Device`/`Pmem` are failures of the storage itself; `Internal` is
//! a broken invariant (a bug in intactfs).

use intactfs_device::{DeviceError, PmemError};

#[derive(Debug, thiserror::Error)]
pub enum FsError {
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
    /// The name's length in bytes.
    #[error("file name of {0} bytes is longer than 255 bytes")]
    NameTooLong(usize),
    #[error("no space left on device: {0}")]
    NoSpace(String),
    #[error("too many links")]
    TooManyLinks,
    #[error("operation not permitted: {0}")]
    NotPermitted(String),
    #[error("file too large{}", ctx(.0))]
    TooBig(String),
    #[error("no such extended attribute")]
    NoData,
    #[error("no data past the end of the file")]
    PastEnd,
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Another owner (a region, an open transaction) holds what the call would change.
    #[error("busy: {0}")]
    Busy(String),
    #[error("the file system is read-only")]
    ReadOnly,
    #[error("damaged file system: {0}")]
    Corrupt(String),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("persistent memory: {0}")]
    Pmem(#[from] PmemError),
    #[error("internal error (a bug in intactfs): {0}")]
    Internal(String),
}

fn ctx(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

impl FsError {
    /// The errno a POSIX layer returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound(_) => 2,
            FsError::Exists(_) => 17,
            FsError::NotDir(_) => 20,
            FsError::IsDir(_) => 21,
            FsError::NotEmpty(_) => 39,
            FsError::Invalid(_) => 22,
            FsError::NameTooLong(_) => 36,
            FsError::NoSpace(_) => 28,
            FsError::TooManyLinks => 31,
            FsError::NotPermitted(_) => 1,
            FsError::TooBig(_) => 27,
            FsError::NoData => 61,
            FsError::PastEnd => 6,
            FsError::Unsupported(_) => 95,
            FsError::ReadOnly => 30,
            FsError::Busy(_) => 16,
            FsError::Corrupt(_) | FsError::Device(_) | FsError::Pmem(_) | FsError::Internal(_) => 5,
        }
    }
}

pub type Result<T, E = FsError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_is_the_posix_number() {
        assert_eq!(FsError::NotFound(String::new()).errno(), 2);
        assert_eq!(FsError::Unsupported("x".into()).errno(), 95);
        assert_eq!(FsError::Busy("x".into()).errno(), 16);
        assert_eq!(FsError::Internal("x".into()).errno(), 5);
    }

    #[test]
    fn context_is_shown_only_when_given() {
        assert_eq!(
            FsError::NotFound(String::new()).to_string(),
            "no such file or directory"
        );
        assert_eq!(
            FsError::NotFound("\"a\" in directory 1".into()).to_string(),
            "no such file or directory: \"a\" in directory 1"
        );
    }
}
