#!/usr/bin/env bash
# The whole test suite: installs what the tests need (Debian packages), then runs the
# Rust unit, property and integration tests (which compile C fixtures, trace real
# programs with strace: sqlite3, git, python3) and the LD_PRELOAD shim's self-test.
# Slow exhaustive runs are opt-in: INTACT_SLOW_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every test must run: one that cannot (a tool, a device, root missing) fails naming what is
# missing instead of skipping (INTACT_REQUIRE_ALL=0 turns failures back into notices).
export INTACT_REQUIRE_ALL="${INTACT_REQUIRE_ALL:-1}"
need=()
for t in strace:strace gcc:gcc sqlite3:sqlite3 git:git python3:python3 rsync:rsync tar:tar gzip:gzip javac:default-jdk-headless mkfs.xfs:xfsprogs mkfs.btrfs:btrfs-progs chromium:chromium; do
  command -v "${t%%:*}" >/dev/null || need+=("${t##*:}")
done
# The SARIF and JUnit tests validate against the official schemas with these, from
# python3 on PATH or Debian's interpreter (report_sarif_junit.rs tries both).
has_schemas() { "$1" -c 'import jsonschema, xmlschema' 2>/dev/null; }
has_schemas python3 || has_schemas /usr/bin/python3 || need+=(python3-jsonschema python3-xmlschema)
# Debian's own interpreter (statically linked libpython) is tested next to python3 on PATH.
[ -x /usr/bin/python3 ] || need+=(python3)
# fsstress (tests/fs_fsstress.rs, built from ../shared/peer-suites) needs the xfs headers.
[ -f /usr/include/xfs/xfs.h ] || need+=(xfslibs-dev)
# libintact/test_embed.sh links the embedded SQLite VFS against the system's SQLite.
[ -f /usr/include/sqlite3.h ] || need+=(libsqlite3-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 2
fi
# Gates: formatting and lints (rustfmt's defaults; clippy with warnings as errors).
if ! cargo fmt --all -- --check >/dev/null; then
  echo "cargo fmt --check: the tree is not formatted; run 'cargo fmt --all' and commit the result" >&2
  exit 1
fi
cargo clippy --workspace --all-targets --quiet -- -D warnings
# No import circles between the modules of a crate (two modules naming each other).
if ! python3 scripts/module-circles.py; then
  echo "scripts/module-circles.py: the modules above import each other; move the shared part down" >&2
  exit 1
fi
cargo test --workspace --quiet -- --test-threads=2
# The persistent-memory engine's mutation checks need its `mutations` feature (a deliberate
# bug per switch, compiled in only there).
cargo test -p intactfs-pmem --features mutations --test mutations --quiet
# FUSE over io_uring is compiled only with the `uring` feature (vendor/fuser/PATCHES.md,
# patch 0003): its mount tests run with it on.
cargo test -p intact-cli --features uring --test fs_uring --quiet -- --test-threads=1
# ... and target/debug/intact, which the scripts below use, is the default build again.
cargo build -p intact-cli --quiet
# vendor/fuser is exactly the pristine fuser 0.18.0 crate plus vendor/fuser/patches.
bash vendor/fuser/check-patches.sh
bash shim/test_shim.sh
# intact.checker, the Python helper for checkers (docs/checkers.md): one state per
# process, the warm server, and the isolation of its forked children.
PYTHONPATH=python python3 -m unittest discover -s python/tests -p test_checker.py
# Checking on Dask (docs/distributed.md): a LocalCluster reproduces a local run's report,
# also with a worker killed mid-run (mid-batch: only its current unit is checked again) and
# with a hanging checker. Fails (INTACT_REQUIRE_ALL=1), saying why, if dask cannot be installed.
python3 -c 'import distributed' 2>/dev/null || python3 -m pip install -q "dask[distributed]" 2>/dev/null \
  || python3 -m pip install -q --break-system-packages "dask[distributed]" 2>/dev/null \
  || echo "dask[distributed] could not be installed: the Dask tests cannot run" >&2
INTACT_DASK_TESTS=1 INTACT=$PWD/target/debug/intact PYTHONPATH=python python3 -m unittest discover -s python/tests -p test_dask.py
# The same through a real single-node Slurm (tests/slurm/cluster.sh: slurm-wlm and munge from
# apt-get, daemons started under a temporary directory and stopped by PID) and dask-jobqueue:
# `--dask slurm:2` reproduces a local run's report, also when a worker's job is killed.
python3 -c 'import dask_jobqueue' 2>/dev/null || python3 -m pip install -q dask-jobqueue 2>/dev/null \
  || python3 -m pip install -q --break-system-packages dask-jobqueue 2>/dev/null \
  || echo "dask-jobqueue could not be installed: the Slurm tests cannot run" >&2
INTACT_SLURM_TESTS=1 INTACT=$PWD/target/debug/intact PYTHONPATH=python python3 -m unittest discover -s python/tests -p test_slurm.py
# PBS through dask-jobqueue's PBSCluster, with only the batch system replaced by a stand-in
# (tests/pbs-standin: qsub runs the generated job script in the background with PBS_JOBID
# set, qdel kills it; no PBS can be installed here): `--dask pbs:2` reproduces a local run's
# report. Never skipped once run: without dask-jobqueue it fails saying so.
INTACT_PBS_TESTS=1 INTACT=$PWD/target/debug/intact PYTHONPATH=python python3 -m unittest discover -s python/tests -p test_pbs.py
# The example checkers against hand-made crash states (the explorer tests use them).
bash examples/undolog/selftest.sh >/dev/null && echo "undolog example self-test: ok"
bash examples/kvstore/selftest.sh >/dev/null && echo "kvstore example self-test: ok"
# The application study's CI subset (study/README.md): SQLite rollback journal and
# dbm.dumb under every APM, checked against known answers; the full study is
# `bash study/run.sh` (about the time in docs/study.md).
log=$(mktemp)
if bash study/selftest.sh >"$log" 2>&1; then tail -1 "$log"; rm -f "$log"
else cat "$log"; rm -f "$log"; exit 1; fi
# intactfs through a real FUSE mount: the C library and the Python module against the
# ioctls, including three crash cycles (docs/fs-api.md).
log=$(mktemp)
if bash libintact/test.sh >"$log" 2>&1; then tail -1 "$log"; rm -f "$log"
else cat "$log"; rm -f "$log"; exit 1; fi
# The same proof on every kind of storage (tests/peer/run.sh; docs/fs-testing.md): on block,
# txflash and pmem mounts side by side, the POSIX conformance suite (tests/posix) against
# tmpfs, pjdfstest and a short fsx (both from ../shared/peer-suites; INTACT_SLOW_TESTS=1:
# fsx 1,000,000 operations). Passes if exactly each kind's listed known failures fail and
# fsck is clean afterwards. (tests/posix/run-intactfs.sh runs the conformance suite alone.)
log=$(mktemp)
if bash tests/peer/run.sh >"$log" 2>&1; then cat "$log"; rm -f "$log"
else cat "$log"; rm -f "$log"; exit 1; fi
# Real applications on an intactfs mount against tmpfs (tests/fs-apps): SQLite rollback and
# WAL, git, LevelDB, PostgreSQL, tar, rsync; fsck clean after unmount; results re-read after
# a remount.
log=$(mktemp)
if bash tests/fs-apps/run.sh >"$log" 2>&1; then tail -1 "$log"; rm -f "$log"
else cat "$log"; rm -f "$log"; exit 1; fi
