#!/usr/bin/env bash
# Benchmarks through the intactfs FUSE mount, side by side in one run with the kernel's ext4
# and with a passthrough FUSE file system over ext4 (the bare cost of FUSE); writes its
# section of docs/benchmarks.md (between the bench/fs/mount.sh markers).
#
#   [REPS=3] bash bench/fs/mount.sh [--quick]     (as root: losetup, mkfs.ext4, mount, FUSE)
#
# About 7 minutes per repetition plus ~2 minutes of set-up (13 GiB of images written); --quick
# (1 GiB images, small sizes, 3 s runs, one repetition) takes about 1.5 minutes. Needs jq,
# gcc, g++, git, libleveldb-dev; RESULTS=FILE keeps the raw JSON lines (and FILE.args, the
# report's arguments, to regenerate the report from them).
#
# Three systems, each on its own loop device over a file in a fresh /var/tmp/intact-bench.*
# directory on the root disk (the files are written full of zeros first, so no block write
# allocates in the root file system); /sys/block/loopN/stat of that loop device counts what
# each system sends to the disk:
#   ext4         mkfs.ext4 -b 4096 (nodiscard, inode tables and journal zeroed at mkfs),
#                default mount options, on loop device 1 over ext4.img;
#   passthrough  crates/intactfs-fuse/examples/passthrough.rs (the intactfs mount's fuser
#                configuration) over a directory of a second such ext4, loop 2 over pt.img;
#   intactfs     `intact fs mount --daemon` (its defaults: 4 threads, fsync=durable, commit=5,
#                dirty limit a tenth of RAM) of an image made by
#                `intact fs mkfs`, a zero-filled file in a third ext4 (loop 3 over host.img)
#                that holds nothing else: loop 3 counts the engine's writes (its pwrites and
#                fdatasyncs of the image file), plus that ext4's own journal (a few KiB).
# Every repetition starts from freshly made file systems; every workload runs on the three
# systems in turn (the order rotates between repetitions) in an empty directory that is
# removed (and the removal synced) afterwards. Figures are medians over the repetitions.
# Mounts, daemons, loop devices and images are removed on exit, even on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: bash bench/fs/mount.sh [--quick]" >&2; exit 2 ;;
esac
[[ $(id -u) == 0 ]] || { echo "mount.sh: needs root (losetup, mkfs.ext4, mount, FUSE)" >&2; exit 1; }
for tool in jq gcc g++ git mkfs.ext4 losetup; do
  command -v "$tool" >/dev/null || { echo "mount.sh: $tool is missing" >&2; exit 1; }
done
[[ -e /usr/include/leveldb/db.h ]] || { echo "mount.sh: LevelDB headers missing (apt-get install -y libleveldb-dev)" >&2; exit 1; }

started=$(date +%s)
# Other work on the shared machine (lifetime-average CPU of processes above 20%), at the start.
others=$(ps -eo ni=,pcpu=,comm= --sort=-pcpu | awk '$2 > 20 {printf "%s%s (nice %s, %s%% CPU)", sep, $3, $1, $2; sep=", "}' | head -c 400)
psi() { awk '/^some/ {sub("total=", "", $5); print $5}' "/proc/pressure/$1" 2>/dev/null || echo 0; }
psi_cpu0=$(psi cpu); psi_io0=$(psi io)
load0=$(cut -d' ' -f1-3 /proc/loadavg)

work=$(mktemp -d /var/tmp/intact-bench.XXXXXX)
mnt_ext4=$work/mnt/ext4 mnt_pt=$work/mnt/pt mnt_ifs=$work/mnt/ifs
back_pt=$work/backing/pt back_host=$work/backing/host
loop_ext4="" loop_pt="" loop_host="" pt_pid="" ifs_pid=""
intact=$PWD/target/release/intact
pt_bin=$PWD/target/release/examples/passthrough

