//! The warm-checker protocol: one long-lived checker process ("server") per worker judges
//! many crash states, so a checker with a costly start (an interpreter and its imports, a
//! JVM) pays it once per worker instead of once per state.
//!
//! The runner starts the server as `CHECKER...` (no further arguments) in its own process
//! group, stdin and stdout pipes, stderr to a file, `INTACT_WORKER` and
//! `INTACT_CHECKER_SERVER=1` set. For each state it
//! writes one request line and reads one reply line, both JSON objects:
//!
//! ```text
//! -> {"protocol":1,"crash_dir":"/dev/shm/…/w0/crash","stdout_file":"/dev/shm/…/w0/stdout","state":"s17","worker":0}
//! <- {"verdict":"pass"}
//! <- {"verdict":"fail","message":"row 3 is missing"}
//! ```
//!
//! The crash directory is fresh for every request and the server may modify it, as a
//! per-process checker may. Rules the runner enforces (docs/checkers.md has the user's view):
//! - a reply that takes longer than the time limit: the server's group is killed, the
//!   state counts as timed out, the next state gets a new server;
//! - the server dies while judging a state: a new server judges that state again, once
//!   (from a fresh crash directory when the job can be rebuilt); a second death is the
//!   verdict "inconsistent", as a per-process checker killed by a signal is;
//! - the server dies before it ever answered: it cannot be run at all (an error, not a
//!   verdict), as a checker that cannot start;
//! - a reply line that is not such an object: an error, and a new server.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::{fsutil, kill_group, spawn_failure, spawn_retrying, ChildGuard, CANCEL_POLL};

/// The protocol version sent in every request: a server may refuse versions it does not know.
pub const PROTOCOL_VERSION: u32 = 1;

/// How a checker is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// ALICE's contract: one process per state, `CHECKER <crash_dir> <stdout_file>`.
    #[default]
    PerProcess,
    /// One warm server per worker, one JSON line per state each way (this module).
    Server,
}

/// What a server said, or why it said nothing.
pub(crate) enum Answer {
    Pass,
    Fail(String),
    TimedOut(Duration),
    Cancelled,
    /// It died (or closed its stdout) before replying: how, with its stderr's tail.
    Died(String),
    /// It replied with something that is not a verdict.
    Garbled(String),
}

/// What one server needs to start, per worker.
pub(crate) struct ServerSpec<'a> {
    pub program: &'a Path,
    pub arg0: &'a str,
    pub args: &'a [String],
    pub worker: usize,
    pub err_capture: &'a Path,
    pub keep_bytes: usize,
}

/// One request: where the state is, which state, which worker.
pub(crate) struct Request<'a> {
    pub crash_dir: &'a Path,
    pub stdout_file: &'a Path,
    pub state: &'a str,
    pub worker: usize,
}

/// A running server; dropping it kills its whole process group and reaps it.
pub(crate) struct Server {
    guard: ChildGuard,
    stdin: ChildStdin,
    /// Reply lines read by a reader thread (a blocking read cannot be given a time limit);
    /// disconnected once the server closes its stdout.
    replies: Receiver<std::io::Result<String>>,
    err_capture: PathBuf,
    keep_bytes: usize,
    /// Replies received: 0 means a death is the server's fault, not a state's.
    answered: u64,
}

