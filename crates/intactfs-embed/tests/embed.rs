//! Embedded mode on a real image file: the one-owner lock, file calls, AD-transactions, and
//! a crash (the image dropped without a clean close, as a killed program leaves it).

use intact_embed::{mkfs, EmbedError, Image, OpenFlags, Options};
use std::path::{Path, PathBuf};

const RW: OpenFlags = OpenFlags {
    write: true,
    create: false,
    exclusive: false,
    truncate: false,
};
const CREATE: OpenFlags = OpenFlags {
    write: true,
    create: true,
    exclusive: false,
    truncate: true,
};

fn image(dir: &Path) -> PathBuf {
    let p = dir.join("img");
    mkfs(&p, 16 << 20, None).unwrap();
    p
}

fn put(img: &mut Image, path: &str, data: &[u8]) {
    let fd = img.open_file(Path::new(path), CREATE, 0o644).unwrap();
    assert_eq!(img.pwrite(fd, data, 0).unwrap(), data.len());
    img.close_file(fd).unwrap();
}

fn get(img: &mut Image, path: &str) -> Option<Vec<u8>> {
    let fd = img
        .open_file(Path::new(path), OpenFlags::default(), 0)
        .ok()?;
    let mut buf = vec![0u8; 1 << 16];
    let n = img.pread(fd, &mut buf, 0).unwrap();
    img.close_file(fd).unwrap();
    buf.truncate(n);
    Some(buf)
}

#[test]
fn one_owner_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path());
    let img = Image::open(&p, Options::default()).unwrap();
    let again = Image::open(&p, Options::default()).err().expect("refused");
    assert_eq!(again.errno(), libc::EBUSY, "{again}");
    assert!(again.to_string().contains("in use"), "{again}");
    assert!(matches!(again, EmbedError::Lock(_)));
    img.close().unwrap();
    Image::open(&p, Options::default())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn files_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path());
    let mut img = Image::open(&p, Options::default()).unwrap();
    put(&mut img, "/a", b"hello");
    assert_eq!(img.stat(Path::new("a")).unwrap().size, 5);
    img.mkdir(Path::new("d"), 0o755).unwrap();
    img.rename(Path::new("a"), Path::new("d/b")).unwrap();
    assert_eq!(get(&mut img, "d/./b").as_deref(), Some(&b"hello"[..]));
    assert_eq!(get(&mut img, "d/../d/b").as_deref(), Some(&b"hello"[..]));
    assert_eq!(get(&mut img, "a"), None);
    let names: Vec<Vec<u8>> = img
        .readdir(Path::new("/d"))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![b"b".to_vec()]);
    let ro = img
        .open_file(Path::new("d/b"), OpenFlags::default(), 0)
        .unwrap();
    let e = img.pwrite(ro, b"x", 0).unwrap_err();
    assert_eq!(e.errno(), libc::EBADF, "{e}");
    img.close_file(ro).unwrap();
    assert_eq!(img.close_file(ro).unwrap_err().errno(), libc::EBADF);
    let e = img
        .open_file(Path::new("d/none"), OpenFlags::default(), 0)
        .unwrap_err();
    assert_eq!(e.errno(), libc::ENOENT);
    assert!(
        e.to_string().contains("d/none"),
        "the message names the path: {e}"
    );
    img.unlink(Path::new("d/b")).unwrap();
    img.rmdir(Path::new("d")).unwrap();
    assert_eq!(img.open_fds(), 0);
    img.close().unwrap();
}

/// The image at `p` opened, with files "a" and "b" of 6,000 bytes 'o' each, open read-write.
fn two_open_files(p: &Path) -> (Image, intact_embed::Fd, intact_embed::Fd) {
    let mut img = Image::open(p, Options::default()).unwrap();
    put(&mut img, "a", &[b'o'; 6000]);
    put(&mut img, "b", &[b'o'; 6000]);
    let a = img.open_file(Path::new("a"), RW, 0).unwrap();
    let b = img.open_file(Path::new("b"), RW, 0).unwrap();
    (img, a, b)
}

