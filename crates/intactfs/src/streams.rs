//! Streams (ccfs: thesis `004` ch. 5.4–5.5, journal article `000` §3.2 the stream API, §3.5
//! the related-operation rule and temporary merging). Owns all of the streams' state:
//! running transactions, claimed keys, the merge forest and the callers' streams.
//!
//! Every stream has a running transaction. Uncommitted operations *claim* keys: the inode
//! whose content or attributes they change, the directory entry name they change. An
//! operation that touches a key claimed by another stream's uncommitted operation is
//! related to it, and the two streams are merged (union-find) until their transaction
//! commits; a merged group commits as one record, its operations in real-time order.
//! Creating an entry inside a directory also *checks* the directory's inode, so it is
//! related to that directory's creation (or attribute change) in another stream.

use crate::meta::{Ino, LogOp};
use std::collections::{BTreeMap, HashMap};

pub type StreamId = u64;
/// Every caller not in a stream of its own is in the init stream (ccfs).
pub const INIT_STREAM: StreamId = 0;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamFlags {
    /// fsync/fdatasync in this stream are no-ops; streamsync still commits.
    pub ignore_fsync: bool,
    /// fsync/fdatasync in this stream are osync (OptFS §4.4): an ordering point, durable
    /// later; dsync and streamsync still make it durable at once.
    pub fsync_as_osync: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum Key {
    Ino(Ino),
    Entry(Ino, Vec<u8>),
    /// Entries inside a directory changed: marked (never claimed) by entry operations, and
    /// checked by the directory's removal, which must not overtake them.
    Inside(Ino),
    /// The shape of the directory tree: claimed by every rename that moves a directory to
    /// another parent. Whether such a move would create a cycle depends on every earlier
    /// move, so these moves never commit out of real-time order across streams.
    DirTree,
}

#[derive(Debug, Default)]
pub struct Stream {
    pub flags: StreamFlags,
    /// The running transaction: (global sequence, operation).
    pub ops: Vec<(u64, LogOp)>,
    /// Mutating calls of this stream: committed so far, and made so far.
    pub committed: u64,
    pub logged: u64,
    claimed: Vec<Key>,
}

#[derive(Debug, Default)]
pub struct Streams {
    pub streams: BTreeMap<StreamId, Stream>,
    /// Union-find parent; a stream absent from the map is its own root.
    parent: HashMap<StreamId, StreamId>,
    owner: HashMap<Key, StreamId>,
    /// Keys marked by several streams at once (no merge among the markers).
    marked: HashMap<Key, Vec<StreamId>>,
    next_gseq: u64,
    /// How many times two groups were merged (for tests and statistics).
    pub merges: u64,
    /// Caller → stream, for `setstream`/`getstream` (ccfs §3.2).
    callers: HashMap<u64, StreamId>,
}

impl Streams {
    /// ccfs `setstream`: `caller`'s later calls go to `stream`.
    pub fn set_caller(&mut self, caller: u64, stream: StreamId) {
        self.callers.insert(caller, stream);
    }

    /// ccfs `getstream`: the caller's stream; callers that never set one are in the init
    /// stream.
    pub fn caller_stream(&self, caller: u64) -> StreamId {
        self.callers.get(&caller).copied().unwrap_or(INIT_STREAM)
    }

    pub fn stream(&mut self, id: StreamId) -> &mut Stream {
        self.streams.entry(id).or_default()
    }

    pub fn find(&mut self, id: StreamId) -> StreamId {
        let mut r = id;
        while let Some(&p) = self.parent.get(&r) {
            if p == r {
                break;
            }
            r = p;
        }
        // Path compression.
        let mut c = id;
        while c != r {
            let next = self.parent.get(&c).copied().unwrap_or(r);
            self.parent.insert(c, r);
            c = next;
        }
        r
    }

    fn union(&mut self, a: StreamId, b: StreamId) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The smaller id stays root: deterministic.
            let (root, child) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent.insert(child, root);
            self.merges += 1;
        }
    }

    /// Relates an operation of stream `s` to uncommitted work on `claims` and `checks`,
    /// merging groups as needed, and claims `claims` for `s`.
    pub fn relate(&mut self, s: StreamId, claims: &[Key], checks: &[Key]) {
        self.stream(s);
        let roots = self.related_roots(claims, checks);
        for &o in &roots {
            self.union(s, o);
        }
        let r = self.find(s);
        for o in roots {
            assert_eq!(self.find(o), r, "stream {o} related to {s} but not merged");
        }
        for k in claims {
            if self.owner.get(k) != Some(&s) {
                self.owner.insert(k.clone(), s);
                self.stream(s).claimed.push(k.clone());
            }
        }
    }

    /// Marks `keys` for `s` without relating markers to each other.
    pub fn mark(&mut self, s: StreamId, keys: &[Key]) {
        for k in keys {
            let m = self.marked.entry(k.clone()).or_default();
            if !m.contains(&s) {
                m.push(s);
                self.stream(s).claimed.push(k.clone());
            }
        }
    }

    /// Roots of the groups whose uncommitted work an operation on `claims` and `checks`
    /// would be related to (what [`Self::relate`] would merge), in id order.
    pub fn related_roots(&mut self, claims: &[Key], checks: &[Key]) -> Vec<StreamId> {
        let mut found: Vec<StreamId> = claims
            .iter()
            .chain(checks)
            .filter_map(|k| self.owner.get(k).copied())
            .collect();
        for k in checks {
            found.extend(self.marked.get(k).cloned().unwrap_or_default());
        }
        let mut roots: Vec<StreamId> = found.into_iter().map(|o| self.find(o)).collect();
        roots.sort_unstable();
        roots.dedup();
        roots
    }

    /// Drops the running transaction of `s` (an aborted atomic region) and the stream;
    /// returns the keys its operations claimed.
    pub fn discard(&mut self, s: StreamId) -> Vec<Key> {
        let (_, keys, _) = self.take_group(&[s]);
        self.streams.remove(&s);
        keys
    }

    /// Every stream's uncommitted operations, in real-time order.
    pub fn uncommitted(&self) -> Vec<&(u64, LogOp)> {
        let mut all: Vec<&(u64, LogOp)> =
            self.streams.values().flat_map(|s| s.ops.iter()).collect();
        all.sort_by_key(|(g, _)| *g);
        all
    }

    /// The next global sequence number: the real-time position of an operation or of a
    /// write's direct change to the live metadata.
    pub fn tick(&mut self) -> u64 {
        let g = self.next_gseq;
        self.next_gseq += 1;
        g
    }

    /// Appends an operation to the running transaction of `s`.
    pub fn log(&mut self, s: StreamId, op: LogOp) {
        let g = self.tick();
        self.stream(s).ops.push((g, op));
    }

    /// One more mutating call of `s` done (the unit a stream's history is counted in).
    pub fn count_call(&mut self, s: StreamId) {
        self.stream(s).logged += 1;
    }

    /// The group of uncommitted work `s` belongs to.
    pub fn group(&mut self, s: StreamId) -> Vec<StreamId> {
        let r = self.find(s);
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        ids.into_iter().filter(|&i| self.find(i) == r).collect()
    }

    /// The stream whose uncommitted work claims `key`.
    pub fn owner_of(&self, key: &Key) -> Option<StreamId> {
        self.owner.get(key).copied()
    }

    /// Some stream has uncommitted work.
    pub fn any_busy(&self) -> bool {
        self.streams
            .values()
            .any(|s| !s.ops.is_empty() || !s.claimed.is_empty())
    }

    /// Every group with uncommitted work, each as its member list.
    pub fn busy_groups(&mut self) -> Vec<Vec<StreamId>> {
        let ids: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.ops.is_empty() || !s.claimed.is_empty())
            .map(|(i, _)| *i)
            .collect();
        let mut roots: BTreeMap<StreamId, ()> = BTreeMap::new();
        for i in ids {
            let r = self.find(i);
            roots.insert(r, ());
        }
        roots.keys().map(|&r| self.group(r)).collect()
    }

    /// Operations waiting in the running transactions of `members`, and the inodes they
    /// claimed: what a commit of the group would take, looked at without taking it (a
    /// commit sizes itself and checks for room first: issue 25, the commit failure rule).
    pub fn pending(&self, members: &[StreamId]) -> (Vec<&LogOp>, Vec<Ino>) {
        let mut ops = Vec::new();
        let mut inos = Vec::new();
        for m in members {
            let Some(st) = self.streams.get(m) else {
                continue;
            };
            ops.extend(st.ops.iter().map(|(_, o)| o));
            inos.extend(st.claimed.iter().filter_map(|k| match k {
                Key::Ino(i) => Some(*i),
                _ => None,
            }));
        }
        inos.sort_unstable();
        inos.dedup();
        (ops, inos)
    }

    /// Takes the running transactions of `members`, merged in real-time order, and the
    /// keys they claimed; the members become separate streams again. Their calls count as
    /// committed from here on (the progress goes into the record), so the caller is past
    /// its point of no return: it either writes the record or poisons the mount
    /// (`Fs::past_no_return`).
    pub fn take_group(
        &mut self,
        members: &[StreamId],
    ) -> (Vec<LogOp>, Vec<Key>, Vec<(StreamId, u64)>) {
        let mut ops: Vec<(u64, LogOp)> = Vec::new();
        let mut keys = Vec::new();
        let mut progress = Vec::new();
        for &m in members {
            let st = self.stream(m);
            ops.append(&mut st.ops);
            keys.append(&mut st.claimed);
            assert!(
                st.committed <= st.logged,
                "stream {m}: {} calls committed of {} made",
                st.committed,
                st.logged
            );
            st.committed = st.logged;
            progress.push((m, st.committed));
        }
        for k in &keys {
            if self.owner.get(k).is_some_and(|o| members.contains(o)) {
                self.owner.remove(k);
            }
            if let Some(m) = self.marked.get_mut(k) {
                m.retain(|o| !members.contains(o));
                if m.is_empty() {
                    self.marked.remove(k);
                }
            }
        }
        // Members are whole groups: no stream left behind still hangs under a member.
        assert!(
            !self
                .parent
                .iter()
                .any(|(c, p)| members.contains(p) && !members.contains(c)),
            "a commit took part of a group ({members:?})"
        );
        for &m in members {
            self.parent.remove(&m);
        }
        ops.sort_by_key(|(g, _)| *g);
        (ops.into_iter().map(|(_, o)| o).collect(), keys, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two streams related through one inode form one group.
    fn merged() -> Streams {
        let mut s = Streams::default();
        s.relate(1, &[Key::Ino(5)], &[]);
        s.log(1, LogOp::Free { ino: 5 });
        s.relate(2, &[Key::Ino(5)], &[]);
        assert_eq!(s.group(1), vec![1, 2]);
        s
    }

    #[test]
    fn a_commit_takes_whole_groups() {
        let mut s = merged();
        let (ops, _, progress) = s.take_group(&[1, 2]);
        assert_eq!((ops.len(), progress.len()), (1, 2));
        assert_eq!(
            s.group(2),
            vec![2],
            "the members are separate streams again"
        );
    }

    #[test]
    #[should_panic(expected = "a commit took part of a group")]
    fn taking_part_of_a_group_is_refused() {
        merged().take_group(&[1]);
    }

    #[test]
    fn callers_without_a_stream_are_in_the_init_stream() {
        let mut s = Streams::default();
        s.set_caller(42, 7);
        assert_eq!((s.caller_stream(42), s.caller_stream(43)), (7, INIT_STREAM));
    }
}
