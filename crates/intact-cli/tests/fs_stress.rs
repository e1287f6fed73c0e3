//! A stress test of the real FUSE mount: eight writer processes in four streams (two per
//! stream) append, overwrite, truncate, replace (write a temporary file, fsync, rename)
//! and unlink their own files under a 1 MiB dirty limit and one-second periodic commits,
//! fsyncing one operation in eight, so that dirty-limit commits, periodic commits and
//! fsyncs race; meanwhile a reader checks that whatever it reads is data that was written.
//! At the end every file must hold exactly what its writer wrote: through the mount, and
//! again after an unmount, a clean fsck and a remount.
//!
//! Streams belong to a process (the daemon maps a request's thread to its thread group,
//! crates/intactfs-fuse/src/procs.rs), so each writer is a process of its own: this test
//! binary run again with `INTACTFS_STRESS_WRITER` set. The writers run for
//! `INTACTFS_STRESS_SECS` seconds (default 60). Needs root and /dev/fuse, as fs_mount.rs.
//!
//! Content is self-describing, so that the reader can check reads that race with writes:
//! in the block files every 4 KiB block carries a header (writer, file, block index,
//! version) and a payload generated from it; a block that is not one that was written
//! there is an error once a re-read shows it stays that way (a read racing with a write of
//! the same page may see it half copied: counted, and reported in the summary). Replaced
//! files are never written after their rename, so the reader checks them strictly: one
//! complete version, every block of the same version, the length its header names.

mod common;
use common::mount::Mount;
use intactfs_fuse::control;
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TEST_NAME: &str = "eight_writers_in_four_streams_under_a_1mib_dirty_limit";
/// Set in a writer process: its number.
const WRITER_ENV: &str = "INTACTFS_STRESS_WRITER";
const WRITERS: usize = 8;
const PER_STREAM: usize = 2;
/// Files per writer: see [`kind`].
const SLOTS: usize = 7;
const BLOCK: usize = 4096;
/// Block files grow to at most this many blocks, byte files to [`MAX_BYTES`].
const MAX_BLOCKS: usize = 64;
const MAX_BYTES: usize = 256 << 10;
const MAGIC: &[u8; 8] = b"INTACTSB";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Appended whole blocks (O_APPEND), truncated to fewer blocks, unlinked.
    Log,
    /// Whole blocks overwritten at random block offsets (growing it up to the end),
    /// truncated to fewer blocks, unlinked.
    Rand,
    /// Random bytes at random byte offsets (past the end too: holes), truncated up and down.
    Bytes,
    /// Replaced whole: a temporary file written, fsynced and renamed over it.
    Replace,
}

fn kind(slot: usize) -> Kind {
    match slot {
        0 | 1 => Kind::Log,
        2 | 3 => Kind::Rand,
        4 => Kind::Bytes,
        _ => Kind::Replace,
    }
}

/// splitmix64: deterministic, seeded per writer.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next() % n as u64) as usize
    }
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Block `idx` of file `slot` of writer `w`, as version `version` writes it; `total` is
/// the number of blocks of a replaced file's version (0 in other files).
fn block(w: usize, slot: usize, idx: usize, version: u64, total: u32) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[0..8].copy_from_slice(MAGIC);
    b[8..10].copy_from_slice(&(w as u16).to_le_bytes());
    b[10..12].copy_from_slice(&(slot as u16).to_le_bytes());
    b[12..16].copy_from_slice(&(idx as u32).to_le_bytes());
    b[16..24].copy_from_slice(&version.to_le_bytes());
    b[24..28].copy_from_slice(&total.to_le_bytes());
    let mut r = Rng(mix(mix(mix(w as u64 + 1) ^ slot as u64) ^ idx as u64) ^ version);
    for c in b[32..].chunks_mut(8) {
        c.copy_from_slice(&r.next().to_le_bytes());
    }
    b
}

