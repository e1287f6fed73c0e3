//! Extended attributes (format 4): every attribute of an inode in one block, named by the
//! inode's word [`I_XATTR`] (0: none).
//!
//! The contract: a change writes the whole new set into a new block and persists it, then
//! stores the new pointer in the inode as ordinary metadata (undo-logged, so an abort or a
//! crash before the commit restores the old pointer); the old block is freed when the
//! transaction commits, the new one if it aborts. So a set is never changed in place, and
//! a pointer that recovery keeps always names a block that was persistent before it (the
//! same order as a symbolic link's target block). Names and values together fit one block,
//! as on ext4 without `ea_inode` (ENOSPC beyond).
//!
//! Block format: magic (4 bytes), entry count (u16), bytes used (u16, header included),
//! then the entries sorted by name: name length (u8), value length (u16), name, value.
//! Mount decodes every block a pointer names ([`decode`] refuses anything else as damage).

use crate::error::{PmemFsError, Result};
use crate::layout::{BLOCK, I_XATTR};
use crate::{Batch, Ino, PmemFs, TxId};
use intactfs_device::PmemDevice;
use intactfs_types::{check_xattr, valid_xattr_name, ExtAttrs, XattrMode};
use std::collections::BTreeMap;

/// An inode's attributes: name → value.
pub type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

const MAGIC: [u8; 4] = *b"XAT4";
const HEADER_BYTES: usize = 8;
const ENTRY_HEADER_BYTES: usize = 3;

/// Bytes `set` takes in its block.
pub fn encoded_bytes(set: &Xattrs) -> usize {
    HEADER_BYTES
        + set
            .iter()
            .map(|(n, v)| ENTRY_HEADER_BYTES + n.len() + v.len())
            .sum::<usize>()
}

/// The block image of `set`, or ENOSPC when it does not fit one block.
pub fn encode(set: &Xattrs) -> Result<Vec<u8>> {
    let used = encoded_bytes(set);
    if used > BLOCK as usize {
        return Err(PmemFsError::NoSpace(format!(
            "extended attributes of one inode fit one block ({BLOCK} bytes with headers; these need {used})"
        )));
    }
    let mut b = Vec::with_capacity(BLOCK as usize);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&(set.len() as u16).to_le_bytes());
    b.extend_from_slice(&(used as u16).to_le_bytes());
    for (n, v) in set {
        assert!(valid_xattr_name(n), "attribute name checked by setxattr");
        b.push(n.len() as u8);
        b.extend_from_slice(&(v.len() as u16).to_le_bytes());
        b.extend_from_slice(n);
        b.extend_from_slice(v);
    }
    assert_eq!(b.len(), used, "encoded size and the sum of its parts");
    b.resize(BLOCK as usize, 0);
    Ok(b)
}

/// The set a block holds; Err names the first thing wrong (damage).
pub fn decode(b: &[u8]) -> std::result::Result<Xattrs, String> {
    if b.len() != BLOCK as usize || b[..4] != MAGIC {
        return Err("not an extended-attribute block (bad magic)".into());
    }
    let count = u16::from_le_bytes([b[4], b[5]]) as usize;
    let used = u16::from_le_bytes([b[6], b[7]]) as usize;
    if !(HEADER_BYTES..=b.len()).contains(&used) {
        return Err(format!(
            "{used} bytes used, outside {HEADER_BYTES}..={BLOCK}"
        ));
    }
    let mut set = Xattrs::new();
    let mut pos = HEADER_BYTES;
    for i in 0..count {
        let (name, value, next) = entry(b, pos, used).ok_or(format!("entry {i} overruns"))?;
        if !valid_xattr_name(name) {
            return Err(format!("entry {i} has an invalid name"));
        }
        if set
            .last_key_value()
            .is_some_and(|(k, _)| k.as_slice() >= name)
        {
            return Err(format!("entry {i} is out of order or repeated"));
        }
        set.insert(name.to_vec(), value.to_vec());
        pos = next;
    }
    if pos != used {
        return Err(format!("entries end at byte {pos}, the header says {used}"));
    }
    Ok(set)
}

/// The entry at `pos`, within `used` bytes: (name, value, next position).
fn entry(b: &[u8], pos: usize, used: usize) -> Option<(&[u8], &[u8], usize)> {
    let head = b.get(pos..pos + ENTRY_HEADER_BYTES)?;
    let name_len = head[0] as usize;
    let value_len = u16::from_le_bytes([head[1], head[2]]) as usize;
    let name_at = pos + ENTRY_HEADER_BYTES;
    let next = name_at + name_len + value_len;
    if next > used {
        return None;
    }
    Some((
        &b[name_at..name_at + name_len],
        &b[name_at + name_len..next],
        next,
    ))
}

impl<P: PmemDevice> PmemFs<P> {
    /// The block holding `ino`'s attributes, 0 for none.
    pub(crate) fn xattr_block(&self, ino: Ino) -> Result<u64> {
        let off = self.g.inode_off(ino) + I_XATTR;
        self.ptr(off, || format!("inode {ino}'s attribute pointer"))
    }

    /// Every attribute of `ino`.
    pub fn xattrs(&self, ino: Ino) -> Result<Xattrs> {
        self.inode(ino)?;
        self.read_xattrs(ino)
    }

    /// The set `ino`'s attribute pointer names (mount's scan checks every one this way).
    pub(crate) fn read_xattrs(&self, ino: Ino) -> Result<Xattrs> {
        let blk = self.xattr_block(ino)?;
        if blk == 0 {
            return Ok(Xattrs::new());
        }
        let mut b = vec![0u8; BLOCK as usize];
        self.dev.read(blk * BLOCK, &mut b)?;
        decode(&b)
            .map_err(|e| PmemFsError::Corrupt(format!("attribute block {blk} of inode {ino}: {e}")))
    }

