//! The APM language: a TOML file naming how logical operations split into micro-operations
//! (atomicity) and which micro-operations must reach disk before which (ordering rules).
//! `docs/apm.md` is the user documentation; the built-ins in `apms/` are written in it.

use serde::Deserialize;
use std::path::Path;

/// A parsed, validated APM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Apm {
    pub name: String,
    pub description: String,
    pub atomicity: Atomicity,
    pub order: Vec<Rule>,
    /// Where the model comes from (optional in user files).
    pub about: Option<About>,
    /// The TOML text it was read from (for `intact apm show`).
    pub source: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Atomicity {
    /// Size-atomicity granularity in bytes (Table 3.5 "SAG"): data operations split at
    /// multiples of it. 1 = byte granularity.
    pub granularity: u64,
    /// Content atomicity ("CA"): the size change, zeros and data of each appended piece
    /// persist together, so no garbage is ever visible.
    #[serde(default)]
    pub content: bool,
    /// Appends write zeros before the data (the default APM's zero-filled states).
    #[serde(default)]
    pub append_zeros: bool,
    /// Directory-operation atomicity ("DO"): each link, unlink, rename, mkdir, rmdir,
    /// symlink persists as a whole.
    #[serde(default)]
    pub directory_ops: bool,
    /// Every system call persists as a whole.
    #[serde(default)]
    pub calls: bool,
    /// With `content`: an append's (or growing truncate's) new size may persist before its
    /// data, the new range reading as zeros, never garbage or stale data (ext4's default
    /// `dioread_nolock`: blocks allocated as unwritten extents before the data is written).
    #[serde(default)]
    pub zeros_before_data: bool,
    /// With `content`: a shrinking truncate's size may persist before the same file's
    /// earlier appended data; what no persisted write covers below the new size reads as
    /// zeros (ext4's delayed allocation: the data has no blocks when the size commits).
    #[serde(default)]
    pub truncate_before_data: bool,
    /// A shrinking truncate to a size inside a block zeroes the rest of that block (so a
    /// later extension reads zeros), as a write that may persist before the size change:
    /// the old size can then show zeros past the new one (ext4_block_truncate_page, an
    /// ordered data write of the truncate's transaction).
    #[serde(default)]
    pub truncate_zeroes_tail: bool,
}

/// Where a built-in model comes from, for `intact apm list`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A model from the thesis (004 Tables 3.4/3.5, Linux 3.13), kept for the study.
    Thesis,
    /// A model of a file system as today's kernel behaves, written from block-level
    /// validation (`intact blk validate-apm`, docs/validation.md).
    Kernel,
    /// What intactfs promises.
    Intactfs,
    /// A reference point that is no real file system (strict, nobarrier).
    Reference,
}

impl ModelKind {
    /// How `intact apm list` names the kind.
    pub fn label(self) -> &'static str {
        match self {
            ModelKind::Thesis => "thesis model (Linux 3.13; kept for the study)",
            ModelKind::Kernel => "today's kernel model",
            ModelKind::Intactfs => "intactfs's promise",
            ModelKind::Reference => "reference model (no real file system)",
        }
    }
}

/// Provenance of a model: what it models and on what it was validated. Data next to the
/// APM (the `[about]` table), so the CLI prints it without knowing any model.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct About {
    pub model: ModelKind,
    /// What block-level validation found, e.g. "Linux 6.18 ext4 (default mount),
    /// 2026-11-28: 0 of N crash images forbidden"; absent when never validated.
    #[serde(default)]
    pub validation: Option<String>,
}

/// Micro-operation classes that rules select on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    Any,
    Overwrite,
    Append,
    Truncate,
    Size,
    Write,
    Data,
    Dir,
    Rename,
    Sync,
    Fsync,
    Output,
}

impl Class {
    pub const ALL: [(&'static str, Class, &'static str); 12] = [
        ("any", Class::Any, "every disk micro-operation (not output)"),
        ("overwrite", Class::Overwrite, "data written inside a file's size"),
        ("append", Class::Append, "size change, zeros and data of an append"),
        ("truncate", Class::Truncate, "size changes and zeros of a truncate, and the truncation of an unlinked file's last link"),
        ("size", Class::Size, "every file-size change (change_file_size)"),
        ("write", Class::Write, "every data write, including zeros (write)"),
        ("data", Class::Data, "overwrite + append + truncate"),
        ("dir", Class::Dir, "directory-entry creation and deletion (link, unlink, rename, mkdir, rmdir, symlink)"),
        ("rename", Class::Rename, "the directory-entry operations of a rename"),
        ("sync", Class::Sync, "a sync point (fsync, fdatasync, msync, O_SYNC, sync, syncfs; sync_file_range is none)"),
        ("fsync", Class::Fsync, "a sync point of one file or directory (fsync, fdatasync, msync, O_SYNC, O_DSYNC; not sync, syncfs, STREAMSYNC)"),
        ("output", Class::Output, "output the application printed"),
    ];
    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL
            .iter()
            .find(|(n, _, _)| *n == s)
            .map(|(_, c, _)| *c)
    }
}

