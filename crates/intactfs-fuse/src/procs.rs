//! Which stream a FUSE request belongs to.
//!
//! A request carries the calling thread's id. A process that called SETSTREAM is in that
//! stream; any other process is in the stream of its nearest ancestor that did (ccfs §3.2:
//! children adopt their parent's stream), else in the init stream. The ancestry is read
//! from `/proc`.
//!
//! Two approximations, both documented in docs/fs-api.md: the ancestor walk happens when a
//! process first touches the mount (and again at most once a second), not at fork, so a
//! child that starts after its parent changed streams follows the parent's new stream;
//! and a process whose ancestor exited is re-parented by the kernel and loses the stream.

use intactfs::{StreamId, INIT_STREAM};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a resolved thread → stream answer is trusted.
const TTL: Duration = Duration::from_secs(1);

/// A process's own stream choice: (stream, the process's start time).
pub type Explicit = (StreamId, u64);

#[derive(Default)]
pub struct ProcTable {
    /// Process (thread-group id) → (stream, the process's start time, to detect pid reuse).
    explicit: HashMap<u32, (StreamId, u64)>,
    /// Thread id → resolved stream.
    cache: HashMap<u32, (StreamId, Instant)>,
}

/// `Tgid` and `PPid` from /proc/PID/status.
fn status(pid: u32) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    Some((field("Tgid:")?, field("PPid:")?))
}

/// The fields of /proc/PID/stat after the command name: [0] is the state (field 3).
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    Some(
        s[s.rfind(')')? + 1..]
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

/// Whether process `pid` still runs and is the one that started at `start` (one read of
/// /proc/PID/stat: the reaper and every owner check call this).
pub fn alive(pid: u32, start: u64) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // As in `stat_fields`, without collecting them: the state, then field 22.
    let Some(after_name) = s.rfind(')').map(|i| &s[i + 1..]) else {
        return false;
    };
    let mut f = after_name.split_whitespace();
    let running = f.next().is_some_and(|state| state != "Z");
    running && f.nth(18).and_then(|t| t.parse().ok()) == Some(start)
}

/// The process (thread-group id) of thread `tid` and its start time: who owns a pmem
/// transaction (checked with [`alive`]).
pub fn process_of(tid: u32) -> Option<(u32, u64)> {
    let (tgid, _) = status(tid)?;
    Some((tgid, start_time(tgid)?))
}

/// The process (thread-group id) of thread `tid`; `tid` itself if /proc does not say.
pub fn tgid_of(tid: u32) -> u32 {
    status(tid).map_or(tid, |(tgid, _)| tgid)
}

/// Whether a close ends an F2FS atomic write that process `starter` began: its release
/// (the last close, `closer` None) always does; a FLUSH only when it is the starter's.
/// A forked child closes its inherited copy of the descriptor when it exits or execs,
/// and that must not abort the parent's atomic write, whose later writes would then land
/// as plain writes (on F2FS the atomic write lasts until the release).
pub fn closer_ends(closer: Option<u32>, starter: u32) -> bool {
    closer.is_none_or(|p| p == starter)
}

/// Whether thread `tid` belongs to process `owner` (started at `owner_start`) or to one of
/// its descendants: who may commit or abort a region or transaction that `owner` began
/// (docs/fs-api.md, "Who may call what"). The walk follows PPid links in /proc, so a
/// process re-parented after its parent exited is no longer the owner's; a pid reused
/// by another process does not match (start times differ). Unknown: not the owner's.
pub fn descends_from(tid: u32, owner: u32, owner_start: u64) -> bool {
    assert!(owner > 0, "process 0 owns nothing");
    // The common case, the owner's main thread itself: one read of /proc.
    if tid == owner {
        return alive(owner, owner_start);
    }
    let Some((mut pid, _)) = status(tid) else {
        return false;
    };
    // Bounded as in `resolve`: pid chains are short; a cycle can only come from pid reuse.
    for _ in 0..64 {
        if pid == owner {
            return alive(owner, owner_start);
        }
        if pid <= 1 {
            return false;
        }
        match status(pid) {
            Some((_, ppid)) => pid = ppid,
            None => return false,
        }
    }
    false
}

