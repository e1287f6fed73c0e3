//! The system steps: programs (mkfs, fsck), loop devices and mounts (system calls) as
//! guards that undo themselves on every exit path, and image copies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Runs a program to completion; an error names the step and carries its stderr.
pub fn run(what: &str, cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let msg = String::from_utf8_lossy(&out.stdout);
        let text = if err.trim().is_empty() {
            msg.trim().to_string()
        } else {
            err.trim().to_string()
        };
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            tail(&text, 2000)
        ));
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

/// Whether `prog` can be found on PATH (or is an existing path). Only PATH: programs are
/// run by name, so one found elsewhere (say /usr/sbin when PATH lacks it) would still fail
/// to start.
pub fn have(prog: &str) -> bool {
    if prog.contains('/') {
        return Path::new(prog).exists();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(prog).is_file())
}

/// Waits (up to 2 s) until loop device `dev` no longer serves `file`: a detach, or an
/// autoclear after unmount, completes only when every opener (udev, blkid) has closed it.
fn wait_detached(dev: &Path, file: &Path) {
    let Some(name) = dev.file_name() else { return };
    let sys = Path::new("/sys/block").join(name).join("loop/backing_file");
    for i in 0..400 {
        match std::fs::read_to_string(&sys) {
            Ok(b) if Path::new(b.trim().trim_end_matches(" (deleted)")) == file => {
                std::thread::sleep(std::time::Duration::from_millis(if i < 100 {
                    1
                } else {
                    10
                }))
            }
            _ => return, // detached (or already reused for another file)
        }
    }
}

#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_FLAGS_DIRECT_IO: u32 = 16;

fn cstr(p: &Path) -> Result<std::ffi::CString, String> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("{}: path contains a NUL byte", p.display()))
}

/// Mounts an image file through a loop device that detaches itself when unmounted
/// (autoclear), with system calls instead of losetup(8) and mount(8): checking thousands
/// of images, the two programs per image would cost more than the mount. `direct_io`: the
/// loop device writes straight to the file (the recorder then sees each write as the
/// device completes it, and writes between flushes in any order: block semantics).
pub fn mount_image(
    fstype: &str,
    image: &Path,
    dir: &Path,
    options: &str,
    direct_io: bool,
) -> Result<Mounted, String> {
    let what = |e: std::io::Error| {
        format!(
            "mounting {} ({fstype}) on {}: {e}",
            image.display(),
            dir.display()
        )
    };
    let backing = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .map_err(what)?;
    let ctl = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")
        .map_err(|e| format!("/dev/loop-control: {e} (loop devices are needed)"))?;
    for _ in 0..100 {
        // SAFETY: ioctl without arguments on our descriptor.
        let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if n < 0 {
            return Err(what(std::io::Error::last_os_error()));
        }
        let dev = PathBuf::from(format!("/dev/loop{n}"));
        let lo = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&dev)
        {
            Ok(f) => f,
            Err(_) => continue, // udev has not made the node yet, or it went away
        };
        // SAFETY: zeroed plain-data struct.
        let mut cfg: LoopConfig = unsafe { std::mem::zeroed() };
        cfg.fd = backing.as_raw_fd() as u32;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | if direct_io { LO_FLAGS_DIRECT_IO } else { 0 };
        // SAFETY: LOOP_CONFIGURE reads a loop_config we own.
        if unsafe { libc::ioctl(lo.as_raw_fd(), LOOP_CONFIGURE, &cfg as *const LoopConfig) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EBUSY) {
                continue; // another thread took this device first
            }
            return Err(what(e));
        }
        let (src, target, ty, data) = (
            cstr(&dev)?,
            cstr(dir)?,
            std::ffi::CString::new(fstype).map_err(|_| "bad fs type".to_string())?,
            std::ffi::CString::new(options)
                .map_err(|_| "mount options contain a NUL byte".to_string())?,
        );
        // SAFETY: valid C strings; data is a NUL-terminated option string.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                ty.as_ptr(),
                0,
                data.as_ptr() as *const libc::c_void,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            // Closing `lo` with autoclear set detaches the device.
            drop(lo);
            let k = kernel_says(&dev)
                .map(|k| format!("{k}; "))
                .unwrap_or_default();
            return Err(format!(
                "{k}mounting {} ({fstype}) on {}: {e}",
                image.display(),
                dir.display()
            ));
        }
        let file = std::fs::canonicalize(image).unwrap_or_else(|_| image.to_path_buf());
        return Ok(Mounted {
            dir: dir.to_path_buf(),
            done: false,
            lo: Some((dev, file)),
        });
    }
    Err(format!(
        "mounting {}: no free loop device after 100 attempts",
        image.display()
    ))
}

