//! The one-owner rule of an image: a mount, fsck, dump or a program that opened the image
//! in-process (intactfs-embed) holds an exclusive `flock(2)` on it for as long as it uses
//! it, and every other would-be owner is refused with [`LockError::InUse`].
//!
//! Why flock: it belongs to the open file description, so two opens in one process
//! exclude each other as two processes do, and the kernel drops it when the owner exits
//! or is killed (no stale lock file to clean up after a crash).

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive lock on an image, held until dropped.
#[derive(Debug)]
pub struct ImageLock {
    _file: File,
    path: PathBuf,
}

impl ImageLock {
    /// The image this lock is on.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another owner holds the image.
    #[error("{0} is in use by another intactfs owner (a mount, fsck, dump, or a program that opened it embedded); unmount it (`intact fs umount MOUNTPOINT`) or end that program first")]
    InUse(String),
    #[error("{path}: cannot {what}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
}

/// Takes the exclusive lock on `image` without waiting.
pub fn lock_image(image: &Path) -> Result<ImageLock, LockError> {
    let io = |what, source| LockError::Io {
        what,
        path: image.display().to_string(),
        source,
    };
    let f = File::open(image).map_err(|e| io("open", e))?;
    // SAFETY: flock on a descriptor we own, alive for the call.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(LockError::InUse(image.display().to_string()));
        }
        return Err(io("lock", e));
    }
    Ok(ImageLock {
        _file: f,
        path: image.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_owner_is_refused_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("intactfs-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("img");
        std::fs::write(&img, b"x").unwrap();
        let first = lock_image(&img).unwrap();
        assert_eq!(first.path(), img.as_path());
        let second = lock_image(&img).unwrap_err();
        assert!(matches!(second, LockError::InUse(_)), "{second}");
        assert!(second.to_string().contains("in use"));
        drop(first);
        let third = lock_image(&img);
        assert!(third.is_ok(), "free again once dropped");
        drop(third);
        let missing = lock_image(&dir.join("none")).unwrap_err();
        assert!(matches!(missing, LockError::Io { .. }), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
