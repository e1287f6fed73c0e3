//! The report as one self-contained HTML page (`intact check --html`, `intact report
//! --html`): inline CSS and SVG, no script, nothing fetched. A header with the bundle,
//! the checker and the time; a table per APM; then each static vulnerability with its
//! protocol diagram (`html/diagram.rs`), its calls, the source lines around each location,
//! the example state and what the checker said; the timeouts; the whole protocol.
//! Everything taken from the report, the bundle or source files is escaped.

use crate::{Category, Context};
use serde_json::Value;
use std::fmt::Write as _;

pub mod diagram;

/// Lines of source shown on each side of a location's line.
const SOURCE_CONTEXT: usize = 3;
/// A checker message longer than this is cut (its full text is in the JSON report).
const MAX_MESSAGE: usize = 20_000;
/// Rows of the whole-protocol table at most.
const MAX_OP_ROWS: usize = 5_000;
/// Timeouts listed at most.
const MAX_TIMEOUTS: usize = 200;

/// Escapes text for HTML content and attribute values (both quote kinds), and makes
/// control characters visible (U+2400 "control pictures") instead of passing them to
/// the parser; newlines and tabs stay.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\n' | '\t' => o.push(c),
            '\r' => o.push('\u{240d}'),
            c if (c as u32) < 0x20 => {
                o.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'))
            }
            '\u{7f}' => o.push('\u{2421}'),
            c if ('\u{80}'..='\u{9f}').contains(&c) => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// The text label of a JSON category (`Category::label`), or the name itself if unknown.