/// Which pairs of selected micro-operations a rule relates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Every earlier `before` micro-op precedes every later `after` micro-op.
    Always,
    /// Only when both act on the same inode (a directory for directory-entry operations;
    /// a sync of the whole file system acts on every inode).
    SameInode,
    /// Only writes to overlapping bytes of the same file.
    SameBytes,
    /// `after` is part of a rename of the file that `before` acts on (safe rename).
    RenamedFile,
    /// As `RenamedFile`, but only for a rename that replaces an existing name (what
    /// ext4's auto_da_alloc and xfs do today: a rename to a new name is not safe).
    ReplacingRename,
    /// Both come from operations of the same intactfs stream (SETSTREAM).
    SameStream,
    /// ccfs's related operations (`000` §3.5): the same file, the same directory entry, an
    /// entry and the inode it names, a directory and the entries in it; a global sync and
    /// everything.
    Related,
    /// `after` is a sync of a file, `before` a directory-entry operation naming that file
    /// or one of its ancestor directories (safe file flush).
    FilePath,
}

impl When {
    pub const ALL: [(&'static str, When); 8] = [
        ("always", When::Always),
        ("same-inode", When::SameInode),
        ("same-bytes", When::SameBytes),
        ("renamed-file", When::RenamedFile),
        ("replacing-rename", When::ReplacingRename),
        ("same-stream", When::SameStream),
        ("related", When::Related),
        ("file-path", When::FilePath),
    ];
}

/// One ordering rule: for micro-ops i < j (program order), if i matches `before`, j matches
/// `after` and the pair satisfies `when`, then i reaches disk before j.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub before: Vec<Class>,
    pub before_except: Vec<Class>,
    pub after: Vec<Class>,
    pub after_except: Vec<Class>,
    pub when: When,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApm {
    name: String,
    #[serde(default)]
    description: String,
    atomicity: Atomicity,
    #[serde(default)]
    order: Vec<RawRule>,
    #[serde(default)]
    about: Option<About>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    before: Vec<String>,
    #[serde(default)]
    before_except: Vec<String>,
    after: Vec<String>,
    #[serde(default)]
    after_except: Vec<String>,
    #[serde(default)]
    when: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApmError {
    #[error("{origin}: {msg}")]
    Invalid { origin: String, msg: String },
    #[error("cannot read APM file {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("no APM named {name:?}: built-in APMs are {known}; or give the path of a .toml file")]
    Unknown { name: String, known: String },
}

fn classes(origin: &str, what: &str, names: &[String]) -> Result<Vec<Class>, ApmError> {
    names
        .iter()
        .map(|n| {
            Class::parse(n).ok_or_else(|| ApmError::Invalid {
                origin: origin.to_string(),
                msg: format!(
                    "{what}: unknown class {n:?}; classes are {}",
                    Class::ALL
                        .iter()
                        .map(|(n, _, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        })
        .collect()
}

impl Apm {
    /// Parses APM text. `origin` names the file in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Apm, ApmError> {
        let raw: RawApm = toml::from_str(text).map_err(|e| ApmError::Invalid {
            origin: origin.to_string(),
            msg: e.to_string(),
        })?;
        let bad = |msg: String| ApmError::Invalid {
            origin: origin.to_string(),
            msg,
        };
        if raw.name.trim().is_empty()
            || raw.name.contains(char::is_whitespace)
            || raw.name.contains(',')
        {
            return Err(bad(format!(
                "name {:?} must be a non-empty word without spaces or commas",
                raw.name
            )));
        }
        if raw.atomicity.granularity == 0 {
            return Err(bad("atomicity.granularity must be at least 1 (byte)".into()));
        }
        if raw.atomicity.granularity > 1 << 30 {
            return Err(bad("atomicity.granularity is larger than 1 GiB".into()));
        }
        let at = &raw.atomicity;
        if (at.zeros_before_data || at.truncate_before_data) && !at.content {
            return Err(bad("atomicity.zeros_before_data and truncate_before_data refine content atomicity and need content = true (without it sizes already persist apart from data, exposing garbage: use append_zeros for zero-filled states)".into()));
        }
        let mut order = Vec::new();
        for (i, r) in raw.order.iter().enumerate() {
            let at = format!("order[{i}]");
            let when = match &r.when {
                None => When::Always,
                Some(w) => When::ALL
                    .iter()
                    .find(|(n, _)| n == w)
                    .map(|(_, w)| *w)
                    .ok_or_else(|| {
                        bad(format!(
                            "{at}.when: unknown relation {w:?}; relations are {}",
                            When::ALL
                                .iter()
                                .map(|(n, _)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })?,
            };
            let rule = Rule {
                before: classes(origin, &format!("{at}.before"), &r.before)?,
                before_except: classes(origin, &format!("{at}.before_except"), &r.before_except)?,
                after: classes(origin, &format!("{at}.after"), &r.after)?,
                after_except: classes(origin, &format!("{at}.after_except"), &r.after_except)?,
                when,
            };
            if rule.before.is_empty() || rule.after.is_empty() {
                return Err(bad(format!(
                    "{at}: before and after must each name at least one class"
                )));
            }
            if when == When::FilePath && !rule.after.iter().all(|c| *c == Class::Sync) {
                return Err(bad(format!(
                    "{at}: when = \"file-path\" needs after = [\"sync\"]"
                )));
            }
            if matches!(when, When::RenamedFile | When::ReplacingRename)
                && !rule.after.iter().all(|c| *c == Class::Rename)
            {
                return Err(bad(format!("{at}: when = \"renamed-file\" and \"replacing-rename\" need after = [\"rename\"]")));
            }
            order.push(rule);
        }
        Ok(Apm {
            name: raw.name,
            description: raw.description,
            atomicity: raw.atomicity,
            order,
            about: raw.about,
            source: text.to_string(),
        })
    }

    pub fn from_file(path: &Path) -> Result<Apm, ApmError> {
        let text = std::fs::read_to_string(path).map_err(|err| ApmError::Io {
            path: path.display().to_string(),
            err,
        })?;
        Apm::parse(&text, &path.display().to_string())
    }

    /// A built-in by name, or a file when the argument is a path (contains '/' or ends in .toml).
    pub fn resolve(name_or_path: &str) -> Result<Apm, ApmError> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            return Apm::from_file(Path::new(name_or_path));
        }
        match BUILTINS.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, text)) => Apm::parse(text, &format!("built-in APM {n}")),
            None => Err(ApmError::Unknown {
                name: name_or_path.to_string(),
                known: BUILTINS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    pub fn builtins() -> Vec<Apm> {
        BUILTINS
            .iter()
            .map(|(n, text)| {
                Apm::parse(text, &format!("built-in APM {n}")).expect("built-in APMs parse")
            })
            .collect()
    }
}

/// The built-in APMs, in the order `intact apm list` shows them: the thesis' models (the
/// study's), today's kernels' (validated at block level), then intactfs and references.
pub const BUILTINS: [(&str, &str); 14] = [
    ("default", include_str!("../apms/default.toml")),
    ("ext3-j", include_str!("../apms/ext3-j.toml")),
    ("ext3-o", include_str!("../apms/ext3-o.toml")),
    ("ext3-w", include_str!("../apms/ext3-w.toml")),
    ("ext4-o", include_str!("../apms/ext4-o.toml")),
    ("btrfs", include_str!("../apms/btrfs.toml")),
    ("ext4", include_str!("../apms/ext4.toml")),
    (
        "ext4-dioread_lock",
        include_str!("../apms/ext4-dioread_lock.toml"),
    ),
    ("xfs", include_str!("../apms/xfs.toml")),
    ("btrfs-linux6", include_str!("../apms/btrfs-linux6.toml")),
    ("strict", include_str!("../apms/strict.toml")),
    ("intactfs", include_str!("../apms/intactfs.toml")),
    (
        "intactfs-osync",
        include_str!("../apms/intactfs-osync.toml"),
    ),
    ("nobarrier", include_str!("../apms/nobarrier.toml")),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_names_match() {
        for (n, text) in BUILTINS {
            let a = Apm::parse(text, n).unwrap();
            assert_eq!(a.name, n);
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Apm::parse("name = \"x\"\n[atomicity]\ngranularity = 0\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.toml") && e.contains("granularity"), "{e}");
        let e = Apm::parse("name = \"x\"\n[atomicity]\ngranularity = 1\n[[order]]\nbefore=[\"dirr\"]\nafter=[\"any\"]\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("order[0].before") && e.contains("\"dirr\""),
            "{e}"
        );
        let e = Apm::parse(
            "name = \"x\"\n[atomicity]\ngranularity = 1\nbogus = 1\n",
            "f.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = Apm::resolve("ext5").unwrap_err().to_string();
        assert!(e.contains("ext4-o"), "{e}");
    }
}
