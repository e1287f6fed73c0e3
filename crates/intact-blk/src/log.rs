//! The block log: every write, flush and discard a file system sent to its device, in the
//! order the device saw them. Format (`docs/blk-format.md`), all integers little-endian:
//!
//! ```text
//! header  "INTACTBLK\n" u32 version=1 u32 sector=512 u64 device_size u32 crc32c(header)
//! record  u8 tag, payload, u32 crc32c(tag ++ payload)
//!   1 write    u64 offset u32 len u8 flags(bit 0: FUA) data[len]
//!   2 flush
//!   3 discard  u64 offset u64 len
//!   4 end      u64 records_before u64 bytes_written [u8; 32] blake3 of the final image
//!   5 output   u32 len, bytes the workload printed (version 2; where in the order of the
//!              device's requests it printed them)
//! ```
//!
//! The end record is written only when recording finished cleanly, so a log without it
//! is refused as truncated. Flushes split the log into *epochs*: a write in epoch k is on
//! media once flush k+1 has completed; until then it may or may not be, in any order and
//! torn at sector granularity.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 10] = b"INTACTBLK\n";
/// Version 2 added output records; version 1 logs (no output records) are still read.
pub const VERSION: u32 = 2;
/// Torn writes are modelled at this granularity (the smallest unit a disk writes atomically).
pub const SECTOR: u64 = 512;
const HEADER: usize = 10 + 4 + 4 + 8 + 4;

const T_WRITE: u8 = 1;
const T_FLUSH: u8 = 2;
const T_DISCARD: u8 = 3;
const T_END: u8 = 4;
const T_OUTPUT: u8 = 5;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not an intact block log ({what}); logs are written by `intact blk record`", path.display())]
    NotALog { path: PathBuf, what: String },
    #[error("{}: block log version {version} is not supported (this intact reads version {VERSION}); record it again", path.display())]
    Version { path: PathBuf, version: u32 },
    #[error("{}: damaged at byte {at} (record {index}): {what}; the log cannot be used, record it again", path.display())]
    Damaged {
        path: PathBuf,
        at: usize,
        index: usize,
        what: String,
    },
    #[error("{}: truncated after record {index} (byte {at}) — it has no end record, so recording did not finish (interrupted, or the disk filled); record it again", path.display())]
    Truncated {
        path: PathBuf,
        at: usize,
        index: usize,
    },
}

/// What a record is; data of writes stays in the log's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Write {
        fua: bool,
    },
    Flush,
    /// The range reads as zeros afterwards (we assume the common "discard zeroes" case).
    Discard,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec {
    pub kind: Kind,
    pub offset: u64,
    pub len: u64,
    /// Where a write's data starts in [`BlockLog::bytes`].
    pub data_at: usize,
}

/// Totals, also kept in the log's metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub writes: u64,
    pub bytes: u64,
    pub flushes: u64,
    pub fua: u64,
    pub discards: u64,
}

/// Appends records to a log file.
pub struct LogWriter {
    out: BufWriter<File>,
    path: PathBuf,
    records: u64,
    pub counts: Counts,
    scratch: Vec<u8>,
}

impl LogWriter {
    pub fn create(path: &Path, device_size: u64) -> Result<LogWriter, LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let f = File::create(path).map_err(io)?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        let mut h = Vec::with_capacity(HEADER);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&(SECTOR as u32).to_le_bytes());
        h.extend_from_slice(&device_size.to_le_bytes());
        let crc = crc32c::crc32c(&h);
        h.extend_from_slice(&crc.to_le_bytes());
        out.write_all(&h).map_err(io)?;
        Ok(LogWriter {
            out,
            path: path.to_path_buf(),
            records: 0,
            counts: Counts::default(),
            scratch: Vec::new(),
        })
    }

    fn emit(&mut self, tag: u8, payload: &[&[u8]]) -> Result<(), LogError> {
        self.scratch.clear();
        self.scratch.push(tag);
        for p in payload {
            self.scratch.extend_from_slice(p);
        }
        let crc = crc32c::crc32c(&self.scratch);
        self.scratch.extend_from_slice(&crc.to_le_bytes());
        self.records += 1;
        self.out
            .write_all(&self.scratch)
            .map_err(|source| LogError::Io {
                path: self.path.clone(),
                source,
            })
    }

    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), LogError> {
        let len = u32::try_from(data.len()).map_err(|_| LogError::Io {
            path: self.path.clone(),
            source: std::io::Error::other("a single write larger than 4 GiB"),
        })?;
        self.counts.writes += 1;
        self.counts.bytes += data.len() as u64;
        self.counts.fua += u64::from(fua);
        self.emit(
            T_WRITE,
            &[
                &offset.to_le_bytes(),
                &len.to_le_bytes(),
                &[u8::from(fua)],
                data,
            ],
        )
    }

    pub fn flush(&mut self) -> Result<(), LogError> {
        self.counts.flushes += 1;
        self.emit(T_FLUSH, &[])
    }

    /// What the workload printed, at this point of the device's request order.
    pub fn output(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        let len = u32::try_from(bytes.len()).map_err(|_| LogError::Io {
            path: self.path.clone(),
            source: std::io::Error::other("output chunk larger than 4 GiB"),
        })?;
        self.emit(T_OUTPUT, &[&len.to_le_bytes(), bytes])
    }

    pub fn discard(&mut self, offset: u64, len: u64) -> Result<(), LogError> {
        self.counts.discards += 1;
        self.emit(T_DISCARD, &[&offset.to_le_bytes(), &len.to_le_bytes()])
    }

    /// Writes the end record and syncs the file: only now is the log complete.
    pub fn finish(mut self, final_hash: [u8; 32]) -> Result<Counts, LogError> {
        let records = self.records;
        let bytes = self.counts.bytes;
        self.emit(
            T_END,
            &[&records.to_le_bytes(), &bytes.to_le_bytes(), &final_hash],
        )?;
        let io = |source| LogError::Io {
            path: self.path.clone(),
            source,
        };
        let f = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        f.sync_all().map_err(io)?;
        Ok(self.counts)
    }
}

