//! The namespace: directories of fixed 272-byte entry slots in directory blocks (metadata,
//! changed in place with undo like inodes), and the calls on it. Every call checks all it
//! can before it changes anything, and changes pmem in one batch, so a failing call leaves
//! nothing behind in its transaction.

use crate::error::{PmemFsError, Result};
use crate::invariants::release;
use crate::layout::*;
use crate::{Attr, Batch, DirEntry, DirIndex, Ino, PmemFs, TxId};
use intactfs_device::PmemDevice;
use intactfs_types::prelude::*;
use intactfs_types::{MknodKind, Owner, RenameFlags};

/// What a create makes: kind, mode, owner, device number, symbolic-link target.
struct NewNode<'a> {
    kind: FileType,
    mode: u32,
    uid: u32,
    gid: u32,
    rdev: u32,
    target: &'a [u8],
}

impl NewNode<'_> {
    fn new(kind: FileType, mode: u32, o: Owner) -> Self {
        NewNode {
            kind,
            mode,
            uid: o.uid,
            gid: o.gid,
            rdev: 0,
            target: &[],
        }
    }

    /// The new inode in `parent`, stamped `now`.
    fn rec(&self, parent: Ino, now: Time) -> InodeRec {
        let dir = self.kind == FileType::Dir;
        assert!(self.target.is_empty() || self.kind == FileType::Symlink);
        assert!(self.rdev == 0 || self.kind.has_rdev());
        InodeRec {
            kind: self.kind,
            mode: self.mode & 0o7777,
            nlink: if dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            parent: if dir { parent as u32 } else { 0 },
            size: self.target.len() as u64,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: self.rdev,
        }
    }
}

/// Where a new directory entry goes.
struct SlotPlan {
    slot: u64,
    /// Blocks taken for it (a new directory block, maybe an indirect block), zeroed.
    new_blocks: Vec<u64>,
    grew: bool,
}

impl<P: PmemDevice> PmemFs<P> {
    pub(crate) fn dir_slot_off(&self, dir: Ino, slot: u64) -> Result<u64> {
        let lbn = slot / DIRENTS_PER_BLOCK;
        let pb = self.home(dir, lbn)?;
        if pb == 0 {
            return Err(PmemFsError::Corrupt(format!(
                "directory {dir} has no block {lbn} within its size"
            )));
        }
        Ok(pb * BLOCK + (slot % DIRENTS_PER_BLOCK) * DIRENT_SIZE)
    }

    /// Reads a directory's entries from pmem: (slot, name, ino, kind code) of the used slots,
    /// and the free slots.
    #[allow(clippy::type_complexity)]
    pub(crate) fn read_dir_slots(
        &self,
        dir: Ino,
        size: u64,
    ) -> Result<(Vec<(u64, Vec<u8>, Ino, u8)>, Vec<u64>)> {
        let mut used = Vec::new();
        let mut free = Vec::new();
        if !size.is_multiple_of(BLOCK) || size / BLOCK > MAX_BLOCKS {
            return Err(PmemFsError::Corrupt(format!(
                "directory {dir} has size {size} (a multiple of {BLOCK} up to {MAX_BLOCKS} blocks expected)"
            )));
        }
        for slot in 0..size / BLOCK * DIRENTS_PER_BLOCK {
            let off = self.dir_slot_off(dir, slot)?;
            let h = self.dev.load_u64(off)?;
            let (ino, len, kind, rest) = dirent_decode(h);
            if ino == 0 {
                free.push(slot);
                continue;
            }
            if rest != 0
                || len == 0
                || len > NAME_MAX
                || ino >= self.g.inodes
                || FileType::from_code(kind).is_none()
            {
                return Err(PmemFsError::Corrupt(format!(
                    "directory {dir} slot {slot}: malformed entry header {h:#018x}"
                )));
            }
            let mut name = vec![0u8; len];
            self.dev.read(off + 8, &mut name)?;
            check_name(&name)
                .map_err(|e| PmemFsError::Corrupt(format!("directory {dir} slot {slot}: {e}")))?;
            used.push((slot, name, ino, kind));
        }
        Ok((used, free))
    }

    pub(crate) fn scan_dir(&self, dir: Ino) -> Result<DirIndex> {
        let rec = self.inode(dir)?;
        let (used, free) = self.read_dir_slots(dir, rec.size)?;
        let mut di = DirIndex {
            nslots: rec.size / BLOCK * DIRENTS_PER_BLOCK,
            free: free.into_iter().collect(),
            ..Default::default()
        };
        for (slot, name, ino, _) in used {
            if !di.insert(&name, slot, ino) {
                return Err(PmemFsError::Corrupt(format!(
                    "directory {dir} holds {:?} twice",
                    String::from_utf8_lossy(&name)
                )));
            }
        }
        Ok(di)
    }

    /// Rebuilds a directory's volatile index from pmem (after an abort), or drops it when
    /// the directory no longer exists.
    pub(crate) fn rescan_dir(&mut self, dir: Ino) -> Result<()> {
        match self.inode(dir) {
            Ok(r) if r.kind == FileType::Dir => {
                let di = self.scan_dir(dir)?;
                self.dirs.insert(dir, di);
            }
            _ => {
                self.dirs.remove(&dir);
            }
        }
        Ok(())
    }

