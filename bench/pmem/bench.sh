#!/usr/bin/env bash
# The FCFS paper's microbenchmark (seed paper 002 §VI-B, Figure 7; intactfs: issue 14 item 5),
# three systems side by side in one run on the same emulated persistent memory:
#   fcfs   intactfs-FCFS: the engine crates/intactfs-pmem (PmemFs), tx_begin(&[a, b]),
#          write(Some(tx), ..) twice, tx_commit; checkpoints inline at commit
#   fcfs-bg the same engine with background checkpoints: a checkpointer thread runs them in
#          units between the workers' calls (issue 28)
#   fgwal  fine-grained (cacheline) redo write-ahead logging, PMFS-style 64-byte entries with
#          48 data bytes (a minimal store in the benchmark program, same device and layout)
#   nc     no consistency: data in place, clwb, one fence at commit
# Each transaction picks 2 distinct files of FILES and overwrites a random 0–16 KiB range at
# a random offset in each; 1 and 2 threads; with LatencyModel::FCFS (150 ns per flushed
# cacheline, 4 GB/s: the paper's NVMM emulation) and without latency injection. The program
# is crates/intactfs-pmem/examples/txbench.rs (it prints one JSON line per run); the report
# is bench/pmem/report.py.
#
#   [REPS=3] bash bench/pmem/bench.sh [--quick] [--write-docs]
#
# Environment: REPS (repetitions, default 3; --quick: 1), FILES (1000), FILE_MIB (4),
# TXNS (transactions per run, 2000), THREADS ("1,2"), SEED (1), PMEM_DIR (where the image
# files go, /var/tmp; each is unlinked as soon as it is mapped), RESULTS=FILE (keep the JSON
# lines), DOCS=FILE (the file --write-docs writes, docs/benchmarks.md).
# --quick: REPS=1, FILES=100, FILE_MIB=1, TXNS=500 (seconds).
# Within a repetition every system gets a freshly made image and the same transactions
# (same seed); the order of the systems rotates between repetitions; figures are medians
# over the repetitions. Exit 0: the run succeeded; 1: it failed; 2: cannot run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
me=bench/pmem/bench.sh
source bench/pmem/lib.sh  # parse_args, cannot, start_clock, stop_clock
parse_args "$@"
if ((quick)); then
  reps=${REPS:-1} files=${FILES:-100} file_mib=${FILE_MIB:-1} txns=${TXNS:-500}
else
  reps=${REPS:-3} files=${FILES:-1000} file_mib=${FILE_MIB:-4} txns=${TXNS:-2000}
fi
threads=${THREADS:-1,2} seed=${SEED:-1} dir=${PMEM_DIR:-/var/tmp} docs=${DOCS:-docs/benchmarks.md}
for v in reps files file_mib txns; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "${v^^}=${!v}: expected a positive whole number"
done
[[ $seed =~ ^[0-9]+$ ]] || cannot "SEED=$seed: expected a whole number"
[[ $threads =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || cannot "THREADS=$threads: expected e.g. 1,2"
command -v python3 >/dev/null || cannot "python3 is missing"
[[ -d $dir && -w $dir ]] || cannot "PMEM_DIR=$dir is not a writable directory"
# One image at a time: the files, a quarter more for pending blocks, and the log.
need_mib=$((files * file_mib * 5 / 4 + 64))
avail_mib=$(df -Pm "$dir" | awk 'NR == 2 {print $4}')
((avail_mib > need_mib + 1024)) || cannot "$dir has $avail_mib MiB free, $need_mib MiB (+1 GiB spare) needed"

bin=${CARGO_TARGET_DIR:-target}/release/examples/txbench
echo "building txbench (cargo build --release -p intactfs-pmem --example txbench -j 1) ..." >&2
cargo build --release -p intactfs-pmem --example txbench -j 1 -q || cannot "building txbench failed"

results=${RESULTS:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/intactfs-pmem-bench.XXXXXX")
child="" txpid=none
cleanup() {
  if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  rm -rf "$tmp"
  # txbench unlinks its images as soon as they are mapped; a killed run leaves nothing,
  # but remove any that a crash between create and unlink could leave.
  rm -f "$dir"/intactfs-txbench-"$txpid"-*.img
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[[ -n $results ]] || results=$tmp/results.jsonl
: >"$results"

start_clock
args=(--files "$files" --file-mib "$file_mib" --txns "$txns" --threads "$threads" --latency fcfs,none --reps "$reps" --seed "$seed" --dir "$dir")
echo "running $bin ${args[*]} ..." >&2
set +e
"$bin" "${args[@]}" >>"$results" 2>"$tmp/stderr" &
child=$! txpid=$!
wait "$child"; rc=$?
set -e
child=""
cat "$tmp/stderr" >&2
stop_clock
if ((rc != 0)); then
  echo "$me: txbench failed (exit $rc); results so far in $results" >&2
  [[ -n ${RESULTS:-} ]] || cat "$results" >&2
  exit 1
fi
report=(python3 bench/pmem/report.py "$results" --reps "$reps" --command "$command_line" --date "$date"
  --elapsed "${e}s" --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --pressure "$pressure"
  --txbench-args "${args[*]}")
if ((write_docs)); then report+=(--write-docs "$docs"); fi
"${report[@]}"
