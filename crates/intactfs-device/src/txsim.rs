//! The simulated transactional device: a [`SimDevice`] holds the committed state and the
//! plain writes (with their volatile-cache crash rules); open transactions live beside it
//! and reach it only at commit, so a crash image simply never contains them.

use crate::{check, check_run, BlockDevice, CrashImage, DeviceError, SimDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Memory-backed twin of [`crate::TxFileDevice`]: same semantics (crate docs), plus crash
/// images of the *logical* device, the blocks a reader sees after recovery.
///
/// Allowed post-crash images: every committed transaction whole, no open transaction, and
/// the plain writes since the last flush or commit per [`SimDevice`]'s rules.
#[derive(Clone, Debug)]
pub struct TxSimDevice {
    sim: SimDevice,
    /// Open transactions: their writes, by block.
    open: BTreeMap<u64, BTreeMap<u64, Vec<u8>>>,
    /// Block -> the open transaction that wrote it.
    owner: BTreeMap<u64, u64>,
    counters: TxSimCounters,
}

/// Calls so far: the crash points a test walks through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxSimCounters {
    /// Plain writes.
    pub writes: u64,
    /// Transactional writes.
    pub tx_writes: u64,
    /// `flush` calls (a commit flushes too but is counted only in `commits`).
    pub flushes: u64,
    pub commits: u64,
    pub aborts: u64,
}

// Keeps the commit coin of crash_during_commit independent of the draws SimDevice::crash makes.
const COMMIT_COIN: u64 = 0x7478_636f_6d6d_6974;

impl TxSimDevice {
    /// A zero-filled device.
    pub fn new(block_size: usize, blocks: u64) -> Result<Self, DeviceError> {
        Ok(Self::wrap(SimDevice::new(block_size, blocks)?))
    }

    /// A device whose durable logical content is `image` (e.g. a crash image, to recover from it).
    pub fn from_image(block_size: usize, image: Vec<u8>) -> Result<Self, DeviceError> {
        Ok(Self::wrap(SimDevice::from_image(block_size, image)?))
    }

    fn wrap(sim: SimDevice) -> Self {
        TxSimDevice {
            sim,
            open: BTreeMap::new(),
            owner: BTreeMap::new(),
            counters: TxSimCounters::default(),
        }
    }

    pub fn counters(&self) -> TxSimCounters {
        self.counters
    }

    /// The logical content that survives every crash.
    pub fn durable(&self) -> &[u8] {
        self.sim.durable()
    }

    /// The content reads see now (open transactions excluded).
    pub fn contents(&self) -> &[u8] {
        self.sim.contents()
    }

    /// Plain writes since the last flush or commit.
    pub fn volatile_writes(&self) -> usize {
        self.sim.volatile_writes()
    }

    /// The open transactions, in id order.
    pub fn open_txs(&self) -> Vec<u64> {
        self.open.keys().copied().collect()
    }

    /// One allowed image, the same for the same seed (the draw is [`SimDevice::crash`]'s).
    pub fn crash(&self, seed: u64) -> CrashImage {
        self.sim.crash(seed)
    }

    /// Whether a crash now may leave `image`.
    pub fn allows(&self, image: &[u8]) -> bool {
        self.sim.allows(image)
    }

    /// Every image a crash now may leave, when there are at most `max`.
    pub fn all_images(&self, max: usize) -> Option<Vec<Vec<u8>>> {
        self.sim.all_images(max)
    }

    /// Checks a run of whole blocks from `block` (all of it, before anything is written).
    fn run(&self, block: u64, len: usize) -> Result<std::ops::Range<u64>, DeviceError> {
        let n = check_run(len, self.block_size())?;
        check(
            block.saturating_add(n - 1),
            self.block_size(),
            self.blocks(),
            self.block_size(),
        )?;
        Ok(block..block + n)
    }

    fn open_tx(&self, tx: u64) -> Result<&BTreeMap<u64, Vec<u8>>, DeviceError> {
        self.open.get(&tx).ok_or(DeviceError::UnknownTx(tx))
    }

    fn apply(&self, image: &mut [u8], writes: &BTreeMap<u64, Vec<u8>>) {
        let bs = self.sim.block_size();
        for (&b, d) in writes {
            image[b as usize * bs..(b as usize + 1) * bs].copy_from_slice(d);
        }
    }

    /// One image a crash *during* `tx_commit(tx)` may leave (the call had not returned):
    /// the transaction whole or absent (a coin drawn from the seed), the plain writes as in
    /// [`TxSimDevice::crash`], which a transaction kept overrides on its blocks. (A commit
    /// writes its record and flushes once, so it may land before earlier unflushed writes.)
    pub fn crash_during_commit(&self, tx: u64, seed: u64) -> Result<CrashImage, DeviceError> {
        let writes = self.open_tx(tx)?;
        let mut img = self.sim.crash(seed);
        let kept = ChaCha8Rng::seed_from_u64(seed ^ COMMIT_COIN).random_bool(0.5);
        if kept {
            self.apply(&mut img.bytes, writes);
        }
        img.description += &format!(
            "; transaction {tx} ({} blocks) {}",
            writes.len(),
            if kept { "committed" } else { "lost" }
        );
        Ok(img)
    }