    fn dir_rec(&self, dir: Ino) -> Result<InodeRec> {
        let r = self.inode(dir)?;
        if r.kind != FileType::Dir {
            return Err(PmemFsError::NotDir(format!("inode {dir}")));
        }
        Ok(r)
    }

    /// A directory that may take a new entry: ENOENT once removed (an orphan kept for its
    /// open descriptors, [`crate::orphan`]), as POSIX wants for a removed directory.
    fn live_dir_rec(&self, dir: Ino) -> Result<InodeRec> {
        let r = self.dir_rec(dir)?;
        if r.nlink == 0 {
            return Err(PmemFsError::NotFound(format!(
                "directory {dir} was removed (it stays only for its open descriptors)"
            )));
        }
        Ok(r)
    }

    fn find(&self, dir: Ino, name: &[u8]) -> Result<Option<(u64, Ino)>> {
        let di = self.dirs.get(&dir).ok_or_else(|| {
            PmemFsError::Internal(format!("directory {dir} has no volatile index"))
        })?;
        Ok(di.get(name))
    }

    /// Picks a slot for a new entry in `dir` (growing it by a zeroed block if full: the
    /// block pointer and the size are staged in `b`, `rec` is updated).
    fn plan_slot(&mut self, dir: Ino, rec: &mut InodeRec, b: &mut Batch) -> Result<SlotPlan> {
        let di = self.dirs.get(&dir).ok_or_else(|| {
            PmemFsError::Internal(format!("directory {dir} has no volatile index"))
        })?;
        if let Some(&slot) = di.free.first() {
            return Ok(SlotPlan {
                slot,
                new_blocks: Vec::new(),
                grew: false,
            });
        }
        let slot = di.nslots;
        let lbn = slot / DIRENTS_PER_BLOCK;
        if lbn >= MAX_BLOCKS {
            return Err(PmemFsError::NoSpace(format!(
                "directory {dir} is full ({slot} entries)"
            )));
        }
        let missing = self.missing_levels(dir, lbn)?;
        let blocks = self.take_blocks(1 + missing, "a directory block")?;
        for &bl in &blocks {
            self.zero_block(bl)?;
        }
        self.stage_new_dir_block(dir, lbn, &blocks, b)?;
        rec.size += BLOCK;
        Ok(SlotPlan {
            slot,
            new_blocks: blocks,
            grew: true,
        })
    }

    /// Stages the pointers naming a new directory block `blocks[0]` at `lbn`, with the
    /// missing indirect levels `blocks[1..]` (zeroed; pointer words inside them are fresh,
    /// the others logged).
    fn stage_new_dir_block(&self, dir: Ino, lbn: u64, blocks: &[u64], b: &mut Batch) -> Result<()> {
        let base = self.g.inode_off(dir);
        let (root, depth, idx) = match ptr_path(lbn) {
            Some(PtrPath::Direct(i)) => {
                assert_eq!(blocks.len(), 1, "a direct block needs no indirect block");
                b.put(base + I_DIRECT + i * 8, blocks[0]);
                return Ok(());
            }
            Some(PtrPath::Tree { root, depth, idx }) => (root, depth, idx),
            None => unreachable!("plan_slot bounds lbn by MAX_BLOCKS"),
        };
        let mut spare = blocks[1..].iter();
        let (mut off, mut fresh) = (base + root, false);
        for &i in &idx[..depth as usize] {
            let mut x = if fresh {
                0
            } else {
                self.ptr(off, || format!("an indirect pointer of directory {dir}"))?
            };
            if x == 0 {
                x = *spare.next().expect("missing_levels counted it");
                if fresh {
                    b.put_fresh(off, x)
                } else {
                    b.put(off, x)
                }
                fresh = true;
            }
            off = x * BLOCK + i * 8;
        }
        assert!(
            spare.next().is_none(),
            "every indirect block taken is named"
        );
        if fresh {
            b.put_fresh(off, blocks[0])
        } else {
            b.put(off, blocks[0])
        }
        Ok(())
    }

    /// Stages an entry `name` → `ino` in slot `plan.slot` of `dir` (whose block is `blk` when
    /// it is new): name words fresh, header word logged.
    fn stage_entry(
        &self,
        dir: Ino,
        plan: &SlotPlan,
        name: &[u8],
        ino: Ino,
        kind: FileType,
        b: &mut Batch,
    ) -> Result<()> {
        let off = if plan.grew {
            plan.new_blocks[0] * BLOCK
        } else {
            self.dir_slot_off(dir, plan.slot)?
        };
        let mut padded = [0u8; 264];
        padded[..name.len()].copy_from_slice(name);
        for k in 0..33 {
            b.put_fresh(
                off + 8 + k * 8,
                u64::from_le_bytes(
                    padded[k as usize * 8..k as usize * 8 + 8]
                        .try_into()
                        .expect("8 bytes"),
                ),
            );
        }
        b.put(off, dirent_header(ino, name.len(), kind));
        Ok(())
    }

