//! Path resolution against the logical state, with the recorded directory mounted at
//! `root_abs` inside the real file system.

use intact_model::{IgnoreSet, InodeId, Node, State};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// A position while walking: a directory of the logical state, or a real path outside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loc {
    In(InodeId),
    Out(PathBuf),
}

/// The result of resolving a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Res {
    /// `name` in directory `parent` (which may or may not exist: `target`).
    In {
        parent: InodeId,
        name: String,
        target: Option<InodeId>,
    },
    /// The path names a directory of the state itself (".", the root, "a/..").
    Dir(InodeId),
    /// Outside the recorded directory (or ignored): the normalised absolute path.
    Out(PathBuf),
}

pub struct Resolver<'a> {
    pub state: &'a State,
    pub root_abs: &'a Path,
    pub ignore: &'a IgnoreSet,
    /// Set when a path resolved into an ignored part of the directory.
    pub hit_ignored: Option<&'a std::cell::Cell<bool>>,
}

impl Resolver<'_> {
    fn enter_out(&self, p: PathBuf) -> Loc {
        if p == self.root_abs {
            Loc::In(self.state.root)
        } else {
            Loc::Out(p)
        }
    }

    fn at(&self, loc: Loc) -> Res {
        match loc {
            Loc::In(d) => Res::Dir(d),
            Loc::Out(p) => Res::Out(p),
        }
    }

    /// Resolves `path` from `base`. `follow_last`: follow a symlink in the last component.
    pub fn resolve(&self, base: &Loc, path: &str, follow_last: bool) -> Result<Res, String> {
        self.walk(base, path, follow_last, None)
    }

    /// openat2 RESOLVE_IN_ROOT: `base` acts as "/" (absolute paths, absolute symlinks and
    /// ".." never leave it).
    pub fn resolve_in_root(
        &self,
        base: &Loc,
        path: &str,
        follow_last: bool,
    ) -> Result<Res, String> {
        self.walk(base, path, follow_last, Some(base.clone()))
    }

    fn walk(
        &self,
        base: &Loc,
        path: &str,
        follow_last: bool,
        root: Option<Loc>,
    ) -> Result<Res, String> {
        let top = root.clone().unwrap_or(Loc::Out(PathBuf::from("/")));
        let mut cur = if path.starts_with('/') {
            top.clone()
        } else {
            base.clone()
        };
        if let Loc::Out(p) = &cur {
            cur = self.enter_out(p.clone());
        }
        let mut comps: VecDeque<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        let mut budget = 40;
        while let Some(c) = comps.pop_front() {
            let last = comps.is_empty();
            if c == "." {
                continue;
            }
            if c == ".." {
                if Some(&cur) == root.as_ref() {
                    continue;
                }
                cur = match cur {
                    Loc::In(d) if d == self.state.root => Loc::Out(
                        self.root_abs
                            .parent()
                            .unwrap_or(Path::new("/"))
                            .to_path_buf(),
                    ),
                    Loc::In(d) => Loc::In(
                        self.state
                            .parent_of(d)
                            .ok_or_else(|| format!("directory #{d} has no parent"))?,
                    ),
                    Loc::Out(p) => {
                        self.enter_out(p.parent().unwrap_or(Path::new("/")).to_path_buf())
                    }
                };
                continue;
            }
            match cur {
                Loc::Out(p) => {
                    cur = self.enter_out(p.join(&c));
                }
                Loc::In(d) => {
                    if !self.ignore.is_empty() && self.ignore.is_ignored(&self.state.join(d, &c)) {
                        if let Some(h) = self.hit_ignored {
                            h.set(true);
                        }
                        let rel = self.state.join(d, &c);
                        let mut p = self.root_abs.join(rel);
                        for rest in comps {
                            p.push(rest);
                        }
                        return Ok(Res::Out(p));
                    }
                    let child = self.state.lookup(d, &c);
                    let node = child
                        .and_then(|id| self.state.inodes.get(&id))
                        .map(|i| &i.node);
                    match node {
                        Some(Node::Symlink { target }) if !last || follow_last => {
                            // Resolution returns when the budget reaches 0.
                            assert!(budget > 0, "symlink budget already spent");
                            budget -= 1;
                            if budget == 0 {
                                return Err(format!(
                                    "too many levels of symbolic links resolving {path:?}"
                                ));
                            }
                            let mut new: VecDeque<String> = target
                                .split('/')
                                .filter(|c| !c.is_empty())
                                .map(String::from)
                                .collect();
                            new.extend(comps.drain(..));
                            comps = new;
                            cur = if !target.starts_with('/') {
                                Loc::In(d)
                            } else if let Some(r) = &root {
                                r.clone()
                            } else {
                                self.enter_out(PathBuf::from("/"))
                            };
                            if comps.is_empty() {
                                return Ok(self.at(cur));
                            }
                        }
                        _ if last => {
                            return Ok(Res::In {
                                parent: d,
                                name: c,
                                target: child,
                            })
                        }
                        Some(Node::Dir { .. }) => cur = Loc::In(child.unwrap()),
                        Some(_) => {
                            return Err(format!(
                                "{:?} is not a directory (resolving {path:?})",
                                self.state.join(d, &c)
                            ))
                        }
                        None => {
                            return Err(format!(
                                "{:?} does not exist in the recorded state (resolving {path:?})",
                                self.state.join(d, &c)
                            ))
                        }
                    }
                }
            }
        }
        Ok(self.at(cur))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use intact_model::LogicalOp;

    #[test]
    fn resolves_in_out_dotdot_symlinks() {
        let mut s = State::empty();
        s.apply(
            &LogicalOp::Mkdir {
                dir: 1,
                name: "d".into(),
                inode: 2,
            },
            b"",
        )
        .unwrap();
        s.apply(
            &LogicalOp::Link {
                dir: 2,
                name: "f".into(),
                inode: 3,
                link_count: 1,
                created: true,
            },
            b"",
        )
        .unwrap();
        s.apply(
            &LogicalOp::Symlink {
                dir: 1,
                name: "l".into(),
                inode: 4,
                target: "d".into(),
            },
            b"",
        )
        .unwrap();
        s.apply(
            &LogicalOp::Symlink {
                dir: 1,
                name: "abs".into(),
                inode: 5,
                target: "/r/d/f".into(),
            },
            b"",
        )
        .unwrap();
        let ig = IgnoreSet::new(&["*.lock".into()]).unwrap();
        let r = Resolver {
            state: &s,
            root_abs: Path::new("/r"),
            ignore: &ig,
            hit_ignored: None,
        };
        let out = Loc::Out("/".into());
        assert_eq!(
            r.resolve(&out, "/r/d/f", true).unwrap(),
            Res::In {
                parent: 2,
                name: "f".into(),
                target: Some(3)
            }
        );
        assert_eq!(
            r.resolve(&Loc::In(2), "../l/f", true).unwrap(),
            Res::In {
                parent: 2,
                name: "f".into(),
                target: Some(3)
            }
        );
        assert_eq!(
            r.resolve(&Loc::In(1), "l", false).unwrap(),
            Res::In {
                parent: 1,
                name: "l".into(),
                target: Some(4)
            }
        );
        assert_eq!(
            r.resolve(&Loc::In(1), "l", true).unwrap(),
            Res::In {
                parent: 1,
                name: "d".into(),
                target: Some(2)
            }
        );
        // RESOLVE_IN_ROOT: "/" and ".." stay inside the base.
        assert_eq!(
            r.resolve_in_root(&Loc::In(2), "/f", true).unwrap(),
            Res::In {
                parent: 2,
                name: "f".into(),
                target: Some(3)
            }
        );
        assert_eq!(
            r.resolve_in_root(&Loc::In(2), "../../f", true).unwrap(),
            Res::In {
                parent: 2,
                name: "f".into(),
                target: Some(3)
            }
        );
        assert_eq!(
            r.resolve(&Loc::In(1), "abs", true).unwrap(),
            Res::In {
                parent: 2,
                name: "f".into(),
                target: Some(3)
            }
        );
        assert_eq!(
            r.resolve(&Loc::In(1), "../x", true).unwrap(),
            Res::Out("/x".into())
        );
        assert_eq!(
            r.resolve(&Loc::Out("/tmp".into()), "../r", true).unwrap(),
            Res::Dir(1)
        );
        assert_eq!(
            r.resolve(&Loc::In(1), "d/x.lock", true).unwrap(),
            Res::Out("/r/d/x.lock".into())
        );
        assert_eq!(
            r.resolve(&Loc::In(1), "new", true).unwrap(),
            Res::In {
                parent: 1,
                name: "new".into(),
                target: None
            }
        );
        assert!(r.resolve(&Loc::In(1), "d/f/x", true).is_err());
    }
}