kill_pid() {  # kill_pid PID: TERM, then KILL after 10 s (only processes this script started)
  local p=$1 i
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 0
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}
unmount_fuse() {
  if [[ -n $ifs_pid ]] || grep -q " $mnt_ifs " /proc/mounts; then
    if grep -q " $mnt_ifs " /proc/mounts; then
      "$intact" fs umount "$mnt_ifs" --timeout 300 >/dev/null 2>&1 || umount -l "$mnt_ifs" 2>/dev/null || true
    fi
    kill_pid "$ifs_pid"; ifs_pid=""
  fi
  if [[ -n $pt_pid ]] || grep -q " $mnt_pt " /proc/mounts; then
    if grep -q " $mnt_pt " /proc/mounts; then umount "$mnt_pt" 2>/dev/null || umount -l "$mnt_pt" 2>/dev/null || true; fi
    kill_pid "$pt_pid"
    [[ -n $pt_pid ]] && { wait "$pt_pid" 2>/dev/null || true; }
    pt_pid=""
  fi
}
unmount_ext4() {
  local m
  for m in "$mnt_ext4" "$back_pt" "$@"; do
    if grep -q " $m " /proc/mounts; then umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
  done
}
cleanup() {
  set +e
  cd /
  unmount_fuse
  unmount_ext4 "$back_host"
  for l in "$loop_ext4" "$loop_pt" "$loop_host"; do [[ -n $l ]] && losetup -d "$l"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---------------------------------------------------------------- parameters
reps=${REPS:-3}
if ((quick)); then
  reps=${REPS:-1}; img_mib=1024; dur=3; a_mib=20
  create_files=3000; fs_files=1000; seq_size=128m; rand_size=64m; rand_ops=2000
  sqlite_rows=300; ldb_num=20000; ldb_sync_num=200; tree_limit=600; log_cap=128m
else
  img_mib=4096; dur=20; a_mib=100
  create_files=50000; fs_files=10000; seq_size=1g; rand_size=1g; rand_ops=20000
  sqlite_rows=2000; ldb_num=100000; ldb_sync_num=1000; tree_limit=0; log_cap=512m
fi
timeout_s=$((quick ? 300 : 1200))
personalities=(
  "createfiles --files $create_files --dirwidth 100 --filesize 16k --iosize 1m --threads 16"
  "varmail --files 1000 --dirwidth 1000000 --filesize 16k --appendsize 16k --iosize 1m --threads 16 --prealloc 80 --duration $dur"
  "fileserver --files $fs_files --dirwidth 20 --filesize 128k --appendsize 16k --iosize 1m --threads 50 --prealloc 80 --duration $dur"
  "webserver --files 1000 --dirwidth 20 --filesize 16k --appendsize 16k --iosize 1m --threads 100 --prealloc 100 --duration $dur --log-cap $log_cap"
  "seqwrite --filesize $seq_size --iosize 1m"
  "randwrite --filesize $rand_size --iosize 4k --ops $rand_ops --fsync-every 100"
)

# ---------------------------------------------------------------- build
echo "building (cargo -j 1) ..." >&2
cargo build --release -j 1 -q -p intact-cli
cargo build --release -j 1 -q -p intactfs-fuse --example passthrough
mkdir -p "$work/bin" "$work/mnt" "$work/backing" "$work/home" "$mnt_ext4" "$mnt_pt" "$mnt_ifs" "$back_pt" "$back_host"
gcc -O2 -pthread -o "$work/bin/personalities" bench/fs/personalities.c
g++ -O2 -o "$work/bin/leveldb_fill" bench/fs/leveldb_fill.cc -lleveldb
pers=$work/bin/personalities ldb=$work/bin/leveldb_fill mb="python3 $PWD/bench/fs/mount_bench.py"

# ---------------------------------------------------------------- the git tree
# The PostgreSQL 15 source tree (the release tarball the study caches) if present, else a
# generated tree of the same shape (deterministic).
pg_tar=study/out/build/postgres/src/postgresql-15_15.18.orig.tar.bz2
mkdir "$work/tree"
if [[ -f $pg_tar ]]; then
  tar xjf "$pg_tar" -C "$work/tree" --strip-components=1
  tree_desc="the PostgreSQL 15.18 source tree (\`$pg_tar\`, unpacked)"
else
  python3 - "$work/tree" <<'EOF'
import os, random, sys
root, rng = sys.argv[1], random.Random(1)
words = ["int", "return", "struct", "static", "void", "if", "else", "for", "while", "const", "char", "buffer", "state", "node", "list", "error", "value", "index", "size", "result"]
for i in range(8000):
    d = os.path.join(root, f"d{i % 40:02d}", f"s{i % 400:03d}")
    os.makedirs(d, exist_ok=True)
    n = int(rng.expovariate(1 / 19000)) + 200
    text = []
    while sum(map(len, text)) < n:
        text.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + ";\n")
    open(os.path.join(d, f"f{i:05d}.c"), "w").write("".join(text)[:n])
EOF
  tree_desc="a generated tree (no PostgreSQL tarball at \`$pg_tar\`)"
fi
if ((tree_limit)); then  # --quick: a slice of the tree
  find "$work/tree" -type f | sort | tail -n +$((tree_limit + 1)) | xargs -r rm -f
