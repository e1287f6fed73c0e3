//! The C ABI of embedded mode (libintact/include/intact_embed.h, which documents each
//! call): an [`Image`] behind a mutex, descriptors as ints, transaction ids as `int64_t`.
//! A call that fails returns -1 (NULL for [`intact_embed_open`]) with `errno` set, and
//! leaves its message, with context, for [`intact_embed_errmsg`] on the calling thread.
//! An invariant that breaks (an assertion in the engine or here) aborts the program: a
//! panic never unwinds into C.

use crate::{mkfs, EmbedError, Fd, FileType, Image, OpenFlags, Options};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

/// What C holds: `intact_embed *`.
pub struct Handle(Mutex<Image>);

/// `struct intact_embed_stat`.
#[repr(C)]
pub struct Stat {
    pub ino: u64,
    pub size: u64,
    pub mode: u32,
    pub nlink: u32,
    /// 1 regular file, 2 directory, 3 symbolic link, 4 anything else.
    pub kind: u32,
    pub reserved: u32,
}

/// `struct intact_embed_counters`: the device's work since the image was opened.
#[repr(C)]
pub struct Counters {
    pub stores: u64,
    pub bytes_stored: u64,
    pub lines_flushed: u64,
    pub fences: u64,
}

/// `INTACT_EMBED_NO_SYNC`: fences do not msync (durable against a crash of the program
/// only, not of the machine).
pub const NO_SYNC: u32 = 1;
/// `INTACT_EMBED_INLINE_CHECKPOINTS`: commits checkpoint inline, no background thread
/// (the mount's `-o pmem_ckpt=inline`).
pub const INLINE_CHECKPOINTS: u32 = 2;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno, valid for its lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// Records a failure for errno and intact_embed_errmsg.
fn fail(e: EmbedError) -> c_int {
    let code = e.errno();
    assert!(code > 0, "an error has a positive errno: {e}");
    let msg = CString::new(e.to_string().replace('\0', " ")).expect("no NUL left");
    LAST_ERROR.with(|m| *m.borrow_mut() = msg);
    set_errno(code);
    -1
}

fn invalid(what: &str) -> EmbedError {
    EmbedError::Invalid {
        path: "(argument)".into(),
        why: what.into(),
    }
}

/// A C string argument as a path.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string alive for the call.
unsafe fn path_arg<'a>(p: *const c_char) -> Result<&'a Path, EmbedError> {
    if p.is_null() {
        return Err(invalid("a path argument is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    Ok(Path::new(OsStr::from_bytes(bytes)))
}

/// Runs `f` on the image of handle `h` (EINVAL for NULL).
///
/// # Safety
/// `h` is NULL or a handle from [`intact_embed_open`] not yet closed.
unsafe fn with<T>(
    h: *const Handle,
    f: impl FnOnce(&mut Image) -> Result<T, EmbedError>,
) -> Result<T, EmbedError> {
    if h.is_null() {
        return Err(invalid("the intact_embed handle is NULL"));
    }
    // SAFETY: a live handle by the caller's contract; the mutex serialises threads.
    let m = unsafe { &(*h).0 };
    let mut img = m.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut img)
}

fn ret(r: Result<(), EmbedError>) -> c_int {
    r.map_or_else(fail, |()| 0)
}

fn ret64(r: Result<u64, EmbedError>) -> i64 {
    match r {
        Ok(v) => i64::try_from(v).unwrap_or_else(|_| panic!("{v} fits an int64_t")),
        Err(e) => fail(e).into(),
    }
}

/// # Safety
/// `image` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_mkfs(
    image: *const c_char,
    size_bytes: u64,
    log_bytes: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    let r = unsafe { path_arg(image) }
        .and_then(|p| mkfs(p, size_bytes, (log_bytes > 0).then_some(log_bytes)));
    ret(r)
}

/// # Safety
/// `image` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_open(image: *const c_char, flags: u32) -> *mut Handle {
    let opts = Options {
        sync_on_fence: flags & NO_SYNC == 0,
        background_checkpoints: flags & INLINE_CHECKPOINTS == 0,
    };
    let known = NO_SYNC | INLINE_CHECKPOINTS;
    let r = if flags & !known != 0 {
        Err(invalid(&format!(
            "unknown flags {:#x} (only INTACT_EMBED_NO_SYNC and INTACT_EMBED_INLINE_CHECKPOINTS)",
            flags & !known
        )))
    } else {
        // SAFETY: forwarded contract.
        unsafe { path_arg(image) }.and_then(|p| Image::open(p, opts))
    };
    match r {
        Ok(img) => Box::into_raw(Box::new(Handle(Mutex::new(img)))),
        Err(e) => {
            fail(e);
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// `h` is NULL or a handle from [`intact_embed_open`] not yet closed; it is freed (also
/// when closing fails).
#[no_mangle]
pub unsafe extern "C" fn intact_embed_close(h: *mut Handle) -> c_int {
    if h.is_null() {
        return fail(invalid("the intact_embed handle is NULL"));
    }
    // SAFETY: from Box::into_raw in intact_embed_open, closed once by the caller's contract.
    let b = unsafe { Box::from_raw(h) };
    let img = b.0.into_inner().unwrap_or_else(|p| p.into_inner());
    ret(img.close())
}

/// The open(2) flags embedded mode takes: the access mode, O_CREAT, O_EXCL, O_TRUNC, and
/// O_CLOEXEC and O_NOFOLLOW, which change nothing here.
fn open_flags(oflags: c_int) -> Result<OpenFlags, EmbedError> {
    let known = libc::O_ACCMODE
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_TRUNC
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW;
    if oflags & !known != 0 {
        return Err(invalid(&format!(
            "open flags {:#o} are not supported embedded",
            oflags & !known
        )));
    }
    let acc = oflags & libc::O_ACCMODE;
    if acc != libc::O_RDONLY && acc != libc::O_WRONLY && acc != libc::O_RDWR {
        return Err(invalid(
            "the access mode is not O_RDONLY, O_WRONLY or O_RDWR",
        ));
    }
    Ok(OpenFlags {
        write: acc != libc::O_RDONLY,
        create: oflags & libc::O_CREAT != 0,
        exclusive: oflags & libc::O_EXCL != 0,
        truncate: oflags & libc::O_TRUNC != 0,
    })
}

/// # Safety
/// `h` as for [`intact_embed_close`] (not freed); `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_open_file(
    h: *const Handle,
    path: *const c_char,
    oflags: c_int,
    mode: u32,
) -> c_int {
    // SAFETY: forwarded contract.
    let r = unsafe { path_arg(path) }
        .and_then(|p| open_flags(oflags).map(|f| (p, f)))
        .and_then(|(p, f)| unsafe { with(h, |img| img.open_file(p, f, mode)) });
    r.unwrap_or_else(fail)
}

/// # Safety
/// `h` as for [`intact_embed_open_file`].
#[no_mangle]
pub unsafe extern "C" fn intact_embed_close_file(h: *const Handle, fd: Fd) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with(h, |img| img.close_file(fd)) })
}