    /// Records a new entry in the volatile index once its batch is applied.
    fn index_entry(&mut self, id: u64, dir: Ino, plan: SlotPlan, name: &[u8], ino: Ino) {
        let di = self.dirs.get_mut(&dir).expect("checked in plan_slot");
        if plan.grew {
            di.free.extend(di.nslots + 1..di.nslots + DIRENTS_PER_BLOCK);
            di.nslots += DIRENTS_PER_BLOCK;
        } else {
            di.free.remove(&plan.slot);
        }
        let added = di.insert(name, plan.slot, ino);
        assert!(added, "the name was checked absent before the batch");
        let t = self.txs.get_mut(&id).expect("open");
        t.new_blocks.extend(plan.new_blocks);
        t.dirs.insert(dir);
    }

    fn unindex_entry(&mut self, id: u64, dir: Ino, name: &[u8], slot: u64) {
        if let Some(di) = self.dirs.get_mut(&dir) {
            di.remove(name);
        }
        let t = self.txs.get_mut(&id).expect("open");
        t.freed_slots.push((dir, slot));
        t.dirs.insert(dir);
    }

    /// The checks a new name in `parent` starts with; the parent's inode.
    fn check_new_name(&self, id: u64, parent: Ino, name: &[u8]) -> Result<InodeRec> {
        check_name(name)?;
        let prec = self.live_dir_rec(parent)?;
        self.check_owner(id, parent)?;
        if self.find(parent, name)?.is_some() {
            return Err(PmemFsError::Exists(format!(
                "{:?} in directory {parent}",
                String::from_utf8_lossy(name)
            )));
        }
        Ok(prec)
    }

    /// Stages a new inode `ino` (its slot was free: only the type word needs an undo
    /// entry, restoring 0 frees it; the other words are fresh).
    fn stage_new_inode(&self, ino: Ino, rec: &InodeRec, target_block: u64, b: &mut Batch) {
        let base = self.g.inode_off(ino);
        let words = rec.words();
        b.put(base, words[0]);
        for (i, w) in words.iter().enumerate().skip(1) {
            b.put_fresh(base + INODE_WORD_OFFS[i], *w);
        }
        for off in (I_DIRECT..I_XATTR_END).step_by(8) {
            b.put_fresh(base + off, 0);
        }
        if target_block != 0 {
            b.put_fresh(base + I_DIRECT, target_block);
        }
    }

    /// O_TMPFILE: a file with no name (link count 0), open once for the caller, in
    /// directory `parent`. It is an orphan from the start: its last release frees it, and
    /// a crash leaves it for mount to reclaim ([`crate::orphan`]); until then
    /// [`Namespace::link`] may give it a name.
    pub fn tmpfile(&mut self, tx: Option<TxId>, parent: Ino, mode: u32, o: Owner) -> Result<Attr> {
        self.live_dir_rec(parent)?;
        let node = NewNode::new(FileType::File, mode, o);
        self.mutate(tx, |fs, id| fs.do_tmpfile(id, &node))
    }

    /// The lowest free inode number (taken by the caller once its batch is applied).
    fn first_free_inode(&self) -> Result<Ino> {
        self.free_inodes
            .first()
            .copied()
            .ok_or_else(|| PmemFsError::NoSpace(format!("all {} inodes in use", self.g.inodes - 1)))
    }

    fn do_tmpfile(&mut self, id: u64, node: &NewNode) -> Result<Attr> {
        let ino = self.first_free_inode()?;
        let mut rec = node.rec(0, self.now());
        rec.nlink = 0;
        let mut b = Batch::default();
        self.stage_new_inode(ino, &rec, 0, &mut b);
        self.apply_meta(id, b)?;
        self.free_inodes.remove(&ino);
        self.txs.get_mut(&id).expect("open").new_inodes.push(ino);
        self.open(ino)?;
        self.tmpfiles.insert(ino);
        self.claim(id, &[ino]);
        let a = self.getattr(ino)?;
        assert_eq!(a.nlink, 0, "a new O_TMPFILE file has no link");
        Ok(a)
    }

    /// A symbolic link's target block: taken, written and persisted (nothing durable names
    /// it until the create commits; an abort or a crash before leaves it free).
    fn write_target_block(&mut self, target: &[u8]) -> Result<Vec<u64>> {
        if target.is_empty() {
            return Ok(Vec::new());
        }
        assert!(target.len() <= SYMLINK_MAX, "target checked by symlink");
        let blocks = self.take_blocks(1, "a symbolic link's target block")?;
        // The whole block (target, then zeros), so a stale tail never reads back.
        let mut block = vec![0u8; BLOCK as usize];
        block[..target.len()].copy_from_slice(target);
        self.dev.write(blocks[0] * BLOCK, &block)?;
        let mutated = crate::mutation::active(crate::mutation::Mutation::SymlinkTargetNotPersisted);
        if !mutated {
            self.dev.persist(blocks[0] * BLOCK, BLOCK)?;
        }
        Ok(blocks)
    }