fi
# Every file goes into the commit: the tree's own .gitignore files would leave some out.
find "$work/tree" -name .gitignore -delete
tree_files=$(find "$work/tree" -type f | wc -l)
tree_mib=$(du -sm --apparent-size "$work/tree" | cut -f1)
tree_desc+=" without its .gitignore files: $tree_files files, $tree_mib MiB"

# ---------------------------------------------------------------- devices
echo "writing the images ($img_mib MiB each) ..." >&2
dd if=/dev/zero of="$work/ext4.img" bs=4M count=$((img_mib / 4)) status=none
dd if=/dev/zero of="$work/pt.img" bs=4M count=$((img_mib / 4)) status=none
dd if=/dev/zero of="$work/host.img" bs=4M count=$((img_mib / 4 + 64)) status=none
loop_ext4=$(losetup -f --show "$work/ext4.img")
loop_pt=$(losetup -f --show "$work/pt.img")
loop_host=$(losetup -f --show "$work/host.img")
mkext4() { mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$1"; }
mkext4 "$loop_host"
mount "$loop_host" "$back_host"
dd if=/dev/zero of="$back_host/intactfs.img" bs=4M count=$((img_mib / 4)) status=none
sync

declare -A dev dir syncspec
dev[ext4]=$(basename "$loop_ext4"); dev[passthrough]=$(basename "$loop_pt"); dev[intactfs]=$(basename "$loop_host")
syncspec[ext4]="syncfs:$mnt_ext4"; syncspec[passthrough]="syncfs:$back_pt"; syncspec[intactfs]="streamsync:$mnt_ifs"
dir[ext4]=$mnt_ext4; dir[passthrough]=$mnt_pt; dir[intactfs]=$mnt_ifs

wait_mount() {  # wait_mount MNT PID
  local i
  for ((i = 0; i < 200; i++)); do
    grep -q " $1 " /proc/mounts && return 0
    kill -0 "$2" 2>/dev/null || { echo "mount.sh: the daemon for $1 exited" >&2; return 1; }
    sleep 0.05
  done
  echo "mount.sh: $1 did not appear" >&2; return 1
}
fresh() {  # new ext4, passthrough backing ext4 and intactfs; all three mounted
  unmount_fuse
  unmount_ext4
  mkext4 "$loop_ext4"; mount "$loop_ext4" "$mnt_ext4"
  mkext4 "$loop_pt"; mount "$loop_pt" "$back_pt"
  mkdir "$back_pt/data"
  "$intact" fs mkfs "$back_host/intactfs.img" --force >/dev/null
  sync
  "$pt_bin" "$back_pt/data" "$mnt_pt" 2>>"$work/passthrough.log" &
  pt_pid=$!
  wait_mount "$mnt_pt" "$pt_pid"
  "$intact" fs mount "$back_host/intactfs.img" "$mnt_ifs" --daemon --pid-file "$work/ifs.pid" --log "$work/intactfs.log" >/dev/null
  ifs_pid=$(cat "$work/ifs.pid")
  wait_mount "$mnt_ifs" "$ifs_pid"
}

# ---------------------------------------------------------------- running one workload
results=$work/results.jsonl
: >"$results"
stat_of() { awk '{printf "%.0f %.0f\n", $7 * 512, ($16 == "" ? 0 : $16)}' "/sys/block/$1/stat"; }
cpu_of() { [[ -n ${1:-} && -r /proc/$1/stat ]] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
daemon_of() { case $1 in intactfs) echo "$ifs_pid" ;; passthrough) echo "$pt_pid" ;; *) echo "" ;; esac; }
sys_sync() {  # make everything on system $1 durable
  if [[ $1 == intactfs ]]; then timeout 300 $mb sync --intactfs "$mnt_ifs"; else timeout 300 $mb sync "${syncspec[$1]#syncfs:}"; fi
}
failures=0
# run SYSTEM NAME REP CMD...: CMD prints one JSON line; @D@ in CMD is the work directory.
run() {
  local sys=$1 name=$2 rep=$3; shift 3
  local d=${dir[$sys]}/w args=() a out err=$work/err.txt rc=0
  for a in "$@"; do args+=("${a//@D@/$d}"); done
  mkdir "$d"
  sys_sync "$sys" || echo "mount.sh: syncing $sys failed" >&2
  local pid; pid=$(daemon_of "$sys")
  read -r b0 f0 < <(stat_of "${dev[$sys]}")
  local c0; c0=$(cpu_of "$pid")
  local t0; t0=$(date +%s.%N)
  out=$(cd "$d" && HOME=$work/home timeout --kill-after=10 "$timeout_s" "${args[@]}" 2>"$err") || rc=$?
  local t1; t1=$(date +%s.%N)
  local c1; c1=$(cpu_of "$pid")
  read -r b1 f1 < <(stat_of "${dev[$sys]}")
  if ((rc == 0)) && jq -e . >/dev/null 2>&1 <<<"$out"; then
    jq -c --arg sys "$sys" --arg name "$name" --argjson rep "$rep" --argjson b $((b1 - b0)) --argjson f $((f1 - f0)) \
      --argjson cpu "$(awk -v a="$c0" -v b="$c1" 'BEGIN {print (b - a) / 100}')" --argjson wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
      '. + {system: $sys, name: $name, rep: $rep, dev_bytes: $b, dev_flushes: $f, daemon_cpu_s: $cpu, wall_s: $wall}' <<<"$out" >>"$results"
    echo "  $name on $sys: ok ($(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s)" >&2
  else
    failures=$((failures + 1))
    jq -nc --arg sys "$sys" --arg name "$name" --argjson rep "$rep" --argjson rc "$rc" --arg err "$(tail -c 1500 "$err")$(tail -c 500 <<<"$out")" \
      '{system: $sys, name: $name, rep: $rep, failed: true, rc: $rc, error: $err}' >>"$results"
    echo "  $name on $sys: FAILED (exit $rc): $(tail -c 300 "$err")" >&2
  fi
  # Remove the work directory (not timed) and make the removal durable.
  if grep -q " ${dir[$sys]} " /proc/mounts; then
    timeout 600 rm -rf "$d" || echo "mount.sh: removing $d failed" >&2
    sys_sync "$sys" || echo "mount.sh: syncing $sys failed" >&2
  fi
}

