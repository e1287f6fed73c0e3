//! `intact check-unit --serve`: many work units through one process, so that a worker
//! reads and hashes the bundle once, builds each APM's prefix states once, and keeps one
//! checker runner — with `--checker-server`, one warm checker server — for all its units.
//!
//! The protocol (python/intact/dask_run.py speaks it): one request per line on stdin,
//! `{"unit": PATH, "out": PATH}`; for each, exactly one reply line on stdout, after the
//! verdict file is written whole (or, on an error, not at all):
//!
//! ```text
//! -> {"unit":"/w/units/s3.json","out":"/w/verdicts/s3.json"}
//! <- {"ok":true}
//! <- {"ok":false,"code":2,"error":"unit /w/units/s3.json: ..."}
//! ```
//!
//! `code` is the exit status the one-shot `intact check-unit` would have had: 2 for a bad
//! request, unit, bundle or checker, 3 for intact's own failure. Until EOF; an interrupt
//! (or the parent's death with --exit-with-parent) ends the process with no reply to the
//! request in progress and no verdict written for it.

use crate::units::{exit_with_parent, UnitChecker};
use crate::{Error, Kind};
use serde::Deserialize;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// What `intact check-unit --serve` needs: everything but the units.
pub struct ServeJob {
    /// The bundle every unit must have been emitted from.
    pub bundle: PathBuf,
    /// INTACT_WORKER for the checker, for the whole life of the process.
    pub worker: usize,
    /// Where to build the crash states.
    pub scratch: Option<PathBuf>,
    /// Stop (as on an interrupt) when the parent process dies.
    pub exit_with_parent: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    unit: PathBuf,
    out: PathBuf,
}

/// Answers requests from `input` on `output` until EOF. Errors: reading or writing the
/// protocol's streams failed, or an interrupt.
pub fn serve_units(
    a: ServeJob,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), Error> {
    if a.exit_with_parent {
        exit_with_parent();
    }
    let mut checker = UnitChecker::new(a.bundle, a.worker, a.scratch);
    let r = serve_loop(&mut checker, input, output);
    checker.finish();
    r
}

fn serve_loop(
    checker: &mut UnitChecker,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), Error> {
    let mut line = Vec::new();
    for number in 1.. {
        if crate::interrupted() {
            return Err(Error::interrupted("interrupted: no verdict written"));
        }
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::input(format!("--serve: reading request {number}: {e}")))?;
        if n == 0 {
            break;
        }
        let result = parse_request(&line, number).and_then(|r| checker.check(&r.unit, &r.out));
        if let Err(e) = &result {
            if e.kind == Kind::Interrupted {
                return result;
            }
        }
        let reply = reply_line(&result);
        assert!(reply.ends_with('\n') && reply.matches('\n').count() == 1);
        output
            .write_all(reply.as_bytes())
            .and_then(|()| output.flush())
            .map_err(|e| Error::input(format!("--serve: writing reply {number}: {e}")))?;
    }
    Ok(())
}

fn parse_request(line: &[u8], number: u64) -> Result<Request, Error> {
    // Through a Value: serde would also take a struct from a JSON array.
    let parsed = serde_json::from_slice::<serde_json::Value>(line).and_then(|v| match v {
        serde_json::Value::Object(_) => serde_json::from_value(v),
        _ => Err(serde::de::Error::custom("not a JSON object")),
    });
    parsed.map_err(|e| {
        let shown = String::from_utf8_lossy(line);
        let shown: String = shown.trim_end().chars().take(200).collect();
        Error::input(format!(
            "--serve: request {number} {shown:?} is not {{\"unit\": PATH, \"out\": PATH}} on one line: {e}"
        ))
    })
}

/// `{"ok":true}`, or the error with the exit status a one-shot check-unit would have had.
fn reply_line(result: &Result<(), Error>) -> String {
    let value = match result {
        Ok(()) => serde_json::json!({"ok": true}),
        Err(e) => {
            let code = match e.kind {
                Kind::Input => 2,
                Kind::Internal | Kind::Interrupted => 3,
            };
            serde_json::json!({"ok": false, "code": code, "error": e.message})
        }
    };
    format!("{value}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_strictly() {
        let r = parse_request(b"{\"unit\":\"/u\",\"out\":\"/o\"}\n", 1).unwrap();
        assert_eq!((r.unit, r.out), (PathBuf::from("/u"), PathBuf::from("/o")));
        for bad in [
            &b""[..],
            b"\n",
            b"{\"unit\":\"/u\"}",
            b"{\"unit\":\"/u\",\"out\":\"/o\",\"x\":1}",
            b"[\"/u\",\"/o\"]",
            b"\xff\xfe\n",
        ] {
            let e = parse_request(bad, 7).err().expect("refused");
            assert_eq!(e.kind, Kind::Input);
            assert!(e.message.contains("request 7"), "{}", e.message);
        }
    }

    #[test]
    fn a_reply_is_one_json_line() {
        assert_eq!(reply_line(&Ok(())), "{\"ok\":true}\n");
        let line = reply_line(&Err(Error::internal("two\nlines")));
        assert_eq!(line.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (v["ok"].as_bool(), v["code"].as_u64()),
            (Some(false), Some(3))
        );
        assert_eq!(v["error"], "two\nlines");
    }

    #[test]
    fn a_bad_request_is_answered_and_the_next_one_read() {
        let mut input = &b"not json\n{\"unit\":\"/nonexistent/u.json\",\"out\":\"/tmp/x\"}\n"[..];
        let mut output = Vec::new();
        let mut checker = UnitChecker::new(PathBuf::from("/nonexistent-bundle"), 0, None);
        serve_loop(&mut checker, &mut input, &mut output).unwrap();
        let replies: Vec<serde_json::Value> = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(replies.len(), 2, "one reply per request");
        for r in &replies {
            assert_eq!(
                (r["ok"].as_bool(), r["code"].as_u64()),
                (Some(false), Some(2))
            );
        }
        assert!(replies[1]["error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/u.json"));
    }
}