    fn do_create(&mut self, id: u64, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr> {
        let mut prec = self.check_new_name(id, parent, name)?;
        let kind = node.kind;
        let ino = self.first_free_inode()?;
        let now = self.now();
        let rec = node.rec(parent, now);
        let target_blocks = self.write_target_block(node.target)?;
        let mut b = Batch::default();
        self.stage_new_inode(
            ino,
            &rec,
            target_blocks.first().copied().unwrap_or(0),
            &mut b,
        );
        let plan = match self.plan_slot(parent, &mut prec, &mut b) {
            Ok(p) => p,
            Err(e) => {
                self.give_back_blocks(&target_blocks);
                return Err(e);
            }
        };
        self.stage_entry(parent, &plan, name, ino, kind, &mut b)?;
        prec.mtime = now;
        prec.ctime = now;
        if kind == FileType::Dir {
            prec.nlink += 1;
        }
        self.stage_inode(&mut b, parent, &prec)?;
        if let Err(e) = self.apply_meta(id, b) {
            self.give_back_blocks(&plan.new_blocks);
            self.give_back_blocks(&target_blocks);
            return Err(e);
        }
        self.free_inodes.remove(&ino);
        self.index_entry(id, parent, plan, name, ino);
        let t = self.txs.get_mut(&id).expect("open");
        t.new_inodes.push(ino);
        t.new_blocks.extend(target_blocks);
        if kind == FileType::Dir {
            t.dirs.insert(ino);
            self.dirs.insert(ino, DirIndex::default());
        }
        self.claim(id, &[parent, ino]);
        self.getattr(ino)
    }

    /// Stages the end of `victim` (its last link goes): its type word to 0. Its blocks are
    /// freed, and its committed versions retired, when the transaction commits.
    pub(crate) fn stage_drop_inode(&mut self, victim: Ino, b: &mut Batch) -> Result<()> {
        b.put(self.g.inode_off(victim) + I_TYPE, 0);
        Ok(())
    }

    /// After the batch: the victim's blocks and inode are freed at commit, its open versions
    /// (this transaction's) at once. Its committed versions leave the index now (no
    /// checkpoint may install them into a dying inode) and are retired at commit
    /// ([`PmemFs::retire_versions`]): installing them first, as this did before, needs
    /// indirect blocks a full device may not have, and a version left behind then outlived
    /// its inode (a block leak, docs/fs-testing.md).
    pub(crate) fn finish_drop_inode(&mut self, id: u64, victim: Ino) -> Result<()> {
        let blocks: Vec<u64> = self
            .mapped_blocks(victim)?
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        let retired = self.index.take_committed(victim);
        self.txs
            .get_mut(&id)
            .expect("open")
            .retired
            .extend(retired.into_iter().map(|(lbn, c)| (victim, lbn, c)));
        let lbns: Vec<u64> = self.index.file(victim).map(|(l, _)| l).collect();
        for lbn in lbns {
            if let Some(o) = self.index.entry(victim, lbn).open.take() {
                self.free_blocks.insert(o.pblk);
                release(&mut self.log.reserved, 1, "log.reserved (dropped inode)");
                let t = self.txs.get_mut(&id).expect("open");
                release(&mut t.reserved, 1, "tx.reserved (dropped inode)");
                t.data.remove(&(victim, lbn));
            }
            self.index.tidy(victim, lbn);
        }
        // Only an inode nobody has open is dropped (orphans wait for their last release),
        // but FreeOpenFileAtUnlink drops open ones: a new inode reusing the number starts
        // closed either way.
        self.opens.remove(&victim);
        if self.dirs.remove(&victim).is_some() {
            self.txs.get_mut(&id).expect("open").dirs.insert(victim);
        }
        let t = self.txs.get_mut(&id).expect("open");
        t.freed_blocks.extend(blocks);
        t.freed_inodes.push(victim);
        Ok(())
    }

    fn do_remove(&mut self, id: u64, parent: Ino, name: &[u8], dir: bool) -> Result<()> {
        let mut prec = self.dir_rec(parent)?;
        if name.len() > NAME_MAX {
            return Err(PmemFsError::NameTooLong(name.len()));
        }
        self.check_owner(id, parent)?;
        let (slot, ino) = self.find(parent, name)?.ok_or_else(|| {
            PmemFsError::NotFound(format!(
                "{:?} in directory {parent}",
                String::from_utf8_lossy(name)
            ))
        })?;
        let rec = self.inode(ino)?;
        match (dir, rec.kind) {
            (false, FileType::Dir) => {
                return Err(PmemFsError::IsDir(format!(
                    "{:?} (use rmdir)",
                    String::from_utf8_lossy(name)
                )))
            }
            (true, k) if k != FileType::Dir => {
                return Err(PmemFsError::NotDir(format!(
                    "{:?}",
                    String::from_utf8_lossy(name)
                )))
            }
            _ => {}
        }
        self.check_owner(id, ino)?;
        if dir && self.dirs.get(&ino).is_some_and(|d| !d.is_empty()) {
            return Err(PmemFsError::NotEmpty(format!(
                "{:?}",
                String::from_utf8_lossy(name)
            )));
        }
        let mut b = Batch::default();
        let now = self.now();
        let orphan = self.stage_unlink_target(ino, now, &mut b)?;
        b.put(self.dir_slot_off(parent, slot)?, 0);
        prec.mtime = now;
        prec.ctime = now;
        if dir {
            prec.nlink = drop_link(prec.nlink, parent)?;
        }
        self.stage_inode(&mut b, parent, &prec)?;
        self.apply_meta(id, b)?;
        self.unindex_entry(id, parent, name, slot);
        if !orphan {
            self.finish_drop_inode(id, ino)?;
        }
        self.claim(id, &[parent, ino]);
        Ok(())
    }

    /// Stages the loss of one name of `victim`: a file with other names (hard links) loses
    /// a link; an inode that is open (file or empty directory) becomes an orphan, link
    /// count 0, freed at its last release ([`crate::orphan`]); anything else is dropped
    /// (finish with `finish_drop_inode` after the batch). True when the inode stays.
    fn stage_unlink_target(&mut self, victim: Ino, now: Time, b: &mut Batch) -> Result<bool> {
        let mut rec = self.inode_in(b, victim)?;
        let mutated = crate::mutation::active(crate::mutation::Mutation::FreeOpenFileAtUnlink);
        let open = self.is_open(victim) && !mutated;
        if rec.kind == FileType::Dir && open {
            // Its one name goes: "." and the parent's entry, so 0 (mount checked 2 + its
            // subdirectories, and an empty one has none).
            assert!(
                self.dirs.get(&victim).is_some_and(|d| d.is_empty()),
                "directory {victim} is removed with entries"
            );
            rec.nlink = 0;
            rec.ctime = now;
            self.stage_inode(b, victim, &rec)?;
            return Ok(true);
        }
        if rec.kind == FileType::Dir || (rec.nlink <= 1 && !open) {
            self.stage_drop_inode(victim, b)?;
            return Ok(false);
        }
        // A named non-directory has link count = its names (mount checks it), so at least
        // 1 here.
        rec.nlink = (rec.nlink.checked_sub(1))
            .unwrap_or_else(|| panic!("inode {victim} has a name but link count 0"));
        rec.ctime = now;
        self.stage_inode(b, victim, &rec)?;
        Ok(true)
    }

    fn do_link(&mut self, id: u64, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        check_name(name)?;
        let mut prec = self.live_dir_rec(parent)?;
        let mut rec = self.inode(ino)?;
        match rec.kind {
            FileType::Dir => {
                return Err(PmemFsError::NotPermitted(format!(
                    "inode {ino} is a directory: no hard links to directories"
                )))
            }
            _ if rec.nlink == 0 && !self.tmpfiles.contains(&ino) => {
                return Err(PmemFsError::NotFound(format!(
                    "inode {ino} was unlinked (open, no name left)"
                )))
            }
            _ if rec.nlink >= MAX_LINKS => return Err(PmemFsError::TooManyLinks),
            // Files, symbolic links and special files take hard links (as Linux).
            _ => {}
        }
        self.check_owner(id, parent)?;
        self.check_owner(id, ino)?;
        if self.find(parent, name)?.is_some() {
            return Err(PmemFsError::Exists(format!(
                "{:?} in directory {parent}",
                String::from_utf8_lossy(name)
            )));
        }
        let now = self.now();
        let mut b = Batch::default();
        let plan = self.plan_slot(parent, &mut prec, &mut b)?;
        self.stage_entry(parent, &plan, name, ino, rec.kind, &mut b)?;
        prec.mtime = now;
        prec.ctime = now;
        self.stage_inode(&mut b, parent, &prec)?;
        rec.nlink += 1;
        rec.ctime = now;
        self.stage_inode(&mut b, ino, &rec)?;
        if let Err(e) = self.apply_meta(id, b) {
            self.give_back_blocks(&plan.new_blocks);
            return Err(e);
        }
        self.index_entry(id, parent, plan, name, ino);
        // A linked O_TMPFILE file is an ordinary file from now on (an abort of this link
        // leaves it nameless, and its last release frees it).
        self.tmpfiles.remove(&ino);
        self.claim(id, &[parent, ino]);
        self.getattr(ino)
    }

    /// The checks every rename starts with; the source's slot and inode.
    fn rename_source(
        &self,
        id: u64,
        sp: Ino,
        sname: &[u8],
        dp: Ino,
        dname: &[u8],
    ) -> Result<(u64, Ino)> {
        check_name(sname)?;
        check_name(dname)?;
        self.dir_rec(sp)?;
        self.live_dir_rec(dp)?;
        self.check_owner(id, sp)?;
        self.check_owner(id, dp)?;
        let (sslot, src) = self.find(sp, sname)?.ok_or_else(|| {
            PmemFsError::NotFound(format!(
                "{:?} in directory {sp}",
                String::from_utf8_lossy(sname)
            ))
        })?;
        self.check_owner(id, src)?;
        Ok((sslot, src))
    }

    /// EINVAL when directory `moved` would go into `target`, itself or one of its
    /// subdirectories.
    fn check_not_inside(&self, target: Ino, moved: Ino) -> Result<()> {
        let mut d = target;
        loop {
            if d == moved {
                return Err(PmemFsError::Invalid(format!(
                    "cannot move directory {moved} into itself or a subdirectory of itself"
                )));
            }
            if d == ROOT {
                return Ok(());
            }
            d = self.inode(d)?.parent as u64;
        }
    }

    /// RENAME_EXCHANGE: the two entries' header words swap inodes in one batch; a directory
    /// that changes parent gets its parent field, and the parents' link counts follow.
    fn do_exchange(
        &mut self,
        id: u64,
        (sp, sname, sslot, src): (Ino, &[u8], u64, Ino),
        dp: Ino,
        dname: &[u8],
    ) -> Result<()> {
        let (dslot, dst) = self.find(dp, dname)?.ok_or_else(|| {
            PmemFsError::NotFound(format!(
                "{:?} in directory {dp} (RENAME_EXCHANGE needs both)",
                String::from_utf8_lossy(dname)
            ))
        })?;
        if dst == src {
            return Ok(());
        }
        self.check_owner(id, dst)?;
        let (srec, drec) = (self.inode(src)?, self.inode(dst)?);
        if srec.kind == FileType::Dir {
            self.check_not_inside(dp, src)?;
        }
        if drec.kind == FileType::Dir {
            self.check_not_inside(sp, dst)?;
        }
        let now = self.now();
        let mut b = Batch::default();
        let h_s = dirent_header(dst, sname.len(), drec.kind);
        b.put(self.dir_slot_off(sp, sslot)?, h_s);
        let h_d = dirent_header(src, dname.len(), srec.kind);
        b.put(self.dir_slot_off(dp, dslot)?, h_d);
        // Subdirectories moving from sp to dp (-1, 0 or 1).
        let moved = (srec.kind == FileType::Dir) as i64 - (drec.kind == FileType::Dir) as i64;
        for (dir, delta) in [(sp, -moved), (dp, moved)] {
            let mut r = self.inode_in(&b, dir)?;
            r.mtime = now;
            r.ctime = now;
            if sp != dp {
                r.nlink = add_links(r.nlink, delta, dir)?;
            }
            self.stage_inode(&mut b, dir, &r)?;
        }
        for (ino, parent) in [(src, dp), (dst, sp)] {
            let mut r = self.inode_in(&b, ino)?;
            r.ctime = now;
            if r.kind == FileType::Dir {
                r.parent = parent as u32;
            }
            self.stage_inode(&mut b, ino, &r)?;
        }
        self.apply_meta(id, b)?;
        for (dir, name, slot, ino) in [(sp, sname, sslot, dst), (dp, dname, dslot, src)] {
            let di = self.dirs.get_mut(&dir).expect("checked");
            assert_eq!(di.get(name).map(|e| e.0), Some(slot));
            di.set_ino(name, ino);
            self.txs.get_mut(&id).expect("open").dirs.insert(dir);
        }
        self.claim(id, &[sp, dp, src, dst]);
        Ok(())
    }

    /// The checks on a rename's existing target `dino` (another inode than the source):
    /// EBUSY, ENOTDIR or EISDIR by kind, ENOTEMPTY for a directory with entries.
    fn check_rename_target(&self, id: u64, src_dir: bool, dino: Ino, dname: &[u8]) -> Result<()> {
        self.check_owner(id, dino)?;
        let drec = self.inode(dino)?;
        match (src_dir, drec.kind) {
            (true, k) if k != FileType::Dir => Err(PmemFsError::NotDir(format!(
                "{:?} is not a directory",
                String::from_utf8_lossy(dname)
            ))),
            (false, FileType::Dir) => Err(PmemFsError::IsDir(format!(
                "{:?} is a directory",
                String::from_utf8_lossy(dname)
            ))),
            (true, FileType::Dir) if self.dirs.get(&dino).is_some_and(|d| !d.is_empty()) => Err(
                PmemFsError::NotEmpty(format!("{:?}", String::from_utf8_lossy(dname))),
            ),
            _ => Ok(()),
        }
    }

    fn do_rename(
        &mut self,
        id: u64,
        (sp, sname, sslot, src): (Ino, &[u8], u64, Ino),
        dp: Ino,
        dname: &[u8],
    ) -> Result<()> {
        let srec = self.inode(src)?;
        let src_dir = srec.kind == FileType::Dir;
        if src_dir {
            // The target directory must not be the source or inside it.
            self.check_not_inside(dp, src)?;
        }
        let dest = self.find(dp, dname)?;
        if let Some((_, dino)) = dest {
            if dino == src {
                return Ok(());
            }
            self.check_rename_target(id, src_dir, dino, dname)?;
        }
        let now = self.now();
        let mut b = Batch::default();
        let mut kept = false;
        if let Some((_, dino)) = dest {
            kept = self.stage_unlink_target(dino, now, &mut b)?;
        }
        // Source entry goes.
        b.put(self.dir_slot_off(sp, sslot)?, 0);
        let mut sprec = self.inode_in(&b, sp)?;
        sprec.mtime = now;
        sprec.ctime = now;
        if src_dir {
            sprec.nlink = drop_link(sprec.nlink, sp)?;
        }
        self.stage_inode(&mut b, sp, &sprec)?;
        let mut dprec = self.inode_in(&b, dp)?;
        dprec.mtime = now;
        dprec.ctime = now;
        if src_dir {
            dprec.nlink += 1;
        }
        let mut plan = None;
        match dest {
            Some((dslot, dino)) => {
                if self.inode(dino)?.kind == FileType::Dir {
                    dprec.nlink = drop_link(dprec.nlink, dp)?;
                }
                b.put(
                    self.dir_slot_off(dp, dslot)?,
                    dirent_header(src, dname.len(), srec.kind),
                );
            }
            None => {
                let p = self.plan_slot(dp, &mut dprec, &mut b)?;
                self.stage_entry(dp, &p, dname, src, srec.kind, &mut b)?;
                plan = Some(p);
            }
        }
        self.stage_inode(&mut b, dp, &dprec)?;
        // The renamed inode's ctime advances (as on ext4 and tmpfs); a directory moving to
        // another parent also records it.
        let mut r = self.inode_in(&b, src)?;
        r.ctime = now;
        if src_dir && sp != dp {
            r.parent = dp as u32;
        }
        self.stage_inode(&mut b, src, &r)?;
        if let Err(e) = self.apply_meta(id, b) {
            if let Some(p) = plan {
                self.give_back_blocks(&p.new_blocks);
            }
            return Err(e);
        }
        self.unindex_entry(id, sp, sname, sslot);
        self.index_rename_target(id, (dp, dname, src), dest, plan, kept)?;
        self.claim(id, &[sp, dp, src]);
        Ok(())
    }

    /// After a rename's batch: the target name in the volatile index, and a replaced
    /// inode dropped unless it stays (other names, or open: `kept`).
    fn index_rename_target(
        &mut self,
        id: u64,
        (dp, dname, src): (Ino, &[u8], Ino),
        dest: Option<(u64, Ino)>,
        plan: Option<SlotPlan>,
        kept: bool,
    ) -> Result<()> {
        match (dest, plan) {
            (Some((dslot, dino)), _) => {
                let di = self.dirs.get_mut(&dp).expect("checked");
                assert_eq!(di.get(dname), Some((dslot, dino)));
                di.set_ino(dname, src);
                self.txs.get_mut(&id).expect("open").dirs.insert(dp);
                if !kept {
                    self.finish_drop_inode(id, dino)?;
                }
                self.claim(id, &[dino]);
            }
            (None, Some(p)) => self.index_entry(id, dp, p, dname, src),
            (None, None) => return Err(PmemFsError::Internal("rename without a slot plan".into())),
        }
        Ok(())
    }
}

/// The calls on names. The caller's context is its open AD-transaction (None: a legacy
/// call, committed before it returns).
impl<P: PmemDevice> Namespace for PmemFs<P> {
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.dir_rec(parent)?;
        if name.len() > NAME_MAX {
            return Err(PmemFsError::NameTooLong(name.len()));
        }
        match self.find(parent, name)? {
            Some((_, ino)) => self.getattr(ino),
            None => Err(PmemFsError::NotFound(format!(
                "{:?} in directory {parent}",
                String::from_utf8_lossy(name)
            ))),
        }
    }