git_bench() {  # git_bench MODE: copies the tree in, then git init + add -A + commit
  local mode=$1 sync cfg
  case $mode in
    default) cfg="" ;;
    committed) cfg="-c core.fsync=committed -c core.fsyncMethod=fsync" ;;
  esac
  cat <<EOF
set -e
now() { date +%s.%N; }
t0=\$(now); cp -a "$work/tree" tree; t1=\$(now)
$( [[ $SYS == intactfs ]] && echo "$mb sync --intactfs $mnt_ifs" || echo "$mb sync ${syncspec[$SYS]#syncfs:}" ); t2=\$(now)
git -C tree init -q
t3=\$(now); git -C tree -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid $cfg add -A; t4=\$(now)
git -C tree -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid $cfg commit -q -m bench; t5=\$(now)
$( [[ $SYS == intactfs ]] && echo "$mb sync --intactfs $mnt_ifs" || echo "$mb sync ${syncspec[$SYS]#syncfs:}" ); t6=\$(now)
files=\$(git -C tree ls-files | wc -l)
git -C tree fsck --no-progress --no-dangling >&2
[ "\$files" -eq $tree_files ] || { echo "git: \$files files in the commit, want $tree_files" >&2; exit 1; }
d() { awk -v a="\$1" -v b="\$2" 'BEGIN {printf "%.6f", b - a}'; }
echo "{\"bench\": \"git\", \"mode\": \"$mode\", \"files\": \$files, \"copy_s\": \$(d \$t0 \$t1), \"copy_sync_s\": \$(d \$t1 \$t2), \"add_s\": \$(d \$t3 \$t4), \"commit_s\": \$(d \$t4 \$t5), \"git_sync_s\": \$(d \$t5 \$t6)}"
EOF
}

rotate() {  # rotate REP ITEMS...: the items, starting at index REP mod count
  local r=$1; shift
  local n=$# i
  local items=("$@")
  for ((i = 0; i < n; i++)); do echo "${items[$(((i + r) % n))]}"; done
}