pub fn category_label(name: &str) -> String {
    use Category::*;
    for c in [
        AcrossCallsAtomicity,
        AppendTruncateAtomicity,
        OverwriteAtomicity,
        RenameUnlinkAtomicity,
        SafeFileFlush,
        SafeRename,
        OtherOrdering,
        Durability,
    ] {
        if serde_json::to_value(c)
            .ok()
            .as_ref()
            .and_then(Value::as_str)
            == Some(name)
        {
            return c.label().to_string();
        }
    }
    name.to_string()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    x.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| x.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

fn n(v: &Value, k: &str) -> String {
    match &v[k] {
        Value::Number(x) => x.to_string(),
        Value::Null => "–".into(),
        x => x.to_string(),
    }
}

fn secs(v: &Value) -> String {
    v.as_f64()
        .map(|x| format!("{x:.1} s"))
        .unwrap_or_else(|| "–".into())
}

/// The title line of the text report (`Static::title`): the report's own `title`, or
/// derived from the kind and locations (reports written before it had one).
pub fn title(v: &Value) -> String {
    if let Some(t) = v["title"].as_str().filter(|t| !t.is_empty()) {
        return t.to_string();
    }
    let locs = strs(&v["locations"]);
    let first = locs.first().cloned().unwrap_or_default();
    match s(v, "kind") {
        "across_calls" => format!("calls from {} persist only together", locs.join(" to ")),
        "atomicity" => format!("{first} is not atomic"),
        _ => format!(
            "{first} must reach disk before {}",
            locs.get(1).cloned().unwrap_or_default()
        ),
    }
}

/// The categories, comma-separated (`Static::categories_label`).
pub fn categories_label(v: &Value) -> String {
    strs(&v["categories"])
        .iter()
        .map(|c| category_label(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Words as a shell would take them back.
fn shell_join(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `path:line:function` → (path, line, function). None without a line number.
pub fn parse_location(loc: &str) -> Option<(&str, usize, &str)> {
    let (path, rest) = loc.split_once(':')?;
    let (line, func) = rest.split_once(':').unwrap_or((rest, ""));
    let line: usize = line.parse().ok()?;
    (!path.is_empty() && line > 0).then_some((path, line, func))
}

/// The source lines around a location, or why there are none.
fn source_block(loc: &str, source: &dyn Fn(&str) -> Option<String>) -> String {
    if loc == crate::OUTPUT_LOCATION {
        return String::new();
    }
    let mut o = String::from("<figure class=\"src\">");
    let Some((path, line, func)) = parse_location(loc) else {
        let _ = write!(o, "<figcaption><code>{}</code></figcaption><p class=\"na\">source not available (the location has no source line)</p></figure>", esc(loc));
        return o;
    };
    let func = if func.is_empty() {
        String::new()
    } else {
        format!(", in <code>{}</code>", esc(func))
    };
    let _ = write!(
        o,
        "<figcaption><code>{}</code> line {line}{func}</figcaption>",
        esc(path)
    );
    let text = source(loc);
    let lines: Vec<&str> = text
        .as_deref()
        .map(|t| t.lines().collect())
        .unwrap_or_default();
    if text.is_none() || line > lines.len() {
        let why = if text.is_none() {
            "source not available".to_string()
        } else {
            format!("source not available (the file has {} lines)", lines.len())
        };
        let _ = write!(o, "<p class=\"na\">{why}</p></figure>");
        return o;
    }
    let from = line.saturating_sub(SOURCE_CONTEXT).max(1);
    let to = (line + SOURCE_CONTEXT).min(lines.len());
    o.push_str("<pre class=\"code\">");
    for (i, l) in lines.iter().enumerate().take(to).skip(from - 1) {
        let no = i + 1;
        let cls = if no == line { "line hit" } else { "line" };
        let _ = write!(
            o,
            "<span class=\"{cls}\"><span class=\"ln\">{no}</span>{}</span>",
            esc(l)
        );
    }
    o.push_str("</pre></figure>");
    o
}

/// What the diagram's red labels mean for this vulnerability, in a sentence.
fn diagram_caption(v: &Value) -> String {
    let calls = v["calls"].as_array().cloned().unwrap_or_default();
    let op = |i: usize| {
        calls
            .get(i)
            .map(|c| format!("op {}", n(c, "op")))
            .unwrap_or_else(|| "?".into())
    };
    let durability = strs(&v["categories"]).iter().all(|c| c == "durability");
    match s(v, "kind") {
        "atomicity" => format!("In the example state, {} persisted only in part (<b>torn</b>).", op(0)),
        "across_calls" => format!(
            "In the example state, the calls from {} to {} (bracketed) persisted only in part (<b>torn</b>): they must persist together.",
            op(0),
            op(calls.len().saturating_sub(1))
        ),
        _ if durability => format!("In the example state, {} was <b>lost</b> although the output of {} had been <b>printed</b>: the arrow shows what must be durable first.", op(0), op(1)),
        _ => format!("In the example state, {} had not reached disk (<b>reordered</b>) while {} had (<b>persisted</b>): the arrow shows what must reach disk first.", op(0), op(1)),
    }
}

const CSS: &str = r#"
:root { --red: #c62828; --blue: #1565c0; --grey: #5f6670; --line: #d9dce1; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d2126; margin: 0; background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 18px 24px 40px; }
h1 { font-size: 22px; margin: 0 0 10px; }
h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 14px; margin: 16px 0 6px; color: var(--grey); text-transform: uppercase; letter-spacing: .04em; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.meta dt { color: var(--grey); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 4px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 9px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bad { color: var(--red); font-weight: 600; }
.ok { color: #2e7d32; font-weight: 600; }
nav ol { margin: 4px 0; padding-left: 22px; }
section.vuln { border: 1px solid var(--line); border-left: 5px solid var(--red); border-radius: 6px; padding: 4px 18px 14px; margin: 22px 0; }
section.vuln h2 { margin-top: 12px; overflow-wrap: anywhere; }
.cat { display: inline-block; background: #ffebee; color: var(--red); border-radius: 10px; padding: 0 9px; font-size: 12.5px; font-weight: 600; margin-right: 4px; }
.apm { display: inline-block; background: #e3f2fd; color: var(--blue); border-radius: 10px; padding: 0 9px; font-size: 12.5px; margin-right: 4px; }
.diagram { overflow-x: auto; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
.diagram svg { display: block; }
svg.protocol text { font: 11px ui-monospace, "DejaVu Sans Mono", monospace; fill: #1d2126; }
svg.protocol .lane-label { font-weight: 600; }
svg.protocol .op-id { fill: var(--grey); font-size: 10px; }
svg.protocol .role { fill: var(--red); font-weight: 700; font-size: 10.5px; }
svg.protocol .sync-label { fill: var(--blue); font-size: 10px; }
svg.protocol .gap-label { fill: var(--grey); font-size: 10px; }
.legend { color: var(--grey); font-size: 12.5px; margin: 4px 0 0; }
.legend .sw { display: inline-block; width: 14px; height: 10px; vertical-align: -1px; margin: 0 3px 0 10px; border-radius: 2px; }
.note { color: var(--grey); font-size: 12.5px; margin: 4px 0; }
figure.src { margin: 6px 0 10px; }
figure.src figcaption { font-size: 12.5px; color: var(--grey); margin-bottom: 2px; }
pre.code { margin: 0; padding: 4px 0; background: #f8f9fb; border: 1px solid var(--line); border-radius: 4px; overflow-x: auto; tab-size: 4; }
pre.code .line { display: block; padding: 0 10px 0 0; }
pre.code .line.hit { background: #fff3c4; box-shadow: inset 4px 0 0 var(--red); }
pre.code .ln { display: inline-block; width: 4.5em; padding-right: 1em; text-align: right; color: #9aa0aa; user-select: none; }
p.na { color: var(--grey); font-style: italic; margin: 2px 0; }
pre.msg { margin: 4px 0; padding: 6px 10px; background: #fff5f5; border: 1px solid #f3c7c7; border-radius: 4px; white-space: pre-wrap; overflow-wrap: anywhere; }
details { margin: 8px 0; }
summary { cursor: pointer; color: var(--grey); }
footer { color: var(--grey); font-size: 12px; margin-top: 30px; }
"#;

const LEGEND: &str = "<p class=\"legend\">\
<span class=\"sw\" style=\"border:2.5px solid #c62828;background:#ffebee\"></span>this vulnerability's operations\
<span class=\"sw\" style=\"background:#1565c0;width:5px\"></span>sync (a barrier on its file; dashed across every lane: sync/syncfs)\
<span class=\"sw\" style=\"border-top:2px solid #c62828;height:0\"></span>must reach disk before (dotted: safe rename, safe file flush)\
<span class=\"sw\" style=\"border:1.5px dashed #c62828\"></span>must persist together\
<span class=\"sw\" style=\"border:1px solid #7a808a;background:#fff\"></span>other operations (hover for details); “… N more”: operations left out</p>";

/// Renders the page.
pub fn render(ctx: &Context) -> Result<String, String> {
    let r = ctx.report;
    if !r.is_object() {
        return Err("the report is not a JSON object".into());
    }
    let statics = r["static"]
        .as_array()
        .ok_or("the report has no \"static\" array (schema intact-report/1)")?;
    let apms = r["apms"].as_array().cloned().unwrap_or_default();
    let dynamic = r["dynamic"].as_array().cloned().unwrap_or_default();
    let timeouts = r["timeouts"].as_array().cloned().unwrap_or_default();
    let bundle = s(r, "bundle");
    let drawn: Option<Vec<diagram::DOp>> = ctx.ops.map(diagram::from_ops);
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"intact {}\">\n<title>intact report: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        esc(bundle)
    );

    // Header.
    let nd = dynamic.len();
    let verdict = if statics.is_empty() {
        "<span class=\"ok\">No vulnerability found.</span>".to_string()
    } else {
        format!(
            "<span class=\"bad\">{} static vulnerabilit{}</span> ({nd} dynamic)",
            statics.len(),
            if statics.len() == 1 { "y" } else { "ies" }
        )
    };
    let timeouts_note = if timeouts.is_empty() {
        String::new()
    } else {
        format!(
            "; {} state(s) timed out (not counted as failures)",
            timeouts.len()
        )
    };
    let _ = write!(
        o,
        "<header>\n<h1>intact: crash vulnerabilities</h1>\n<dl class=\"meta\">\n<dt>bundle</dt><dd><code>{}</code></dd>\n<dt>checker</dt><dd><code>{}</code></dd>\n<dt>total time</dt><dd>{}</dd>\n<dt>result</dt><dd>{verdict}{timeouts_note}</dd>\n</dl>\n</header>\n",
        esc(bundle),
        esc(&shell_join(&strs(&r["checker"]))),
        secs(&r["seconds"])
    );

    // APMs.
    o.push_str("<section id=\"apms\">\n<h2>APMs</h2>\n<table>\n<tr><th>APM</th><th>explore</th><th class=\"num\">calls</th><th class=\"num\">micro-ops</th><th class=\"num\">units</th><th class=\"num\">states built</th><th class=\"num\">distinct</th><th class=\"num\">checked here</th><th class=\"num\">failed</th><th class=\"num\">timed out</th><th>complete</th><th class=\"num\">time</th><th class=\"num\">static vulnerabilities</th></tr>\n");
    for a in &apms {
        let name = s(a, "apm");
        let exposed = statics
            .iter()
            .filter(|v| strs(&v["apms"]).iter().any(|x| x == name))
            .count();
        let complete = match a["complete"].as_bool() {
            Some(true) => "yes".to_string(),
            Some(false) => "<span class=\"bad\">no: cut by --max-states</span>".to_string(),
            None => "–".to_string(),
        };
        let cls = if exposed > 0 { "num bad" } else { "num" };
        let _ = writeln!(
            o,
            "<tr><td><b>{}</b><br><small>{}</small></td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{complete}</td><td class=\"num\">{}</td><td class=\"{cls}\">{exposed}</td></tr>",
            esc(name),
            esc(s(a, "models")),
            esc(s(a, "explore")),
            n(a, "calls"),
            n(a, "micro_ops"),
            n(a, "units"),
            n(a, "constructed"),
            n(a, "distinct"),
            n(a, "checked"),
            n(a, "failed"),
            n(a, "timeouts"),
            secs(&a["seconds"])
        );
    }
    o.push_str("</table>\n</section>\n");

    // Index.
    if !statics.is_empty() {
        o.push_str("<nav>\n<h2>Vulnerabilities</h2>\n<ol>\n");
        for v in statics {
            let id = n(v, "id");
            let _ = writeln!(
                o,
                "<li value=\"{}\"><a href=\"#v{}\">[{}] {}</a></li>",
                esc(&id),
                esc(&id),
                esc(&categories_label(v)),
                esc(&title(v))
            );
        }
        o.push_str("</ol>\n</nav>\n");
    }

    // Each static vulnerability.
    for v in statics {
        let id = n(v, "id");
        let uid = format!(
            "v{}",
            id.chars()
                .filter(char::is_ascii_alphanumeric)
                .collect::<String>()
        );
        let _ = write!(
            o,
            "<section class=\"vuln\" id=\"{}\">\n<h2>#{} {}</h2>\n<p>",
            esc(&uid),
            esc(&id),
            esc(&title(v))
        );
        for c in strs(&v["categories"]) {
            let _ = write!(o, "<span class=\"cat\">{}</span>", esc(&category_label(&c)));
        }
        o.push_str(" APMs: ");
        for a in strs(&v["apms"]) {
            let _ = write!(o, "<span class=\"apm\">{}</span>", esc(&a));
        }
        let members = v["dynamic"].as_array().cloned().unwrap_or_default();
        let _ = writeln!(o, " dynamic vulnerabilities: {}</p>", members.len());

        // Protocol diagram.
        let (dg, from_bundle) = diagram::draw(v, drawn.as_deref(), &uid);
        o.push_str("<h3>Protocol</h3>\n");
        let scope = if from_bundle {
            if dg.windowed {
                format!("The update protocol has {} operations; shown: a window around this vulnerability's, with runs of alike operations drawn once (×N).", dg.total)
            } else {
                format!("The update protocol ({} operations), one lane per file; x: operation order (op ids on top).", dg.total)
            }
        } else if ctx.ops.is_some() {
            "The bundle's operations do not match this report (was it recorded again?): the diagram shows the vulnerability's calls only.".to_string()
        } else {
            "The bundle is not available: the diagram shows the vulnerability's calls only (lanes by the paths in their summaries).".to_string()
        };
        let _ = writeln!(
            o,
            "<p class=\"note\">{} {}</p>",
            esc(&scope),
            diagram_caption(v)
        );
        let _ = writeln!(o, "<div class=\"diagram\">{}</div>\n{LEGEND}", dg.svg);

        // Calls.
        o.push_str("<h3>Calls</h3>\n<table>\n<tr><th class=\"num\">call</th><th class=\"num\">op</th><th>system call</th><th>operation</th><th>location</th></tr>\n");
        for c in v["calls"].as_array().cloned().unwrap_or_default() {
            let _ = writeln!(
                o,
                "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td><td><code>{}</code></td><td><code>{}</code></td></tr>",
                esc(&n(&c, "index")),
                esc(&n(&c, "op")),
                esc(s(&c, "syscall")),
                esc(s(&c, "summary")),
                esc(s(&c, "location"))
            );
        }
        o.push_str("</table>\n");

        // Source.
        o.push_str("<h3>Source</h3>\n");
        let mut locs = strs(&v["locations"]);
        locs.dedup();
        for l in &locs {
            o.push_str(&source_block(l, ctx.source));
            o.push('\n');
        }
        if locs.iter().any(|l| l == crate::OUTPUT_LOCATION) {
            let _ = writeln!(
                o,
                "<p class=\"note\">and {} (any output printed after it).</p>",
                esc(crate::OUTPUT_LOCATION)
            );
        }

        // Example state and the checker's message.
        let ex = &v["example"];
        let _ = writeln!(
            o,
            "<h3>Example state</h3>\n<p><code>{}</code>: {}</p>",
            esc(s(ex, "state")),
            esc(s(ex, "description"))
        );
        let msg = s(ex, "checker_message");
        if !msg.is_empty() {
            let _ = writeln!(
                o,
                "<p class=\"note\">The checker said:</p>\n<pre class=\"msg\">{}</pre>",
                esc(&cut(msg))
            );
        }

        // Its dynamic vulnerabilities.
        let _ = writeln!(o, "<details>\n<summary>{} dynamic vulnerabilit{}</summary>\n<table>\n<tr><th>APM</th><th>category</th><th>calls</th><th class=\"num\">failing states</th><th>example state</th></tr>", members.len(), if members.len() == 1 { "y" } else { "ies" });
        for m in &members {
            let Some(d) = m.as_u64().and_then(|i| dynamic.get(i as usize)) else {
                continue;
            };
            let calls: Vec<String> = d["calls"]
                .as_array()
                .map(|a| a.iter().map(|c| n(c, "index")).collect())
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td><code>{}</code>: {}</td></tr>",
                esc(s(d, "apm")),
                esc(&category_label(s(d, "category"))),
                esc(&calls.join(", ")),
                esc(&n(d, "failing_states")),
                esc(s(&d["example"], "state")),
                esc(s(&d["example"], "description"))
            );
        }
        o.push_str("</table>\n</details>\n</section>\n");
    }

    // Timeouts.
    if !timeouts.is_empty() {
        let _ = writeln!(o, "<section id=\"timeouts\">\n<h2>Timed-out states</h2>\n<p class=\"note\">{} state(s) timed out or could not be checked; they are not counted as failures.</p>\n<table>\n<tr><th>state</th><th>how it was built</th><th>message</th></tr>", timeouts.len());
        for t in timeouts.iter().take(MAX_TIMEOUTS) {
            let _ = writeln!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(s(t, "state")),
                esc(s(t, "description")),
                esc(&cut(s(t, "checker_message")))
            );
        }
        if timeouts.len() > MAX_TIMEOUTS {
            let _ = writeln!(
                o,
                "<tr><td colspan=\"3\">… {} more</td></tr>",
                timeouts.len() - MAX_TIMEOUTS
            );
        }
        o.push_str("</table>\n</section>\n");
    }

    // The whole protocol.
    if let Some(ops) = ctx.ops {
        let _ = writeln!(o, "<section id=\"protocol\">\n<details>\n<summary>The whole update protocol ({} logical operations, as <code>intact ops</code> prints it)</summary>\n<table>\n<tr><th class=\"num\">op</th><th>system call</th><th>operation</th><th>location</th><th class=\"num\">pid</th></tr>", ops.len());
        for (op, d) in ops.iter().zip(drawn.iter().flatten()).take(MAX_OP_ROWS) {
            let what = d.detail.split_once(": ").map(|x| x.1).unwrap_or(&d.detail);
            let what = what.split(" @ ").next().unwrap_or(what);
            let _ = writeln!(
                o,
                "<tr><td class=\"num\">{}</td><td><code>{}</code></td><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td></tr>",
                op.id,
                esc(&op.syscall),
                esc(what),
                esc(&op.loc.as_ref().map(|f| f.display()).unwrap_or_default()),
                op.pid
            );
        }
        if ops.len() > MAX_OP_ROWS {
            let _ = writeln!(
                o,
                "<tr><td colspan=\"5\">… {} more (see <code>intact ops</code>)</td></tr>",
                ops.len() - MAX_OP_ROWS
            );
        }
        o.push_str("</table>\n</details>\n</section>\n");
    }

    let _ = write!(o, "<footer>Written by intact {} from a report of schema <code>{}</code>. Reading it: docs/report.md.</footer>\n</main>\n</body>\n</html>\n", env!("CARGO_PKG_VERSION"), esc(s(r, "schema")));
    Ok(o)
}

fn cut(msg: &str) -> String {
    match msg.char_indices().nth(MAX_MESSAGE) {
        Some((at, _)) => format!(
            "{}\n… ({} more characters; the JSON report has them all)",
            &msg[..at],
            msg[at..].chars().count()
        ),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_markup_quotes_and_control_characters() {
        assert_eq!(
            esc(r#"<b a="1">&'x'</b>"#),
            "&lt;b a=&quot;1&quot;&gt;&amp;&#39;x&#39;&lt;/b&gt;"
        );
        assert_eq!(
            esc("a\nb\tc\0d\x1be\x7f"),
            "a\nb\tc\u{2400}d\u{241b}e\u{2421}"
        );
        assert_eq!(esc("naïve ✓"), "naïve ✓");
    }

    #[test]
    fn locations_and_labels() {
        assert_eq!(
            parse_location("/src/kv.c:25:put"),
            Some(("/src/kv.c", 25, "put"))
        );
        assert_eq!(
            parse_location("a.cc:7:ns::f(int)"),
            Some(("a.cc", 7, "ns::f(int)"))
        );
        assert_eq!(parse_location("/usr/bin/git+0x1f2a:main"), None);
        assert_eq!(parse_location("write(x) [no stack]"), None);
        assert_eq!(category_label("safe_rename"), "ordering: safe rename");
        assert_eq!(category_label("something_new"), "something_new");
        let v = json!({"kind": "ordering", "locations": ["a.c:1:f", "b.c:2:g"], "categories": ["safe_rename", "durability"]});
        assert_eq!(title(&v), "a.c:1:f must reach disk before b.c:2:g");
        assert_eq!(
            title(&json!({"kind": "atomicity", "locations": ["a.c:1:f"]})),
            "a.c:1:f is not atomic"
        );
        assert_eq!(
            title(&json!({"kind": "across_calls", "locations": ["a.c:1:f", "a.c:2:f"]})),
            "calls from a.c:1:f to a.c:2:f persist only together"
        );
        assert_eq!(
            title(&json!({"kind": "atomicity", "locations": ["x"], "title": "as written"})),
            "as written"
        );
        assert_eq!(categories_label(&v), "ordering: safe rename, durability");
        assert_eq!(
            shell_join(&[
                "python3".into(),
                "/x/check.py".into(),
                "a b".into(),
                "it's".into()
            ]),
            "python3 /x/check.py 'a b' 'it'\\''s'"
        );
    }

    fn report(msg: &str) -> Value {
        json!({
            "schema": "intact-report/1", "bundle": "b<&>", "checker": ["sh", "-c", "echo '<x>'"], "seconds": 1.25,
            "apms": [{"apm": "default", "explore": "alice", "micro_ops": 3, "units": 3, "calls": 2, "constructed": 5, "distinct": 4, "checked": 4, "failed": 1, "timeouts": 0, "complete": true, "seconds": 1.0},
                     {"apm": "ext4-o", "explore": "alice", "micro_ops": 3, "units": 2, "calls": 2, "constructed": 3, "distinct": 3, "checked": 0, "failed": 0, "timeouts": 0, "complete": true, "seconds": 0.0}],
            "static": [{"id": 1, "kind": "atomicity", "categories": ["append_truncate_atomicity"], "locations": ["src/a.c:3:put"], "apms": ["default"], "dynamic": [0],
                        "calls": [{"index": 1, "op": 1, "syscall": "write", "summary": "append    a<b>.log size 0 -> 7 \"x\" (inode 2)", "location": "src/a.c:3:put"}],
                        "example": {"state": "s9", "description": "op 1 write(a<b>.log); garbage", "checker_message": msg}}],
            "dynamic": [{"apm": "default", "kind": "atomicity", "category": "append_truncate_atomicity", "calls": [{"index": 1, "op": 1, "syscall": "write", "summary": "", "location": "src/a.c:3:put"}], "failing_states": 2, "example": {"state": "s9", "description": "d", "checker_message": msg}}],
            "timeouts": [{"state": "s4", "description": "first 1 of 2 calls", "checker_message": "timed out after 60 s"}]
        })
    }

    #[test]
    fn page_escapes_everything_and_shows_the_parts() {
        let r = report("</pre><script>alert('x')</script> & \"done\"");
        let src = |loc: &str| {
            (loc.starts_with("src/a.c")).then(|| {
                (1..=10)
                    .map(|i| format!("line {i} <tag> & stuff"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
        };
        let ctx = Context {
            report: &r,
            ops: None,
            source: &src,
            source_root: None,
        };
        let h = render(&ctx).unwrap();
        assert!(
            !h.contains("<script"),
            "raw markup from the checker must not reach the page"
        );
        assert!(h.contains(
            "&lt;/pre&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;done&quot;"
        ));
        assert!(
            h.contains("<code>b&lt;&amp;&gt;</code>")
                && h.contains("sh -c &#39;echo &#39;\\&#39;&#39;&lt;x&gt;&#39;\\&#39;&#39;&#39;"),
            "bundle and checker escaped"
        );
        // Source: lines 1..=6 (3 before 3 is 1), line 3 highlighted, escaped.
        assert!(h.contains("<span class=\"line hit\"><span class=\"ln\">3</span>line 3 &lt;tag&gt; &amp; stuff</span>"), "{h}");
        assert!(h.contains(">6</span>") && !h.contains(">7</span>line 7"));
        // One diagram, drawn from the calls (no bundle), said so; the label of the op.
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains("The bundle is not available") && h.contains(">torn<"));
        // APM table: default exposes 1, ext4-o 0; the timeout is listed.
        assert!(
            h.contains("<td class=\"num bad\">1</td>")
                && h.contains("<td class=\"num\">0</td></tr>")
        );
        assert!(h.contains("timed out after 60 s"));
        assert!(
            !h.contains("http://") && !h.contains("https://"),
            "self-contained"
        );
    }

    #[test]
    fn missing_source_and_lines_without_source() {
        let r = report("m");
        let none = |_: &str| None;
        let h = render(&Context {
            report: &r,
            ops: None,
            source: &none,
            source_root: None,
        })
        .unwrap();
        assert!(h.contains("source not available"));
        let short = |_: &str| Some("one line".to_string());
        let h = render(&Context {
            report: &r,
            ops: None,
            source: &short,
            source_root: None,
        })
        .unwrap();
        assert!(h.contains("source not available (the file has 1 lines)"));
        assert!(render(&Context {
            report: &json!([1]),
            ops: None,
            source: &none,
            source_root: None,
        })
        .is_err());
        let mut clean = report("m");
        clean["static"] = json!([]);
        clean["dynamic"] = json!([]);
        let h = render(&Context {
            report: &clean,
            ops: None,
            source: &none,
            source_root: None,
        })
        .unwrap();
        assert!(
            h.contains("No vulnerability found.") && !h.contains("<svg") && !h.contains("<nav>")
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let m = "x".repeat(MAX_MESSAGE + 5);
        assert!(cut(&m).ends_with("… (5 more characters; the JSON report has them all)"));
        assert_eq!(cut("short"), "short");
    }
}