/// A block's header: (writer, file, block index, version, total).
fn header(b: &[u8]) -> Option<(usize, usize, usize, u64, u32)> {
    if b.len() < 32 || &b[0..8] != MAGIC {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    Some((
        u16_at(8),
        u16_at(10),
        u32_at(12) as usize,
        u64::from_le_bytes(b[16..24].try_into().unwrap()),
        u32_at(24),
    ))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What a block is, for messages.
fn describe(b: &[u8]) -> String {
    match header(b) {
        Some((w, s, i, v, t)) => {
            let intact = b.len() == BLOCK && block(w, s, i, v, t) == b;
            format!(
                "block tagged writer {w} file f{s} block {i} version {v} total {t} ({})",
                if intact {
                    "payload intact"
                } else {
                    "payload damaged"
                }
            )
        }
        None if b.iter().all(|&x| x == 0) => "all zeros".to_string(),
        None => format!("untagged data {}...", hex(&b[..b.len().min(16)])),
    }
}

/// Checks that `got` (a whole block read at block index `idx` of file `slot` of writer
/// `w`) is a block written there; returns its version and total.
fn check_block(got: &[u8], w: usize, slot: usize, idx: usize) -> Result<(u64, u32), String> {
    let Some((hw, hs, hi, v, t)) = header(got) else {
        return Err(format!(
            "expected a block tagged writer {w} file f{slot} block {idx}, got {}",
            describe(got)
        ));
    };
    if (hw, hs, hi) != (w, slot, idx) {
        return Err(format!(
            "expected a block tagged writer {w} file f{slot} block {idx}, got a {}",
            describe(got)
        ));
    }
    let want = block(w, slot, idx, v, t);
    if let Some(o) = (0..BLOCK).find(|&o| want[o] != got[o]) {
        let e = (o + 16).min(BLOCK);
        return Err(format!(
            "the {} is damaged at byte {o} of the block: expected {} got {}",
            describe(got),
            hex(&want[o..e]),
            hex(&got[o..e])
        ));
    }
    Ok((v, t))
}

/// Why `got` is not `want` (None if it is), naming the first differing offset.
fn difference(want: &[u8], got: &[u8]) -> Option<String> {
    if want == got {
        return None;
    }
    let off = (0..want.len().min(got.len()))
        .find(|&o| want[o] != got[o])
        .unwrap_or(want.len().min(got.len()));
    let at = |d: &[u8]| hex(&d[off.min(d.len())..(off + 16).min(d.len())]);
    let blk = off / BLOCK * BLOCK;
    let blk_of = |d: &[u8]| {
        if blk < d.len() {
            describe(&d[blk..(blk + BLOCK).min(d.len())])
        } else {
            "past the end".to_string()
        }
    };
    Some(format!(
        "length expected {} got {}; first difference at offset {off}: expected {} got {}; the block at offset {blk}: expected {}, got {}",
        want.len(),
        got.len(),
        at(want),
        at(got),
        blk_of(want),
        blk_of(got)
    ))
}

/// Opens `p` for reading, with O_DIRECT (reads go to the daemon, past the page cache).
fn open_read(p: &Path, direct: bool) -> std::io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(if direct { libc::O_DIRECT } else { 0 })
        .open(p)
}

/// A 4096-aligned buffer of `n` bytes (O_DIRECT wants aligned memory).
struct Aligned {
    raw: Vec<u8>,
    off: usize,
    n: usize,
}

impl Aligned {
    fn new(n: usize) -> Aligned {
        let raw = vec![0u8; n + BLOCK];
        let off = raw.as_ptr().align_offset(BLOCK);
        Aligned { raw, off, n }
    }
    fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.n]
    }
}

/// The whole file from offset 0 (1 MiB reads into an aligned buffer).
fn read_all(f: &fs::File) -> std::io::Result<Vec<u8>> {
    let mut buf = Aligned::new(1 << 20);
    let mut out = Vec::new();
    loop {
        let n = f.read_at(buf.buf(), out.len() as u64)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf.buf()[..n]);
    }
}

fn read_path(p: &Path, direct: bool) -> std::io::Result<Vec<u8>> {
    read_all(&open_read(p, direct)?)
}

// ---------------------------------------------------------------------------------------
// A writer process.

#[derive(Default)]
struct WriterStats {
    ops: u64,
    fsyncs: u64,
    bytes: u64,
    verifies: u64,
    unlinks: u64,
    truncates: u64,
    renames: u64,
    max_fsync_ms: u64,
}

struct Writer {
    w: usize,
    dir: PathBuf,
    rng: Rng,
    /// Expected content of each file (None: it does not exist).
    model: Vec<Option<Vec<u8>>>,
    version: u64,
    st: WriterStats,
}