    /// Whether a crash during `tx_commit(tx)` may leave `image`.
    pub fn allows_during_commit(&self, tx: u64, image: &[u8]) -> Result<bool, DeviceError> {
        let writes = self.open_tx(tx)?;
        if self.sim.allows(image) {
            return Ok(true);
        }
        if image.len() != self.sim.durable().len() {
            return Ok(false);
        }
        // Kept: its blocks hold exactly its data; every other sector follows the plain rules
        // (the durable content stands in on its blocks, as it is always allowed).
        let bs = self.sim.block_size();
        let whole = writes
            .iter()
            .all(|(&b, d)| image[b as usize * bs..(b as usize + 1) * bs] == d[..]);
        let mut probe = image.to_vec();
        self.apply(
            &mut probe,
            &writes
                .keys()
                .map(|&b| {
                    (
                        b,
                        self.sim.durable()[b as usize * bs..(b as usize + 1) * bs].to_vec(),
                    )
                })
                .collect(),
        );
        Ok(whole && self.sim.allows(&probe))
    }

    /// Every image a crash during `tx_commit(tx)` may leave, when there are at most `max`.
    pub fn all_images_during_commit(
        &self,
        tx: u64,
        max: usize,
    ) -> Result<Option<Vec<Vec<u8>>>, DeviceError> {
        let writes = self.open_tx(tx)?;
        let Some(lost) = self.sim.all_images(max) else {
            return Ok(None);
        };
        let mut all: BTreeSet<Vec<u8>> = BTreeSet::new();
        for img in lost {
            let mut kept = img.clone();
            self.apply(&mut kept, writes);
            all.insert(img);
            all.insert(kept);
            if all.len() > max {
                return Ok(None);
            }
        }
        Ok(Some(all.into_iter().collect()))
    }
}

