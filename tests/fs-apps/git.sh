#!/usr/bin/env bash
# git workload, deterministic (fixed names, dates and contents, so commit ids are the same
# on every file system):
#   git.sh run DIR       init a repository in DIR (created), commit a generated tree of
#                        ~350 files, then a second commit with renames, deletions, edits,
#                        new files and mode changes, gc into a pack, check out both commits
#   git.sh verify DIR    fsck, commit ids, status, index and working tree digests
# stdout is the normalized result.
set -euo pipefail
cmd=$1 dir=$2

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent
export GIT_AUTHOR_NAME="Intact Test" GIT_AUTHOR_EMAIL=test@intact.invalid
export GIT_COMMITTER_NAME="Intact Test" GIT_COMMITTER_EMAIL=test@intact.invalid
export TZ=UTC LC_ALL=C
# Deterministic packs (one delta-search thread), no background gc, every fsync git knows.
gitc() { git -c core.fsync=all -c core.fsyncMethod=fsync -c pack.threads=1 -c gc.auto=0 -c maintenance.auto=false "$@"; }
# Digest of the tracked files as they are in the working tree (mode, content, link target).
worktree() {
  git ls-files -z | python3 -c '
import hashlib, os, sys
h = hashlib.sha256()
for p in sorted(sys.stdin.buffer.read().split(b"\0")):
    if not p:
        continue
    if os.path.islink(p):
        h.update(p + b" -> " + os.readlink(p) + b"\n")
    else:
        h.update(p + b" %o " % os.stat(p).st_mode + hashlib.sha256(open(p, "rb").read()).digest() + b"\n")
print(h.hexdigest())'
}

verify() {
  cd "$dir"
  echo "fsck: $(gitc fsck --full --strict --no-progress 2>&1 && echo clean)"
  echo "HEAD: $(git rev-parse HEAD)"
  echo "HEAD~1: $(git rev-parse HEAD~1)"
  echo "branch: $(git symbolic-ref HEAD)"
  echo "log:"; git log --format='  %H %T %an <%ae> %ad %cd %s' --date=iso-strict
  local st
  st=$(gitc status --porcelain=v1 --untracked-files=all)
  if [ -z "$st" ]; then echo "status: clean"; else echo "status:"; sed 's/^/  /' <<<"$st"; fi
  echo "ignored:"; gitc status --porcelain=v1 --ignored | grep '^!!' | sed 's/^/  /'
  echo "index: $(git ls-files -s --debug | grep -v -E '^  (ctime|mtime|dev|uid|size|flags):' | sha256sum | cut -c1-64)"
  echo "index entries: $(git ls-files | wc -l)"
  echo "objects: $(git rev-list --all --objects | sort | sha256sum | cut -c1-64)"
  echo "worktree: $(worktree)"
  echo "diff against HEAD: $(git diff --stat HEAD | tail -1)"
}

case $cmd in
run)
  mkdir -p "$dir"
  cd "$dir"
  gitc init -q -b main .
  python3 - <<'EOF'
import os, random
rng = random.Random(42)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
for d in range(30):
    dd = f"src/mod{d:02d}" + ("/inner" if d % 4 == 0 else "")
    os.makedirs(dd, exist_ok=True)
    for i in range(11):
        lines = [f"// module {d} file {i}\n"] + [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) + "\n" for _ in range(rng.randint(0, 400))]
        p = f"{dd}/f{i:02d}.c"
        with open(p, "w") as f:
            f.writelines(lines)
        os.chmod(p, 0o755 if i % 10 == 3 else 0o644)
os.makedirs("assets", exist_ok=True)
for i in range(8):
    with open(f"assets/blob{i}.bin", "wb") as f:
        f.write(rng.randbytes(50_000 * (i + 1)))
with open("assets/zeros.bin", "wb") as f:
    f.write(bytes(2 << 20))
os.makedirs("empty-ish", exist_ok=True)
open("empty-ish/empty", "w").close()
os.symlink("src/mod01/f01.c", "link-to-file")
os.symlink("assets", "link-to-dir")
with open(".gitignore", "w") as f:
    f.write("*.log\nbuild/\n")
os.makedirs("build", exist_ok=True)
for n in ["a.log", "build/out.o"]:
    with open(n, "w") as f:
        f.write("ignored\n")
EOF
  gitc add -A
  GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z" gitc commit -q -m "first commit"
  echo "commit 1: $(git rev-parse HEAD) tree $(git rev-parse 'HEAD^{tree}')"
  echo "fsck 1: $(gitc fsck --full --strict --no-progress 2>&1 && echo clean)"
  echo "status 1:"; gitc status --porcelain | sed 's/^/  /'

  # Second commit: renames, deletions, edits, new files, mode changes.
  mkdir -p moved
  for d in 01 02 03 05; do
    for i in 00 01 02 03 04; do gitc mv "src/mod$d/f$i.c" "moved/mod$d-f$i.c"; done
  done
  for d in 06 07; do gitc rm -q -r "src/mod$d"; done
  for d in 09 10 11; do
    for i in 00 02 04 06 08; do
      printf 'edited line %s\n' "$d$i" >>"src/mod$d/f$i.c"
      sed -i '3s/^/changed: /' "src/mod$d/f$i.c"
    done
  done
  mkdir -p src/new
  for i in $(seq 1 20); do seq "$i" $((i * 50)) >"src/new/n$i.txt"; done
  chmod 755 src/mod13/f00.c src/mod13/f01.c
  chmod 644 src/mod14/f03.c
  rm link-to-dir && ln -s src link-to-dir
  gitc add -A
  GIT_AUTHOR_DATE="2024-01-02T12:34:56Z" GIT_COMMITTER_DATE="2024-01-02T12:35:00Z" gitc commit -q -m "second commit: renames, deletions, edits"
  echo "commit 2: $(git rev-parse HEAD) tree $(git rev-parse 'HEAD^{tree}')"
  echo "changes:"; git diff --name-status -M HEAD~1 HEAD | sed 's/^/  /'
  echo "loose objects before gc: $(git count-objects | cut -d' ' -f1)"

  # Pack everything, then check out the first commit and come back.
  gitc gc -q --prune=now
  echo "after gc: $(git count-objects -v | grep -E '^(count|in-pack|packs|prune-packable|garbage):' | tr '\n' ' ')"
  echo "packs: $(cd .git/objects/pack && ls *.pack | tr '\n' ' ')"
  gitc checkout -q --detach HEAD~1
  echo "checked out first commit: $(git rev-parse HEAD), status: [$(gitc status --porcelain)]"
  echo "  worktree: $(worktree)"
  gitc checkout -q main
  verify
  ;;
verify)
  verify
  ;;
*)
  echo "usage: git.sh run|verify DIR" >&2
  exit 2
  ;;
esac
