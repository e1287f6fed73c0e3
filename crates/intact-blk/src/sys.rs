//! The system steps: programs (mkfs, losetup, mount, fsck), loop devices and mounts as
//! guards that undo themselves on every exit path, and image copies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Runs a program to completion; an error names the step and carries its stderr.
pub fn run(what: &str, cmd: &mut Command) -> Result<Output, String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let msg = String::from_utf8_lossy(&out.stdout);
        let text = if err.trim().is_empty() { msg.trim().to_string() } else { err.trim().to_string() };
        return Err(format!("{what} failed ({}): {}", out.status, tail(&text, 2000)));
    }
    Ok(out)
}

pub fn tail(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut cut = s.len() - n;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    format!("...{}", &s[cut..])
}

/// Whether `prog` can be found on PATH (or is an existing path).
pub fn have(prog: &str) -> bool {
    if prog.contains('/') {
        return Path::new(prog).exists();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")]).any(|d| d.join(prog).is_file())
}

/// An attached loop device, detached on drop.
pub struct Loop {
    pub dev: PathBuf,
}

impl Loop {
    pub fn attach(file: &Path, direct_io: bool) -> Result<Loop, String> {
        let mut c = Command::new("losetup");
        c.args(["--find", "--show"]);
        if direct_io {
            c.arg("--direct-io=on");
        }
        let out = run(&format!("attaching a loop device to {}", file.display()), c.arg(file))?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if dev.is_empty() {
            return Err("losetup printed no device name".into());
        }
        Ok(Loop { dev: PathBuf::from(dev) })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // A device still busy right after umount (udev probing) frees itself shortly.
        for attempt in 0..20 {
            match run("detaching", Command::new("losetup").arg("-d").arg(&self.dev)) {
                Ok(_) => return,
                Err(e) if attempt == 19 => eprintln!("intact: warning: cannot detach {}: {e}", self.dev.display()),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
            }
        }
    }
}

/// The kernel's last messages about a device (why a mount failed), from the kernel log.
fn kernel_says(dev: &Path) -> Option<String> {
    let name = dev.file_name()?.to_string_lossy().into_owned();
    let out = Command::new("dmesg").arg("--notime").stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(&format!("({name})")) || l.contains(&format!("{name}:"))).collect();
    let last: Vec<&str> = lines.iter().rev().take(2).rev().copied().collect();
    (!last.is_empty()).then(|| last.join("; "))
}

/// A mounted file system, unmounted on drop (lazily if it stays busy).
pub struct Mounted {
    pub dir: PathBuf,
    done: bool,
}

impl Mounted {
    pub fn kernel(fstype: &str, source: &Path, dir: &Path, options: &str) -> Result<Mounted, String> {
        let mut c = Command::new("mount");
        c.arg("-t").arg(fstype);
        if !options.is_empty() {
            c.arg("-o").arg(options);
        }
        if let Err(e) = run(&format!("mounting {} ({fstype}) on {}", source.display(), dir.display()), c.arg(source).arg(dir)) {
            return Err(match kernel_says(source) {
                Some(k) => format!("{k} ({e})"),
                None => e,
            });
        }
        Ok(Mounted { dir: dir.to_path_buf(), done: false })
    }

    /// A mount someone else made (e.g. an intactfs daemon); we only unmount it.
    pub fn adopt(dir: &Path) -> Mounted {
        Mounted { dir: dir.to_path_buf(), done: false }
    }

    pub fn unmount(mut self) -> Result<(), String> {
        self.done = true;
        unmount(&self.dir)
    }

    /// Someone else unmounted it.
    pub fn forget(mut self) {
        self.done = true;
    }
}

pub fn unmount(dir: &Path) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..40 {
        match run(&format!("unmounting {}", dir.display()), Command::new("umount").arg(dir)) {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
        std::thread::sleep(std::time::Duration::from_millis(25 * (attempt + 1).min(8)));
    }
    // Busy for two seconds: detach it so nothing stays mounted, and say so.
    let _ = Command::new("umount").arg("-l").arg(dir).stderr(Stdio::null()).status();
    Err(last)
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = unmount(&self.dir) {
                eprintln!("intact: warning: {e} (detached lazily)");
            }
        }
    }
}

/// Copies `from` to a new file `to`: a reflink (FICLONE) where the file system shares
/// blocks, otherwise a sparse copy of the allocated ranges (SEEK_DATA/SEEK_HOLE with
/// copy_file_range), so an image costs what its file system has allocated, not its size.
/// Returns whether it was a reflink.
pub fn clone_file(from: &Path, to: &Path) -> std::io::Result<bool> {
    let src = File::open(from)?;
    let dst = std::fs::OpenOptions::new().write(true).create_new(true).open(to)?;
    // SAFETY: ioctl(FICLONE) with two descriptors we own.
    if unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0 {
        return Ok(true);
    }
    let len = src.metadata()?.len();
    dst.set_len(len)?;
    let (s, d) = (src.as_raw_fd(), dst.as_raw_fd());
    let mut pos: i64 = 0;
    while (pos as u64) < len {
        // SAFETY: lseek on our descriptor.
        let data = unsafe { libc::lseek(s, pos, libc::SEEK_DATA) };
        if data < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole remains
            }
            return Err(e);
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(s, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut off_in = data;
        let mut off_out = data;
        while off_in < hole {
            // SAFETY: copy_file_range between our descriptors with offsets we own.
            let n = unsafe { libc::copy_file_range(s, &mut off_in, d, &mut off_out, (hole - off_in) as usize, 0) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)) {
                    copy_range(&src, &dst, off_in as u64, (hole - off_in) as u64)?;
                    break;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
        }
        pos = hole;
    }
    Ok(false)
}

fn copy_range(src: &File, dst: &File, at: u64, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len() as u64) as usize;
        src.read_exact_at(&mut buf[..n], at + done)?;
        dst.write_all_at(&buf[..n], at + done)?;
        done += n as u64;
    }
    Ok(())
}
