//! Atomic regions (CFS, `003` §3–4; §4.1 atomic propagation groups, §4.3 commit and
//! abort): everything a process group changes between [`Fs::region_begin`] and
//! [`Fs::region_commit`] reaches the media all or nothing, and [`Fs::region_abort`] undoes
//! it in memory. Their state is one struct, [`Regions`], owned by this module.
//!
//! A region is a stream of its own that nothing commits early:
//! * **No steal.** `sync`, periodic commits, the dirty limit and fsync of another
//!   stream skip a region's group; fsync, osync, dsync and streamsync inside a region
//!   return at once (the region becomes durable at its commit, as one record).
//! * **Kept apart from other streams.** Before a region's operation is related to
//!   uncommitted work of a legacy group (the system-wide init stream or any other), that
//!   group commits (without a flush; the region's commit flushes it too), so a region's
//!   group is always the region alone and aborting it touches nobody else. An operation
//!   of another stream that depends on a region's uncommitted change (writes a file the
//!   region wrote, renames an entry it created) becomes part of the region: there is no
//!   isolation (CFS §3), and the dependent change cannot commit without what it depends on.
//!   Two regions changing the same thing is refused (`Busy`).
//! * **Undo by redo.** Abort drops the region's running transaction and rebuilds the live
//!   metadata from the committed state plus every other stream's uncommitted operations in
//!   their real-time order (the same replay a commit of those groups would do), so the
//!   undo needs no per-field log (CFS Table 1). Dirty blocks of the region's files are
//!   dropped; blocks are allocated only at commit, so nothing needs deallocating (CFS's
//!   delayed deallocation comes for free: blocks a region frees are freed when it commits).
//! * **Files added** ([`Fs::region_add`], `cfs_add` for mmap'd files, and the F2FS atomic
//!   write of one file) route every write to that file, from any stream, into the region.

use super::*;

/// Region streams have ids from here on (2^32 of them per mount); user stream ids stay
/// below: the FUSE layer refuses SETSTREAM to these, so the one stream name in 2^32 whose
/// id falls here cannot be used.
pub const REGION_BASE: StreamId = 0xFFFF_FFFF_0000_0000;

/// What an abort changed back, for caches outside the engine (the kernel's page and
/// directory-entry caches under FUSE) to drop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aborted {
    pub inodes: Vec<Ino>,
    pub entries: Vec<(Ino, Vec<u8>)>,
}

#[derive(Debug, Default)]
pub(super) struct Region {
    files: BTreeSet<Ino>,
}

/// The state of this mount's atomic regions, owned here: the engine reaches it only
/// through the functions of this module.
#[derive(Debug, Default)]
pub(super) struct Regions {
    /// Open atomic regions, by their stream.
    open: BTreeMap<StreamId, Region>,
    /// Files added to a region: every write to them goes there.
    added: HashMap<Ino, StreamId>,
    /// Regions begun on this mount: the next one's stream is `REGION_BASE + next`.
    next: u64,
    /// The last routing decision ([`Fs::route`]): (caller's stream, stream the call went
    /// to), so that a call that joined a region is counted in the region's history.
    routed: Option<(StreamId, StreamId)>,
}

impl Regions {
    /// No region is open.
    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The open regions' streams.
    pub(super) fn ids(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.open.keys().copied()
    }

    /// Opens a region: a new stream at or above [`REGION_BASE`].
    fn begin(&mut self) -> Result<StreamId> {
        if self.next > u32::MAX as u64 {
            return Err(FsError::Busy(
                "this mount has begun 2^32 atomic regions; mount it again".into(),
            ));
        }
        let r = REGION_BASE + self.next;
        self.next += 1;
        let was = self.open.insert(r, Region::default());
        assert!(was.is_none(), "region {r} begun twice");
        Ok(r)
    }

    /// Adds file `ino` to open region `r` (the caller checked it belongs to no other).
    fn add_file(&mut self, r: StreamId, ino: Ino) {
        let was = self.added.insert(ino, r);
        assert!(
            was.is_none(),
            "inode {ino} added to region {r} while in region {was:?}"
        );
        self.open
            .get_mut(&r)
            .expect("adding a file to a region that is not open")
            .files
            .insert(ino);
    }