/// The kernel's last messages about a device (why a mount failed), from the kernel log.
fn kernel_says(dev: &Path) -> Option<String> {
    let name = dev.file_name()?.to_string_lossy().into_owned();
    let out = Command::new("dmesg")
        .arg("--notime")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&format!("({name})")) || l.contains(&format!("{name}:")))
        .collect();
    let last: Vec<&str> = lines.iter().rev().take(2).rev().copied().collect();
    (!last.is_empty()).then(|| last.join("; "))
}

/// A mounted file system, unmounted on drop (lazily if it stays busy).
pub struct Mounted {
    pub dir: PathBuf,
    done: bool,
    /// An autoclear loop device under the mount and its backing file: unmounting waits
    /// until it is gone, so nothing stays attached after us.
    lo: Option<(PathBuf, PathBuf)>,
}

impl Mounted {
    /// A mount someone else made (e.g. an intactfs daemon); we only unmount it.
    pub fn adopt(dir: &Path) -> Mounted {
        Mounted {
            dir: dir.to_path_buf(),
            done: false,
            lo: None,
        }
    }

    pub fn unmount(mut self) -> Result<(), String> {
        self.done = true;
        unmount(&self.dir)?;
        if let Some((dev, file)) = &self.lo {
            wait_detached(dev, file);
        }
        Ok(())
    }

    /// Someone else unmounted it.
    pub fn forget(mut self) {
        self.done = true;
    }
}

pub fn unmount(dir: &Path) -> Result<(), String> {
    let c = cstr(dir)?;
    let mut last = String::new();
    for attempt in 0..40 {
        // SAFETY: a valid C string.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) {
            return Ok(()); // not mounted (any more)
        }
        last = format!("unmounting {}: {e}", dir.display());
        std::thread::sleep(std::time::Duration::from_millis(25 * (attempt + 1).min(8)));
    }
    // Busy for two seconds: detach it so nothing stays mounted, and say so.
    // SAFETY: as above.
    unsafe {
        libc::umount2(c.as_ptr(), libc::MNT_DETACH);
    }
    Err(last)
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if !self.done {
            match unmount(&self.dir) {
                Err(e) => eprintln!("intact: warning: {e} (detached lazily)"),
                Ok(()) => {
                    if let Some((dev, file)) = &self.lo {
                        wait_detached(dev, file);
                    }
                }
            }
        }
    }
}

/// Whether files in `dir` can share blocks (FICLONE works there).
pub fn supports_reflink(dir: &Path) -> bool {
    let (a, b) = (dir.join(".reflink-probe-a"), dir.join(".reflink-probe-b"));
    let ok = (|| -> std::io::Result<bool> {
        std::fs::write(&a, [0u8; 4096])?;
        let src = File::open(&a)?;
        let dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&b)?;
        // SAFETY: ioctl(FICLONE) with two descriptors we own.
        Ok(unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0)
    })()
    .unwrap_or(false);
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    ok
}

/// Copies `from` to a new file `to`: a reflink (FICLONE) where the file system shares
/// blocks, otherwise a sparse copy of the allocated ranges (SEEK_DATA/SEEK_HOLE with
/// copy_file_range), so an image costs what its file system has allocated, not its size.
/// Returns whether it was a reflink.
pub fn clone_file(from: &Path, to: &Path) -> std::io::Result<bool> {
    let src = File::open(from)?;
    let dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
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
            let n = unsafe {
                libc::copy_file_range(s, &mut off_in, d, &mut off_out, (hole - off_in) as usize, 0)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EXDEV | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)
                ) {
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

/// Copies `len` bytes at `at` by reading and writing (where copy_file_range cannot).
pub fn copy_range(src: &File, dst: &File, at: u64, len: u64) -> std::io::Result<()> {
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