impl BlockDevice for TxSimDevice {
    fn block_size(&self) -> usize {
        self.sim.block_size()
    }
    fn blocks(&self) -> u64 {
        self.sim.blocks()
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.sim.read(block, buf)
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        check(block, data.len(), self.blocks(), self.block_size())?;
        self.write_run(block, data)
    }
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let range = self.run(block, data.len())?;
        if let Some((b, &tx)) = range
            .clone()
            .find_map(|b| self.owner.get(&b).map(|t| (b, t)))
        {
            return Err(DeviceError::TxConflict { block: b, tx });
        }
        for (b, d) in range.zip(data.chunks(self.block_size())) {
            self.counters.writes += 1;
            self.sim.write(b, d)?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.counters.flushes += 1;
        self.sim.flush()
    }
    fn tx_room(&self) -> u64 {
        // Memory-backed: open transactions have no slot limit.
        u64::MAX
    }
    fn transactional(&self) -> bool {
        true
    }
    fn tx_begin(&mut self, tx: u64) -> Result<(), DeviceError> {
        self.open.entry(tx).or_default();
        Ok(())
    }
    fn tx_write(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        check(block, data.len(), self.blocks(), self.block_size())?;
        self.tx_write_run(tx, block, data)
    }
    fn tx_write_run(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let range = self.run(block, data.len())?;
        if let Some((b, &other)) = range
            .clone()
            .find_map(|b| self.owner.get(&b).filter(|&&t| t != tx).map(|t| (b, t)))
        {
            return Err(DeviceError::TxConflict {
                block: b,
                tx: other,
            });
        }
        let writes = self.open.entry(tx).or_default();
        for (b, d) in range.zip(data.chunks(self.sim.block_size())) {
            writes.insert(b, d.to_vec());
            self.owner.insert(b, tx);
            self.counters.tx_writes += 1;
        }
        Ok(())
    }
    fn tx_commit(&mut self, tx: u64) -> Result<(), DeviceError> {
        let writes = self.open.remove(&tx).ok_or(DeviceError::UnknownTx(tx))?;
        // Earlier plain writes become durable first, so a later crash cannot put one of
        // them over a committed block.
        self.sim.flush()?;
        for (b, d) in writes {
            self.owner.remove(&b);
            self.sim.write(b, &d)?;
        }
        self.sim.flush()?;
        self.counters.commits += 1;
        Ok(())
    }
    fn tx_abort(&mut self, tx: u64) -> Result<(), DeviceError> {
        let writes = self.open.remove(&tx).ok_or(DeviceError::UnknownTx(tx))?;
        for b in writes.keys() {
            self.owner.remove(b);
        }
        self.counters.aborts += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: usize = 1024;

    fn blk(v: u8) -> Vec<u8> {
        let mut d = vec![v; BS];
        d[512..].fill(v.wrapping_add(1));
        d
    }

    fn at(img: &[u8], b: u64) -> &[u8] {
        &img[b as usize * BS..(b as usize + 1) * BS]
    }

    #[test]
    fn commit_makes_writes_visible_and_durable() {
        let mut d = TxSimDevice::new(BS, 4).unwrap();
        d.tx_write(7, 1, &blk(1)).unwrap();
        d.tx_write_run(7, 2, &[blk(2), blk(3)].concat()).unwrap();
        let mut buf = vec![0; BS];
        d.read(1, &mut buf).unwrap();
        assert_eq!(buf, vec![0; BS], "an open transaction's write is invisible");
        assert!(d.crash(1).bytes.iter().all(|&b| b == 0));
        d.tx_commit(7).unwrap();
        d.read(1, &mut buf).unwrap();
        assert_eq!(buf, blk(1));
        assert_eq!(at(d.durable(), 3), &blk(3)[..]);
        for seed in 0..20 {
            assert_eq!(d.crash(seed).bytes, d.durable());
        }
        assert_eq!(
            d.counters(),
            TxSimCounters {
                writes: 0,
                tx_writes: 3,
                flushes: 0,
                commits: 1,
                aborts: 0
            }
        );
    }

    #[test]
    fn abort_drops_writes_and_errors_are_reported() {
        let mut d = TxSimDevice::new(BS, 4).unwrap();
        d.tx_write(1, 0, &blk(1)).unwrap();
        d.tx_write(1, 0, &blk(2)).unwrap(); // the same transaction may rewrite
        assert!(matches!(
            d.tx_write(2, 0, &blk(3)),
            Err(DeviceError::TxConflict { block: 0, tx: 1 })
        ));
        assert!(matches!(
            d.write(0, &blk(3)),
            Err(DeviceError::TxConflict { block: 0, tx: 1 })
        ));
        d.tx_abort(1).unwrap();
        assert!(matches!(d.tx_abort(1), Err(DeviceError::UnknownTx(1))));
        assert!(matches!(d.tx_commit(9), Err(DeviceError::UnknownTx(9))));
        d.write(0, &blk(3)).unwrap(); // free again
        assert_eq!(at(d.contents(), 0), &blk(3)[..]);
        d.tx_begin(5).unwrap();
        d.tx_commit(5).unwrap(); // no writes: a durable point, and a flush
        assert_eq!(at(d.durable(), 0), &blk(3)[..]);
    }

    #[test]
    fn a_crash_keeps_committed_drops_open_and_tears_plain_writes() {
        let mut d = TxSimDevice::new(BS, 4).unwrap();
        d.tx_write(1, 0, &blk(1)).unwrap();
        d.tx_commit(1).unwrap();
        d.tx_write(2, 1, &blk(2)).unwrap();
        d.write(2, &blk(3)).unwrap();
        let all = d.all_images(100).unwrap();
        assert_eq!(all.len(), 4, "block 2's two sectors each old or new");
        for img in &all {
            assert!(d.allows(img));
            assert_eq!(at(img, 0), &blk(1)[..]);
            assert_eq!(at(img, 1), &[0; BS][..]);
        }
    }

    #[test]
    fn a_crash_during_commit_keeps_the_transaction_whole_or_not_at_all() {
        let mut d = TxSimDevice::new(BS, 4).unwrap();
        d.write(0, &blk(9)).unwrap();
        d.tx_write(1, 1, &blk(1)).unwrap();
        d.tx_write(1, 2, &blk(2)).unwrap();
        let (mut kept, mut lost) = (0, 0);
        for seed in 0..64 {
            let img = d.crash_during_commit(1, seed).unwrap();
            assert!(
                d.allows_during_commit(1, &img.bytes).unwrap(),
                "{}",
                img.description
            );
            if at(&img.bytes, 1) == &blk(1)[..] {
                assert_eq!(at(&img.bytes, 2), &blk(2)[..]);
                kept += 1;
            } else {
                assert_eq!(at(&img.bytes, 2), &[0; BS][..]);
                lost += 1;
            }
        }
        assert!(kept > 0 && lost > 0);
        let all = d.all_images_during_commit(1, 100).unwrap().unwrap();
        assert_eq!(all.len(), 8, "block 0: 4 choices; the transaction: 2");
        let mut half = vec![0; 4 * BS];
        half[BS..2 * BS].copy_from_slice(&blk(1));
        assert!(
            !d.allows_during_commit(1, &half).unwrap(),
            "half a transaction"
        );
        assert!(matches!(
            d.crash_during_commit(2, 0),
            Err(DeviceError::UnknownTx(2))
        ));
    }
}
