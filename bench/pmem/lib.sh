# Shell helpers shared by bench/pmem/bench.sh and bench/pmem/sqlite.sh. Sourced from the
# repository root after setting me (the script's path from the root, as messages name it).

cannot() { echo "$me: cannot run: $*" >&2; exit 2; }

parse_args() {  # parse_args "$@": --quick, --write-docs (sets quick, write_docs); -h prints the header
  local a
  quick=0 write_docs=0
  for a in "$@"; do
    case $a in
      --quick) quick=1 ;;
      --write-docs) write_docs=1 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$me" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "$me: unknown argument $a (try --help)" >&2; exit 2 ;;
    esac
  done
}

psi() { awk '/^some/ {sub("total=", "", $5); print $5}' "/proc/pressure/$1" 2>/dev/null || echo 0; }

start_clock() {  # the load, PSI totals, time and date at the start (load0 psi0 psio0 t0 date)
  load0=$(cut -d' ' -f1-3 /proc/loadavg) psi0=$(psi cpu) psio0=$(psi io) t0=$(date +%s)
  date=$(date -u '+%Y-%m-%d %H:%M UTC')
}

stop_clock() {  # e (seconds since start_clock, at least 1), pressure and command_line for the report
  e=$(($(date +%s) - t0))
  ((e > 0)) || e=1
  pressure="CPU $((($(psi cpu) - psi0) / 10000 / e))%, I/O $((($(psi io) - psio0) / 10000 / e))%"
  # The settings given in the environment, so that the command reruns the same run.
  local v env=""
  for v in FILES FILE_MIB TXNS THREADS SEED; do
    [[ -n ${!v:-} ]] && env+="$v=${!v} "
  done
  command_line="REPS=$reps ${env}bash $me"
  if ((quick)); then command_line+=" --quick"; fi
  if ((write_docs)); then command_line+=" --write-docs"; fi
}