impl Server {
    pub fn start(spec: &ServerSpec) -> Result<Server, String> {
        let err = File::create(spec.err_capture).map_err(|e| {
            format!(
                "cannot create {} for the checker server's stderr: {e}",
                spec.err_capture.display()
            )
        })?;
        let mut cmd = Command::new(spec.program);
        cmd.arg0(spec.arg0)
            .args(spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .env("INTACT_WORKER", spec.worker.to_string())
            // So one script can serve both contracts (python/intact/checker.py).
            .env("INTACT_CHECKER_SERVER", "1")
            .process_group(0);
        let mut child = spawn_retrying(&mut cmd).map_err(|e| spawn_failure(spec.program, &e))?;
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let guard = ChildGuard { child, pgid };
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err("the checker server's pipes were not set up".into());
        };
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("intact-check-s{}", spec.worker))
            .spawn(move || read_lines(BufReader::new(stdout), tx))
            .map_err(|e| format!("cannot start a reader thread for the checker server: {e}"))?;
        Ok(Server {
            guard,
            stdin,
            replies,
            err_capture: spec.err_capture.to_path_buf(),
            keep_bytes: spec.keep_bytes,
            answered: 0,
        })
    }

    /// Whether this server has answered at least one request.
    pub fn has_answered(&self) -> bool {
        self.answered > 0
    }

    /// Sends one request and waits for its reply, within `limit` and while not cancelled.
    pub fn ask(
        &mut self,
        req: &Request,
        limit: Option<Duration>,
        cancelled: &AtomicBool,
    ) -> Answer {
        let line = request_line(req);
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        if let Err(e) = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
        {
            return Answer::Died(self.death(&format!("writing the request failed: {e}")));
        }
        let start = Instant::now();
        loop {
            if cancelled.load(Ordering::SeqCst) {
                return Answer::Cancelled;
            }
            let slice = match limit {
                Some(limit) if start.elapsed() >= limit => return Answer::TimedOut(limit),
                Some(limit) => (limit - start.elapsed()).min(CANCEL_POLL),
                None => CANCEL_POLL,
            };
            match self.replies.recv_timeout(slice) {
                Ok(Ok(reply)) => return self.judge(&reply),
                Ok(Err(e)) => return Answer::Died(self.death(&format!("reading failed: {e}"))),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Answer::Died(self.death("it closed its stdout"))
                }
            }
        }
    }

    fn judge(&mut self, reply: &str) -> Answer {
        let answer = parse_reply(reply, self.keep_bytes);
        if matches!(answer, Answer::Pass | Answer::Fail(_)) {
            self.answered += 1;
        }
        answer
    }

    /// How the server ended: its exit status (after killing what is left of its group) and
    /// the tail of its stderr.
    fn death(&mut self, what: &str) -> String {
        kill_group(self.guard.pgid);
        let status = match self.guard.child.wait() {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit status {c}"),
                (_, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("{s}"),
            },
            Err(e) => format!("status unknown: {e}"),
        };
        let err = fsutil::read_tail(&self.err_capture, self.keep_bytes);
        let err = err.trim();
        if err.is_empty() {
            format!("{what}; {status}, no stderr")
        } else {
            format!("{what}; {status}; its stderr ends: {err}")
        }
    }
}

fn read_lines(
    mut from: BufReader<std::process::ChildStdout>,
    to: mpsc::Sender<std::io::Result<String>>,
) {
    loop {
        let mut line = String::new();
        match from.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) => {
                if to.send(Ok(line)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = to.send(Err(e));
                return;
            }
        }
    }
}

fn request_line(req: &Request) -> String {
    let value = serde_json::json!({
        "protocol": PROTOCOL_VERSION,
        "crash_dir": req.crash_dir.to_string_lossy(),
        "stdout_file": req.stdout_file.to_string_lossy(),
        "state": req.state,
        "worker": req.worker,
    });
    format!("{value}\n")
}

/// `{"verdict":"pass"}` or `{"verdict":"fail","message":…}`; anything else is garbled.
fn parse_reply(line: &str, keep_bytes: usize) -> Answer {
    let shown = || fsutil::tail_of(line.trim(), keep_bytes.min(200));
    let Ok(serde_json::Value::Object(reply)) = serde_json::from_str(line) else {
        return Answer::Garbled(format!(
            "the checker server replied {:?}, which is not a JSON object on one line (does it print to stdout? the protocol owns it)",
            shown()
        ));
    };
    let message = reply
        .get("message")
        .and_then(|m| m.as_str())
        .map(|m| fsutil::tail_of(m, keep_bytes))
        .unwrap_or_default();
    match reply.get("verdict").and_then(|v| v.as_str()) {
        Some("pass") => Answer::Pass,
        Some("fail") => Answer::Fail(message),
        _ => Answer::Garbled(format!(
            "the checker server replied {:?}: \"verdict\" must be \"pass\" or \"fail\"",
            shown()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_parsed_strictly() {
        assert!(matches!(
            parse_reply("{\"verdict\":\"pass\"}\n", 100),
            Answer::Pass
        ));
        match parse_reply("{\"verdict\":\"fail\",\"message\":\"row 3\"}", 100) {
            Answer::Fail(m) => assert_eq!(m, "row 3"),
            _ => panic!("a fail reply"),
        }
        for bad in [
            "",
            "pass",
            "{\"verdict\":true}",
            "[1]",
            "{\"verdict\":\"ok\"}",
        ] {
            assert!(
                matches!(parse_reply(bad, 100), Answer::Garbled(_)),
                "{bad:?} must be garbled"
            );
        }
    }

    #[test]
    fn a_request_is_one_json_line() {
        let req = Request {
            crash_dir: Path::new("/x/crash\ndir"),
            stdout_file: Path::new("/x/stdout"),
            state: "s1",
            worker: 3,
        };
        let line = request_line(&req);
        assert_eq!(line.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["crash_dir"], "/x/crash\ndir");
        assert_eq!(v["worker"], 3);
        assert_eq!(v["protocol"], PROTOCOL_VERSION);
    }
}
