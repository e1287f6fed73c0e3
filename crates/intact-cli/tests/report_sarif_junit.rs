//! `--sarif` and `--junit` of `intact check` and `intact report` on real reports (the
//! key-value store example, with and without vulnerabilities) and on a hand-made report
//! with awkward content. The SARIF must validate against the official OASIS SARIF 2.1.0
//! JSON schema (python-jsonschema) and the JUnit XML against the JUnit XSD Jenkins' xunit
//! plugin and pytest use (python xmlschema); both schemas are vendored in tests/sarif/
//! (see its README). A deliberately broken copy of each document must be rejected, so a
//! validator that accepts anything fails the test.

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn support() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sarif")
}

/// Runs tests/sarif/validate.py with `python`; (exit code, stdout + stderr).
fn validate_py(python: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(python)
        .arg(support().join("validate.py"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A Python interpreter that has `module` (python3 on PATH, then Debian's), installing it
/// with pip once if none has it. None (with the reason printed) if that fails too.
fn python_with(module: &'static str) -> Option<String> {
    static JSONSCHEMA: OnceLock<Option<String>> = OnceLock::new();
    static XMLSCHEMA: OnceLock<Option<String>> = OnceLock::new();
    let cell = if module == "jsonschema" {
        &JSONSCHEMA
    } else {
        &XMLSCHEMA
    };
    cell.get_or_init(|| {
        let candidates = ["python3", "/usr/bin/python3"];
        let find = || candidates.iter().find(|p| Command::new(p).arg(support().join("validate.py")).args(["has", module]).output().is_ok_and(|o| o.status.success())).map(|p| p.to_string());
        if let Some(p) = find() {
            return Some(p);
        }
        let pip = Command::new("python3").args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", module]).output();
        let found = find();
        if found.is_none() {
            let why = match pip {
                Ok(o) => String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").to_string(),
                Err(e) => e.to_string(),
            };
            common::cannot_run(&format!("validation with python {module}"), &format!("not installed and `python3 -m pip install {module}` failed ({why}); install python3-{module} (Debian) or pip install {module}"));
        }
        found
    })
    .clone()
}

/// Validates the SARIF file against the vendored schema and checks that a broken copy is
/// rejected. Skips (printed) only when no python jsonschema can be had.
fn validate_sarif(path: &Path) {
    let Some(py) = python_with("jsonschema") else {
        return;
    };
    let schema = support().join("sarif-schema-2.1.0.json");
    let (code, out) = validate_py(
        &py,
        &["sarif", schema.to_str().unwrap(), path.to_str().unwrap()],
    );
    assert_eq!(
        code,
        0,
        "{} does not validate against the SARIF 2.1.0 schema:\n{out}",
        path.display()
    );
    // The negative check: a validator that accepts this is not validating anything.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc.as_object_mut().unwrap().remove("version");
    doc["runs"][0]["tool"]["driver"]["bogus"] = json!(1);
    if let Some(r) = doc["runs"][0]["results"].get_mut(0) {
        r["level"] = json!("fatal");
    }
    let broken = path.with_extension("broken.sarif");
    std::fs::write(&broken, serde_json::to_string(&doc).unwrap()).unwrap();
    let (code, out) = validate_py(
        &py,
        &["sarif", schema.to_str().unwrap(), broken.to_str().unwrap()],
    );
    assert_eq!(code, 1, "a broken SARIF document must be rejected:\n{out}");
    assert!(
        out.contains("'version' is a required property") && out.contains("bogus"),
        "{out}"
    );
}

/// Validates the JUnit file against the vendored XSD (and rejects a broken copy), then
/// returns its structure as parsed by Python's xml.etree.
fn junit(path: &Path) -> Value {
    if let Some(py) = python_with("xmlschema") {
        let xsd = support().join("junit-10.xsd");
        let (code, out) = validate_py(
            &py,
            &["junit-xsd", xsd.to_str().unwrap(), path.to_str().unwrap()],
        );
        assert_eq!(
            code,
            0,
            "{} does not validate against junit-10.xsd:\n{out}",
            path.display()
        );
        let text = std::fs::read_to_string(path).unwrap();
        // A test suite without its required `errors` attribute.
        let broken_text = text.replacen(" errors=\"0\" skipped=\"0\"", " skipped=\"0\"", 1);
        assert_ne!(broken_text, text);
        let broken = path.with_extension("broken.xml");
        std::fs::write(&broken, broken_text).unwrap();
        let (code, out) = validate_py(
            &py,
            &["junit-xsd", xsd.to_str().unwrap(), broken.to_str().unwrap()],
        );
        assert_eq!(code, 1, "a broken JUnit document must be rejected:\n{out}");
        assert!(out.contains("errors"), "{out}");
    }
    let (code, out) = validate_py("python3", &["junit-summary", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// "path:line:function" (the function may hold colons) as its parts; None without a line.
fn split_location(loc: &str) -> Option<(String, u64, String)> {
    let parts: Vec<&str> = loc.split(':').collect();
    let i = (1..parts.len())
        .find(|&i| !parts[i].is_empty() && parts[i].bytes().all(|b| b.is_ascii_digit()))?;
    Some((
        parts[..i].join(":"),
        parts[i].parse().ok()?,
        parts[i + 1..].join(":"),
    ))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn count(v: &Value, key: &str) -> usize {
    v["attrib"][key].as_str().unwrap().parse().unwrap()
}

/// Checks the JUnit structure against the JSON report: a suite per APM, a case per APM and
/// static vulnerability (failing where it shows), "no crash vulnerability" where none does.
fn check_junit(j: &Value, rep: &Value) {
    assert_eq!(j["tag"], "testsuites");
    let statics = rep["static"].as_array().unwrap();
    let apms = rep["apms"].as_array().unwrap();
    let suites = j["suites"].as_array().unwrap();
    assert_eq!(suites.len(), apms.len());
    let (mut tests, mut failures) = (0, 0);
    for (suite, a) in suites.iter().zip(apms) {
        let apm = a["apm"].as_str().unwrap();
        let class = format!("intact.{apm}");
        assert_eq!(suite["attrib"]["name"], class.as_str());
        assert_eq!(suite["properties"]["explore"], a["explore"]);
        assert_eq!(
            suite["properties"]["distinct"],
            a["distinct"].to_string().as_str()
        );
        let exposed: Vec<&Value> = statics
            .iter()
            .filter(|s| strs(&s["apms"]).iter().any(|x| x == apm))
            .collect();
        let cases = suite["testcases"].as_array().unwrap();
        assert_eq!(count(suite, "tests"), cases.len());
        assert_eq!(cases.len(), statics.len() + usize::from(exposed.is_empty()));
        assert_eq!(count(suite, "failures"), exposed.len(), "{suite:#}");
        assert_eq!(
            cases.iter().filter(|c| !c["failure"].is_null()).count(),
            exposed.len()
        );
        for (case, s) in cases.iter().zip(statics) {
            assert_eq!(case["attrib"]["classname"], class.as_str());
            assert!(
                case["attrib"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("#{} ", s["id"])),
                "{case:#}"
            );
            let shows = exposed.iter().any(|e| e["id"] == s["id"]);
            assert_eq!(!case["failure"].is_null(), shows, "{case:#}");
            if shows {
                let f = &case["failure"];
                assert_eq!(
                    f["attrib"]["message"], s["example"]["checker_message"],
                    "the failure message is the checker's"
                );
                assert_eq!(f["attrib"]["type"], s["categories"][0]);
                assert!(
                    f["text"].as_str().unwrap().contains(&format!(
                        "example state {}:",
                        s["example"]["state"].as_str().unwrap()
                    )),
                    "{f:#}"
                );
            }
        }
        if exposed.is_empty() {
            let last = cases.last().unwrap();
            assert_eq!(last["attrib"]["name"], "no crash vulnerability");
            assert!(last["failure"].is_null());
        }
        assert_eq!(
            suite["attrib"]["time"],
            format!("{:.3}", a["seconds"].as_f64().unwrap()).as_str()
        );
        tests += cases.len();
        failures += exposed.len();
    }
    assert_eq!(count(j, "tests"), tests);
    assert_eq!(count(j, "failures"), failures);
}

/// Checks the SARIF content against the JSON report (and the text report's titles when
/// given).
fn check_sarif(doc: &Value, rep: &Value, text: Option<&str>) {
    assert_eq!(doc["version"], "2.1.0");
    assert_eq!(
        doc["$schema"],
        "https://json.schemastore.org/sarif-2.1.0.json"
    );
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["tool"]["driver"]["name"], "intact");
    let statics = rep["static"].as_array().unwrap();
    let categories: BTreeSet<String> = statics
        .iter()
        .flat_map(|s| strs(&s["categories"]))
        .collect();
    let rules: Vec<String> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        rules.iter().cloned().collect::<BTreeSet<_>>(),
        categories,
        "one rule per category present"
    );
    assert_eq!(rules.len(), categories.len());
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), statics.len());
    let mut fingerprints = BTreeSet::new();
    for (r, s) in results.iter().zip(statics) {
        let rule = s["categories"][0].as_str().unwrap();
        assert_eq!(r["ruleId"], rule);
        assert_eq!(rules[r["ruleIndex"].as_u64().unwrap() as usize], rule);
        assert_eq!(
            r["level"],
            if rule == "durability" {
                "warning"
            } else {
                "error"
            }
        );
        let msg = r["message"]["text"].as_str().unwrap();
        assert!(
            msg.contains(s["example"]["checker_message"].as_str().unwrap()),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("APMs: {}", strs(&s["apms"]).join(", "))),
            "{msg}"
        );
        if let Some(text) = text {
            // The first line is the text report's title line without its number.
            let first = msg.lines().next().unwrap();
            assert!(
                text.contains(&format!("#{} {first}\n", s["id"])),
                "{first:?} is not a title of the text report:\n{text}"
            );
        }
        assert_eq!(r["properties"]["apms"], s["apms"]);
        assert_eq!(r["properties"]["categories"], s["categories"]);
        assert_eq!(r["properties"]["exampleState"], s["example"]["state"]);
        assert!(
            fingerprints.insert(
                r["partialFingerprints"]["intactVulnerability/v1"]
                    .as_str()
                    .unwrap()
                    .to_string()
            ),
            "fingerprints differ"
        );
        // The primary location: the first location of the static vulnerability.
        let loc = s["locations"][0].as_str().unwrap();
        let l = &r["locations"][0];
        match split_location(loc) {
            Some((path, line, func)) => {
                let uri = l["physicalLocation"]["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap();
                // Under the source root (the git work tree, when the checkout is one):
                // relative to %SRCROOT%; elsewhere absolute.
                let root = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
                    .as_str()
                    .and_then(|u| u.strip_prefix("file://"));
                let under_root = root.and_then(|r| path.strip_prefix(r));
                if let Some(rel) = under_root {
                    assert_eq!(uri, rel.replace(' ', "%20"));
                } else if path.starts_with('/') {
                    assert_eq!(uri, format!("file://{}", path.replace(' ', "%20")));
                } else {
                    assert_eq!(
                        l["physicalLocation"]["artifactLocation"]["uriBaseId"],
                        "%SRCROOT%"
                    );
                }
                assert_eq!(
                    l["physicalLocation"]["region"]["startLine"].as_u64(),
                    Some(line)
                );
                assert_eq!(l["logicalLocations"][0]["name"], func.as_str());
            }
            None => {
                assert!(l.get("physicalLocation").is_none(), "{l:#}");
                assert!(
                    l["message"]["text"]
                        .as_str()
                        .unwrap()
                        .contains("no source line"),
                    "{l:#}"
                );
            }
        }
        let calls = s["calls"].as_array().unwrap().len();
        let related = r
            .get("relatedLocations")
            .and_then(Value::as_array)
            .map(Vec::len)
            .unwrap_or(0);
        assert_eq!(
            related,
            (calls - 1).min(100),
            "one related location per other call"
        );
    }
}

/// `intact report JSON --sarif --junit` writes the same files as `intact check` did.
fn report_again(json: &Path, sarif: &Path, junit: &Path) {
    let (s2, j2) = (
        sarif.with_extension("again.sarif"),
        junit.with_extension("again.xml"),
    );
    let out = intact()
        .arg("report")
        .arg(json)
        .arg("--sarif")
        .arg(&s2)
        .arg("--junit")
        .arg(&j2)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&s2).unwrap(),
        std::fs::read_to_string(sarif).unwrap(),
        "intact report --sarif differs from intact check --sarif"
    );
    assert_eq!(
        std::fs::read_to_string(&j2).unwrap(),
        std::fs::read_to_string(junit).unwrap(),
        "intact report --junit differs from intact check --junit"
    );
}

/// Records kv (examples/kvstore) with `args`, checks it under `apms` with every output;
/// returns (exit code, text report, JSON report, SARIF path, JUnit path, JSON path).
fn kv_check(
    tmp: &Path,
    tag: &str,
    args: &[&str],
    apms: &str,
) -> (i32, String, Value, PathBuf, PathBuf, PathBuf) {
    let bundle = record_kv_as(tmp, &format!("b-{tag}"), &format!("db-{tag}"), args);
    let (json, sarif, junit) = (
        tmp.join(format!("{tag}.json")),
        tmp.join(format!("{tag}.sarif")),
        tmp.join(format!("{tag}.xml")),
    );
    let checker = format!(
        "python3 {}",
        repo().join("examples/kvstore/check.py").display()
    );
    let out = intact()
        .arg("check")
        .arg(&bundle)
        .args([
            "--checker",
            &checker,
            "--apm",
            apms,
            "-j",
            "2",
            "-q",
            "--json",
        ])
        .arg(&json)
        .arg("--sarif")
        .arg(&sarif)
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    }))
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        text,
        rep,
        sarif,
        junit,
        json,
    )
}