for ((r = 1; r <= reps; r++)); do
  echo "repetition $r/$reps: fresh file systems" >&2
  fresh
  mapfile -t order < <(rotate "$r" ext4 passthrough intactfs)

  # Table 5.3 through the mount: ext4, passthrough, intactfs one stream and two streams.
  for v in append truncate overwrite; do
    for cfg in $(rotate "$r" ext4 passthrough intactfs-1 intactfs-2); do
      case $cfg in
        intactfs-*) run intactfs "table53-$v-${cfg#intactfs-}" "$r" $mb table53 --dir @D@ --variant "$v" --a-mib "$a_mib" --streams "${cfg#intactfs-}" --intactfs --blockdev "${dev[intactfs]}" --sync-path "$mnt_ifs" --system "$cfg" ;;
        *) run "$cfg" "table53-$v" "$r" $mb table53 --dir @D@ --variant "$v" --a-mib "$a_mib" --blockdev "${dev[$cfg]}" --sync-path "${syncspec[$cfg]#syncfs:}" --system "$cfg" ;;
      esac
    done
  done

  # Filebench-style personalities.
  for p in "${personalities[@]}"; do
    read -ra pa <<<"$p"
    for s in "${order[@]}"; do
      run "$s" "${pa[0]}" "$r" "$pers" "${pa[0]}" @D@ "${pa[@]:1}" --seed "$r" --sync "${syncspec[$s]}" --label "$s" --blockdev "${dev[$s]}"
    done
  done

  # git add + commit of a large tree (git's default fsync settings, and core.fsync=committed).
  for mode in default committed; do
    for s in "${order[@]}"; do
      SYS=$s
      run "$s" "git-$mode" "$r" bash -c "$(git_bench "$mode")"
    done
  done

  # SQLite: inserts, each its own transaction.
  for s in "${order[@]}"; do
    if [[ $s == intactfs ]]; then
      for m in default streamsync-commit streamsync-end; do
        run intactfs "sqlite-$m" "$r" $mb sqlite --dir @D@ --rows "$sqlite_rows" --row-bytes 120 --mode "$m" --intactfs --blockdev "${dev[intactfs]}" --sync-path "$mnt_ifs" --system intactfs
      done
    else
      run "$s" sqlite-default "$r" $mb sqlite --dir @D@ --rows "$sqlite_rows" --row-bytes 120 --blockdev "${dev[$s]}" --sync-path "${syncspec[$s]#syncfs:}" --system "$s"
    fi
  done

  # LevelDB fillrandom (sync off) and fillsync (sync on).
  for s in "${order[@]}"; do
    run "$s" leveldb-fillrandom "$r" "$ldb" @D@ --num "$ldb_num" --value-size 100 --final-sync "${syncspec[$s]}"
    run "$s" leveldb-fillsync "$r" "$ldb" @D@ --num "$ldb_sync_num" --value-size 100 --sync --final-sync "${syncspec[$s]}"
    if [[ $s == intactfs ]]; then
      run intactfs leveldb-fillsync-streamsync "$r" "$ldb" @D@ --num "$ldb_sync_num" --value-size 100 --sync --stream leveldb --ignore-fsync --streamsync-each --final-sync "${syncspec[$s]}"
    fi
  done
done

# The intactfs daemon's own totals for the last repetition (printed when it unmounts).
unmount_fuse
ifs_totals=$(grep -h "unmounted and written back" "$work/intactfs.log" | tail -1 || true)

elapsed=$(($(date +%s) - started))
pressure="CPU $(( ($(psi cpu) - psi_cpu0) / 10000 / (elapsed > 0 ? elapsed : 1) ))%, I/O $(( ($(psi io) - psi_io0) / 10000 / (elapsed > 0 ? elapsed : 1) ))%"
cmd="bash bench/fs/mount.sh"
if ((quick)); then cmd+=" --quick"; fi
if [[ -n ${REPS:-} ]]; then cmd="REPS=$REPS $cmd"; fi
# The commit as the report states it (report.py's machine()), kept in the saved arguments.
rev=$(cd bench/fs && python3 -c 'import report; print(report.machine()["commit"])')
report_args=(
  --command "$cmd" --reps "$reps" --elapsed "$elapsed" --image-mib "$img_mib" --pressure "$pressure"
  --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" --others "$others" --tree "$tree_desc" --failures "$failures" --intactfs-totals "$ifs_totals"
  --params "$(printf '%s\n' "${personalities[@]}")" --a-mib "$a_mib" --sqlite-rows "$sqlite_rows"
  --ldb-num "$ldb_num" --ldb-sync-num "$ldb_sync_num" --duration "$dur" --commit "$rev"
)
if [[ -n ${RESULTS:-} ]]; then
  # Keep the raw results and the report's arguments: the report can be regenerated from them
  # (python3 bench/fs/mount_report.py RESULTS docs/benchmarks.md $(cat RESULTS.args), via eval).
  cp "$results" "$RESULTS"
  printf '%q ' "${report_args[@]}" > "$RESULTS.args"
fi
python3 bench/fs/mount_report.py "$results" docs/benchmarks.md "${report_args[@]}"
