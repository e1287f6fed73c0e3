//! The report as SARIF 2.1.0 (OASIS; GitHub code scanning, editors): one run, one rule per
//! Table 4.2 category present, one result per static vulnerability. The shape is
//! documented in docs/report.md, "SARIF and JUnit". Works from the JSON report alone (the
//! schema of docs/report.md) plus, where a source file can be read, the line as a snippet.

use crate::{Category, Context, OUTPUT_LOCATION};
use serde_json::{json, Map, Value};

pub const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The key of intact's fingerprint in `partialFingerprints` (the suffix versions the recipe).
pub const FINGERPRINT_KEY: &str = "intactVulnerability/v1";

/// Related locations listed per result at most (a long across-calls group lists its first
/// calls; `properties.calls` says how many there were).
const MAX_RELATED: usize = 100;

const ALL_CATEGORIES: [Category; 8] = [
    Category::AcrossCallsAtomicity,
    Category::AppendTruncateAtomicity,
    Category::OverwriteAtomicity,
    Category::RenameUnlinkAtomicity,
    Category::SafeFileFlush,
    Category::SafeRename,
    Category::OtherOrdering,
    Category::Durability,
];

/// The category a JSON `category` string names.
pub(crate) fn category(id: &str) -> Option<Category> {
    ALL_CATEGORIES.into_iter().find(|c| {
        serde_json::to_value(c)
            .ok()
            .as_ref()
            .and_then(Value::as_str)
            == Some(id)
    })
}

/// The text label of a JSON category (the string itself when unknown).
pub(crate) fn category_label(id: &str) -> String {
    category(id)
        .map(|c| c.label().to_string())
        .unwrap_or_else(|| id.to_string())
}

/// A JSON value's string, or "".
pub(crate) fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|x| s(x).to_string()).collect())
        .unwrap_or_default()
}

/// `Static::title` of a static vulnerability of the JSON report: its `title` field, or
/// re-derived from `kind` and `locations` (reports written before the field existed).
pub(crate) fn title(st: &Value) -> String {
    if let Some(t) = st["title"].as_str().filter(|t| !t.is_empty()) {
        return t.to_string();
    }
    let locs = strings(&st["locations"]);
    let first = locs.first().cloned().unwrap_or_default();
    match s(&st["kind"]) {
        "across_calls" => format!("calls from {} persist only together", locs.join(" to ")),
        "atomicity" => format!("{first} is not atomic"),
        _ => format!(
            "{first} must reach disk before {}",
            locs.get(1).cloned().unwrap_or_default()
        ),
    }
}