/// kv without its fsync before the rename: three static vulnerabilities under the
/// default APM, none under ext4-o.
#[test]
fn sarif_and_junit_of_a_vulnerable_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, text, rep, sarif, junit_path, json) =
        kv_check(tmp.path(), "plain", &[], "default,ext4-o");
    assert_eq!(code, 1, "{text}");
    let statics = rep["static"].as_array().unwrap();
    assert!(
        statics
            .iter()
            .any(|s| s["categories"] == json!(["safe_rename"])),
        "{text}"
    );
    report_again(&json, &sarif, &junit_path);
    validate_sarif(&sarif);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    check_sarif(&doc, &rep, Some(&text));
    // The safe rename: kv.c's checkpoint, the data write first and the log truncation as
    // the related location; the source line as the snippet.
    let i = statics
        .iter()
        .position(|s| s["categories"] == json!(["safe_rename"]))
        .unwrap();
    let r = &doc["runs"][0]["results"][i];
    let phys = &r["locations"][0]["physicalLocation"];
    assert!(
        phys["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
            .ends_with("examples/kvstore/kv.c"),
        "{r:#}"
    );
    assert!(
        phys["region"]["snippet"]["text"]
            .as_str()
            .unwrap()
            .contains("write("),
        "{r:#}"
    );
    assert_eq!(
        r["locations"][0]["logicalLocations"][0]["name"],
        "checkpoint"
    );
    assert_eq!(r["relatedLocations"].as_array().unwrap().len(), 1);
    assert!(
        r["relatedLocations"][0]["message"]["text"]
            .as_str()
            .unwrap()
            .contains("truncate"),
        "{r:#}"
    );
    let j = junit(&junit_path);
    check_junit(&j, &rep);
    assert_eq!(count(&j["suites"][0], "failures"), statics.len());
    assert_eq!(count(&j["suites"][1], "failures"), 0);
}

