//! A pseudo-terminal for the workload's standard output, so that it behaves as on a
//! terminal (C stdio, Python and most runtimes line-buffer a terminal and fully buffer a
//! pipe or file): a promise the program prints is written where the program printed it,
//! not at exit (issue 27 item 7).
//!
//! Why this is byte-exact: the terminal is put in raw mode (no `\n` -> `\r\n`, no other
//! output processing), and a thread copies everything the master side reads to our own
//! standard output unchanged. The recorded output itself comes from the trace (the bytes
//! of each `write` to the terminal), not from this copy. Standard input and error stay the
//! caller's: only output buffering is meant to change.
//!
//! Why a terminal rather than forcing line buffering in the preload shim (`setvbuf` on C's
//! `stdout`): the shim reaches only C stdio in dynamically linked programs; Python, Java
//! and statically linked programs decide their buffering by asking whether stdout is a
//! terminal, so only a terminal makes all of them behave as ALICE's users saw them.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How long the copy waits for more output after the workload has ended, when something
/// (a background process the workload left) still holds the terminal open.
const DRAIN_IDLE_MS: i32 = 100;

/// The open terminal: `slave` goes to the workload as its stdout.
pub struct Pty {
    master: File,
    /// The slave side, opened once to set raw mode and handed to the workload.
    pub slave: OwnedFd,
    /// The slave's path, as strace's `-y` names the workload's stdout.
    pub name: String,
}

fn last_error(what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Pty {
    /// Opens a new pseudo-terminal in raw mode.
    pub fn open() -> std::io::Result<Pty> {
        // SAFETY: posix_openpt returns a new descriptor or -1; nothing else is touched.
        let fd = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(last_error("posix_openpt"));
        }
        // SAFETY: fd is a descriptor we own from here on.
        let master = unsafe { File::from_raw_fd(fd) };
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: grantpt/unlockpt take the master fd; ptsname_r writes at most len bytes
        // (NUL included) into our buffer.
        let ok = unsafe {
            libc::grantpt(fd) == 0
                && libc::unlockpt(fd) == 0
                && libc::ptsname_r(fd, name.as_mut_ptr(), name.len()) == 0
        };
        if !ok {
            return Err(last_error("setting up the pseudo-terminal"));
        }
        // SAFETY: ptsname_r succeeded, so `name` holds a NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        // O_NOCTTY: the workload must not get it as its controlling terminal.
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&name)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{name}: {e}")))?;
        raw_mode(&slave)?;
        Ok(Pty {
            master,
            slave: OwnedFd::from(slave),
            name,
        })
    }

    /// Starts copying the terminal's output to our stdout; the slave must have been given
    /// away (and our copy closed) before [`Copy::finish`].
    pub fn copy_out(self) -> (OwnedFd, Copy) {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let master = self.master;
        let thread = std::thread::spawn(move || copy_loop(master, &flag));
        (
            self.slave,
            Copy {
                done,
                thread: Some(thread),
            },
        )
    }
}

/// cfmakeraw: bytes pass unchanged.
fn raw_mode(slave: &File) -> std::io::Result<()> {
    // SAFETY: termios is plain data; tcgetattr fills it, tcsetattr reads it.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(slave.as_raw_fd(), &mut t) != 0 {
            return Err(last_error("tcgetattr on the pseudo-terminal"));
        }
        libc::cfmakeraw(&mut t);
        if libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t) != 0 {
            return Err(last_error("tcsetattr on the pseudo-terminal"));
        }
    }
    Ok(())
}

/// The running copy of the terminal's output.
pub struct Copy {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Copy {
    /// The workload has ended: copy what is left, then stop.
    pub fn finish(mut self) {
        self.stop();
    }
    fn stop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copies until every slave descriptor is closed (EIO), or, once the workload has ended,
/// until the terminal stays quiet for [`DRAIN_IDLE_MS`].
fn copy_loop(mut master: File, done: &AtomicBool) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let mut p = libc::pollfd {
            fd: master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut p, 1, DRAIN_IDLE_MS) };
        if ready == 0 {
            if done.load(Ordering::SeqCst) {
                return;
            }
            continue;
        }
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        match master.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => return, // EIO: no writer left
            Ok(n) => {
                assert!(n <= buf.len(), "read past the buffer");
                let mut out = std::io::stdout().lock();
                // Our stdout gone (a closed pipe) must not stop the workload: keep draining.
                let _ = out.write_all(&buf[..n]).and_then(|_| out.flush());
            }
        }
    }
}