/// `Static::categories_label` from the JSON.
pub(crate) fn categories_label(st: &Value) -> String {
    strings(&st["categories"])
        .iter()
        .map(|c| category_label(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A location string split into its parts: (path, line, function) for `file:line[:function]`
/// (the function may hold colons, as C++'s `ns::f`); None for the forms without a line
/// (`binary:function`, `binary+0xOFF[:function]`, `syscall(path) [no stack]`, the output).
pub(crate) fn parse_location(loc: &str) -> Option<(&str, u64, Option<&str>)> {
    if loc.ends_with("[no stack]") || loc == OUTPUT_LOCATION {
        return None;
    }
    for (i, _) in loc.match_indices(':') {
        if i == 0 {
            continue;
        }
        let rest = &loc[i + 1..];
        let (digits, func) = match rest.find(':') {
            Some(j) => (&rest[..j], Some(&rest[j + 1..])),
            None => (rest, None),
        };
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            let line: u64 = digits.parse().ok()?;
            if line == 0 {
                return None;
            }
            return Some((&loc[..i], line, func.filter(|f| !f.is_empty())));
        }
    }
    None
}

/// The function of a location without a line (`binary:function`), if it names one.
fn lineless_function(loc: &str) -> Option<&str> {
    if loc.ends_with("[no stack]") || loc == OUTPUT_LOCATION {
        return None;
    }
    loc.split_once(':')
        .map(|(_, f)| f)
        .filter(|f| !f.is_empty())
}

/// Percent-encodes a path for a URI (RFC 3986): unreserved characters and `/` stay.
fn encode_path(p: &str) -> String {
    let mut o = String::new();
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// SARIF `artifactLocation` of a path: a relative one, or an absolute one under the source
/// root, relative to `%SRCROOT%` (GitHub: the repository root); other absolute paths as
/// `file://` URIs.
fn artifact_location(path: &str, root: Option<&str>) -> Value {
    let under_root = root
        .and_then(|r| path.strip_prefix(r))
        .and_then(|rest| rest.strip_prefix('/'));
    if let Some(rel) = under_root {
        json!({ "uri": encode_path(rel), "uriBaseId": "%SRCROOT%" })
    } else if path.starts_with('/') {
        json!({ "uri": format!("file://{}", encode_path(path)) })
    } else {
        json!({ "uri": encode_path(path.strip_prefix("./").unwrap_or(path)), "uriBaseId": "%SRCROOT%" })
    }
}

/// Where `%SRCROOT%` is, when known (a consumer may also supply it, as GitHub does).
fn base_ids(root: Option<&str>) -> Value {
    match root {
        Some(r) => json!({ "%SRCROOT%": { "uri": format!("file://{}/", encode_path(r)) } }),
        None => json!({}),
    }
}

/// A stable fingerprint of the parts (each NUL-terminated): 128 bits of blake3, as intact
/// hashes states.
fn fingerprint(parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex()[..32].to_string()
}

/// The SARIF `location` of a source location string, with a message.
fn location(ctx: &Context, loc: &str, message: &str, id: Option<usize>) -> Value {
    let mut o = Map::new();
    if let Some(id) = id {
        o.insert("id".into(), json!(id));
    }
    match parse_location(loc) {
        Some((path, line, func)) => {
            let mut region = json!({ "startLine": line });
            let text = (ctx.source)(loc)
                .and_then(|src| src.lines().nth(line as usize - 1).map(str::to_string));
            if let Some(t) = text {
                region["snippet"] = json!({ "text": t });
            }
            o.insert(
                "physicalLocation".into(),
                json!({ "artifactLocation": artifact_location(path, ctx.source_root), "region": region }),
            );
            if let Some(f) = func {
                o.insert(
                    "logicalLocations".into(),
                    json!([{ "name": f, "kind": "function" }]),
                );
            }
            o.insert("message".into(), json!({ "text": message }));
        }
        None => {
            if let Some(f) = lineless_function(loc) {
                o.insert(
                    "logicalLocations".into(),
                    json!([{ "name": f, "fullyQualifiedName": loc, "kind": "function" }]),
                );
            }
            let text = if loc == OUTPUT_LOCATION {
                format!("{message}; what the workload printed after it")
            } else {
                format!("{message}; no source line: {loc} (recorded without a stack, or code without debug information)")
            };
            o.insert("message".into(), json!({ "text": text }));
        }
    }
    Value::Object(o)
}

/// "call I op O SYSCALL: SUMMARY", the operation name's padding removed.
fn call_text(c: &Value) -> String {
    let summary = match s(&c["summary"]).split_once(' ') {
        Some((op, rest)) => format!("{op} {}", rest.trim_start()),
        None => s(&c["summary"]).to_string(),
    };
    format!(
        "call {} op {} {}: {summary}",
        c["index"],
        c["op"],
        s(&c["syscall"])
    )
}

fn level(cat: &str) -> &'static str {
    if cat == "durability" {
        "warning"
    } else {
        "error"
    }
}

fn camel(id: &str) -> String {
    id.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn rule_description(id: &str) -> &'static str {
    match id {
        "across_calls_atomicity" => "Several consecutive system calls must persist together: a crash that keeps only some of them leaves a state the application's checker rejects (thesis Table 4.2: across-syscalls atomicity).",
        "append_truncate_atomicity" => "An append or truncate must persist atomically: a crash in its middle (the size changed without the data, or part of the data) leaves a state the checker rejects.",
        "overwrite_atomicity" => "An overwrite must persist atomically: a crash that keeps only part of the written data leaves a state the checker rejects.",
        "rename_unlink_atomicity" => "A directory operation (rename, unlink, link, mkdir, rmdir, symlink) must persist atomically.",
        "safe_file_flush" => "A new directory entry must reach disk before a later fsync of the file it names is relied on (fsync the parent directory too).",
        "safe_rename" => "Data written to a file must reach disk before the file is renamed into place (fsync it before the rename).",
        "other_ordering" => "A system call's effect must reach disk before a later call's, and nothing (no fsync between them) makes it so.",
        "durability" => "The workload reported something as done (printed output) before the data behind it reached disk: a crash after the output loses it.",
        _ => "A crash vulnerability of a category this version of intact does not know.",
    }
}

pub fn render(ctx: &Context) -> Result<String, String> {
    let r = ctx.report;
    if r["schema"] != crate::SCHEMA {
        return Err(format!(
            "not a report of schema {}: {}",
            crate::SCHEMA,
            r["schema"]
        ));
    }
    let statics: &[Value] = r["static"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    // Rules: every category some static vulnerability has, in Table 4.2 order (known ones
    // first, unknown ones after, by name).
    let mut cats: Vec<String> = statics
        .iter()
        .flat_map(|st| strings(&st["categories"]))
        .collect();
    cats.sort_by_key(|c| {
        (
            category(c).map(|k| k as usize).unwrap_or(usize::MAX),
            c.clone(),
        )
    });
    cats.dedup();
    let rules: Vec<Value> = cats
        .iter()
        .map(|c| {
            json!({
                "id": c,
                "name": camel(c),
                "shortDescription": { "text": category_label(c) },
                "fullDescription": { "text": rule_description(c) },
                "defaultConfiguration": { "level": level(c) },
                "properties": { "tags": ["crash-consistency"] },
            })
        })
        .collect();
    let mut results = Vec::new();
    for st in statics {
        let categories = strings(&st["categories"]);
        let rule = categories
            .first()
            .cloned()
            .unwrap_or_else(|| "other_ordering".into());
        let locations = strings(&st["locations"]);
        let calls: &[Value] = st["calls"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let apms = strings(&st["apms"]);
        let ndyn = st["dynamic"].as_array().map(Vec::len).unwrap_or(0);
        let ex = &st["example"];
        let mut text = format!(
            "[{}] {}\nAPMs: {} ({} dynamic vulnerabilit{})",
            categories_label(st),
            title(st),
            apms.join(", "),
            ndyn,
            if ndyn == 1 { "y" } else { "ies" }
        );
        text.push_str(&format!(
            "\nExample crash state {}: {}",
            s(&ex["state"]),
            s(&ex["description"])
        ));
        let said = s(&ex["checker_message"]);
        if !said.is_empty() {
            text.push_str(&format!("\nThe checker said: {said}"));
        }
        let primary = locations.first().cloned().unwrap_or_default();
        let first_call = calls.first().map(call_text).unwrap_or_default();
        // The other calls of the example (for ordering: call b; for a group: the rest of
        // it, its last call kept when the list is cut).
        let others: Vec<&Value> = match calls.len().saturating_sub(1) {
            n if n > MAX_RELATED => calls[1..MAX_RELATED].iter().chain(calls.last()).collect(),
            _ => calls.iter().skip(1).collect(),
        };
        let related: Vec<Value> = others
            .iter()
            .enumerate()
            .map(|(i, c)| location(ctx, s(&c["location"]), &call_text(c), Some(i)))
            .collect();
        let kind = s(&st["kind"]).to_string();
        let mut parts: Vec<&str> = vec![&kind, &rule];
        parts.extend(locations.iter().map(String::as_str));
        let mut result = json!({
            "ruleId": rule,
            "level": level(&rule),
            "message": { "text": text },
            "locations": [location(ctx, &primary, &first_call, None)],
            "partialFingerprints": { FINGERPRINT_KEY: fingerprint(&parts) },
            "properties": {
                "id": st["id"],
                "kind": kind,
                "categories": categories,
                "apms": apms,
                "dynamicVulnerabilities": ndyn,
                "calls": calls.len(),
                "exampleState": ex["state"],
                "exampleDescription": ex["description"],
                "checkerMessage": ex["checker_message"],
                "tags": ["crash-consistency"],
            },
        });
        if let Some(i) = cats.iter().position(|c| *c == rule) {
            result["ruleIndex"] = json!(i);
        }
        if !related.is_empty() {
            result["relatedLocations"] = Value::Array(related);
        }
        results.push(result);
    }
    let timeouts: &[Value] = r["timeouts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let notifications: Vec<Value> = timeouts
        .iter()
        .map(|t| {
            json!({
                "level": "warning",
                "message": { "text": format!("state {} ({}): {} (not counted as a failure)", s(&t["state"]), s(&t["description"]), s(&t["checker_message"])) },
            })
        })
        .collect();
    let unchecked = timeouts
        .iter()
        .any(|t| s(&t["checker_message"]).starts_with("not checked"));
    let mut invocation = json!({ "executionSuccessful": !unchecked });
    if !notifications.is_empty() {
        invocation["toolExecutionNotifications"] = Value::Array(notifications);
    }
    invocation["properties"] =
        json!({ "checker": r["checker"], "bundle": r["bundle"], "seconds": r["seconds"] });
    let log = json!({
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "intact",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [invocation],
            "originalUriBaseIds": base_ids(ctx.source_root),
            "results": results,
            "properties": {
                "reportSchema": r["schema"],
                "bundle": r["bundle"],
                "apms": r["apms"],
            },
        }],
    });
    serde_json::to_string_pretty(&log)
        .map(|t| t + "\n")
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        assert_eq!(
            parse_location("/src/kv.c:49:checkpoint"),
            Some(("/src/kv.c", 49, Some("checkpoint")))
        );
        assert_eq!(
            parse_location("a.cc:7:ns::f"),
            Some(("a.cc", 7, Some("ns::f")))
        );
        assert_eq!(parse_location("app.py:12"), Some(("app.py", 12, None)));
        assert_eq!(parse_location("/bin/a:main"), None);
        assert_eq!(parse_location("/bin/a+0x1f:main"), None);
        assert_eq!(parse_location("write(x:1) [no stack]"), None);
        assert_eq!(parse_location(OUTPUT_LOCATION), None);
        assert_eq!(lineless_function("/bin/a:main"), Some("main"));
        assert_eq!(lineless_function("write(a:b) [no stack]"), None);
    }

    #[test]
    fn uris_and_categories() {
        assert_eq!(
            artifact_location("/a b/c.c", None),
            json!({"uri": "file:///a%20b/c.c"})
        );
        assert_eq!(
            artifact_location("./src/c.c", None),
            json!({"uri": "src/c.c", "uriBaseId": "%SRCROOT%"})
        );
        // Under the source root: relative to it; beside it (a common prefix): absolute.
        assert_eq!(
            artifact_location("/repo/src/c.c", Some("/repo")),
            json!({"uri": "src/c.c", "uriBaseId": "%SRCROOT%"})
        );
        assert_eq!(
            artifact_location("/repo2/c.c", Some("/repo")),
            json!({"uri": "file:///repo2/c.c"})
        );
        assert_eq!(
            base_ids(Some("/my repo")),
            json!({"%SRCROOT%": {"uri": "file:///my%20repo/"}})
        );
        assert_eq!(category("safe_rename"), Some(Category::SafeRename));
        assert_eq!(category("nope"), None);
        assert_eq!(camel("safe_file_flush"), "SafeFileFlush");
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
        assert_eq!(fingerprint(&[""]), fingerprint(&[""]));
    }
}
