//! End-to-end tests with small shell-script checkers written at test time.
//! Timeouts in here are only "did not hang" guards.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use intact_runner::{Cancelled, Job, Outcome, Runner, RunnerConfig, RunnerError, Verdict};

/// Generous guard for anything that should happen "soon".
const GUARD: Duration = Duration::from_secs(10);

struct Env {
    /// Scripts, pid files, markers: outside the crash dirs.
    dir: tempfile::TempDir,
    /// Scratch parent, so leftovers can be detected.
    scratch: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn script(&self, name: &str, body: &str) -> String {
        let p = self.path(name);
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn config(&self, checker: Vec<String>, jobs: usize, timeout: Option<Duration>) -> RunnerConfig {
        RunnerConfig {
            checker,
            jobs,
            timeout,
            scratch_parent: Some(self.scratch.path().to_path_buf()),
            keep_output_bytes: 8192,
            protocol: intact_runner::Protocol::PerProcess,
        }
    }

    fn assert_scratch_clean(&self) {
        let left: Vec<_> = fs::read_dir(self.scratch.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "scratch leftovers: {left:?}");
    }
}

fn job(id: u64, state: &str, stdout: &str, files: &[(&str, &str)]) -> Job {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    Job {
        id,
        state_id: state.to_string(),
        stdout: stdout.as_bytes().to_vec(),
        materialise: Box::new(move |dir: &Path| {
            for (name, content) in &files {
                fs::write(dir.join(name), content).map_err(|e| e.to_string())?;
            }
            Ok(())
        }),
        release: None,
        patch: None,
    }
}

fn sorted(mut v: Vec<Outcome>) -> Vec<Outcome> {
    v.sort_by_key(|o| o.id);
    v
}

/// Dead = no /proc entry, or a zombie (our container's PID 1 may not reap
/// orphans, and a zombie is harmless).
fn is_dead(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // State is the field after the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            matches!(state, Some('Z') | Some('X') | None)
        }
    }
}

