# Shell helpers shared by libintact/test.sh and libintact/test_pmem.sh (sourced): pass and
# fail counters, running a step under a timeout, the daemon's liveness, waiting for files.
# The caller sets TIMEOUT and INTACT.

FAILS=0
PASSES=0
ok() { PASSES=$((PASSES + 1)); echo "ok: $*"; }
bad() { FAILS=$((FAILS + 1)); echo "FAIL: $*"; }
section() { echo; echo "== $*"; }

# run NAME CMD...: passes if CMD exits 0; its output is shown indented.
run() {
    local name=$1 out rc=0
    shift
    out=$(timeout "$TIMEOUT" "$@" 2>&1) || rc=$?
    [ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
    if [ $rc -eq 0 ]; then ok "$name"; else bad "$name (exit $rc)"; fi
}

# eq NAME GOT WANT
eq() {
    if [ "$2" = "$3" ]; then ok "$1: $2"; else bad "$1: got '$2', want '$3'"; fi
}

# The daemon we started: alive, not a zombie, and still running the intact binary (a
# recycled pid is left alone).
daemon_alive() {
    local pid=$1 st
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ "$st" != Z ] && [ "$st" != X ] || return 1
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$INTACT")" ]
}

wait_dead() {
    local pid=$1 i
    for i in $(seq 1 200); do
        daemon_alive "$pid" || return 0
        sleep 0.05
    done
    return 1
}

# wait_file FILE: up to 30 s for FILE to exist.
wait_file() {
    local i
    for i in $(seq 1 300); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

sha_of() { if [ -e "$1" ]; then sha256sum <"$1" | cut -d' ' -f1; else echo absent; fi; }
