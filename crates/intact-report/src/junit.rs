//! The report as JUnit XML (CI test-result viewers): one test suite per APM, one test case
//! per APM and static vulnerability, failing where that APM exposes it. The shape is
//! documented in docs/report.md, "SARIF and JUnit"; it validates against the JUnit XSD
//! that Jenkins' xunit plugin and pytest use (junit-10.xsd).

use crate::sarif::{categories_label, s, strings, title};
use crate::Context;
use serde_json::Value;

/// Escapes text for XML 1.0 element content and attribute values (both quoted with `"`).
/// Characters XML 1.0 cannot carry at all (control characters other than tab, newline and
/// carriage return, U+FFFE, U+FFFF) become `\xNN` / `\u{NNNN}` text. In attributes, tab,
/// newline and carriage return become character references so that they survive
/// attribute-value normalisation.
pub(crate) fn escape(text: &str, attribute: bool) -> String {
    let mut o = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' if attribute => o.push_str("&quot;"),
            '\'' if attribute => o.push_str("&apos;"),
            '\n' if attribute => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            '\t' if attribute => o.push_str("&#9;"),
            '\t' | '\n' => o.push(ch),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{FFFE}' | '\u{FFFF}' => o.push_str(&format!("\\u{{{:x}}}", ch as u32)),
            c => o.push(c),
        }
    }
    o
}

/// Seconds as JUnit writes them (Surefire's pattern: at most three decimals).
fn secs(v: &Value) -> String {
    format!("{:.3}", v.as_f64().unwrap_or(0.0).max(0.0))
}

fn attr(name: &str, value: &str) -> String {
    format!(" {name}=\"{}\"", escape(value, true))
}

/// The static vulnerability's block of the text report.
fn details(st: &Value) -> String {
    let mut o = format!("#{} [{}] {}\n", st["id"], categories_label(st), title(st));
    let ndyn = st["dynamic"].as_array().map(Vec::len).unwrap_or(0);
    o.push_str(&format!(
        "APMs: {}   dynamic vulnerabilities: {ndyn}\n",
        strings(&st["apms"]).join(", ")
    ));
    for c in st["calls"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        o.push_str(&format!(
            "call {:>3} op {:>4}  {}  @ {}\n",
            c["index"],
            c["op"],
            s(&c["summary"]),
            s(&c["location"])
        ));
    }
    let ex = &st["example"];
    o.push_str(&format!(
        "example state {}: {}\n",
        s(&ex["state"]),
        s(&ex["description"])
    ));
    let said = s(&ex["checker_message"]);
    if !said.is_empty() {
        o.push_str("checker said:\n");
        for l in said.lines() {
            o.push_str(&format!("  | {l}\n"));
        }
    }
    o
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
    let apms: &[Value] = r["apms"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut suites = String::new();
    let (mut all_tests, mut all_failures) = (0usize, 0usize);
    for a in apms {
        let apm = s(&a["apm"]);
        let class = format!("intact.{apm}");
        let exposed: Vec<&Value> = statics
            .iter()
            .filter(|st| strings(&st["apms"]).iter().any(|x| x == apm))
            .collect();
        let tests = statics.len() + usize::from(exposed.is_empty());
        all_tests += tests;
        all_failures += exposed.len();
        suites.push_str(&format!(
            "  <testsuite{}{}{}{}{}{}>\n",
            attr("name", &class),
            attr("tests", &tests.to_string()),
            attr("failures", &exposed.len().to_string()),
            attr("errors", "0"),
            attr("skipped", "0"),
            attr("time", &secs(&a["seconds"])),
        ));
        suites.push_str("    <properties>\n");
        for key in [
            "explore",
            "calls",
            "micro_ops",
            "units",
            "constructed",
            "distinct",
            "checked",
            "failed",
            "timeouts",
            "complete",
        ] {
            let v = match &a[key] {
                Value::String(t) => t.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            suites.push_str(&format!(
                "      <property{}{}/>\n",
                attr("name", key),
                attr("value", &v)
            ));
        }
        suites.push_str("    </properties>\n");
        for st in statics {
            let name = format!("#{} {}", st["id"], title(st));
            let fails = exposed.iter().any(|e| std::ptr::eq(*e, st));
            if !fails {
                suites.push_str(&format!(
                    "    <testcase{}{}/>\n",
                    attr("classname", &class),
                    attr("name", &name)
                ));
                continue;
            }
            let ex = &st["example"];
            let said = s(&ex["checker_message"]);
            let message = if said.is_empty() {
                format!("example state {} fails the checker", s(&ex["state"]))
            } else {
                said.to_string()
            };
            let cats = strings(&st["categories"]);
            suites.push_str(&format!(
                "    <testcase{}{}>\n",
                attr("classname", &class),
                attr("name", &name)
            ));
            suites.push_str(&format!(
                "      <failure{}{}>{}</failure>\n",
                attr("message", &message),
                attr(
                    "type",
                    cats.first()
                        .map(String::as_str)
                        .unwrap_or("crash_vulnerability")
                ),
                escape(&details(st), false)
            ));
            suites.push_str("    </testcase>\n");
        }
        if exposed.is_empty() {
            suites.push_str(&format!(
                "    <testcase{}{}{}/>\n",
                attr("classname", &class),
                attr("name", "no crash vulnerability"),
                attr("time", &secs(&a["seconds"]))
            ));
        }
        let line = format!(
            "APM {apm} explore {}: {} calls, {} micro-ops in {} units; {} states built, {} distinct, {} checked here: {} failed, {} timed out{}",
            s(&a["explore"]),
            a["calls"],
            a["micro_ops"],
            a["units"],
            a["constructed"],
            a["distinct"],
            a["checked"],
            a["failed"],
            a["timeouts"],
            if a["complete"] == Value::Bool(false) { "; search cut by --max-states" } else { "" }
        );
        suites.push_str(&format!(
            "    <system-out>{}</system-out>\n",
            escape(&line, false)
        ));
        suites.push_str("  </testsuite>\n");
    }
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    o.push_str(&format!(
        "<testsuites{}{}{}{}{}>\n",
        attr("name", "intact"),
        attr("tests", &all_tests.to_string()),
        attr("failures", &all_failures.to_string()),
        attr("errors", "0"),
        attr("time", &secs(&r["seconds"])),
    ));
    o.push_str(&suites);
    o.push_str("</testsuites>\n");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape("a<b>&\"c'", false), "a&lt;b&gt;&amp;\"c'");
        assert_eq!(escape("a<b>&\"c'", true), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("x\ny\tz\r", true), "x&#10;y&#9;z&#13;");
        assert_eq!(escape("x\ny\tz\r", false), "x\ny\tz&#13;");
        assert_eq!(
            escape("\u{0}\u{1b}\u{FFFF}é", false),
            "\\x00\\x1b\\u{ffff}é"
        );
    }

    #[test]
    fn times() {
        assert_eq!(secs(&serde_json::json!(23.07135044)), "23.071");
        assert_eq!(secs(&serde_json::json!(0.000322507)), "0.000");
        assert_eq!(secs(&Value::Null), "0.000");
    }
}