    /// Up to `max` entries after `cookie` (0: from the start), in slot order ("." and ".."
    /// are not stored), each entry's cookie its slot + 1. Entries never move between slots
    /// (directories do not compact), so an entry that exists during the whole listing is
    /// returned exactly once, whatever is created or removed between pages; a new entry may
    /// or may not be (as POSIX allows). Cost: O(log n) to find the cookie, then the page.
    fn readdir(&self, dir: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        self.dir_rec(dir)?;
        let di = self.dirs.get(&dir).ok_or_else(|| {
            PmemFsError::Internal(format!("directory {dir} has no volatile index"))
        })?;
        let mut out = Vec::new();
        for (slot, name, ino) in di.entries_from(cookie).take(max) {
            assert!(
                slot < di.nslots,
                "directory {dir}: slot {slot} beyond its size"
            );
            out.push(DirEntry {
                name: name.clone(),
                ino,
                kind: self.inode(ino)?.kind,
                cookie: slot + 1,
            });
        }
        assert!(out.windows(2).all(|w| w[0].cookie < w[1].cookie));
        assert!(out.first().is_none_or(|e| e.cookie > cookie));
        Ok(out)
    }

    /// readlink(2): a symbolic link's target; EINVAL for any other kind.
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let rec = self.inode(ino)?;
        if rec.kind != FileType::Symlink {
            return Err(PmemFsError::Invalid(format!(
                "inode {ino} is a {:?}, not a symbolic link",
                rec.kind
            )));
        }
        // Pair of scan_metadata's check: a link's size is its target's length.
        assert!(
            (1..=SYMLINK_MAX as u64).contains(&rec.size),
            "symlink {ino} has size {}",
            rec.size
        );
        let target = self.read_shared(ino, 0, rec.size as usize)?;
        assert_eq!(target.len() as u64, rec.size, "symlink {ino} reads short");
        Ok(target)
    }

    fn parent(&self, dir: Ino) -> Result<Ino> {
        let rec = self.inode(dir)?;
        if rec.kind != FileType::Dir {
            return Err(PmemFsError::NotDir(format!("inode {dir}")));
        }
        if rec.nlink == 0 {
            // Removed while open: its parent field may name a directory gone since.
            return Err(PmemFsError::NotFound(format!(
                "directory {dir} was removed"
            )));
        }
        assert!(rec.parent != 0, "directory {dir} has no parent");
        Ok(rec.parent as Ino)
    }

    fn create(&mut self, t: Self::Ctx, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        let node = NewNode::new(FileType::File, mode, o);
        self.mutate(t, |fs, id| fs.do_create(id, p, name, &node))
    }

    fn mkdir(&mut self, t: Self::Ctx, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        let node = NewNode::new(FileType::Dir, mode, o);
        self.mutate(t, |fs, id| fs.do_create(id, p, name, &node))
    }

    /// symlink(2): a link to `target` (mode 0o777, as the block engine), its bytes in one
    /// data block that the create's batch names (written and persisted before the batch,
    /// like a new directory block, so the link never names a block without its target).
    /// EINVAL for an empty target or one longer than [`SYMLINK_MAX`].
    fn symlink(
        &mut self,
        tx: Option<TxId>,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        o: Owner,
    ) -> Result<Attr> {
        if target.is_empty() || target.len() > SYMLINK_MAX {
            return Err(PmemFsError::Invalid(format!(
                "symlink target of {} bytes (1 to {SYMLINK_MAX})",
                target.len()
            )));
        }
        let mut node = NewNode::new(FileType::Symlink, 0o777, o);
        node.target = target;
        self.mutate(tx, |fs, id| fs.do_create(id, parent, name, &node))
    }

    /// mknod(2): a FIFO, socket, character or block device (with its device number), or
    /// an empty regular file.
    fn mknod(
        &mut self,
        tx: Option<TxId>,
        parent: Ino,
        name: &[u8],
        kind: MknodKind,
        mode: u32,
        o: Owner,
    ) -> Result<Attr> {
        let mut node = NewNode::new(kind.file_type(), mode, o);
        node.rdev = kind.rdev();
        self.mutate(tx, |fs, id| fs.do_create(id, parent, name, &node))
    }

    /// A new name `name` in `parent` for the file `ino` (link(2)): EPERM for a directory,
    /// ENOENT for an orphan (unlinked while open), EMLINK beyond [`MAX_LINKS`].
    fn link(&mut self, tx: Option<TxId>, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.mutate(tx, |fs, id| fs.do_link(id, ino, parent, name))
    }

    fn unlink(&mut self, tx: Option<TxId>, parent: Ino, name: &[u8]) -> Result<()> {
        self.mutate(tx, |fs, id| fs.do_remove(id, parent, name, false))
    }

    fn rmdir(&mut self, tx: Option<TxId>, parent: Ino, name: &[u8]) -> Result<()> {
        self.mutate(tx, |fs, id| fs.do_remove(id, parent, name, true))
    }

    /// renameat2(2). Without flags, POSIX rename: an existing target is replaced (a file by
    /// a file, a directory by an empty directory); renaming onto the same inode does
    /// nothing. `noreplace`: EEXIST when `dname` exists; `exchange`: swaps the two entries
    /// atomically (ENOENT when `dname` does not exist). Both together: EINVAL.
    fn rename(
        &mut self,
        tx: Option<TxId>,
        sp: Ino,
        sname: &[u8],
        dp: Ino,
        dname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        if flags.noreplace && flags.exchange {
            return Err(PmemFsError::Invalid(
                "rename flags: RENAME_NOREPLACE or RENAME_EXCHANGE, not both".into(),
            ));
        }
        self.mutate(tx, |fs, id| {
            let (sslot, src) = fs.rename_source(id, sp, sname, dp, dname)?;
            if flags.noreplace && fs.find(dp, dname)?.is_some() {
                return Err(PmemFsError::Exists(format!(
                    "{:?} in directory {dp} (RENAME_NOREPLACE)",
                    String::from_utf8_lossy(dname)
                )));
            }
            if flags.exchange {
                return fs.do_exchange(id, (sp, sname, sslot, src), dp, dname);
            }
            fs.do_rename(id, (sp, sname, sslot, src), dp, dname)
        })
    }
}

/// A directory's link count changed by `delta` subdirectories; underflow or overflow is
/// damage or an engine bug (mount checked every link count), reported, not wrapped.
fn add_links(nlink: u32, delta: i64, dir: Ino) -> Result<u32> {
    u32::try_from(nlink as i64 + delta).map_err(|_| {
        PmemFsError::Internal(format!(
            "directory {dir} has link count {nlink}, cannot change it by {delta}"
        ))
    })
}

/// A directory's link count less one: mount checked every link count against the entries
/// (recovery::scan_metadata), so 0 here is damage or an engine bug, reported, not wrapped.
fn drop_link(nlink: u32, dir: Ino) -> Result<u32> {
    nlink.checked_sub(1).ok_or_else(|| {
        PmemFsError::Internal(format!(
            "directory {dir} has link count 0 while a subdirectory leaves it"
        ))
    })
}
