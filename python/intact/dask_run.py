"""Run intact's checker on a Dask cluster (docs/distributed.md).

    python3 -m intact.dask_run --scheduler tcp://HOST:8786 -- BUNDLE --checker CMD [intact check options]
    python3 -m intact.dask_run --scheduler local:3 --bundle BUNDLE --checker CMD --apm default,ext4-o --json r.json
    intact check BUNDLE --checker CMD --dask local:3 ...      (the same, started by intact)

Steps: `intact check ... --emit-states DIR` writes the distinct crash states as work units;
the bundle is shipped once to every worker (a worker plugin carrying a tarball of the files
intact needs, unpacked into the worker's local directory, also on workers that join later);
one Dask task per unit sends it to the worker thread's `intact check-unit --serve`
subprocess (started at its first unit and kept: it reads the bundle once and keeps the
checker runner, so a --checker-server starts once per worker thread) and returns the
verdict; the verdicts go to DIR/verdicts/; emission repeats while ALICE's strategy needs
verdicts to go on (2 rounds for one APM); finally `intact check ... --from-verdicts DIR`
prints the report (and writes --json etc.) exactly as a local run would.

Scheduler: an address (tcp://HOST:PORT, or a scheduler file with --scheduler-file), local:N
(a LocalCluster of N single-threaded worker processes here), slurm:N or pbs:N (dask-jobqueue:
N workers as batch jobs; options with --cluster-opt KEY=VALUE, e.g. cores=1 memory=2GB
queue=normal walltime=01:00:00 account=ABC, or from ~/.config/dask/jobqueue.yaml).

Exit status as `intact check`: 0 no vulnerability, 1 vulnerabilities, 2 usage or input
error (unreachable scheduler, checker missing on a worker, corrupt unit, ...: no report),
3 internal error (a unit failed on every retry: no report), 130 interrupted.

Standard library plus dask.distributed (pip install "dask[distributed]"; dask-jobqueue for
slurm:/pbs:).
"""

import argparse
import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

# The bundle files intact needs to build states (crates/intact-pipeline/src/units.rs BUNDLE_FILES): the raw trace stays home.
BUNDLE_FILES = ["bundle.json", "ops.jsonl", "data.bin", "initial/manifest.json", "initial/contents.bin",
                "final/manifest.json", "final/contents.bin"]