fn ok<T>(r: std::io::Result<T>, what: impl FnOnce() -> String) -> T {
    r.unwrap_or_else(|e| panic!("{}: {e}", what()))
}

impl Writer {
    fn path(&self, slot: usize) -> PathBuf {
        self.dir.join(format!("f{slot}"))
    }

    fn fsync(&mut self, f: &fs::File, p: &Path, data_only: bool) {
        let t = Instant::now();
        ok(
            if data_only {
                f.sync_data()
            } else {
                f.sync_all()
            },
            || format!("writer {}: fsync of {}", self.w, p.display()),
        );
        self.st.fsyncs += 1;
        self.st.max_fsync_ms = self.st.max_fsync_ms.max(t.elapsed().as_millis() as u64);
    }

    fn fsync_dir(&mut self) {
        let d = ok(fs::File::open(&self.dir), || {
            format!("writer {}: open {}", self.w, self.dir.display())
        });
        let dir = self.dir.clone();
        self.fsync(&d, &dir, false);
    }

    fn unlink(&mut self, slot: usize) {
        let p = self.path(slot);
        ok(fs::remove_file(&p), || {
            format!("writer {}: unlink {}", self.w, p.display())
        });
        self.model[slot] = None;
        self.st.unlinks += 1;
    }

    fn open_rw(&self, slot: usize, append: bool) -> fs::File {
        let p = self.path(slot);
        let mut o = fs::OpenOptions::new();
        if append {
            o.append(true);
        } else {
            o.write(true);
        }
        ok(o.create(true).mode(0o644).open(&p), || {
            format!("writer {}: open {}", self.w, p.display())
        })
    }

    fn truncate(&mut self, slot: usize, f: &fs::File, len: usize) {
        ok(f.set_len(len as u64), || {
            format!(
                "writer {}: truncate {} to {len}",
                self.w,
                self.path(slot).display()
            )
        });
        self.model[slot].get_or_insert_with(Vec::new).resize(len, 0);
        self.st.truncates += 1;
    }

    fn pwrite(&mut self, slot: usize, f: &fs::File, off: usize, data: &[u8]) {
        ok(f.write_all_at(data, off as u64), || {
            format!(
                "writer {}: write {} bytes at {off} of {}",
                self.w,
                data.len(),
                self.path(slot).display()
            )
        });
        let m = self.model[slot].get_or_insert_with(Vec::new);
        if m.len() < off + data.len() {
            m.resize(off + data.len(), 0);
        }
        m[off..off + data.len()].copy_from_slice(data);
        self.st.bytes += data.len() as u64;
    }

    fn blocks(&self, slot: usize, first: usize, n: usize, total: u32) -> Vec<u8> {
        (first..first + n)
            .flat_map(|i| block(self.w, slot, i, self.version, total))
            .collect()
    }