/// Whether a caller (`uid`, primary group `gid`, process `pid`) may write an object with
/// permission bits `mode` owned by `owner_uid`:`owner_gid`, as the kernel's
/// `default_permissions` decides for a write open: root always; otherwise the owner's,
/// the group's or the others' write bit, whichever class the caller is in first.
pub fn may_write(uid: u32, gid: u32, pid: u32, mode: u32, owner_uid: u32, owner_gid: u32) -> bool {
    if uid == 0 {
        return true;
    }
    if uid == owner_uid {
        return mode & 0o200 != 0;
    }
    if in_group(pid, gid, owner_gid) {
        return mode & 0o020 != 0;
    }
    mode & 0o002 != 0
}

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot).
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

impl ProcTable {
    /// Puts the process of thread `tid` in stream `s`. Fails if the process is gone.
    /// Returns the process's earlier explicit choice, its id and its start time.
    pub fn set(&mut self, tid: u32, s: StreamId) -> Result<(Option<Explicit>, u32, u64), String> {
        let (tgid, _) =
            status(tid).ok_or_else(|| format!("process of thread {tid} not found in /proc"))?;
        let start = start_time(tgid).ok_or_else(|| format!("process {tgid} not found in /proc"))?;
        // Recorded for the init stream too, so that the ancestor walk stops here.
        let prev = self.explicit.insert(tgid, (s, start));
        // Inheritance changed for this process and every descendant.
        self.cache.clear();
        Ok((prev, tgid, start))
    }

    /// Puts the process of thread `tid` in stream `s` (an atomic region) and returns what
    /// [`Self::leave`] needs to put it back: the process id, its start time and its own
    /// earlier stream, if it had set one.
    pub fn enter(&mut self, tid: u32, s: StreamId) -> Result<(u32, u64, Option<Explicit>), String> {
        let (prev, tgid, start) = self.set(tid, s)?;
        Ok((tgid, start, prev))
    }

    /// Undoes [`Self::enter`] (if the process still is the one that entered).
    pub fn leave(&mut self, tgid: u32, start: u64, prev: Option<Explicit>) {
        if self.explicit.get(&tgid).is_some_and(|e| e.1 == start) {
            match prev {
                Some(p) => self.explicit.insert(tgid, p),
                None => self.explicit.remove(&tgid),
            };
        }
        self.cache.clear();
    }

    /// The stream of thread `tid` (0, from the kernel itself, is in the init stream).
    pub fn stream_of(&mut self, tid: u32) -> StreamId {
        if self.explicit.is_empty() || tid == 0 {
            return INIT_STREAM;
        }
        let now = Instant::now();
        if let Some(&(s, at)) = self.cache.get(&tid) {
            if now.duration_since(at) < TTL {
                return s;
            }
        }
        let s = self.resolve(tid);
        if self.cache.len() > 65_536 {
            self.cache.clear();
        }
        self.cache.insert(tid, (s, now));
        s
    }

    fn resolve(&mut self, tid: u32) -> StreamId {
        let Some((mut pid, _)) = status(tid) else {
            return INIT_STREAM;
        };
        // Bounded: pid chains are short, and a cycle can only come from pid reuse mid-walk.
        for _ in 0..64 {
            if pid <= 1 {
                return INIT_STREAM;
            }
            if let Some(&(s, start)) = self.explicit.get(&pid) {
                if start_time(pid) == Some(start) {
                    return s;
                }
                // That process exited and its pid was reused.
                self.explicit.remove(&pid);
            }
            match status(pid) {
                Some((_, ppid)) => pid = ppid,
                None => return INIT_STREAM,
            }
        }
        INIT_STREAM
    }

    /// Processes that set a stream and are still the same process.
    pub fn explicit_count(&self) -> usize {
        self.explicit.len()
    }
}