class Fatal(Exception):
    """An error that ends the run without a report: (exit code, message)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def log(msg):
    print(f"intact dask: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# Worker side. These functions are shipped by value (cloudpickle), so workers need Python and
# dask but not this package; they need the intact binary (--worker-intact, or on PATH).

def _bundle_dir(local_directory, bundle_hash):
    return os.path.join(local_directory, "intact-bundle-" + bundle_hash[:16])


def _unpack(local_directory, bundle_hash, tarball):
    """Unpacks the bundle tarball into the worker's local directory, once."""
    dest = _bundle_dir(local_directory, bundle_hash)
    if os.path.isfile(os.path.join(dest, "bundle.json")):
        return dest
    tmp = tempfile.mkdtemp(prefix=".intact-bundle-", dir=local_directory)
    try:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as t:
            for m in t.getmembers():
                if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in m.name.split("/"):
                    raise RuntimeError(f"unexpected member {m.name!r} in the bundle tarball")
            t.extractall(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not os.path.isfile(os.path.join(dest, "bundle.json")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _take_slot():
    """(N, socket): a number free among the checkers running on this host right now
    (INTACT_WORKER), held until the socket is closed: the lowest N whose abstract Unix
    socket name nobody holds (freed when the holder closes it or dies; nothing is left in
    the file system)."""
    n = 0
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(f"\0intact-worker-slot-{os.getuid()}-{n}")
        except OSError:
            s.close()
            n += 1
            continue
        return n, s


class _Served:
    """One `intact check-unit --serve` process of a worker thread's: it keeps the bundle,
    the APMs' prefix states and the checker runner (with --checker-server, the warm server)
    from one unit to the next. It holds its INTACT_WORKER slot for its whole life, since its
    checker server keeps the number it started with."""

    def __init__(self, key, exe, bundle, env, cwd, local_directory):
        self.key = key
        self.n, self.sock = _take_slot()
        try:
            self.err = tempfile.TemporaryFile(prefix="intact-serve-err-", dir=local_directory)
            self.proc = subprocess.Popen([exe, "check-unit", "--bundle", bundle, "--serve", "--worker", str(self.n),
                                          "--exit-with-parent"], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.err)
        except BaseException:
            self.sock.close()
            raise

    def ask(self, unit, out):
        """The reply to one request, or None if the process ended without one."""
        try:
            self.proc.stdin.write((json.dumps({"unit": unit, "out": out}) + "\n").encode())
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            return None
        if not line:
            return None
        try:
            reply = json.loads(line)
        except ValueError:
            return {"ok": False, "code": 3, "error": f"check-unit --serve replied {line[:200]!r}"}
        return reply if isinstance(reply, dict) else {"ok": False, "code": 3, "error": f"reply {reply!r}"}

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        """Ends the process (EOF; it stops its checker server) and frees the slot; returns
        how it ended and the end of its stderr, for messages."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc.stdout.close()
        self.sock.close()
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace").strip()[-2000:]
        self.err.close()
        return f"exit status {code}" + (f": {tail}" if tail else "")


def _served_pool(w):
    """The worker's check-unit --serve processes: idle ones for the next task, every one
    for teardown. A worker may run several task threads; each takes a process of its own."""
    return w.__dict__.setdefault("_intact_served", {"lock": threading.Lock(), "idle": [], "all": []})


def _take_served(w, key, start):
    """An idle process started for `key` (exe, bundle, environment, cwd), else a new one;
    idle ones for another key (an earlier run's) or dead are ended."""
    pool = _served_pool(w)
    stale = []
    found = None
    with pool["lock"]:
        for s in list(pool["idle"]):
            if found is None and s.key == key and s.alive():
                found = s
            elif s.key != key or not s.alive():
                stale.append(s)
            else:
                continue
            pool["idle"].remove(s)
        for s in stale:
            pool["all"].remove(s)
    for s in stale:
        s.close()
    if found is not None:
        return found
    s = start()
    with pool["lock"]:
        pool["all"].append(s)
    return s


def _give_back(w, s, keep):
    """Back to the idle ones after a reply; else (it died, or the pool was closed while it
    worked) ended: returns how it ended."""
    pool = _served_pool(w)
    with pool["lock"]:
        if keep and s in pool["all"]:
            pool["idle"].append(s)
            return None
        if s in pool["all"]:
            pool["all"].remove(s)
    return s.close()


def _close_served(dask_worker=None):
    """Ends every check-unit --serve process of this worker (at the end of a run, and at
    the worker's teardown): their checker servers stop with them."""
    from distributed import get_worker
    w = dask_worker or get_worker()
    pool = _served_pool(w)
    with pool["lock"]:
        todo, pool["all"], pool["idle"] = pool["all"], [], []
    for s in todo:
        s.close()
    return len(todo)


def _ask_served(w, key, start, unit, out, where, state):
    """The reply of this worker thread's `intact check-unit --serve` to one unit; a process
    that died (no reply) is replaced and the unit sent once more; a second death raises."""
    deaths = []
    for _ in range(2):
        s = _take_served(w, key, start)
        reply = s.ask(unit, out)
        ended = _give_back(w, s, reply is not None)
        if reply is not None:
            return reply
        deaths.append(ended)
    raise RuntimeError(f"{where}: intact check-unit --serve ended twice while checking {state}: " + "; then ".join(deaths))


def _already_checked(w, batch_topic):
    """States of this batch whose verdicts an earlier attempt of it has already streamed
    (the scheduler keeps the batch's topic: one short event per verdict sent). Empty on a
    first attempt; on failure to ask, empty too (the units are checked again, as Dask's
    retry bound allows)."""
    from distributed.utils import sync
    try:
        events = sync(w.loop, w.scheduler.events, topic=batch_topic)
    except Exception:
        return set()
    return {m for _, m in events if isinstance(m, str)}


def _run_batch(batch, units, bundle_hash, intact_hint, env, cwd, topic):
    """One task: rebuild and check a batch of units [(state, unit text)] through this
    worker thread's `intact check-unit --serve` (started on first use, kept between tasks),
    streaming each verdict to the client as it is written (event topic `topic`) and noting
    it under the batch's own topic, so that a retry of this batch (its worker died, or an
    attempt raised) checks only the units the earlier attempts did not. Returns
    {"verdicts": {state: TEXT}, "skipped": [state]} or, for errors retrying cannot fix
    (code 2: checker missing, corrupt unit, different bundle), {"error": MESSAGE}; raises
    (Dask retries the batch) on anything else."""
    from distributed import get_worker
    w = get_worker()
    host = socket.gethostname()
    where = f"worker {w.address} (host {host})"
    bundle = _bundle_dir(w.local_directory, bundle_hash)
    if not os.path.isfile(os.path.join(bundle, "bundle.json")):
        raise RuntimeError(f"{where}: the bundle was not unpacked in {bundle}")
    exe = intact_hint if intact_hint and os.access(intact_hint, os.X_OK) else shutil.which("intact")
    if not exe:
        return {"error": f"{where}: no intact executable ({intact_hint} does not exist there and none is on PATH)"}
    full_env = dict(os.environ)
    full_env.update(env)
    run_cwd = cwd if os.path.isdir(cwd) else w.local_directory
    key = (exe, bundle, tuple(sorted(env.items())), run_cwd)
    batch_topic = f"{topic}-b{batch}"
    done = _already_checked(w, batch_topic)
    verdicts = {}
    with tempfile.TemporaryDirectory(prefix="intact-unit-", dir=w.local_directory) as d:
        for state, unit_text in units:
            if state in done:
                continue
            unit = os.path.join(d, f"{state}.json")
            out = os.path.join(d, f"{state}.verdict.json")
            with open(unit, "w") as f:
                f.write(unit_text)
            t0 = time.monotonic()
            reply = _ask_served(w, key, lambda: _Served(key, exe, bundle, full_env, run_cwd, w.local_directory),
                                unit, out, where, state)
            wall = time.monotonic() - t0
            if reply.get("ok") is not True:
                if reply.get("code") == 2:
                    return {"error": f"{where}: unit {state}: {reply.get('error')}"}
                raise RuntimeError(f"{where}: intact check-unit for {state} failed (code {reply.get('code')}): "
                                   f"{reply.get('error')}")
            with open(out) as f:
                verdicts[state] = f.read()
            os.remove(unit)
            os.remove(out)
            # To the client now (progress, and kept if this worker dies later), then the
            # short note a retry of this batch looks for: in this order, on one stream.
            w.log_event(topic, {"batch": batch, "state": state, "verdict": verdicts[state], "wall": wall})
            w.log_event(batch_topic, state)
    return {"verdicts": verdicts, "skipped": sorted(done)}


def _make_plugin(bundle_hash, tarball):
    from distributed.diagnostics.plugin import WorkerPlugin

    class IntactBundle(WorkerPlugin):
        """Unpacks the bundle on every worker, present and future."""
        name = "intact-bundle-" + bundle_hash[:16]

        def __init__(self):
            self.bundle_hash = bundle_hash
            self.tarball = tarball

        def setup(self, worker):
            _unpack(worker.local_directory, self.bundle_hash, self.tarball)

        def teardown(self, worker):
            _close_served(worker)

    return IntactBundle()


# ------------------------------------------------------------------------------------------
# Client side.

class _Batcher:
    """How many units the next task takes: about TARGET_S seconds of work (from the wall time
    per unit the workers report, the median of the last 64), so the scheduler's round trip
    and the task's own costs are paid once per second of checking rather than per state;
    but never more than a share of what is left (guided self-scheduling: left / (2 x
    threads)), so the last tasks are small and no thread waits at the end for another's long
    batch. One unit per task until the first verdict has come back."""

    TARGET_S = 1.0
    MAX_UNITS = 1000  # a batch's verdicts must fit in one task result comfortably

    def __init__(self):
        self.walls = []

    def note(self, wall_s):
        if isinstance(wall_s, (int, float)) and wall_s >= 0:
            self.walls = self.walls[-63:] + [float(wall_s)]

    def size(self, left, threads):
        assert left > 0 and threads > 0
        if not self.walls:
            return 1
        per_unit = max(sorted(self.walls)[len(self.walls) // 2], 1e-4)
        n = min(int(self.TARGET_S / per_unit), -(-left // (2 * threads)), self.MAX_UNITS)
        return max(1, n)


class _Progress:
    """Progress of a round, as `intact check` shows its own: on a terminal one updating line
    (units checked of the round's, failing, rate, time left), otherwise a plain line every
    10 seconds, so logs of batch jobs show it too. Nothing with -q."""

    def __init__(self, quiet):
        self.tty = not quiet and sys.stderr.isatty()
        self.plain = not quiet and not self.tty
        self.label, self.total, self.done, self.failing = "", 0, 0, 0
        self.t0 = self.last_line = time.monotonic()

    def start(self, label, total):
        self.label, self.total, self.done, self.failing = label, total, 0, 0
        self.t0 = self.last_line = time.monotonic()
        if self.tty:
            self.show(force=True)

    def add(self, failing):
        self.done += 1
        self.failing += bool(failing)
        assert self.done <= self.total, "more verdicts than units"

    def show(self, force=False):
        now = time.monotonic()
        if not (self.tty or self.plain) or (not force and now - self.last_line < (0.2 if self.tty else 10)):
            return
        self.last_line = now
        secs = now - self.t0
        rate = self.done / secs if secs > 0 else 0.0
        eta = f"{(self.total - self.done) / rate:.0f} s" if rate > 0 else "?"
        figures = f"{self.done}/{self.total} units checked, {self.failing} failing, {rate:.1f}/s, ETA {eta}"
        if self.tty:
            width = 25
            full = width * self.done // max(self.total, 1)
            bar = "=" * full + (">" if full < width else "") + " " * max(width - full - 1, 0)
            sys.stderr.write(f"\r\x1b[K{self.label} [{bar}] {figures}")
            sys.stderr.flush()
        else:
            log(f"{self.label}: {figures}")

    def finish(self):
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _write_verdict(units_dir, state, text):
    tmp = os.path.join(units_dir, "verdicts", f".{state}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(units_dir, "verdicts", f"{state}.json"))


def _check_round(client, m, units_dir, rnd, futures, batcher, progress, where, retries):
    """Checks the round's pending units in batches (_Batcher), keeping two batches per
    worker thread submitted, writing each verdict as it streams in; returns (units checked,
    tasks submitted). `futures` holds the tasks not finished yet (the caller cancels them on
    an error); a finished one is let go at once, so its result leaves the worker's memory."""
    import queue
    import uuid
    pending = list(m["pending"])
    files = {u["state"]: u["file"] for u in m["units"]}
    left = list(pending)
    wanted = set(pending)
    got = set()
    arrived = queue.Queue()  # ("verdict", event message) | ("done", future), in arrival order
    topic = f"intact-{uuid.uuid4().hex[:12]}-r{rnd}"
    client.subscribe_topic(topic, lambda ev: arrived.put(("verdict", ev[1])))
    batches = {}
    tasks = 0
    threads, threads_at = 1, 0.0

    def record(state, text):
        if state in got or state not in wanted:
            return  # a repeat (a batch retried after its worker died) or not this round's
        v = json.loads(text)
        assert v.get("state") == state, f"verdict for {v.get('state')} sent as {state}"
        _write_verdict(units_dir, state, text)
        got.add(state)
        progress.add(v.get("verdict", {}).get("kind") != "pass")

    progress.start(f"round {rnd}", len(pending))
    try:
        while len(got) < len(pending):
            if time.monotonic() - threads_at > 1.0:  # workers come and go (Slurm jobs start late)
                threads, threads_at = max(1, sum(client.nthreads().values())), time.monotonic()
            while left and len(batches) < 2 * threads:
                n = batcher.size(len(left), threads)
                batch, left = left[:n], left[n:]
                units = []
                for s in batch:
                    with open(os.path.join(units_dir, files[s])) as f:
                        units.append((s, f.read()))
                fut = client.submit(_run_batch, tasks, units, m["bundle_hash"], where["intact_hint"], where["env"],
                                    where["cwd"], topic, key=f"{topic}-b{tasks}", retries=retries, pure=False)
                tasks += 1
                fut.add_done_callback(lambda f: arrived.put(("done", f)))
                futures.append(fut)
                batches[fut] = batch
            try:
                kind, x = arrived.get(timeout=0.5)
            except queue.Empty:
                progress.show()
                continue
            if kind == "verdict":
                batcher.note(x.get("wall"))
                record(x["state"], x["verdict"])
            else:
                batch = batches.pop(x)
                futures.remove(x)
                if x.status == "error":
                    e = x.exception()
                    raise Fatal(3, f"a batch of units failed on every try ({retries} retries): {type(e).__name__}: {e}")
                if x.status != "finished":
                    raise Fatal(3, f"a batch's task ended as {x.status}")
                r = x.result()
                if "error" in r:
                    raise Fatal(2, r["error"])
                for s, text in r["verdicts"].items():
                    record(s, text)
                x.release()
                # A unit an earlier attempt checked but whose verdict never came: again.
                left = [s for s in batch if s not in got] + left
            progress.show()
    finally:
        progress.finish()
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(topic)
    return len(got), tasks


def _cluster(spec, opts, connect_timeout, scheduler_file, scratch, quiet):
    """(client, cluster or None) for --scheduler SPEC."""
    from distributed import Client
    kind, _, n = spec.partition(":")
    if kind in ("local", "slurm", "pbs") and n:
        try:
            n = int(n)
            if n < 1:
                raise ValueError
        except ValueError:
            raise Fatal(2, f"--scheduler {spec}: {kind}:N needs a positive number of workers")
        import dask
        # Everything the cluster writes here (lock files too; the scheduler of a Slurm or PBS
        # cluster runs in this process) goes under the work directory.
        dask.config.set({"temporary-directory": scratch})
        if kind == "local":
            import logging
            from distributed import LocalCluster
            kw = dict(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR, local_directory=scratch)
            kw.update(opts)
            cluster = LocalCluster(**kw)
        else:
            try:
                import dask_jobqueue
            except ImportError:
                raise Fatal(2, f"--scheduler {spec}: needs dask-jobqueue (pip install dask-jobqueue)")
            cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
            try:
                cluster = cls(**opts)
            except Exception as e:
                raise Fatal(2, f"--scheduler {spec}: cannot set up the {cls.__name__}: {e} "
                               "(give cores=, memory= ... with --cluster-opt or in jobqueue.yaml)")
            if not quiet:
                # What each of the N jobs runs: the first thing to look at when they do not start.
                log(f"{n} job(s) of this script:\n{cluster.job_script().rstrip()}")
            cluster.scale(n)
        return Client(cluster), cluster
    if opts:
        raise Fatal(2, "--cluster-opt is for local:N, slurm:N and pbs:N")
    try:
        if scheduler_file:
            return Client(scheduler_file=spec, timeout=connect_timeout), None
        return Client(spec, timeout=connect_timeout), None
    except Exception as e:  # OSError, TimeoutError, ValueError (bad address), ...
        raise Fatal(2, f"cannot reach the Dask scheduler at {spec}: {e}")


def _tarball(bundle):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as t:
        for f in BUNDLE_FILES:
            p = os.path.join(bundle, f)
            if not os.path.isfile(p):
                raise Fatal(2, f"bundle {bundle}: {f} is missing")
            t.add(p, arcname=f)
    return buf.getvalue()


def _register(client, plugin):
    if hasattr(client, "register_plugin"):
        client.register_plugin(plugin)
    else:  # distributed < 2023.9
        client.register_worker_plugin(plugin)


def _opt_value(v):
    if v[:1] in "[{\"":
        try:
            return json.loads(v)  # e.g. job_extra_directives=["--constraint=fast"]
        except ValueError:
            pass
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(v.lower(), v)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m intact.dask_run", description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                epilog="Everything after -- (and every option not listed here) goes to `intact check`.")
    p.add_argument("--scheduler", required=True, metavar="ADDR|local:N|slurm:N|pbs:N",
                   help="Dask scheduler address, or a cluster to start")
    p.add_argument("--scheduler-file", action="store_true", help="--scheduler names a scheduler file")
    p.add_argument("--cluster-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for LocalCluster / SLURMCluster / PBSCluster (repeatable)")
    p.add_argument("--bundle", help="the bundle (or give it after --)")
    p.add_argument("--checker", help="the checker command (or give --checker after --)")
    p.add_argument("--intact", default=None, help="intact here (default: `intact` on PATH)")
    p.add_argument("--worker-intact", default=None,
                   help="intact on the workers (default: the same path if it exists there, else `intact` on PATH)")
    p.add_argument("--retries", type=int, default=3, help="retries of a unit whose task fails (default 3)")
    p.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                   help="pass this environment variable (from here, or VALUE) to the checker on the workers (repeatable)")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to try to reach the scheduler (default 10)")
    p.add_argument("--work-dir", default=None, metavar="DIR",
                   help="keep units and verdicts in DIR (new or empty) instead of a temporary directory")
    args, rest = p.parse_known_args(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    check_args = ([args.bundle] if args.bundle else []) + (["--checker", args.checker] if args.checker else []) + rest
    if "--dask" in check_args or any(a.startswith("--dask=") for a in check_args):
        p.error("--dask is not an intact check option here")
    return args, check_args


def run(args, check_args):
    intact = args.intact or shutil.which("intact")
    if not intact or not os.access(intact, os.X_OK):
        raise Fatal(2, "no intact executable: give --intact PATH or put intact on PATH")
    intact = os.path.abspath(intact)
    quiet = any(a in ("-q", "--quiet") or (a.startswith("-") and not a.startswith("--") and "q" in a[1:] and a[1:].isalpha())
                for a in check_args)
    env = {}
    for e in args.env:
        name, eq, value = e.partition("=")
        if not eq:
            if name not in os.environ:
                raise Fatal(2, f"--env {name}: not set here")
            value = os.environ[name]
        env[name] = value
    opts = {}
    for o in args.cluster_opt:
        k, eq, v = o.partition("=")
        if not eq or not k:
            raise Fatal(2, f"--cluster-opt {o!r}: expected KEY=VALUE")
        opts[k] = _opt_value(v)

    work_tmp = None
    if args.work_dir:
        work = os.path.abspath(args.work_dir)
        if os.path.exists(work) and os.listdir(work):
            raise Fatal(2, f"--work-dir {work}: exists and is not empty")
    else:
        work_tmp = tempfile.mkdtemp(prefix="intact-dask-")
        work = work_tmp
    units_dir = os.path.join(work, "run")
    client = cluster = None
    futures = []
    try:
        t0 = time.monotonic()
        client, cluster = _cluster(args.scheduler, opts, args.connect_timeout, args.scheduler_file,
                                   os.path.join(work, "dask"), quiet)
        phases = {"connecting": time.monotonic() - t0, "emitting": 0.0, "checking": 0.0}
        if not quiet:
            log(f"scheduler {client.scheduler.address}")
        try:
            import cloudpickle
            cloudpickle.register_pickle_by_value(sys.modules[__name__])
        except Exception:
            pass  # run as __main__ (pickled by value anyway), or an old cloudpickle
        shipped = False
        rnd = 0
        checked = tasks = 0
        batcher = _Batcher()
        progress = _Progress(quiet)
        while True:
            rnd += 1
            t_emit = time.monotonic()
            p = subprocess.run([intact, "check", *check_args, "--emit-states", units_dir] + ([] if quiet else ["-q"]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = p.stderr.decode(errors="replace")
            if p.returncode != 0:
                sys.stderr.write(err)
                raise Fatal(p.returncode, None)
            with open(os.path.join(units_dir, "manifest.json")) as f:
                m = json.load(f)
            phases["emitting"] += time.monotonic() - t_emit
            if m["complete"]:
                break
            if not shipped:
                tarball = _tarball(m["bundle_abs"])
                _register(client, _make_plugin(m["bundle_hash"], tarball))
                shipped = True
            pending = m["pending"]
            if not quiet:
                log(f"round {rnd}: {len(pending)} unit(s) on {len(client.scheduler_info().get('workers', {}))} worker(s)")
            t_check = time.monotonic()
            n_checked, n_tasks = _check_round(client, m, units_dir, rnd, futures, batcher, progress,
                                              dict(intact_hint=args.worker_intact or intact, env=env,
                                                   cwd=os.getcwd()), args.retries)
            checked += n_checked
            tasks += n_tasks
            phases["checking"] += time.monotonic() - t_check
        if not quiet:
            log(f"{checked} unit(s) checked in {rnd - 1} round(s) by {tasks} task(s), {time.monotonic() - t0:.1f} s ("
                + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()) + ")")
        # The report, as a local run prints it (and --json etc.).
        sys.stdout.flush()
        p = subprocess.run([intact, "check", *check_args, "--from-verdicts", units_dir])
        return p.returncode
    finally:
        for f in futures:
            f.cancel()
        if client is not None:
            # A cluster we did not start keeps its workers: end their check-unit processes
            # (and warm checker servers) now rather than at the workers' teardown.
            with contextlib.suppress(Exception):
                client.run(_close_served)
            with contextlib.suppress(Exception):
                client.close(timeout=10)
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=20)
        if work_tmp:
            shutil.rmtree(work_tmp, ignore_errors=True)


def main(argv=None):
    args, check_args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args, check_args)
    except Fatal as f:
        if f.message:
            print(f"intact: error: {f.message}; no report written", file=sys.stderr)
        return f.code
    except KeyboardInterrupt:
        print("intact: interrupted: no report written (scratch space removed)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