fn wait_dead(pid: u32) {
    let t = Instant::now();
    while !is_dead(pid) {
        assert!(t.elapsed() < GUARD, "process {pid} still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_file(p: &Path) -> String {
    let t = Instant::now();
    loop {
        if let Ok(s) = fs::read_to_string(p) {
            if s.ends_with('\n') {
                return s;
            }
        }
        assert!(t.elapsed() < GUARD, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_pid(p: &Path) -> u32 {
    wait_file(p).trim().parse().unwrap()
}

/// Runs `f` on a thread and fails the test if it does not return within GUARD.
fn guarded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(GUARD)
        .unwrap_or_else(|_| panic!("{what} hung"))
}

#[test]
fn pass_and_fail_with_captured_output() {
    let env = Env::new();
    let checker = env.script(
        "check",
        r#"if [ "$INTACT_STATE" = good ]; then exit 0; fi
echo "some stdout"
echo "state $INTACT_STATE is inconsistent" >&2
exit 1"#,
    );
    let r = Runner::start(env.config(vec![checker], 1, Some(GUARD))).unwrap();
    let root = r.scratch_root().unwrap().to_path_buf();
    assert!(root
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("intact-check."));
    r.submit(job(1, "good", "", &[])).unwrap();
    r.submit(job(2, "bad", "", &[])).unwrap();
    let out = sorted(r.finish());
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].verdict, Verdict::Pass);
    assert_eq!(
        out[1].verdict,
        Verdict::Fail {
            code: Some(1),
            signal: None,
            stderr: "state bad is inconsistent\n".into(),
            stdout: "some stdout\n".into(),
        }
    );
    assert!(!root.exists());
    env.assert_scratch_clean();
}

#[test]
fn killed_by_signal_is_fail() {
    let env = Env::new();
    let checker = env.script("check", "kill -9 $$");
    let r = Runner::start(env.config(vec![checker], 1, Some(GUARD))).unwrap();
    r.submit(job(1, "s", "", &[])).unwrap();
    let out = r.finish();
    assert!(
        matches!(
            out[0].verdict,
            Verdict::Fail {
                code: None,
                signal: Some(9),
                ..
            }
        ),
        "{:?}",
        out[0].verdict
    );
}

#[test]
fn output_keeps_tail() {
    let env = Env::new();
    let checker = env.script(
        "check",
        r#"i=0; while [ $i -lt 500 ]; do echo "line $i padding padding" >&2; i=$((i+1)); done
echo END >&2; exit 3"#,
    );
    let mut cfg = env.config(vec![checker], 1, Some(GUARD));
    cfg.keep_output_bytes = 100;
    let r = Runner::start(cfg).unwrap();
    r.submit(job(1, "s", "", &[])).unwrap();
    let out = r.finish();
    match &out[0].verdict {
        Verdict::Fail {
            code: Some(3),
            stderr,
            stdout,
            ..
        } => {
            assert!(stderr.len() <= 100, "{}", stderr.len());
            assert!(stderr.ends_with("END\n"), "{stderr:?}");
            assert!(stdout.is_empty());
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn env_vars_and_arguments_seen() {
    let env = Env::new();
    // Fixed leading argument (the report file), resolved through PATH ("sh").
    let script = env.script(
        "check",
        r#"report="$1"; shift
printf '%s|%s|%s|%s|%s\n' "$INTACT_WORKER" "$INTACT_STATE" "$#" "$1" "$2" > "$report""#,
    );
    let report = env.path("report");
    let r = Runner::start(env.config(
        vec!["sh".into(), script, report.to_str().unwrap().into()],
        1,
        Some(GUARD),
    ))
    .unwrap();
    let root = r.scratch_root().unwrap().to_path_buf();
    r.submit(job(7, "state-42", "", &[])).unwrap();
    let out = r.finish();
    assert_eq!(
        out,
        vec![Outcome {
            id: 7,
            verdict: Verdict::Pass,
            elapsed: out[0].elapsed,
            worker: 0
        }]
    );
    let s = fs::read_to_string(report).unwrap();
    let f: Vec<&str> = s.trim_end().split('|').collect();
    assert_eq!(f[0], "0");
    assert_eq!(f[1], "state-42");
    assert_eq!(f[2], "2", "crash dir and stdout file appended");
    assert_eq!(Path::new(f[3]), root.join("w0/crash"));
    assert_eq!(Path::new(f[4]), root.join("w0/stdout"));
}

#[test]
fn stdout_file_and_crash_dir_reach_checker_and_dir_is_fresh() {
    let env = Env::new();
    // Each run must see exactly the materialised file, then litters the dir.
    let checker = env.script(
        "check",
        r#"[ "$(cat "$1/data")" = "hello $INTACT_STATE" ] || { echo "bad data" >&2; exit 1; }
[ "$(cat "$2")" = "printed $INTACT_STATE" ] || { echo "bad stdout" >&2; exit 1; }
[ "$(ls -A "$1")" = data ] || { echo "crash dir not fresh: $(ls -A "$1")" >&2; exit 1; }
mkdir "$1/junk"; echo x > "$1/junk/f"; echo garbage > "$2""#,
    );
    let r = Runner::start(env.config(vec![checker], 1, Some(GUARD))).unwrap();
    for i in 0..3u64 {
        let s = format!("s{i}");
        r.submit(job(
            i,
            &s,
            &format!("printed {s}\n"),
            &[("data", &format!("hello {s}\n"))],
        ))
        .unwrap();
    }
    let out = r.finish();
    assert_eq!(out.len(), 3);
    for o in out {
        assert_eq!(o.verdict, Verdict::Pass, "job {}", o.id);
    }
    env.assert_scratch_clean();
}

#[test]
fn timeout_kills_whole_group() {
    let env = Env::new();
    let pids = env.path("pids");
    let checker = env.script(
        "check",
        r#"report="$1"; sleep 30 & echo "$$ $!" > "$report"; sleep 30"#,
    );
    let r = Runner::start(env.config(
        vec![checker, pids.to_str().unwrap().into()],
        1,
        Some(Duration::from_millis(500)),
    ))
    .unwrap();
    r.submit(job(1, "s", "", &[])).unwrap();
    let out = guarded("finish after timeout", move || r.finish());
    assert_eq!(
        out[0].verdict,
        Verdict::Timeout {
            after: Duration::from_millis(500)
        }
    );
    let s = fs::read_to_string(&pids).unwrap();
    for pid in s.split_whitespace() {
        wait_dead(pid.parse().unwrap());
    }
    env.assert_scratch_clean();
}

#[test]
fn normal_exit_kills_background_leftovers() {
    let env = Env::new();
    let pidfile = env.path("pid");
    let checker = env.script(
        "check",
        r#"report="$1"; sleep 30 & echo $! > "$report"; exit 0"#,
    );
    let r = Runner::start(env.config(
        vec![checker, pidfile.to_str().unwrap().into()],
        1,
        Some(GUARD),
    ))
    .unwrap();
    r.submit(job(1, "s", "", &[])).unwrap();
    let out = guarded("finish", move || r.finish());
    assert_eq!(out[0].verdict, Verdict::Pass);
    wait_dead(read_pid(&pidfile));
}

#[test]
fn read_only_crash_dir_is_cleaned() {
    let env = Env::new();
    let checker = env.script(
        "check",
        r#"[ -z "$(ls -A "$1")" ] || { echo "not empty" >&2; exit 1; }
touch "$1/ok" || exit 1
mkdir -p "$1/sub/deeper"; echo x > "$1/sub/deeper/f"
chmod -R a-w "$1"; chmod a-rx "$1/sub""#,
    );
    let r = Runner::start(env.config(vec![checker], 1, Some(GUARD))).unwrap();
    let root = r.scratch_root().unwrap().to_path_buf();
    for i in 0..3 {
        r.submit(job(i, "s", "", &[])).unwrap();
    }
    let out = r.finish();
    assert_eq!(out.len(), 3);
    for o in &out {
        assert_eq!(o.verdict, Verdict::Pass, "{o:?}");
    }
    assert!(
        !root.exists(),
        "scratch root {} left behind",
        root.display()
    );
    env.assert_scratch_clean();
}

#[test]
fn start_errors() {
    let env = Env::new();
    let e =
        Runner::start(env.config(vec!["intact-no-such-checker-xyz".into()], 1, None)).unwrap_err();
    assert!(matches!(e, RunnerError::CheckerNotFound { .. }), "{e}");
    assert!(e.to_string().contains("intact-no-such-checker-xyz"), "{e}");
    assert!(e.to_string().contains("PATH"), "{e}");

    let missing = env.path("missing.sh");
    let e = Runner::start(env.config(vec![missing.to_str().unwrap().into()], 1, None)).unwrap_err();
    assert!(matches!(e, RunnerError::CheckerNotFound { .. }), "{e}");

    let noexec = env.path("noexec.sh");
    fs::write(&noexec, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&noexec, fs::Permissions::from_mode(0o644)).unwrap();
    let e = Runner::start(env.config(vec![noexec.to_str().unwrap().into()], 1, None)).unwrap_err();
    assert!(matches!(e, RunnerError::CheckerNotExecutable { .. }), "{e}");
    assert!(e.to_string().contains("chmod +x"), "{e}");

    let e = Runner::start(env.config(vec![env.dir.path().to_str().unwrap().into()], 1, None))
        .unwrap_err();
    assert!(matches!(e, RunnerError::CheckerNotExecutable { .. }), "{e}");

    let e = Runner::start(env.config(vec![], 1, None)).unwrap_err();
    assert!(matches!(e, RunnerError::EmptyChecker), "{e}");

    let e = Runner::start(env.config(vec!["sh".into(), "a\0b".into()], 1, None)).unwrap_err();
    assert!(matches!(e, RunnerError::NulInChecker { index: 1 }), "{e}");

    let e = Runner::start(env.config(vec!["true".into()], 0, None)).unwrap_err();
    assert!(matches!(e, RunnerError::ZeroJobs), "{e}");

    let mut cfg = env.config(vec!["true".into()], 1, None);
    let bad_parent = env.path("no/such/parent");
    cfg.scratch_parent = Some(bad_parent.clone());
    let e = Runner::start(cfg).unwrap_err();
    assert!(matches!(e, RunnerError::Scratch { .. }), "{e}");
    assert!(e.to_string().contains(bad_parent.to_str().unwrap()), "{e}");

    env.assert_scratch_clean();
}

#[test]
fn default_scratch_parent_works() {
    let env = Env::new();
    let mut cfg = env.config(vec!["true".into()], 1, Some(GUARD));
    cfg.scratch_parent = None;
    let r = Runner::start(cfg).unwrap();
    let root = r.scratch_root().unwrap().to_path_buf();
    r.submit(job(1, "s", "", &[])).unwrap();
    assert_eq!(r.finish()[0].verdict, Verdict::Pass);
    assert!(!root.exists());
}

#[test]
fn materialise_failure_is_error_and_worker_continues() {
    let env = Env::new();
    let r = Runner::start(env.config(vec!["true".into()], 1, Some(GUARD))).unwrap();
    r.submit(Job {
        id: 1,
        state_id: "s".into(),
        stdout: vec![],
        materialise: Box::new(|_| Err("boom: cannot build state".into())),
        release: None,
        patch: None,
    })
    .unwrap();
    r.submit(Job {
        id: 2,
        state_id: "s".into(),
        stdout: vec![],
        materialise: Box::new(|_| panic!("materialiser bug")),
        release: None,
        patch: None,
    })
    .unwrap();
    r.submit(job(3, "s", "", &[("f", "x")])).unwrap();
    let out = sorted(guarded("finish", move || r.finish()));
    assert_eq!(out.len(), 3);
    match &out[0].verdict {
        Verdict::Error(m) => assert!(m.contains("boom: cannot build state"), "{m}"),
        v => panic!("{v:?}"),
    }
    match &out[1].verdict {
        Verdict::Error(m) => assert!(m.contains("materialiser bug"), "{m}"),
        v => panic!("{v:?}"),
    }
    assert_eq!(out[0].elapsed, Duration::ZERO);
    assert_eq!(out[2].verdict, Verdict::Pass);
    env.assert_scratch_clean();
}

#[test]
fn cancel_kills_running_checker_and_drops_queue() {
    let env = Env::new();
    let pidfile = env.path("pids");
    let checker = env.script(
        "check",
        r#"report="$1"; sleep 30 & echo "$$ $!" > "$report"; wait"#,
    );
    let r = Runner::start(env.config(
        vec![checker, pidfile.to_str().unwrap().into()],
        1,
        None, // no time limit: only cancel can stop it
    ))
    .unwrap();
    let root = r.scratch_root().unwrap().to_path_buf();
    let cancel = r.cancel_handle();
    r.submit(job(1, "s", "", &[])).unwrap();
    let pids = wait_file(&pidfile);

    let queued_ran = Arc::new(AtomicBool::new(false));
    let flag = queued_ran.clone();
    r.submit(Job {
        id: 2,
        state_id: "s".into(),
        stdout: vec![],
        materialise: Box::new(move |_| {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        }),
        release: None,
        patch: None,
    })
    .unwrap();

    assert!(!cancel.is_cancelled());
    cancel.cancel();
    assert!(cancel.is_cancelled());
    assert_eq!(r.submit(job(3, "s", "", &[])), Err(Cancelled));
    let out = guarded("finish after cancel", move || r.finish());
    assert!(out.is_empty(), "cancelled jobs produce no outcome: {out:?}");
    assert!(
        !queued_ran.load(Ordering::SeqCst),
        "queued job must be dropped"
    );
    for pid in pids.split_whitespace() {
        wait_dead(pid.parse().unwrap());
    }
    assert!(!root.exists());
    env.assert_scratch_clean();
}

#[test]
fn cancel_unblocks_full_submit() {
    let env = Env::new();
    let pidfile = env.path("pid");
    let checker = env.script("check", r#"echo $$ > "$1"; exec sleep 30"#);
    let r = Arc::new(
        Runner::start(env.config(vec![checker, pidfile.to_str().unwrap().into()], 1, None))
            .unwrap(),
    );
    r.submit(job(1, "s", "", &[])).unwrap();
    let pid = read_pid(&pidfile);
    // Worker busy; capacity is 2 * jobs = 2.
    r.submit(job(2, "s", "", &[])).unwrap();
    r.submit(job(3, "s", "", &[])).unwrap();
    let (tx, rx) = mpsc::channel();
    let r2 = r.clone();
    std::thread::spawn(move || {
        let res = r2.submit(job(4, "s", "", &[]));
        drop(r2); // before sending, so the main thread is sole owner afterwards
        let _ = tx.send(res);
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "submit should block on a full queue"
    );
    r.cancel_handle().cancel();
    assert_eq!(
        rx.recv_timeout(GUARD)
            .expect("submit still blocked after cancel"),
        Err(Cancelled)
    );
    let r = Arc::try_unwrap(r).expect("sole owner");
    guarded("finish", move || r.finish());
    wait_dead(pid);
}

#[test]
fn drop_without_finish_cleans_up() {
    let env = Env::new();
    let pidfile = env.path("pid");
    let checker = env.script("check", r#"echo $$ > "$1"; exec sleep 30"#);
    let r = Runner::start(env.config(vec![checker, pidfile.to_str().unwrap().into()], 2, None))
        .unwrap();
    let root = r.scratch_root().unwrap().to_path_buf();
    r.submit(job(1, "s", "", &[])).unwrap();
    let pid = read_pid(&pidfile);
    guarded("drop", move || drop(r));
    wait_dead(pid);
    assert!(!root.exists());
    env.assert_scratch_clean();
}

#[test]
fn two_jobs_run_concurrently() {
    let env = Env::new();
    let markers = env.path("markers");
    fs::create_dir(&markers).unwrap();
    // Each checker announces itself and waits for the other: only passes if
    // both run at the same time (otherwise the 10 s limit fires).
    let checker = env.script(
        "check",
        r#"dir="$1"
case "$INTACT_STATE" in a) other=b;; b) other=a;; esac
touch "$dir/$INTACT_STATE"
while [ ! -e "$dir/$other" ]; do sleep 0.05; done"#,
    );
    let r = Runner::start(env.config(
        vec![checker, markers.to_str().unwrap().into()],
        2,
        Some(Duration::from_secs(10)),
    ))
    .unwrap();
    r.submit(job(1, "a", "", &[])).unwrap();
    r.submit(job(2, "b", "", &[])).unwrap();
    let mut out = Vec::new();
    let t = Instant::now();
    while out.len() < 2 && t.elapsed() < Duration::from_secs(20) {
        out.extend(r.drain());
        std::thread::sleep(Duration::from_millis(20));
    }
    out.extend(r.finish());
    let out = sorted(out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].verdict, Verdict::Pass, "{out:?}");
    assert_eq!(out[1].verdict, Verdict::Pass, "{out:?}");
    assert_ne!(out[0].worker, out[1].worker);
    env.assert_scratch_clean();
}

#[test]
fn many_jobs_all_reported() {
    let env = Env::new();
    let checker = env.script(
        "check",
        r#"[ -f "$1/f" ] || exit 1; [ $(( $(cat "$1/f") % 2 )) -eq 0 ]"#,
    );
    let r = Runner::start(env.config(vec![checker], 2, Some(GUARD))).unwrap();
    let mut out = Vec::new();
    for i in 0..40u64 {
        r.submit(job(i, &i.to_string(), "", &[("f", &i.to_string())]))
            .unwrap();
        out.extend(r.drain());
    }
    out.extend(r.finish());
    let out = sorted(out);
    assert_eq!(
        out.iter().map(|o| o.id).collect::<Vec<_>>(),
        (0..40).collect::<Vec<_>>()
    );
    for o in out {
        assert_eq!(matches!(o.verdict, Verdict::Pass), o.id % 2 == 0, "{o:?}");
    }
    env.assert_scratch_clean();
}

#[test]
fn release_runs_once_after_the_checker_on_every_path() {
    // Pass, failing checker, failed and panicking materialisation, time limit: each job's
    // release runs exactly once, after its checker, while the crash dir still exists.
    let env = Env::new();
    let checker = env.script("check", r#"test -f "$1/ok" && sleep "$(cat "$1/ok")""#);
    let r = Runner::start(env.config(vec![checker], 2, Some(Duration::from_millis(300)))).unwrap();
    let log = Arc::new(std::sync::Mutex::new(Vec::<(u64, bool)>::new()));
    let kinds: [(u64, Option<&str>, bool, bool); 5] = [
        (1, Some("0"), false, false),
        (2, None, false, false),
        (3, None, true, false),
        (4, None, false, true),
        (5, Some("5"), false, false),
    ];
    for (id, sleep, fail, panics) in kinds {
        let seen: Arc<std::sync::Mutex<Option<std::path::PathBuf>>> = Arc::default();
        let (seen2, log2) = (seen.clone(), log.clone());
        r.submit(Job {
            id,
            state_id: format!("s{id}"),
            stdout: vec![],
            materialise: Box::new(move |dir: &Path| {
                *seen.lock().unwrap() = Some(dir.to_path_buf());
                if panics {
                    panic!("materialiser bug");
                }
                if fail {
                    return Err("no image".into());
                }
                if let Some(s) = sleep {
                    fs::write(dir.join("ok"), s).map_err(|e| e.to_string())?;
                }
                Ok(())
            }),
            release: Some(Box::new(move || {
                let dir = seen2.lock().unwrap().clone();
                log2.lock()
                    .unwrap()
                    .push((id, dir.is_some_and(|d| d.is_dir())));
            })),
            patch: None,
        })
        .unwrap();
    }
    let out = sorted(guarded("finish", move || r.finish()));
    assert_eq!(out.len(), 5);
    assert_eq!(out[0].verdict, Verdict::Pass);
    assert!(
        matches!(out[1].verdict, Verdict::Fail { .. }),
        "{:?}",
        out[1].verdict
    );
    assert!(matches!(out[2].verdict, Verdict::Error(_)));
    assert!(matches!(out[3].verdict, Verdict::Error(_)));
    assert!(
        matches!(out[4].verdict, Verdict::Timeout { .. }),
        "{:?}",
        out[4].verdict
    );
    let mut released = log.lock().unwrap().clone();
    released.sort();
    assert_eq!(
        released,
        vec![(1, true), (2, true), (3, true), (4, true), (5, true)]
    );
    env.assert_scratch_clean();
}

// ----- the warm-checker protocol (one server per worker) -----

/// A warm server in sh: appends its pid to `starts` when it starts, then for each request
/// line passes when the crash dir holds `ok`. Request fields are picked out with sed (the
/// request is one JSON object whose paths have no quotes here). `extra` runs first for
/// each request with `$line`, `$dir`, `$state` set.
fn server(env: &Env, extra: &str) -> String {
    let starts = env.path("starts");
    env.script(
        "server",
        &format!(
            r#"echo $$ >> {starts}
while IFS= read -r line; do
  dir=$(printf '%s' "$line" | sed 's/.*"crash_dir":"\([^"]*\)".*/\1/')
  state=$(printf '%s' "$line" | sed 's/.*"state":"\([^"]*\)".*/\1/')
  {extra}
  if [ -f "$dir/ok" ]; then echo '{{"verdict":"pass"}}'
  else echo '{{"verdict":"fail","message":"no ok in '"$state"'"}}'; fi
done"#,
            starts = starts.display()
        ),
    )
}

fn server_config(
    env: &Env,
    checker: String,
    jobs: usize,
    timeout: Option<Duration>,
) -> RunnerConfig {
    RunnerConfig {
        protocol: intact_runner::Protocol::Server,
        ..env.config(vec![checker], jobs, timeout)
    }
}

fn server_pids(env: &Env) -> Vec<u32> {
    fs::read_to_string(env.path("starts"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

fn run_all(cfg: RunnerConfig, jobs: Vec<Job>) -> Vec<Outcome> {
    guarded("server run", move || {
        let r = Runner::start(cfg).unwrap();
        for j in jobs {
            r.submit(j).unwrap();
        }
        sorted(r.finish())
    })
}

#[test]
fn a_server_judges_many_states_and_is_started_once_per_worker() {
    let env = Env::new();
    let cfg = server_config(&env, server(&env, ""), 2, Some(GUARD));
    let jobs = (0..20)
        .map(|i| {
            let files: &[(&str, &str)] = if i % 3 == 0 { &[] } else { &[("ok", "")] };
            job(i, &format!("s{i}"), "", files)
        })
        .collect();
    let out = run_all(cfg, jobs);
    assert_eq!(out.len(), 20);
    for o in &out {
        match (&o.verdict, o.id % 3) {
            (Verdict::Pass, 1 | 2) => {}
            (Verdict::Fail { stderr, .. }, 0) => assert_eq!(stderr, &format!("no ok in s{}", o.id)),
            (v, _) => panic!("state {}: {v:?}", o.id),
        }
    }
    let pids = server_pids(&env);
    assert!(
        !pids.is_empty() && pids.len() <= 2,
        "one server per worker at most: {pids:?}"
    );
    pids.iter().for_each(|&p| wait_dead(p));
    env.assert_scratch_clean();
}

#[test]
fn a_server_that_overruns_is_killed_and_replaced() {
    let env = Env::new();
    let extra = r#"[ "$state" = slow ] && sleep 30"#;
    let cfg = server_config(
        &env,
        server(&env, extra),
        1,
        Some(Duration::from_millis(300)),
    );
    let jobs = vec![
        job(0, "fast", "", &[("ok", "")]),
        job(1, "slow", "", &[("ok", "")]),
        job(2, "after", "", &[("ok", "")]),
    ];
    let out = run_all(cfg, jobs);
    assert_eq!(out[0].verdict, Verdict::Pass);
    assert!(
        matches!(out[1].verdict, Verdict::Timeout { .. }),
        "{:?}",
        out[1]
    );
    assert_eq!(out[2].verdict, Verdict::Pass);
    let pids = server_pids(&env);
    assert_eq!(pids.len(), 2, "a new server after the timeout: {pids:?}");
    pids.iter().for_each(|&p| wait_dead(p));
    env.assert_scratch_clean();
}

#[test]
fn a_server_that_dies_is_restarted_and_the_state_retried_once() {
    let env = Env::new();
    // Dies on "flaky" the first time only (a marker outside the crash dir), and on "bad"
    // every time; the state is rebuilt for the retry (`ok` is there again).
    let marker = env.path("died-once");
    let extra = format!(
        r#"[ "$state" = bad ] && {{ echo dying on bad >&2; exit 7; }}
  if [ "$state" = flaky ] && [ ! -f {m} ]; then touch {m}; rm -f "$dir/ok"; kill -9 $$; fi"#,
        m = marker.display()
    );
    let cfg = server_config(&env, server(&env, &extra), 1, Some(GUARD));
    let jobs = vec![
        job(0, "first", "", &[("ok", "")]),
        job(1, "flaky", "", &[("ok", "")]),
        job(2, "bad", "", &[("ok", "")]),
        job(3, "last", "", &[("ok", "")]),
    ];
    let out = run_all(cfg, jobs);
    assert_eq!(out[0].verdict, Verdict::Pass);
    assert_eq!(out[1].verdict, Verdict::Pass, "retried on a rebuilt state");
    match &out[2].verdict {
        Verdict::Fail { stderr, .. } => {
            assert!(stderr.contains("died twice"), "{stderr}");
            assert!(
                stderr.contains("exit status 7") && stderr.contains("dying on bad"),
                "{stderr}"
            );
        }
        v => panic!("bad: {v:?}"),
    }
    assert_eq!(out[3].verdict, Verdict::Pass);
    // first server, after flaky's death, after bad's first and second deaths.
    assert_eq!(server_pids(&env).len(), 4, "{:?}", server_pids(&env));
    env.assert_scratch_clean();
}

#[test]
fn a_server_that_never_answers_cannot_be_run() {
    let env = Env::new();
    let broken = env.script(
        "broken",
        "echo 'ImportError: no module named x' >&2; exit 1",
    );
    let cfg = server_config(&env, broken, 1, Some(GUARD));
    let out = run_all(cfg, vec![job(0, "s0", "", &[])]);
    match &out[0].verdict {
        Verdict::Error(m) => {
            assert!(
                m.contains("could not be run") && m.contains("ImportError"),
                "{m}"
            )
        }
        v => panic!("{v:?}"),
    }
    env.assert_scratch_clean();
}

#[test]
fn a_garbled_reply_is_an_error_and_the_next_state_gets_a_new_server() {
    let env = Env::new();
    let extra = r#"[ "$state" = chatty ] && echo "checking $dir""#;
    let cfg = server_config(&env, server(&env, extra), 1, Some(GUARD));
    let jobs = vec![
        job(0, "chatty", "", &[("ok", "")]),
        job(1, "quiet", "", &[("ok", "")]),
    ];
    let out = run_all(cfg, jobs);
    match &out[0].verdict {
        Verdict::Error(m) => assert!(
            m.contains("not a JSON object") && m.contains("stdout"),
            "{m}"
        ),
        v => panic!("{v:?}"),
    }
    assert_eq!(out[1].verdict, Verdict::Pass);
    assert_eq!(server_pids(&env).len(), 2);
}

#[test]
fn cancel_kills_a_busy_server() {
    let env = Env::new();
    let extra = r#"[ "$state" = slow ] && sleep 30"#;
    let cfg = server_config(&env, server(&env, extra), 1, None);
    let r = Runner::start(cfg).unwrap();
    r.submit(job(0, "slow", "", &[])).unwrap();
    let pid = read_pid(&env.path("starts"));
    let cancel = r.cancel_handle();
    let out = guarded("cancel", move || {
        cancel.cancel();
        r.finish()
    });
    assert!(out.is_empty(), "a cancelled state has no verdict: {out:?}");
    wait_dead(pid);
    env.assert_scratch_clean();
}

#[test]
fn drain_wait_returns_an_outcome_once_it_is_there() {
    let env = Env::new();
    let checker = env.script("check", "sleep 0.2; exit 0");
    let r = Runner::start(env.config(vec![checker], 1, Some(GUARD))).unwrap();
    // Nothing submitted: nothing to wait for, an empty answer after the limit.
    assert!(r.drain_wait(Duration::from_millis(1)).is_empty());
    r.submit(job(7, "s", "", &[])).unwrap();
    // Called while the checker still runs; woken by the outcome (a spurious wake-up
    // returns empty: ask again, within the guard).
    let t = Instant::now();
    let out = loop {
        let out = r.drain_wait(GUARD);
        if !out.is_empty() || t.elapsed() > GUARD {
            break out;
        }
    };
    assert_eq!(out.len(), 1, "the one outcome");
    assert_eq!((out[0].id, &out[0].verdict), (7, &Verdict::Pass));
    assert!(r.drain().is_empty(), "taken once");
    assert!(r.finish().is_empty());
    env.assert_scratch_clean();
}

/// A state for the patching tests: file names and contents, written flat into the crash
/// dir; patching counts its calls.
struct Files {
    files: std::collections::BTreeMap<String, String>,
    patched: Arc<std::sync::atomic::AtomicUsize>,
}

impl intact_runner::PatchState for Files {
    fn patch_from(&self, prev: &dyn intact_runner::PatchState, dir: &Path) -> Result<bool, String> {
        let Some(prev) = prev.as_any().downcast_ref::<Files>() else {
            return Ok(false);
        };
        for name in prev.files.keys().filter(|n| !self.files.contains_key(*n)) {
            fs::remove_file(dir.join(name)).map_err(|e| e.to_string())?;
        }
        for (name, content) in &self.files {
            if prev.files.get(name) != Some(content) {
                fs::write(dir.join(name), content).map_err(|e| e.to_string())?;
            }
        }
        self.patched.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[test]
fn a_checker_that_modifies_its_crash_dir_never_leaks_into_the_next_state() {
    let env = Env::new();
    // Each state's checker first compares the crash dir (names, modes, sizes, contents)
    // with the listing the job passes as the workload's stdout, then changes the dir as
    // INTACT_STATE says. The next state must look exactly as written again.
    let checker = env.script(
        "mutating.sh",
        r#"d="$1"
got=$(cd "$d" && for f in $(ls -A | sort); do printf '%s %s %s %s\n' "$f" "$(stat -c %a "$f")" "$(stat -c %s "$f")" "$(cat "$f")"; done; stat -c 'root %a' .)
want=$(cat "$2")
if [ "$got" != "$want" ]; then printf 'want:\n%s\ngot:\n%s\n' "$want" "$got" >&2; exit 1; fi
case "$INTACT_STATE" in
  *write) printf hacked > "$d/keep" ;;
  *same-size) printf KEEP > "$d/keep" ;;
  *append) printf x >> "$d/keep" ;;
  *delete) rm "$d/keep" ;;
  *chmod) chmod 600 "$d/keep" ;;
  *add) printf new > "$d/added" ;;
  *mkdir) mkdir "$d/sub" ;;
  *rootmode) chmod 700 "$d" ;;
  *replace) rm "$d/keep"; printf keep > "$d/keep" ;;
  *fail) exit 3 ;;
esac
exit 0"#,
    );
    let patched = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mutations = [
        "none",
        "write",
        "none",
        "same-size",
        "none",
        "append",
        "none",
        "delete",
        "none",
        "chmod",
        "none",
        "add",
        "none",
        "mkdir",
        "none",
        "rootmode",
        "none",
        "replace",
        "none",
        "fail",
        "none",
        "none",
    ];
    let r = Runner::start(env.config(vec![checker], 1, Some(GUARD))).unwrap();
    for (i, m) in mutations.iter().enumerate() {
        let mut files = std::collections::BTreeMap::new();
        files.insert("keep".to_string(), "keep".to_string());
        files.insert("v".to_string(), format!("state {i}"));
        if i % 3 == 0 {
            files.insert("sometimes".to_string(), "x".to_string());
        }
        let listing: String = files
            .iter()
            .map(|(n, c)| format!("{n} 644 {} {c}\n", c.len()))
            .collect::<String>()
            + "root 755";
        let whole = files.clone();
        r.submit(Job {
            id: i as u64,
            state_id: format!("s{i}-{m}"),
            stdout: listing.into_bytes(),
            materialise: Box::new(move |dir: &Path| {
                for (name, content) in &whole {
                    fs::write(dir.join(name), content).map_err(|e| e.to_string())?;
                }
                Ok(())
            }),
            release: None,
            patch: Some(Box::new(Files {
                files,
                patched: patched.clone(),
            })),
        })
        .unwrap();
    }
    let out = sorted(guarded("finish", move || r.finish()));
    assert_eq!(out.len(), mutations.len());
    for (o, m) in out.iter().zip(mutations) {
        match (&o.verdict, m) {
            (Verdict::Fail { code: Some(3), .. }, "fail") | (Verdict::Pass, _) => {}
            (v, _) => panic!("state {} ({m}): {v:?}", o.id),
        }
    }
    // Every state after an untouched one was patched (the first is written whole; so is
    // each state after a change, and after the failing checker, which changed nothing).
    let untouched_before = mutations
        .windows(2)
        .filter(|w| matches!(w[0], "none" | "fail"))
        .count();
    assert_eq!(patched.load(Ordering::SeqCst), untouched_before);
    env.assert_scratch_clean();
}