/// kv --safe under ext4-o and btrfs: no vulnerability, an empty but valid SARIF run, and
/// one passing "no crash vulnerability" case per APM.
#[test]
fn sarif_and_junit_without_vulnerabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, text, rep, sarif, junit_path, json) =
        kv_check(tmp.path(), "safe", &["--safe"], "ext4-o,btrfs");
    assert_eq!(code, 0, "{text}");
    report_again(&json, &sarif, &junit_path);
    validate_sarif(&sarif);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    check_sarif(&doc, &rep, Some(&text));
    assert_eq!(doc["runs"][0]["results"], json!([]));
    let j = junit(&junit_path);
    check_junit(&j, &rep);
    for s in j["suites"].as_array().unwrap() {
        assert_eq!(s["testcases"].as_array().unwrap().len(), 1);
    }
    assert_eq!(count(&j, "failures"), 0);
}

/// A hand-made report with what real ones may hold: locations without a line (no stack,
/// a binary without debug information, the output of a durability vulnerability), C++
/// names, relative paths with spaces, a group of 150 calls, XML-hostile and non-ASCII
/// checker messages, an unchecked state. Rendered by `intact report`.
#[test]
fn sarif_and_junit_of_awkward_content() {
    let tmp = tempfile::tempdir().unwrap();
    let call = |i: usize, loc: &str| json!({"index": i, "op": i + 1, "syscall": "write", "summary": format!("append    f{i} size 0 -> 1 \"<&>\""), "location": loc});
    let example = |state: &str, msg: &str| json!({"state": state, "description": "calls 1..=3 without op 1 write(a&b)", "checker_message": msg});
    let group: Vec<Value> = (0..150)
        .map(|i| call(i, &format!("src/my dir/a.cc:{}:ns::Store::put", 10 + i)))
        .collect();
    let statics = json!([
        {"id": 1, "kind": "atomicity", "categories": ["append_truncate_atomicity"], "locations": ["write(kv.log) [no stack]"], "apms": ["default"], "dynamic": [0],
         "calls": [call(0, "write(kv.log) [no stack]")], "example": example("s9", "garbage: <\u{1}\u{7f}> & \"quotes\" 'single' é ü 中\nsecond line\r\n")},
        {"id": 2, "kind": "across_calls", "categories": ["across_calls_atomicity", "other_ordering"], "locations": ["src/my dir/a.cc:10:ns::Store::put", "src/my dir/a.cc:159:ns::Store::put"], "apms": ["default", "ext3-w"], "dynamic": [1],
         "calls": group, "example": example("s10", "")},
        {"id": 3, "kind": "ordering", "categories": ["durability"], "locations": ["/usr/lib/libfoo.so+0x1f:foo_sync", "the output that follows it"], "apms": ["ext3-w"], "dynamic": [2],
         "calls": [call(160, "/usr/lib/libfoo.so+0x1f:foo_sync"), call(161, "/usr/bin/app:main")], "example": example("s11", "durability: ]]> lost")},
    ]);
    let rep = json!({
        "schema": "intact-report/1", "bundle": tmp.path().join("no-such-bundle").to_str().unwrap(), "checker": ["sh", "-c", "check <&>"],
        "apms": [
            {"apm": "default", "explore": "alice", "micro_ops": 9, "units": 9, "calls": 162, "constructed": 20, "distinct": 15, "checked": 15, "failed": 4, "timeouts": 1, "complete": true, "seconds": 1234.56789},
            {"apm": "ext3-w", "explore": "exhaustive", "micro_ops": 9, "units": 5, "calls": 162, "constructed": 20, "distinct": 15, "checked": 0, "failed": 0, "timeouts": 0, "complete": false, "seconds": 0.0001},
            {"apm": "strict", "explore": "alice", "micro_ops": 9, "units": 9, "calls": 162, "constructed": 2, "distinct": 2, "checked": 0, "failed": 0, "timeouts": 0, "complete": true, "seconds": 0.5}
        ],
        "static": statics, "dynamic": [], "seconds": 1235.0,
        "timeouts": [{"state": "s12", "description": "prefix", "checker_message": "not checked: cannot write <state>"}]
    });
    let json_path = tmp.path().join("awkward.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&rep).unwrap()).unwrap();
    let (sarif, junit_path) = (
        tmp.path().join("awkward.sarif"),
        tmp.path().join("awkward.xml"),
    );
    let out = intact()
        .arg("report")
        .arg(&json_path)
        .arg("--sarif")
        .arg(&sarif)
        .arg("--junit")
        .arg(&junit_path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    validate_sarif(&sarif);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    check_sarif(&doc, &rep, None);
    let results = &doc["runs"][0]["results"];
    // No stack: no physical location, a message saying so.
    assert!(results[0]["locations"][0]["message"]["text"]
        .as_str()
        .unwrap()
        .contains("no source line: write(kv.log) [no stack]"));
    // A relative path: relative to %SRCROOT%, percent-encoded; the C++ name whole.
    let l = &results[1]["locations"][0];
    assert_eq!(
        l["physicalLocation"]["artifactLocation"],
        json!({"uri": "src/my%20dir/a.cc", "uriBaseId": "%SRCROOT%"})
    );
    assert_eq!(l["logicalLocations"][0]["name"], "ns::Store::put");
    // 150 calls: the first 99 others and the last.
    let rel = results[1]["relatedLocations"].as_array().unwrap();
    assert_eq!(rel.len(), 100);
    assert_eq!(rel[99]["physicalLocation"]["region"]["startLine"], 159);
    // Durability: a warning; the binary's function as a logical location; the output is no
    // location of its own.
    assert_eq!(results[2]["level"], "warning");
    assert_eq!(
        results[2]["locations"][0]["logicalLocations"][0]["name"],
        "foo_sync"
    );
    assert!(results[2]["locations"][0].get("physicalLocation").is_none());
    assert_eq!(results[2]["relatedLocations"].as_array().unwrap().len(), 1);
    // The unchecked state.
    let inv = &doc["runs"][0]["invocations"][0];
    assert_eq!(inv["executionSuccessful"], false);
    assert!(inv["toolExecutionNotifications"][0]["message"]["text"]
        .as_str()
        .unwrap()
        .contains("not checked: cannot write <state>"));

    let j = junit(&junit_path);
    // xml.etree gives back the message: control characters spelled out, the rest intact.
    let f = &j["suites"][0]["testcases"][0]["failure"];
    assert_eq!(
        f["attrib"]["message"],
        "garbage: <\\x01\u{7f}> & \"quotes\" 'single' é ü 中\nsecond line\r\n"
    );
    assert!(
        f["text"].as_str().unwrap().contains("  | second line"),
        "{f:#}"
    );
    // An empty checker message still gives the failure a message.
    assert_eq!(
        j["suites"][0]["testcases"][1]["failure"]["attrib"]["message"],
        "example state s10 fails the checker"
    );
    let f3 = &j["suites"][1]["testcases"][2]["failure"];
    assert_eq!(f3["attrib"]["message"], "durability: ]]> lost");
    assert!(j["suites"][1]["system_out"]
        .as_str()
        .unwrap()
        .contains("search cut by --max-states"));
    assert_eq!(j["suites"][0]["attrib"]["time"], "1234.568");
    // check_junit against the report as JUnit spells it (the empty message, \x01).
    let mut rep2 = rep.clone();
    rep2["static"][1]["example"]["checker_message"] = json!("example state s10 fails the checker");
    let spelled = rep2["static"][0]["example"]["checker_message"]
        .as_str()
        .unwrap()
        .replace('\u{1}', "\\x01");
    rep2["static"][0]["example"]["checker_message"] = json!(spelled);
    check_junit(&j, &rep2);
}