/// The length of a caller's buffer as a slice length: EINVAL for a NULL buffer of non-zero
/// length, or a length beyond the address space.
fn buffer_len(is_null: bool, len: u64) -> Result<usize, EmbedError> {
    if is_null && len > 0 {
        return Err(invalid("the buffer is NULL"));
    }
    usize::try_from(len).map_err(|_| invalid("the length is larger than the address space"))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `buf` holds `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_pread(
    h: *const Handle,
    fd: Fd,
    buf: *mut u8,
    len: u64,
    off: u64,
) -> i64 {
    let n = match buffer_len(buf.is_null(), len) {
        Ok(n) => n,
        Err(e) => return fail(e).into(),
    };
    let out: &mut [u8] = if n == 0 {
        &mut []
    } else {
        // SAFETY: `buf` holds `len` writable bytes by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(buf, n) }
    };
    // SAFETY: forwarded contract.
    ret64(unsafe { with(h, |img| img.pread(fd, out, off).map(|n| n as u64)) })
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `buf` holds `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_pwrite(
    h: *const Handle,
    fd: Fd,
    buf: *const u8,
    len: u64,
    off: u64,
) -> i64 {
    let n = match buffer_len(buf.is_null(), len) {
        Ok(n) => n,
        Err(e) => return fail(e).into(),
    };
    let data: &[u8] = if n == 0 {
        &[]
    } else {
        // SAFETY: `buf` holds `len` readable bytes by the caller's contract.
        unsafe { std::slice::from_raw_parts(buf, n) }
    };
    // SAFETY: forwarded contract.
    ret64(unsafe { with(h, |img| img.pwrite(fd, data, off).map(|n| n as u64)) })
}

/// # Safety
/// `h` as for [`intact_embed_open_file`].
#[no_mangle]
pub unsafe extern "C" fn intact_embed_ftruncate(h: *const Handle, fd: Fd, size: u64) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with(h, |img| img.ftruncate(fd, size)) })
}

/// # Safety
/// `h` as for [`intact_embed_open_file`].
#[no_mangle]
pub unsafe extern "C" fn intact_embed_fsync(h: *const Handle, fd: Fd) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with(h, |img| img.fsync(fd)) })
}

/// INTACT_EMBED_FILE, _DIR, _SYMLINK or _OTHER.
fn kind_code(kind: FileType) -> u32 {
    match kind {
        FileType::File => 1,
        FileType::Dir => 2,
        FileType::Symlink => 3,
        _ => 4,
    }
}