/// Whether process `pid` (primary group `gid`) is in group `group`: its primary group or
/// one of its supplementary groups (`/proc/PID/status`, "Groups:"). Unknown: not in it.
pub fn in_group(pid: u32, gid: u32, group: u32) -> bool {
    if gid == group {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(group)))
}

/// Whether a caller may put directory `mode`/`owner_uid`:`owner_gid` into a transaction,
/// whose abort undoes every entry made in it meanwhile: [`may_write`], and in a sticky
/// directory (such as /tmp) only its owner or root, who alone may remove others'
/// entries there.
pub fn may_claim_dir(
    uid: u32,
    gid: u32,
    pid: u32,
    mode: u32,
    owner_uid: u32,
    owner_gid: u32,
) -> bool {
    let sticky = mode & 0o1000 != 0;
    may_write(uid, gid, pid, mode, owner_uid, owner_gid)
        && (!sticky || uid == 0 || uid == owner_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_inherit_and_others_stay_in_init() {
        let mut t = ProcTable::default();
        let me = std::process::id();
        assert_eq!(t.stream_of(me), INIT_STREAM);
        // A child of this test process, started before and after the stream was set.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        t.set(me, 42).unwrap();
        assert_eq!(t.stream_of(me), 42);
        assert_eq!(
            t.stream_of(child.id()),
            42,
            "a child adopts its parent's stream"
        );
        // Our parent (the test harness' parent) is not in the stream.
        let (_, ppid) = status(me).unwrap();
        assert_eq!(t.stream_of(ppid), INIT_STREAM);
        // The child sets its own stream; the parent keeps its own.
        t.set(child.id(), 7).unwrap();
        assert_eq!(t.stream_of(child.id()), 7);
        assert_eq!(t.stream_of(me), 42);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_reused_pid_does_not_inherit() {
        let mut t = ProcTable::default();
        let me = std::process::id();
        // Pretend an earlier process with our pid set a stream: its start time differs.
        t.explicit.insert(me, (9, u64::MAX));
        assert_eq!(t.stream_of(me), INIT_STREAM);
        assert_eq!(t.explicit_count(), 0);
    }

    #[test]
    fn only_the_owner_and_its_descendants_descend_from_it() {
        let me = std::process::id();
        let my_start = start_time(me).unwrap();
        assert!(descends_from(me, me, my_start));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(descends_from(child.id(), me, my_start), "a child");
        let child_start = start_time(child.id()).unwrap();
        assert!(
            !descends_from(me, child.id(), child_start),
            "not the parent"
        );
        let (_, ppid) = status(me).unwrap();
        assert!(!descends_from(ppid, me, my_start), "not our parent");
        assert!(!descends_from(me, me, my_start + 1), "not a reused pid");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !descends_from(me, child.id(), child_start),
            "an exited owner owns nothing"
        );
    }

    #[test]
    fn write_permission_follows_the_mode_classes() {
        let me = std::process::id();
        assert!(may_write(0, 0, me, 0o444, 5, 5), "root");
        assert!(may_write(5, 6, me, 0o644, 5, 7), "the owner's bit");
        assert!(!may_write(5, 6, me, 0o466, 5, 7), "the owner's bit only");
        assert!(may_write(9, 7, me, 0o464, 5, 7), "the group's bit");
        assert!(!may_write(9, 7, me, 0o446, 5, 7), "the group's bit only");
        assert!(may_write(9, 8, me, 0o442, 5, 7), "the others' bit");
        assert!(
            !may_write(9, 8, me, 0o755, 5, 7),
            "a 0755 directory of another user"
        );
        assert!(
            may_claim_dir(9, 8, me, 0o777, 5, 7),
            "a world-writable directory"
        );
        assert!(
            !may_claim_dir(9, 8, me, 0o1777, 5, 7),
            "a sticky one of another user"
        );
        assert!(
            may_claim_dir(5, 8, me, 0o1777, 5, 7),
            "a sticky one of the caller's"
        );
        assert!(may_claim_dir(0, 0, me, 0o1777, 5, 7), "root");
    }

    #[test]
    fn start_time_parses_names_with_parentheses() {
        assert!(start_time(std::process::id()).is_some());
    }
}