    /// Installs `set` as `ino`'s attributes in transaction `id` (module documentation):
    /// new block persisted, then the pointer and ctime as logged metadata.
    fn put_xattrs(&mut self, id: u64, ino: Ino, set: &Xattrs) -> Result<()> {
        let image = encode(set)?;
        let old = self.xattr_block(ino)?;
        let new = if set.is_empty() {
            0
        } else {
            self.write_xattr_block(&image)?
        };
        let mut rec = self.inode(ino)?;
        rec.ctime = self.now();
        let mut b = Batch::default();
        b.put(self.g.inode_off(ino) + I_XATTR, new);
        self.stage_inode(&mut b, ino, &rec)?;
        if let Err(e) = self.apply_meta(id, b) {
            if new != 0 {
                self.give_back_blocks(&[new]);
            }
            return Err(e);
        }
        let t = self.txs.get_mut(&id).expect("open");
        if new != 0 {
            t.new_blocks.push(new);
        }
        if old != 0 {
            t.freed_blocks.push(old);
        }
        self.claim(id, &[ino]);
        assert_eq!(
            self.xattr_block(ino)?,
            new,
            "the pointer names the new block"
        );
        Ok(())
    }

    /// A new block holding `image`, persistent before anything names it.
    fn write_xattr_block(&mut self, image: &[u8]) -> Result<u64> {
        assert_eq!(image.len() as u64, BLOCK);
        let blk = self.take_blocks(1, "an extended-attribute block")?[0];
        self.dev.write(blk * BLOCK, image)?;
        let mutated = crate::mutation::active(crate::mutation::Mutation::XattrBlockNotPersisted);
        if !mutated {
            self.dev.persist(blk * BLOCK, BLOCK)?;
        }
        Ok(blk)
    }
}

/// Extended attributes; the caller's context is its open AD-transaction (None: a legacy
/// call, committed before it returns).
impl<P: PmemDevice> ExtAttrs for PmemFs<P> {
    /// Sets attribute `name`, as `mode` allows (EEXIST, ENODATA).
    fn setxattr(
        &mut self,
        tx: Option<TxId>,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        mode: XattrMode,
    ) -> Result<()> {
        self.inode(ino)?;
        check_xattr(name, value)?;
        self.mutate(tx, |fs, id| {
            fs.check_owner(id, ino)?;
            let mut set = fs.read_xattrs(ino)?;
            mode.check(set.contains_key(name))?;
            set.insert(name.to_vec(), value.to_vec());
            fs.put_xattrs(id, ino, &set)
        })
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.xattrs(ino)?.remove(name).ok_or(PmemFsError::NoData)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        Ok(self.xattrs(ino)?.into_keys().collect())
    }

    /// Removes attribute `name` (ENODATA if it has none).
    fn removexattr(&mut self, tx: Option<TxId>, ino: Ino, name: &[u8]) -> Result<()> {
        self.inode(ino)?;
        check_xattr(name, b"")?;
        self.mutate(tx, |fs, id| {
            fs.check_owner(id, ino)?;
            let mut set = fs.read_xattrs(ino)?;
            if set.remove(name).is_none() {
                return Err(PmemFsError::NoData);
            }
            fs.put_xattrs(id, ino, &set)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[(&[u8], &[u8])]) -> Xattrs {
        items
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect()
    }

    #[test]
    fn a_set_round_trips_through_its_block() {
        for s in [
            set(&[]),
            set(&[(b"user.a", b"")]),
            set(&[
                (b"user.a", b"1"),
                (b"user.b", &[7u8; 4000]),
                (b"trusted.x", b"y"),
            ]),
        ] {
            let b = encode(&s).unwrap();
            assert_eq!(b.len() as u64, BLOCK);
            assert_eq!(decode(&b).unwrap(), s);
        }
    }

    #[test]
    fn a_set_larger_than_a_block_is_enospc() {
        let s = set(&[(b"user.a", &[1u8; 4000]), (b"user.b", &[2u8; 200])]);
        assert_eq!(encode(&s).unwrap_err().errno(), 28);
        let fits = BLOCK as usize - HEADER_BYTES - ENTRY_HEADER_BYTES - 6;
        assert!(encode(&set(&[(b"user.a", &vec![1u8; fits])])).is_ok());
        assert!(encode(&set(&[(b"user.a", &vec![1u8; fits + 1])])).is_err());
    }

    #[test]
    fn damaged_blocks_are_refused() {
        let good = encode(&set(&[(b"user.a", b"1"), (b"user.b", b"2")])).unwrap();
        assert!(decode(&vec![0u8; BLOCK as usize]).is_err(), "zeros");
        let mut b = good.clone();
        b[4] = 3; // one entry more than there is
        assert!(decode(&b).is_err());
        let mut b = good.clone();
        b[6] = 0xff; // used beyond the entries
        assert!(decode(&b).is_err());
        let mut b = good.clone();
        b[HEADER_BYTES] = 0; // an empty name
        assert!(decode(&b).is_err());
        let mut b = good;
        // The second name made equal to the first: out of order.
        let second = HEADER_BYTES + ENTRY_HEADER_BYTES + 6 + 1 + ENTRY_HEADER_BYTES + 5;
        b[second] = b'a';
        assert!(decode(&b).is_err());
    }
}