#[test]
fn transactions_commit_abort_and_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path());
    let (mut img, a, b) = two_open_files(&p);
    let tx = img.tx_begin(&[a, b]).unwrap();
    img.pwrite(a, &[b'n'; 6000], 0).unwrap();
    img.pwrite(b, &[b'n'; 6000], 0).unwrap();
    assert_eq!(img.tx_begin(&[b]).unwrap_err().errno(), libc::EBUSY);
    let st = img.tx_commit(tx).unwrap();
    assert!(st.device.fences > 0 && st.redo_entries >= 2, "{st:?}");
    assert_eq!(img.tx_commit(tx).unwrap_err().errno(), libc::EINVAL);
    let tx = img.tx_begin(&[a, b]).unwrap();
    img.pwrite(a, &[b'z'; 100], 0).unwrap();
    img.ftruncate(b, 10).unwrap();
    img.tx_abort(tx).unwrap();
    img.close_file(a).unwrap();
    img.close_file(b).unwrap();
    assert_eq!(get(&mut img, "a").unwrap(), vec![b'n'; 6000]);
    assert_eq!(get(&mut img, "b").unwrap(), vec![b'n'; 6000]);
    img.close().unwrap();
}

/// A program killed with a transaction open: the mapping's stores are in the file, no
/// clean close ran; the next open undoes the transaction and keeps the committed one.
#[test]
fn a_crash_aborts_the_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path());
    let (mut img, a, b) = two_open_files(&p);
    let tx = img.tx_begin(&[a]).unwrap();
    img.pwrite(a, &[b'c'; 6000], 0).unwrap();
    img.tx_commit(tx).unwrap();
    let tx = img.tx_begin(&[a, b]).unwrap();
    img.pwrite(a, &[b'x'; 6000], 0).unwrap();
    img.pwrite(b, &[b'x'; 6000], 0).unwrap();
    assert!(tx > 0);
    drop(img); // no close: no abort, no checkpoint
    let mut img = Image::open(&p, Options::default()).unwrap();
    assert_eq!(img.recovery().uncommitted_txs, 1, "{:?}", img.recovery());
    assert_eq!(get(&mut img, "a").unwrap(), vec![b'c'; 6000]);
    assert_eq!(get(&mut img, "b").unwrap(), vec![b'o'; 6000]);
    img.close().unwrap();
}

/// Background checkpoints (issue 28, FCFS 002 §III-E; the default): committed overwrites
/// leave checkpoint work that the image's checkpointer thread runs in units between calls,
/// and none with `background_checkpoints: false`; a crash (drop) in either mode keeps
/// every committed transaction.
#[test]
fn background_checkpoints_run_between_calls_and_keep_commits() {
    for background in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        mkfs(&p, 16 << 20, Some(64 << 10)).unwrap();
        let opts = Options {
            background_checkpoints: background,
            ..Options::default()
        };
        let mut img = Image::open(&p, opts).unwrap();
        let fds: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|n| img.open_file(Path::new(n), CREATE, 0o644).unwrap())
            .collect();
        for round in 0..200u8 {
            let tx = img.tx_begin(&fds).unwrap();
            for &fd in &fds {
                img.pwrite(fd, &[round; 9000], 0).unwrap();
            }
            img.tx_commit(tx).unwrap();
        }
        // The checkpointer is woken by the commits; give it until the work is done.
        let t0 = std::time::Instant::now();
        while img.engine().checkpoint_due() && t0.elapsed().as_secs() < 60 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let st = img.engine().stats();
        assert_eq!(st.background_units > 0, background, "{st:?}");
        assert!(st.checkpoints > 0, "{st:?}");
        drop(img); // a crash: no close
        let mut img = Image::open(&p, Options::default()).unwrap();
        for n in ["a", "b", "c"] {
            assert_eq!(get(&mut img, n).unwrap(), vec![199u8; 9000], "{n}");
        }
        img.close().unwrap();
    }
}
