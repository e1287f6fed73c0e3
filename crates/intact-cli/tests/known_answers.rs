//! Issue 27 item 4: the known-answer corpus (`tests/known-answers/`). Every program there
//! is recorded once and checked under every built-in APM with the default strategy; the
//! static vulnerabilities of each APM (category and source lines) must be exactly the ones
//! worked out by hand from the APM definitions (`expected.json`, reasoning in the corpus'
//! README.md). A (program, APM) case where the explorer is known to disagree with the hand
//! answer is listed in `known_disagreements` with the explorer's current answer, which is
//! then asserted instead, so that any change, a fix included, fails the test.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/known-answers")
}

/// The built-in APMs, in `intact apm list` order.
fn builtin_apms() -> Vec<String> {
    let out = intact().args(["apm", "list"]).output().unwrap();
    assert!(out.status.success(), "intact apm list failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// What is missing to run the corpus (gcc, strace, python3 for the checkers).
fn missing_tools() -> Vec<&'static str> {
    ["gcc", "strace", "python3"]
        .into_iter()
        .filter(|t| {
            Command::new(t)
                .arg("--version")
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        })
        .collect()
}

/// "category L1 L2": the lines of `prog.c` a static vulnerability names, `out` for "the
/// output that follows it" of a durability vulnerability grouped by missing sync.
fn entry(category: &str, locations: &[serde_json::Value]) -> String {
    let mut s = category.to_string();
    for l in locations {
        let l = l.as_str().expect("a location is a string");
        s.push(' ');
        if l == "the output that follows it" {
            s.push_str("out");
        } else if let Some((_, rest)) = l.split_once("prog.c:") {
            s.push_str(rest.split(':').next().unwrap_or(rest));
        } else {
            s.push_str(l);
        }
    }
    s
}

fn set(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list of vulnerabilities: {v}"))
        .iter()
        .map(|x| x.as_str().expect("a vulnerability is a string").to_string())
        .collect()
}

#[test]
fn known_answers_under_every_builtin_apm() {
    let missing = missing_tools();
    if !missing.is_empty() {
        return cannot_run(
            "known_answers_under_every_builtin_apm",
            &format!("missing {}", missing.join(", ")),
        );
    }
    let apms = builtin_apms();
    assert!(apms.len() >= 14, "built-in APMs: {apms:?}");
    let mut programs: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("prog.c").is_file())
        .collect();
    programs.sort();
    assert!(
        programs.len() >= 15,
        "the corpus has {} programs",
        programs.len()
    );
    let mut failures = Vec::new();
    for dir in &programs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap())
                .unwrap_or_else(|e| panic!("{name}/expected.json: {e}"));
        let expected = spec["expected"]
            .as_object()
            .expect("expected: {APM: [...]}");
        let listed: BTreeSet<&String> = expected.keys().collect();
        assert_eq!(
            listed,
            apms.iter().collect(),
            "{name}/expected.json must have a hand answer for every built-in APM"
        );
        let bins = tempfile::tempdir().unwrap();
        let bin = bins.path().join(&name);
        let st = Command::new("gcc")
            .args(["-g", "-O0", "-Wall", "-o"])
            .arg(&bin)
            .arg(dir.join("prog.c"))
            .status()
            .unwrap();
        assert!(st.success(), "compiling {name}/prog.c");
        let init = spec["init"].as_object().cloned().unwrap_or_default();
        let r = record_in(
            &[bin.to_str().unwrap()],
            |w| {
                for (file, contents) in &init {
                    std::fs::write(w.join(file), contents.as_str().unwrap()).unwrap();
                }
            },
            &[],
        );
        assert_eq!(
            r.output.status.code(),
            Some(0),
            "{name}: intact record failed:\n{}",
            r.stderr()
        );
        let json = r.tmp.path().join("report.json");
        let checker = format!("python3 '{}'", dir.join("check.py").display());
        let out = intact()
            .arg("check")
            .arg(&r.bundle)
            .args(["--checker", &checker, "--apm", &apms.join(",")])
            .args(["-j", "2", "-q", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{name}: intact check failed:\n{text}"
        );
        let rep: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        for a in rep["apms"].as_array().unwrap() {
            assert_eq!(a["explore"], "alice", "{name}: the default strategy");
            assert_eq!(a["complete"], true, "{name}: {}: search cut", a["apm"]);
            assert_eq!(a["timeouts"], 0, "{name}: {}: checker timed out", a["apm"]);
        }
        let mut got: BTreeMap<String, BTreeSet<String>> =
            apms.iter().map(|a| (a.clone(), BTreeSet::new())).collect();
        for s in rep["static"].as_array().unwrap() {
            let locations = s["locations"].as_array().unwrap();
            for i in s["dynamic"].as_array().unwrap() {
                let d = &rep["dynamic"][i.as_u64().unwrap() as usize];
                got.get_mut(d["apm"].as_str().unwrap())
                    .expect("an APM of the run")
                    .insert(entry(d["category"].as_str().unwrap(), locations));
            }
        }
        for apm in &apms {
            let hand = set(&expected[apm.as_str()]);
            let known = &spec["known_disagreements"][apm.as_str()];
            let (want, what) = if known.is_null() {
                (hand.clone(), "hand answer".to_string())
            } else {
                let explorer = set(&known["explorer"]);
                assert_ne!(
                    explorer, hand,
                    "{name} {apm}: a known disagreement differs from the hand answer"
                );
                (
                    explorer,
                    format!("explorer's answer in known_disagreements (hand answer: {hand:?})"),
                )
            };
            if got[apm] != want {
                failures.push(format!(
                    "{name} under {apm}:\n  expected ({what}): {want:?}\n  explorer: {:?}",
                    got[apm]
                ));
            }
        }
        eprintln!("known answers: {name} checked under {} APMs", apms.len());
    }
    assert!(
        failures.is_empty(),
        "{} (program, APM) case(s) differ from tests/known-answers (see its README.md):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