    /// One operation on a random file of this writer; fsyncs one in eight.
    fn step(&mut self) {
        self.version += 1;
        self.st.ops += 1;
        let slot = self.rng.below(SLOTS);
        let p = self.path(slot);
        let exists = self.model[slot].is_some();
        let len = self.model[slot].as_ref().map_or(0, Vec::len);
        let r = self.rng.below(100);
        let sync = self.rng.one_in(8);
        let data_only = self.rng.one_in(2);
        if exists && r < 5 {
            self.unlink(slot);
            if sync {
                self.fsync_dir();
            }
            return;
        }
        let f = match kind(slot) {
            Kind::Log => {
                let nb = len / BLOCK;
                if (r < 20 && nb > 0) || nb >= MAX_BLOCKS {
                    let f = self.open_rw(slot, false);
                    let to = self.rng.below(nb) * BLOCK;
                    self.truncate(slot, &f, to);
                    f
                } else {
                    let mut f = self.open_rw(slot, true);
                    let n = 1 + self.rng.below(8.min(MAX_BLOCKS - nb));
                    let data = self.blocks(slot, nb, n, 0);
                    ok(f.write_all(&data), || {
                        format!(
                            "writer {}: append {} bytes to {}",
                            self.w,
                            data.len(),
                            p.display()
                        )
                    });
                    self.model[slot]
                        .get_or_insert_with(Vec::new)
                        .extend_from_slice(&data);
                    self.st.bytes += data.len() as u64;
                    f
                }
            }
            Kind::Rand => {
                let nb = len / BLOCK;
                let f = self.open_rw(slot, false);
                if r < 20 && nb > 0 {
                    let to = self.rng.below(nb) * BLOCK;
                    self.truncate(slot, &f, to);
                } else {
                    let first = self.rng.below((nb + 1).min(MAX_BLOCKS));
                    let n = 1 + self.rng.below(16.min(MAX_BLOCKS - first));
                    let data = self.blocks(slot, first, n, 0);
                    self.pwrite(slot, &f, first * BLOCK, &data);
                }
                f
            }
            Kind::Bytes => {
                let f = self.open_rw(slot, false);
                if r < 20 {
                    let to = self.rng.below(MAX_BYTES);
                    self.truncate(slot, &f, to);
                } else {
                    let off = self.rng.below((len + 3000).min(MAX_BYTES));
                    let n = 1 + self.rng.below(20_000.min(MAX_BYTES - off));
                    let data: Vec<u8> = (0..n).map(|_| self.rng.next() as u8).collect();
                    self.pwrite(slot, &f, off, &data);
                }
                f
            }
            Kind::Replace => {
                let n = 1 + self.rng.below(32);
                let data = self.blocks(slot, 0, n, n as u32);
                let tmp = self.dir.join(format!("f{slot}.tmp"));
                let mut t = ok(
                    fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .mode(0o644)
                        .open(&tmp),
                    || format!("writer {}: create {}", self.w, tmp.display()),
                );
                ok(t.write_all(&data), || {
                    format!(
                        "writer {}: write {} bytes to {}",
                        self.w,
                        data.len(),
                        tmp.display()
                    )
                });
                self.fsync(&t, &tmp, false);
                drop(t);
                ok(fs::rename(&tmp, &p), || {
                    format!(
                        "writer {}: rename {} over {}",
                        self.w,
                        tmp.display(),
                        p.display()
                    )
                });
                self.model[slot] = Some(data);
                self.st.bytes += (n * BLOCK) as u64;
                self.st.renames += 1;
                if sync {
                    self.fsync_dir();
                }
                return;
            }
        };
        if sync {
            self.fsync(&f, &p, data_only);
        }
    }

    /// Reads file `slot` back (through the page cache or with O_DIRECT) and compares it
    /// with what this writer wrote.
    fn verify(&mut self, slot: usize, direct: bool) {
        let p = self.path(slot);
        self.st.verifies += 1;
        match (&self.model[slot], read_path(&p, direct)) {
            (None, Err(e)) if e.kind() == ErrorKind::NotFound => {}
            (None, r) => panic!(
                "writer {}: {} should not exist (unlinked), but reading it gave {:?}",
                self.w,
                p.display(),
                r.map(|d| d.len())
            ),
            (Some(_), Err(e)) => panic!(
                "writer {}: reading {} back (O_DIRECT: {direct}): {e}",
                self.w,
                p.display()
            ),
            (Some(want), Ok(got)) => {
                if let Some(d) = difference(want, &got) {
                    panic!("writer {}: {} read back wrong (O_DIRECT: {direct}, after {} operations): {d}", self.w, p.display(), self.st.ops);
                }
            }
        }
    }
}

