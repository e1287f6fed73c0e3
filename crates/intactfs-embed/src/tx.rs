//! AD-transactions (FCFS `002` §III-B) over descriptors, as libintact's intact_tx_* on a
//! mount: begin over the first descriptor's file and add the rest, commit, abort. The
//! engine's id is the program's (there is no other process to keep out: the image has
//! one owner), positive as a C `int64_t`.

use crate::{EmbedError, Fd, FileType, Image, Result, TxId, TxStats};

impl Image {
    /// The file (or directory) of `fd`, which a transaction may claim: a file through a
    /// descriptor open for writing (EBADF otherwise, as TX_BEGIN on a mount).
    fn claimable(&self, fd: Fd) -> Result<u64> {
        let f = self.fstat(fd)?;
        if f.kind != FileType::Dir {
            return self.writable(fd);
        }
        Ok(f.ino)
    }

    /// Begins a transaction over the files of `fds` (at least one). If adding one fails
    /// the transaction is aborted and that error returned (EBUSY: another transaction's).
    pub fn tx_begin(&mut self, fds: &[Fd]) -> Result<u64> {
        let Some((&first, rest)) = fds.split_first() else {
            return Err(EmbedError::fs(
                "beginning a transaction".into(),
                intactfs_types::FsError::Invalid("it needs at least one descriptor".into()),
            ));
        };
        let ino = self.claimable(first)?;
        let t = (self.fs().tx_begin(&[ino])).map_err(|e| {
            EmbedError::fs(format!("beginning a transaction on descriptor {first}"), e)
        })?;
        assert!(
            t.0 > 0 && t.0 <= i64::MAX as u64,
            "{t} is positive as a C int64_t"
        );
        for &fd in rest {
            if let Err(e) = self.tx_add(t.0, fd) {
                self.fs().tx_abort(t).map_err(|a| {
                    EmbedError::fs(format!("aborting {t} after a failed add ({e})"), a)
                })?;
                return Err(e);
            }
        }
        assert_eq!(
            self.fs().owner_of(ino),
            Some(t),
            "the first file belongs to {t}"
        );
        Ok(t.0)
    }

    /// Adds the file of `fd` to open transaction `tx`.
    pub fn tx_add(&mut self, tx: u64, fd: Fd) -> Result<()> {
        let ino = self.claimable(fd)?;
        (self.fs().tx_add(TxId(tx), ino))
            .map_err(|e| EmbedError::fs(format!("adding descriptor {fd} to transaction {tx}"), e))
    }

    /// Commits `tx`: durable, all or nothing, when it returns. What it cost the device.
    pub fn tx_commit(&mut self, tx: u64) -> Result<TxStats> {
        let st = (self.fs().tx_commit(TxId(tx)))
            .map_err(|e| EmbedError::fs(format!("committing transaction {tx}"), e))?;
        assert!(
            !self.fs().open_transactions().contains(&TxId(tx)),
            "transaction {tx} is still open after its commit"
        );
        Ok(st)
    }

    /// Aborts `tx`: none of its changes stays.
    pub fn tx_abort(&mut self, tx: u64) -> Result<()> {
        (self.fs().tx_abort(TxId(tx)))
            .map_err(|e| EmbedError::fs(format!("aborting transaction {tx}"), e))
    }
}
