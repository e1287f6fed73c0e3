//! `CrashFs::patch_dir` (issue 29): a directory holding one crash state, patched into the
//! next, is exactly what `materialise` writes for that state into an empty directory
//! (names, kinds, modes, contents, symlink targets, which names are one inode), over the
//! states the alice strategy builds, in its order, for random update protocols.

use intact_apm::{Apm, Program};
use intact_explore::{CrashFs, Explorer, Provenance};
use proptest::prelude::*;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

mod common;
use common::protocol::{act, protocol};

/// What a checker could see of a directory tree, in name order.
fn tree(root: &Path) -> Vec<String> {
    fn rec(root: &Path, rel: &Path, inos: &mut HashMap<u64, String>, out: &mut Vec<String>) {
        let mut names: Vec<_> = std::fs::read_dir(root.join(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for n in names {
            let p = rel.join(&n);
            let full = root.join(&p);
            let m = std::fs::symlink_metadata(&full).unwrap();
            let name = p.display().to_string();
            let what = if m.file_type().is_symlink() {
                format!(
                    "symlink -> {}",
                    std::fs::read_link(&full).unwrap().display()
                )
            } else if m.is_dir() {
                format!("dir {:o}", m.mode())
            } else {
                let first = inos.entry(m.ino()).or_insert_with(|| name.clone()).clone();
                let bytes = std::fs::read(&full).unwrap();
                format!(
                    "file {:o} same inode as {first}: {} bytes {}",
                    m.mode(),
                    bytes.len(),
                    blake3::hash(&bytes)
                )
            };
            out.push(format!("{name}: {what}"));
            if m.is_dir() {
                rec(root, &p, inos, out);
            }
        }
    }
    let mut out = Vec::new();
    rec(root, Path::new(""), &mut HashMap::new(), &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn a_patched_directory_is_the_state_written_whole(acts in proptest::collection::vec(act(), 1..12)) {
        let (ops, blob, initial, _) = protocol(&acts);
        let tmp = tempfile::tempdir().unwrap();
        for apm in ["default", "ext4-o", "ext3-w"] {
            let apm = Apm::resolve(apm).unwrap();
            let prog = Program::build(&apm, &ops, &initial, blob.len() as u64).unwrap();
            let exp = Explorer::new(&prog, &ops, &blob, CrashFs::universe(&initial, &ops).unwrap()).unwrap();
            let mut states: Vec<CrashFs> = Vec::new();
            let mut emit = |_: Provenance, s: CrashFs, _: String| {
                states.push(s);
                Ok(states.len() < 200)
            };
            exp.prefixes(&mut emit).unwrap();
            let none = vec![false; prog.calls.len()];
            exp.atomicity(&none, &mut emit).unwrap();
            exp.reorderings(&none, &mut emit).unwrap();
            exp.micro_reorderings(&none, 100, &mut emit).unwrap();
            let (patched, whole) = (tmp.path().join("patched"), tmp.path().join("whole"));
            let _ = std::fs::remove_dir_all(&patched);
            std::fs::create_dir(&patched).unwrap();
            let mut prev: Option<&CrashFs> = None;
            for (i, s) in states.iter().enumerate() {
                match prev {
                    None => s.materialise(&patched).unwrap(),
                    Some(p) => prop_assert!(s.patch_dir(p, &patched).unwrap(), "state {} patches", i),
                }
                let _ = std::fs::remove_dir_all(&whole);
                std::fs::create_dir(&whole).unwrap();
                s.materialise(&whole).unwrap();
                prop_assert_eq!(tree(&patched), tree(&whole), "APM {} state {}", apm.name, i);
                prev = Some(s);
            }
        }
    }
}