/// A writer process: joins its stream, works until the deadline, checks its files, and
/// leaves their expected content (and its counts) in the output directory.
fn writer_main(w: usize) {
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    // Die with the test (the thread that spawned us) should it die first.
    // SAFETY: prctl with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // SAFETY: getppid cannot fail.
    if unsafe { libc::getppid() }.to_string() != env("INTACTFS_STRESS_PARENT") {
        return;
    }
    let mnt = PathBuf::from(env("INTACTFS_STRESS_MNT"));
    let out = PathBuf::from(env("INTACTFS_STRESS_OUT"));
    let secs: u64 = env("INTACTFS_STRESS_SECS").parse().unwrap();
    let stream = format!("s{}", w / PER_STREAM);
    let d = fs::File::open(&mnt).unwrap();
    control::setstream(d.as_raw_fd(), control::stream_id(&stream), 0).unwrap();
    assert_eq!(
        control::getstream(d.as_raw_fd()).unwrap().id,
        control::stream_id(&stream)
    );
    drop(d);
    let dir = mnt.join(format!("w{w}"));
    fs::create_dir(&dir).unwrap();
    let mut wr = Writer {
        w,
        dir,
        rng: Rng(0x5EED_0000_0000 + w as u64),
        model: vec![None; SLOTS],
        version: 0,
        st: WriterStats::default(),
    };
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        wr.step();
        if wr.rng.one_in(16) {
            let (slot, direct) = (wr.rng.below(SLOTS), wr.rng.one_in(2));
            wr.verify(slot, direct);
        }
    }
    for slot in 0..SLOTS {
        wr.verify(slot, false);
        wr.verify(slot, true);
    }
    let mine = out.join(format!("w{w}"));
    fs::create_dir(&mine).unwrap();
    for (slot, m) in wr.model.iter().enumerate() {
        if let Some(m) = m {
            fs::write(mine.join(format!("f{slot}")), m).unwrap();
        }
    }
    let s = &wr.st;
    fs::write(
        out.join(format!("w{w}.stats")),
        format!(
            "{} {} {} {} {} {} {} {}",
            s.ops, s.fsyncs, s.bytes, s.verifies, s.unlinks, s.truncates, s.renames, s.max_fsync_ms
        ),
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------------
// The reader (a thread of the test process, in the init stream).

#[derive(Default, Debug)]
struct ReaderStats {
    reads: u64,
    direct_reads: u64,
    bytes: u64,
    missing: u64,
    blocks_checked: u64,
    /// Blocks that were not valid in one read, but changed (or became valid) when re-read.
    transient_buffered: u64,
    transient_direct: u64,
    readdirs: u64,
}

/// Reads random files until `stop`; panics on content that was never written.
fn reader(mnt: PathBuf, stop: Arc<AtomicBool>) -> ReaderStats {
    let mut rs = ReaderStats::default();
    let mut rng = Rng(0x4EAD_E400);
    let mut blockbuf = Aligned::new(BLOCK);
    while !stop.load(Ordering::Relaxed) {
        let w = rng.below(WRITERS);
        let dir = mnt.join(format!("w{w}"));
        if rng.one_in(16) {
            match fs::read_dir(&dir) {
                Ok(entries) => {
                    rs.readdirs += 1;
                    for e in entries {
                        let e =
                            e.unwrap_or_else(|e| panic!("reader: listing {}: {e}", dir.display()));
                        let name = e.file_name().into_string().unwrap();
                        let known = (0..SLOTS).any(|s| {
                            name == format!("f{s}")
                                || (kind(s) == Kind::Replace && name == format!("f{s}.tmp"))
                        });
                        assert!(
                            known,
                            "reader: unexpected name {name:?} in {}",
                            dir.display()
                        );
                    }
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => panic!("reader: listing {}: {e}", dir.display()),
            }
        }
        let slot = rng.below(SLOTS);
        let p = dir.join(format!("f{slot}"));
        let direct = rng.one_in(2);
        let f = match open_read(&p, direct) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                rs.missing += 1;
                continue;
            }
            Err(e) => panic!("reader: open {} (O_DIRECT: {direct}): {e}", p.display()),
        };
        let data = read_all(&f).unwrap_or_else(|e| {
            panic!("reader: reading {} (O_DIRECT: {direct}): {e}", p.display())
        });
        rs.reads += 1;
        rs.direct_reads += direct as u64;
        rs.bytes += data.len() as u64;
        match kind(slot) {
            Kind::Bytes => assert!(
                data.len() <= MAX_BYTES,
                "reader: {} has {} bytes, its writer never made it longer than {MAX_BYTES}",
                p.display(),
                data.len()
            ),
            Kind::Log | Kind::Rand => {
                for (idx, got) in data.chunks_exact(BLOCK).enumerate() {
                    rs.blocks_checked += 1;
                    let Err(why) = check_block(got, w, slot, idx) else {
                        continue;
                    };
                    // A read racing with a write of this block may see it half copied: re-read
                    // it; an error only if it stays the same (and so stays wrong).
                    let mut stable = true;
                    for _ in 0..3 {
                        std::thread::sleep(Duration::from_millis(20));
                        let n = f.read_at(blockbuf.buf(), (idx * BLOCK) as u64).unwrap_or(0);
                        if n != BLOCK || blockbuf.buf() != got {
                            stable = false;
                            break;
                        }
                    }
                    assert!(!stable, "reader: {} (O_DIRECT: {direct}) at offset {}: {why}; re-reading it three times over 60 ms gave the same bytes", p.display(), idx * BLOCK);
                    if direct {
                        rs.transient_direct += 1;
                    } else {
                        rs.transient_buffered += 1;
                    }
                    eprintln!("fs_stress: reader: transient: {} (O_DIRECT: {direct}) at offset {}: {why}; it changed when re-read", p.display(), idx * BLOCK);
                }
            }
            Kind::Replace => {
                // Never written after its rename: exactly one complete version.
                let mut problem = None;
                if data.is_empty() || !data.len().is_multiple_of(BLOCK) {
                    problem = Some((0, format!("a replaced file of {} bytes (expected a whole number of blocks, at least one)", data.len())));
                }
                let mut first: Option<(u64, u32)> = None;
                for (idx, got) in data.chunks_exact(BLOCK).enumerate() {
                    if problem.is_some() {
                        break;
                    }
                    rs.blocks_checked += 1;
                    match check_block(got, w, slot, idx) {
                        Err(why) => problem = Some((idx * BLOCK, why)),
                        Ok((v, t)) => match first {
                            None if t as usize * BLOCK != data.len() => problem = Some((0, format!("version {v} has {t} blocks, but the file has {} bytes", data.len()))),
                            None => first = Some((v, t)),
                            Some((v0, _)) if v0 != v => problem = Some((idx * BLOCK, format!("a mix of versions: block 0 is version {v0}, this block is version {v}"))),
                            Some(_) => {}
                        },
                    }
                }
                if let Some((off, why)) = problem {
                    let again = read_all(&f).map(|d| {
                        if d == data {
                            "the same".to_string()
                        } else {
                            format!("different content ({} bytes)", d.len())
                        }
                    });
                    panic!("reader: {} (O_DIRECT: {direct}) at offset {off}: {why}; re-read through the same descriptor: {again:?}", p.display());
                }
            }
        }
    }
    rs
}