    /// Closes region `r` (at its commit or abort): its files are no longer added.
    fn close(&mut self, r: StreamId) -> Result<Region> {
        let reg = self
            .open
            .remove(&r)
            .ok_or_else(|| FsError::Invalid("no atomic region is open".into()))?;
        for f in &reg.files {
            let was = self.added.remove(f);
            assert_eq!(was, Some(r), "inode {f} of region {r} was not added to it");
        }
        assert!(
            !self.added.values().any(|&o| o == r),
            "a closed region {r} still has added files"
        );
        Ok(reg)
    }
}

/// What a write sets on its file directly (as `FileData::write` does).
fn write_attrs(m: &mut Meta, ino: Ino, end: u64, t: Time) {
    if let Some(n) = m.inodes.get_mut(&ino) {
        n.size = n.size.max(end);
        n.mtime = t;
        n.ctime = t;
    }
}

impl<D: BlockDevice> Fs<D> {
    /// Opens an atomic region; returns its stream, for the calls that make up the region.
    pub fn region_begin(&mut self) -> Result<StreamId> {
        self.writable()?;
        let r = self.regions.begin()?;
        self.streams.stream(r);
        Ok(r)
    }

    /// Whether `s` is an open region.
    pub fn is_region(&self, s: StreamId) -> bool {
        self.regions.open.contains_key(&s)
    }

    /// Open regions.
    pub fn regions_open(&self) -> usize {
        self.regions.open.len()
    }

    fn region(&self, r: StreamId) -> Result<&Region> {
        self.regions
            .open
            .get(&r)
            .ok_or_else(|| FsError::Invalid("no atomic region is open".into()))
    }

    /// CFS `cfs_add`: every later write to `ino`, by any stream (mmap write-back arrives
    /// without the writer's identity), belongs to region `r`. Changes of `ino` made before
    /// and not yet committed are committed first (they are not the region's).
    pub fn region_add(&mut self, r: StreamId, ino: Ino) -> Result<()> {
        self.region(r)?;
        self.file(ino)?;
        match self.regions.added.get(&ino) {
            Some(&o) if o == r => return Ok(()),
            Some(_) => {
                return Err(FsError::Busy(format!(
                    "inode {ino} belongs to another atomic region"
                )))
            }
            None => {}
        }
        self.route(r, &[Key::Ino(ino)], &[])?;
        self.regions.add_file(r, ino);
        Ok(())
    }

    /// The region a file was added to.
    pub fn region_of_file(&self, ino: Ino) -> Option<StreamId> {
        self.regions.added.get(&ino).copied()
    }

    /// Commits region `r`: one record, flushed; returns when it is durable.
    pub fn region_commit(&mut self, r: StreamId) -> Result<()> {
        self.writable()?;
        self.regions.close(r)?;
        let res = self.commit(&[r]);
        self.streams.streams.remove(&r);
        self.stats.regions_committed += 1;
        res
    }

    /// Aborts region `r`: none of its changes stays, in memory or on the media.
    pub fn region_abort(&mut self, r: StreamId) -> Result<Aborted> {
        let reg = self.regions.close(r)?;
        let keys = self.streams.discard(r);
        let mut undone = Aborted {
            inodes: reg.files.into_iter().collect(),
            entries: Vec::new(),
        };
        for k in keys {
            match k {
                Key::Ino(i) => {
                    self.drop_dirty(i, 0);
                    if let Some((_, res)) = self.falloc.remove(&i) {
                        intactfs_device::counter::release(
                            &mut self.reserved,
                            res,
                            "reserved (aborted preallocation)",
                        );
                    }
                    undone.inodes.push(i);
                }
                Key::Entry(p, n) => undone.entries.push((p, n)),
                _ => {}
            }
        }
        undone.inodes.sort_unstable();
        undone.inodes.dedup();
        for i in &undone.inodes {
            self.wattrs.remove(i);
        }
        // The committed state, then every other stream's uncommitted operations and their
        // writes' direct changes (size, times), in real-time order.
        let mut live = self.durable.clone();
        let mut freeing = 0;
        let mut writes: Vec<(u64, Ino, u64, Time)> = self
            .wattrs
            .iter()
            .flat_map(|(&i, v)| v.iter().map(move |&(g, end, t)| (g, i, end, t)))
            .collect();
        writes.sort_unstable_by_key(|w| w.0);
        let mut writes = writes.into_iter().peekable();
        for (g, op) in self.streams.uncommitted() {
            while let Some((_, i, end, t)) = writes.next_if(|w| w.0 < *g) {
                write_attrs(&mut live, i, end, t);
            }
            let freed = live.apply(op).map_err(|e| {
                FsError::Internal(format!("replaying {op:?} without the aborted region: {e}"))
            })?;
            freeing += freed.extents.iter().map(|e| e.1).sum::<u64>();
        }
        for (_, i, end, t) in writes {
            write_attrs(&mut live, i, end, t);
        }
        // Inode numbers the region took are not handed out again before the next mount:
        // the kernel may still hold one through an open file of the aborted region.
        live.next_ino = live.next_ino.max(self.live.next_ino);
        self.durable.next_ino = live.next_ino;
        self.live = live;
        self.freeing = freeing;
        self.stats.regions_aborted += 1;
        Ok(undone)
    }

