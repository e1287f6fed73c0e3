#!/usr/bin/env bash
# APM validation (docs/validation.md, "APM validation"): run the explorer's fixtures and
# generated workloads on ext4, xfs, btrfs and intactfs under `intact blk validate-apm`, each
# against its default APM (today's kernel models: ext4, ext4-dioread_lock, xfs,
# btrfs-linux6; intactfs), and print the table. Needs root (loop devices, mounts) and
# xfsprogs/btrfs-progs/strace/gcc.
#   bash bench/blk/validate.sh [--generated N] [--seed S] [--tear BYTES] [--fs LIST]
#                              [--thesis] [--json FILE]
# --generated N: generated workloads per file system (default 20; the recorded slow run
#   used 100, about 10 s each on 2 shared cores). --fs: which of ext4, ext4:dioread_lock,
#   xfs, btrfs, intactfs (default all). --thesis: also ext4 and btrfs under the thesis'
#   ext4-o and btrfs, for comparison. INTACT=path uses that binary instead of building a
#   release one.
set -euo pipefail
cd "$(dirname "$0")/../.."
generated=20 seed=1 tear=4096 json= thesis=0 fslist=ext4,ext4:dioread_lock,xfs,btrfs,intactfs
while [ $# -gt 0 ]; do
  case $1 in
    --generated) generated=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --tear) tear=$2; shift 2 ;;
    --fs) fslist=$2; shift 2 ;;
    --thesis) thesis=1; shift ;;
    --json) json=$2; shift 2 ;;
    *) echo "usage: $0 [--generated N] [--seed S] [--tear BYTES] [--fs LIST] [--thesis] [--json FILE]" >&2; exit 2 ;;
  esac
done
if [ -n "${INTACT:-}" ]; then
  intact=$INTACT
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
else
  source bench/lib.sh
fi
# The explorer's fixtures that need no setup: one protocol family each.
fixtures=(basic rename writes sync symlink_hardlink fallocate)
args=()
for f in "${fixtures[@]}"; do
  gcc -O1 -o "$tmp/$f" "crates/intact-cli/tests/fixtures/$f.c"
  args+=(--workload "$tmp/$f")
done
labels=()
run() { # label, extra args...
  local label=$1; shift
  echo "== $label ($(date -u +%H:%M:%S))" >&2
  local start=$SECONDS rc=0
  "$intact" blk validate-apm -j 2 --seed "$seed" --generated "$generated" --tear "$tear" "${args[@]}" "$@" --json "$tmp/$label.json" >"$tmp/$label.out" 2>"$tmp/$label.err" || rc=$?
  if [ "$rc" -gt 1 ]; then
    cat "$tmp/$label.err" >&2
    echo "validate-apm failed for $label (exit $rc)" >&2
    exit "$rc"
  fi
  labels+=("$label")
  echo "$label: $((SECONDS - start)) s" >&2
}
IFS=, read -ra fses <<<"$fslist"
for f in "${fses[@]}"; do
  case $f in
    ext4:dioread_lock) run ext4-dioread_lock --fs ext4 --mount-opts ext4=dioread_lock ;;
    ext4|xfs|btrfs|intactfs) run "$f" --fs "$f" ;;
    *) echo "--fs: unknown $f (ext4, ext4:dioread_lock, xfs, btrfs, intactfs)" >&2; exit 2 ;;
  esac
done
if [ "$thesis" = 1 ]; then
  run thesis --fs ext4,btrfs --apm ext4=ext4-o --apm btrfs=btrfs
fi
python3 - "$tmp" "$json" "${labels[@]}" <<'PY'
import json, sys, collections
tmp, out, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
rows, all_results = [], []
for label in labels:
    d = json.load(open(f"{tmp}/{label}.json"))
    all_results += d["results"]
    groups = collections.OrderedDict()
    for r in d["results"]:
        groups.setdefault((r["fs"], r["apm"], r["mount_options"]), []).append(r)
    for (fs, apm, mo), rs in groups.items():
        s = lambda k: sum(r[k] for r in rs)
        torn_unmount = sum(1 for r in rs for f in r["findings"] if f["what"] == "unmountable" and f["kind"] == "torn")
        kinds = collections.Counter(f["what"] for r in rs for f in r["findings"])
        rows.append((fs + (f" -o {mo}" if mo else ""), apm.rsplit("/", 1)[-1].removesuffix(".toml"), len(rs), s("images"), s("allowed"), s("forbidden"), s("unmountable"), torn_unmount, s("fsck_errors"), sum(1 for r in rs if r["forbidden"]), sum(1 for r in rs if not r["enumeration_complete"])))
print("| file system | APM | workloads | crash images | allowed | forbidden | did not mount | (of which torn) | fsck errors | workloads with forbidden images | incomplete enumerations |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
print()
for r in all_results:
    forb = [f for f in r["findings"] if f["what"] in ("forbidden", "missing")]
    if forb:
        f = forb[0]
        mo = f" -o {r['mount_options']}" if r["mount_options"] else ""
        print(f"- {r['fs']}{mo}, {r['workload']['name']}: {len(forb)} forbidden images; e.g. image {f['image']} ({f['kind']}, epochs < {f['epoch']}): " + "; ".join(f["detail"][:3]))
if out:
    json.dump({"results": all_results}, open(out, "w"), indent=1)
PY