// ---------------------------------------------------------------------------------------
// The mount, the writer processes and the test.

/// The writer processes; dropping kills and reaps those still running.
struct Writers(Vec<Option<Child>>);

impl Drop for Writers {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The reader thread; dropping stops and joins it (so that it holds nothing open on the
/// mount when the mount is dropped).
struct Reader {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<ReaderStats>>,
}

impl Reader {
    fn finish(mut self) -> ReaderStats {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take().unwrap().join() {
            Ok(s) => s,
            Err(e) => std::panic::resume_unwind(e),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Every file of every writer through the mount (page cache and O_DIRECT) against what
/// its writer wrote; no other names in the writers' directories.
fn check_all(mnt: &Path, expected: &Path, when: &str) {
    for w in 0..WRITERS {
        let dir = mnt.join(format!("w{w}"));
        let mut present = Vec::new();
        for slot in 0..SLOTS {
            let p = dir.join(format!("f{slot}"));
            let want = match fs::read(expected.join(format!("w{w}/f{slot}"))) {
                Ok(d) => Some(d),
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(e) => panic!("{e}"),
            };
            if want.is_some() {
                present.push(format!("f{slot}"));
            }
            for direct in [false, true] {
                match (&want, read_path(&p, direct)) {
                    (None, Err(e)) if e.kind() == ErrorKind::NotFound => {}
                    (None, r) => panic!("{when}: {} should not exist (its writer unlinked it last), but reading it gave {:?}", p.display(), r.map(|d| d.len())),
                    (Some(_), Err(e)) => panic!("{when}: reading {} (O_DIRECT: {direct}): {e}", p.display()),
                    (Some(want), Ok(got)) => {
                        if let Some(d) = difference(want, &got) {
                            panic!("{when}: {} (O_DIRECT: {direct}) is not what its writer wrote: {d}", p.display());
                        }
                    }
                }
            }
        }
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{when}: listing {}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, present, "{when}: the names in {}", dir.display());
    }
}

/// Eight writers, two per stream, race dirty-limit commits (1 MiB), periodic commits
/// (every second) and their own fsyncs; a reader checks what it reads meanwhile; all files
/// are exact at the end, after an unmount, a clean fsck and a remount.
#[test]
fn eight_writers_in_four_streams_under_a_1mib_dirty_limit() {
    if let Ok(w) = std::env::var(WRITER_ENV) {
        writer_main(w.parse().unwrap());
        return;
    }
    let secs: u64 = std::env::var("INTACTFS_STRESS_SECS")
        .ok()
        .map(|s| s.parse().expect("INTACTFS_STRESS_SECS: whole seconds"))
        .unwrap_or(60);
    let started = Instant::now();
    let m = Mount::new("512M");
    m.mount(&["--threads", "4", "-o", "dirty_limit=1M,commit=1"]);
    let expected = m.dir.path().join("expected");
    fs::create_dir(&expected).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut writers = Writers(Vec::new());
    for w in 0..WRITERS {
        let errf = fs::File::create(m.dir.path().join(format!("w{w}.stderr"))).unwrap();
        let c = Command::new(&exe)
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(WRITER_ENV, w.to_string())
            .env("INTACTFS_STRESS_PARENT", std::process::id().to_string())
            .env("INTACTFS_STRESS_MNT", &m.mnt)
            .env("INTACTFS_STRESS_OUT", &expected)
            .env("INTACTFS_STRESS_SECS", secs.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(errf)
            .spawn()
            .unwrap();
        writers.0.push(Some(c));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mnt = m.mnt.clone();
    let stop2 = stop.clone();
    let reader = Reader {
        stop,
        handle: Some(std::thread::spawn(move || reader(mnt, stop2))),
    };

    // Wait for the writers; stop at the first failure (of a writer or of the reader).
    let hung = Duration::from_secs(secs + 600);
    loop {
        for (w, slot) in writers.0.iter_mut().enumerate() {
            if let Some(c) = slot {
                if let Some(st) = c.try_wait().unwrap() {
                    let err = fs::read_to_string(m.dir.path().join(format!("w{w}.stderr")))
                        .unwrap_or_default();
                    assert!(
                        st.success(),
                        "writer {w} (stream s{}) failed ({st}):\n{err}",
                        w / PER_STREAM
                    );
                    *slot = None;
                }
            }
        }
        if writers.0.iter().all(Option::is_none) || reader.handle.as_ref().unwrap().is_finished() {
            break;
        }
        assert!(
            started.elapsed() < hung,
            "writers still running {} s after they should have stopped: is the daemon stuck?",
            hung.as_secs() - secs
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let rs = reader.finish();
    let worked = started.elapsed();

    check_all(&m.mnt, &expected, "after the writers finished");
    let umount1 = m.umount_clean();
    m.fsck_clean();
    m.mount(&["--threads", "4", "-o", "dirty_limit=1M,commit=1"]);
    check_all(&m.mnt, &expected, "after an unmount, fsck and a remount");
    let umount2 = m.umount_clean();
    m.fsck_clean();

    let stats: Vec<Vec<u64>> = (0..WRITERS)
        .map(|w| {
            fs::read_to_string(expected.join(format!("w{w}.stats")))
                .unwrap()
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect()
        })
        .collect();
    let col = |i: usize| {
        stats
            .iter()
            .map(|s| s[i].to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let sum = |i: usize| stats.iter().map(|s| s[i]).sum::<u64>();
    eprintln!(
        "fs_stress: {secs} s, {WRITERS} writers in {} streams: ops [{}] (total {}), fsyncs [{}] (total {}), MiB written [{}] (total {:.1}), self-checks {}, unlinks {}, truncates {}, renames {}, slowest fsync {} ms; \
         reader: {} reads ({} O_DIRECT), {:.1} MiB, {} blocks checked, {} files missing, {} readdirs, transient bad blocks {} buffered / {} O_DIRECT; \
         writers done after {:.1} s, test {:.1} s; first {umount1:?}; then {umount2:?}",
        WRITERS / PER_STREAM,
        col(0),
        sum(0),
        col(1),
        sum(1),
        stats.iter().map(|s| format!("{:.1}", s[2] as f64 / (1 << 20) as f64)).collect::<Vec<_>>().join(","),
        sum(2) as f64 / (1 << 20) as f64,
        sum(3),
        sum(4),
        sum(5),
        sum(6),
        stats.iter().map(|s| s[7]).max().unwrap(),
        rs.reads,
        rs.direct_reads,
        rs.bytes as f64 / (1 << 20) as f64,
        rs.blocks_checked,
        rs.missing,
        rs.readdirs,
        rs.transient_buffered,
        rs.transient_direct,
        worked.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
}