    /// The stream an operation of `s` on `claims`/`checks` belongs to: `s`, or the region
    /// whose uncommitted work (or added file) it touches. Before an operation joins a
    /// region, the legacy groups it is related to commit, so they never join it.
    pub(super) fn route(
        &mut self,
        s: StreamId,
        claims: &[Key],
        checks: &[Key],
    ) -> Result<StreamId> {
        self.regions.routed = Some((s, s));
        if self.regions.is_empty() {
            return Ok(s);
        }
        let roots = self.streams.related_roots(claims, checks);
        let added = claims.iter().chain(checks).filter_map(|k| match k {
            Key::Ino(i) => self.regions.added.get(i).copied(),
            _ => None,
        });
        let mut target = self.is_region(s).then_some(s);
        for r in roots
            .iter()
            .copied()
            .filter(|r| self.is_region(*r))
            .chain(added.collect::<Vec<_>>())
        {
            match target {
                None => target = Some(r),
                Some(t) if t != r => {
                    return Err(FsError::Busy(
                        "the change touches what another atomic region changed".into(),
                    ))
                }
                _ => {}
            }
        }
        let Some(r) = target else { return Ok(s) };
        for g in roots.into_iter().filter(|g| *g != r) {
            let members = self.streams.group(g);
            self.commit_with(&members, super::Wait::Written)?;
        }
        assert!(
            self.is_region(r),
            "routed to {r}, which is not an open region"
        );
        self.regions.routed = Some((s, r));
        Ok(r)
    }

    /// One more mutating call of `s` done: counted in the stream it was routed to.
    pub(super) fn count_call(&mut self, s: StreamId) {
        let to = match self.regions.routed.take() {
            Some((from, to)) if from == s => to,
            _ => s,
        };
        self.streams.count_call(to);
    }

    /// Groups a legacy commit (`sync`, periodic, dirty limit) may take: not regions.
    pub(super) fn legacy_groups(&mut self) -> Vec<Vec<StreamId>> {
        let open = &self.regions.open;
        self.streams
            .busy_groups()
            .into_iter()
            .filter(|g| !g.iter().any(|s| open.contains_key(s)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_begin_add_and_close() {
        let mut rs = Regions::default();
        let (a, b) = (rs.begin().unwrap(), rs.begin().unwrap());
        assert_eq!((a, b), (REGION_BASE, REGION_BASE + 1));
        rs.add_file(a, 7);
        assert_eq!(rs.close(a).unwrap().files.len(), 1);
        assert!(rs.added.is_empty(), "a closed region's files stay added");
        assert!(rs.close(a).is_err(), "a region closed twice");
        assert_eq!(rs.ids().collect::<Vec<_>>(), vec![b]);
    }

    #[test]
    #[should_panic(expected = "while in region")]
    fn a_file_is_added_to_one_region_only() {
        let mut rs = Regions::default();
        let (a, b) = (rs.begin().unwrap(), rs.begin().unwrap());
        rs.add_file(a, 7);
        rs.add_file(b, 7);
    }
}