fn to_stat(a: &crate::Attr) -> Stat {
    Stat {
        ino: a.ino,
        size: a.size,
        mode: a.mode,
        nlink: a.nlink,
        kind: kind_code(a.kind),
        reserved: 0,
    }
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `st` points to a writable struct.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_fstat(h: *const Handle, fd: Fd, st: *mut Stat) -> c_int {
    if st.is_null() {
        return fail(invalid("the stat pointer is NULL"));
    }
    // SAFETY: forwarded contract; `st` is writable.
    ret(unsafe { with(h, |img| img.fstat(fd)) }.map(|a| unsafe { st.write(to_stat(&a)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `path` NUL-terminated; `st` writable.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_stat(
    h: *const Handle,
    path: *const c_char,
    st: *mut Stat,
) -> c_int {
    if st.is_null() {
        return fail(invalid("the stat pointer is NULL"));
    }
    // SAFETY: forwarded contract.
    let r = unsafe { path_arg(path) }.and_then(|p| unsafe { with(h, |img| img.stat(p)) });
    // SAFETY: `st` is writable by the caller's contract.
    ret(r.map(|a| unsafe { st.write(to_stat(&a)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `path` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_unlink(h: *const Handle, path: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { path_arg(path) }.and_then(|p| unsafe { with(h, |img| img.unlink(p)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `path` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_mkdir(
    h: *const Handle,
    path: *const c_char,
    mode: u32,
) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { path_arg(path) }.and_then(|p| unsafe { with(h, |img| img.mkdir(p, mode)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `path` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_rmdir(h: *const Handle, path: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { path_arg(path) }.and_then(|p| unsafe { with(h, |img| img.rmdir(p)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `from` and `to` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_rename(
    h: *const Handle,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    // SAFETY: forwarded contract.
    let r = unsafe { path_arg(from) }
        .and_then(|f| unsafe { path_arg(to) }.map(|t| (f, t)))
        .and_then(|(f, t)| unsafe { with(h, |img| img.rename(f, t)) });
    ret(r)
}

/// `intact_embed_readdir`'s callback: nonzero stops the listing.
pub type ReaddirFn =
    unsafe extern "C" fn(arg: *mut c_void, name: *const c_char, ino: u64, kind: u32) -> c_int;

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `path` NUL-terminated; `cb` callable with `arg`.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_readdir(
    h: *const Handle,
    path: *const c_char,
    cb: Option<ReaddirFn>,
    arg: *mut c_void,
) -> c_int {
    let Some(cb) = cb else {
        return fail(invalid("the readdir callback is NULL"));
    };
    // SAFETY: forwarded contract. The listing is copied out first, so the callback may
    // call back into the image (the lock is not held while it runs).
    let r = unsafe { path_arg(path) }.and_then(|p| unsafe { with(h, |img| img.readdir(p)) });
    let entries = match r {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    for e in entries {
        // A name in a directory holds no NUL byte (the engine checks names).
        let name = CString::new(e.name).expect("a directory entry's name has no NUL");
        let kind = kind_code(e.kind);
        // SAFETY: the caller's callback with the caller's argument; `name` lives across the call.
        if unsafe { cb(arg, name.as_ptr(), e.ino, kind) } != 0 {
            break;
        }
    }
    0
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `fds` holds `n` ints.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_tx_begin(
    h: *const Handle,
    fds: *const c_int,
    n: c_int,
) -> i64 {
    if fds.is_null() || n < 1 {
        return fail(invalid("tx_begin needs fds != NULL and n >= 1")).into();
    }
    // SAFETY: `fds` holds `n` (>= 1) ints by the caller's contract.
    let fds = unsafe { std::slice::from_raw_parts(fds, n as usize) };
    // SAFETY: forwarded contract.
    ret64(unsafe { with(h, |img| img.tx_begin(fds)) })
}

/// A transaction id from C: positive.
fn tx_arg(tx: i64) -> Result<u64, EmbedError> {
    u64::try_from(tx)
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| invalid(&format!("{tx} is not a transaction id (they are positive)")))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`].
#[no_mangle]
pub unsafe extern "C" fn intact_embed_tx_add(h: *const Handle, tx: i64, fd: Fd) -> c_int {
    // SAFETY: forwarded contract.
    ret(tx_arg(tx).and_then(|t| unsafe { with(h, |img| img.tx_add(t, fd)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`].
#[no_mangle]
pub unsafe extern "C" fn intact_embed_tx_commit(h: *const Handle, tx: i64) -> c_int {
    // SAFETY: forwarded contract.
    ret(tx_arg(tx).and_then(|t| unsafe { with(h, |img| img.tx_commit(t).map(|_| ())) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`].
#[no_mangle]
pub unsafe extern "C" fn intact_embed_tx_abort(h: *const Handle, tx: i64) -> c_int {
    // SAFETY: forwarded contract.
    ret(tx_arg(tx).and_then(|t| unsafe { with(h, |img| img.tx_abort(t)) }))
}

/// # Safety
/// `h` as for [`intact_embed_open_file`]; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn intact_embed_counters(h: *const Handle, out: *mut Counters) -> c_int {
    if out.is_null() {
        return fail(invalid("the counters pointer is NULL"));
    }
    // SAFETY: forwarded contract.
    let r = unsafe { with(h, |img| Ok(img.device_counters())) };
    // SAFETY: `out` is writable by the caller's contract.
    ret(r.map(|c| unsafe {
        out.write(Counters {
            stores: c.stores,
            bytes_stored: c.bytes_stored,
            lines_flushed: c.lines_flushed,
            fences: c.fences,
        })
    }))
}

/// The calling thread's last failure message ("" before any); valid until its next failing
/// call.
#[no_mangle]
pub extern "C" fn intact_embed_errmsg() -> *const c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}