/// A complete log, read into memory and checked.
#[derive(Debug)]
pub struct BlockLog {
    pub path: PathBuf,
    pub version: u32,
    pub device_size: u64,
    pub records: Vec<Rec>,
    /// Output the workload printed: (number of `records` logged before it, where its bytes
    /// start in the buffer, length).
    pub outputs: Vec<(usize, usize, usize)>,
    pub final_hash: [u8; 32],
    bytes: Vec<u8>,
}

impl BlockLog {
    pub fn open(path: &Path) -> Result<BlockLog, LogError> {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|source| LogError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        BlockLog::parse(path, bytes)
    }

    pub fn parse(path: &Path, bytes: Vec<u8>) -> Result<BlockLog, LogError> {
        let p = || path.to_path_buf();
        if bytes.len() < HEADER || &bytes[..10] != MAGIC {
            return Err(LogError::NotALog {
                path: p(),
                what: "no INTACTBLK header".into(),
            });
        }
        let version = u32::from_le_bytes(bytes[10..14].try_into().unwrap_or_default());
        if version != VERSION && version != 1 {
            return Err(LogError::Version { path: p(), version });
        }
        let sector = u32::from_le_bytes(bytes[14..18].try_into().unwrap_or_default());
        if u64::from(sector) != SECTOR {
            return Err(LogError::NotALog {
                path: p(),
                what: format!("sector size {sector}, expected {SECTOR}"),
            });
        }
        let device_size = u64::from_le_bytes(bytes[18..26].try_into().unwrap_or_default());
        if crc32c::crc32c(&bytes[..26]).to_le_bytes() != bytes[26..30] {
            return Err(LogError::Damaged {
                path: p(),
                at: 0,
                index: 0,
                what: "header checksum mismatch".into(),
            });
        }
        let mut records = Vec::new();
        let mut outputs = Vec::new();
        let mut at = HEADER;
        let mut bytes_written = 0u64;
        loop {
            let index = records.len() + outputs.len();
            if at >= bytes.len() {
                return Err(LogError::Truncated {
                    path: p(),
                    at,
                    index,
                });
            }
            let damaged = |what: String| LogError::Damaged {
                path: p(),
                at,
                index,
                what,
            };
            let tag = bytes[at];
            let fixed = match tag {
                T_WRITE => 8 + 4 + 1,
                T_FLUSH => 0,
                T_DISCARD => 16,
                T_END => 8 + 8 + 32,
                T_OUTPUT if version >= 2 => 4,
                t => return Err(damaged(format!("unknown record type {t}"))),
            };
            let body = at + 1;
            if body + fixed > bytes.len() {
                return Err(LogError::Truncated {
                    path: p(),
                    at,
                    index,
                });
            }
            let u64_at =
                |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or_default());
            let mut payload = fixed;
            if tag == T_WRITE {
                payload +=
                    u32::from_le_bytes(bytes[body + 8..body + 12].try_into().unwrap_or_default())
                        as usize;
            }
            if tag == T_OUTPUT {
                payload += u32::from_le_bytes(bytes[body..body + 4].try_into().unwrap_or_default())
                    as usize;
            }
            let end = body + payload;
            if end + 4 > bytes.len() {
                return Err(LogError::Truncated {
                    path: p(),
                    at,
                    index,
                });
            }
            let crc = u32::from_le_bytes(bytes[end..end + 4].try_into().unwrap_or_default());
            if crc32c::crc32c(&bytes[at..end]) != crc {
                return Err(damaged("checksum mismatch".into()));
            }
            let in_device =
                |offset: u64, len: u64| offset.checked_add(len).is_some_and(|e| e <= device_size);
            match tag {
                T_WRITE => {
                    let offset = u64_at(body);
                    let len = (payload - fixed) as u64;
                    if !in_device(offset, len) {
                        return Err(damaged(format!("write of {len} bytes at {offset} lies beyond the device ({device_size} bytes)")));
                    }
                    bytes_written += len;
                    records.push(Rec {
                        kind: Kind::Write {
                            fua: bytes[body + 12] & 1 != 0,
                        },
                        offset,
                        len,
                        data_at: body + fixed,
                    });
                }
                T_FLUSH => records.push(Rec {
                    kind: Kind::Flush,
                    offset: 0,
                    len: 0,
                    data_at: 0,
                }),
                T_OUTPUT => outputs.push((records.len(), body + 4, payload - 4)),
                T_DISCARD => {
                    let (offset, len) = (u64_at(body), u64_at(body + 8));
                    if !in_device(offset, len) {
                        return Err(damaged(format!("discard of {len} bytes at {offset} lies beyond the device ({device_size} bytes)")));
                    }
                    records.push(Rec {
                        kind: Kind::Discard,
                        offset,
                        len,
                        data_at: 0,
                    });
                }
                _ => {
                    let (n, b) = (u64_at(body), u64_at(body + 8));
                    if n != index as u64 || b != bytes_written {
                        return Err(damaged(format!("end record says {n} records and {b} bytes, the log holds {index} and {bytes_written}")));
                    }
                    if end + 4 != bytes.len() {
                        return Err(damaged(format!(
                            "{} bytes follow the end record",
                            bytes.len() - end - 4
                        )));
                    }
                    let mut final_hash = [0u8; 32];
                    final_hash.copy_from_slice(&bytes[body + 16..body + 48]);
                    return Ok(BlockLog {
                        path: path.to_path_buf(),
                        version,
                        device_size,
                        records,
                        outputs,
                        final_hash,
                        bytes,
                    });
                }
            }
            at = end + 4;
        }
    }

    /// The data of write record `i` (empty for flushes and discards).
    pub fn data(&self, i: usize) -> &[u8] {
        let r = &self.records[i];
        match r.kind {
            Kind::Write { .. } => &self.bytes[r.data_at..r.data_at + r.len as usize],
            _ => &[],
        }
    }

    /// Everything the workload printed before the device saw record `before` (all of it
    /// for `usize::MAX`). `None` for a version 1 log, which has no output records.
    pub fn output_before(&self, before: usize) -> Option<Vec<u8>> {
        if self.version < 2 {
            return None;
        }
        let mut out = Vec::new();
        for &(pos, at, len) in &self.outputs {
            if pos <= before {
                out.extend_from_slice(&self.bytes[at..at + len]);
            }
        }
        Some(out)
    }

    /// Index of the flush that ends epoch `j` (`None` for the last epoch).
    pub fn flush_ending(&self, j: usize) -> Option<usize> {
        self.records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind == Kind::Flush)
            .nth(j)
            .map(|(i, _)| i)
    }

    /// Record indices of the writes and discards of each epoch; epoch k ends with flush
    /// k+1. There is always one more epoch than flushes (the last may be empty).
    pub fn epochs(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        for (i, r) in self.records.iter().enumerate() {
            match r.kind {
                Kind::Flush => out.push(Vec::new()),
                _ => out.last_mut().expect("never empty").push(i),
            }
        }
        out
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.records {
            match r.kind {
                Kind::Write { fua } => {
                    c.writes += 1;
                    c.bytes += r.len;
                    c.fua += u64::from(fua);
                }
                Kind::Flush => c.flushes += 1,
                Kind::Discard => c.discards += 1,
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &Path) -> PathBuf {
        let p = dir.join("log");
        let mut w = LogWriter::create(&p, 1 << 20).unwrap();
        w.write(0, &[1u8; 1024], false).unwrap();
        w.flush().unwrap();
        w.output(b"synced\n").unwrap();
        w.write(4096, &[2u8; 512], true).unwrap();
        w.discard(8192, 4096).unwrap();
        w.finish([7; 32]).unwrap();
        p
    }

    #[test]
    fn round_trip_and_epochs() {
        let d = tempfile::tempdir().unwrap();
        let log = BlockLog::open(&sample(d.path())).unwrap();
        assert_eq!(log.records.len(), 4);
        assert_eq!(log.data(0), &[1u8; 1024][..]);
        assert_eq!(log.records[2].kind, Kind::Write { fua: true });
        assert_eq!(log.epochs(), vec![vec![0], vec![2, 3]]);
        assert_eq!(log.final_hash, [7; 32]);
        assert_eq!(
            log.counts(),
            Counts {
                writes: 2,
                bytes: 1536,
                flushes: 1,
                fua: 1,
                discards: 1
            }
        );
        // Printed after the flush ending epoch 0: not part of what a crash in epoch 0 saw.
        assert_eq!(log.flush_ending(0), Some(1));
        assert_eq!(log.output_before(1).unwrap(), b"");
        assert_eq!(log.output_before(2).unwrap(), b"synced\n");
        assert_eq!(log.output_before(usize::MAX).unwrap(), b"synced\n");
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let bytes = std::fs::read(sample(d.path())).unwrap();
        for cut in 0..bytes.len() {
            assert!(
                BlockLog::parse(Path::new("x"), bytes[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(BlockLog::parse(Path::new("x"), b).is_err(), "flip at {i}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(matches!(
            BlockLog::parse(Path::new("x"), extra),
            Err(LogError::Damaged { .. })
        ));
    }
}
