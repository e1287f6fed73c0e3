use intactfs_device::DeviceError;

/// Errors of engine calls. POSIX-level refusals map to an errno (the FUSE layer returns
/// it); `Corrupt` names the damaged structure; `Internal` is a broken invariant (a bug).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("file name longer than 255 bytes")]
    NameTooLong,
    #[error("no space left on device: {0}")]
    NoSpace(String),
    #[error("too many links")]
    TooManyLinks,
    #[error("operation not permitted: {0}")]
    NotPermitted(String),
    #[error("file too large")]
    TooBig,
    #[error("no such extended attribute")]
    NoData,
    #[error("no data past the end of the file")]
    PastEnd,
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("busy: {0}")]
    Busy(String),
    #[error("the file system is read-only")]
    ReadOnly,
    #[error("damaged file system: {0}")]
    Corrupt(String),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("internal error (a bug in intactfs): {0}")]
    Internal(String),
}

impl FsError {
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => 2,
            FsError::Exists => 17,
            FsError::NotDir => 20,
            FsError::IsDir => 21,
            FsError::NotEmpty => 39,
            FsError::Invalid(_) => 22,
            FsError::NameTooLong => 36,
            FsError::NoSpace(_) => 28,
            FsError::TooManyLinks => 31,
            FsError::NotPermitted(_) => 1,
            FsError::TooBig => 27,
            FsError::NoData => 61,
            FsError::PastEnd => 6,
            FsError::Unsupported(_) => 95,
            FsError::ReadOnly => 30,
            FsError::Busy(_) => 16,
            FsError::Corrupt(_) | FsError::Device(_) | FsError::Internal(_) => 5,
        }
    }
}

pub type Result<T, E = FsError> = std::result::Result<T, E>;
