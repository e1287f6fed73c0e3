# Mercurial study (sourced by study/run.sh; contract in study/README.md): Debian 12's
# Mercurial 6.3 adds two files to an existing repository and commits them (thesis 004 §4.2:
# the same workload as git's).
CONFIGS=(default)
QUICK_CONFIGS=()
APP_TITLE="Mercurial (Debian 12 package, pure Python frames), default settings (no fsync anywhere)"

study_build() {
  if ! [ -x /usr/bin/hg ] || ! [ -x /usr/bin/python3 ]; then
    apt-get update -qq && apt-get install -y -qq mercurial python3 >/dev/null
  fi
}
study_version() { dpkg-query -W -f '${Version}' mercurial; }

# Every hg run reads only the repository's own configuration (HGRCPATH empty: no
# /etc/mercurial, no ~/.hgrc), plain output (HGPLAIN), a fixed identity; dates are given
# with -d: the same changesets, with the same hashes, on every run.
HG_STUDY_ENV=(HGRCPATH= HGPLAIN=1 "HGUSER=Study User <study@example.org>" LC_ALL=C)

study_init() {
  (
    cd "$1"
    env "${HG_STUDY_ENV[@]}" /usr/bin/hg init .
    printf 'initial file\n' > base.txt
    env "${HG_STUDY_ENV[@]}" /usr/bin/hg add -q base.txt
    env "${HG_STUDY_ENV[@]}" /usr/bin/hg commit -q -m 'initial commit' -d '1700000000 0'
  )
}

# Run by intact in the repository. The expected contents and messages are repeated in
# check.py (BASE, ADDED, INITIAL_MSG, WORKLOAD_MSG).
WORKLOAD=(env "${HG_STUDY_ENV[@]}" /bin/sh -c
  'printf "first file\n" > one.txt && printf "second file\n" > two.txt &&
/usr/bin/hg add one.txt two.txt && echo added &&
/usr/bin/hg commit -q -m "add two files" -d "1700000100 0" && echo committed')
RECORD_OPTS=()
# Debian's python3, isolated (-I) and without site (-S): a fast start per crash state.
CHECKER="/usr/bin/python3 -I -S $APP_DIR/check.py"
# A warm checker: the interpreter starts once per worker and imports Mercurial once; each
# state runs main() in a forked child, and each of its hg commands in a forked child of
# that (check.py; STUDY_HG_MODE=subprocess in intact's environment runs /usr/bin/hg per
# command instead, with the same verdicts: README.md, "Checker").
CHECKER_PROTOCOL=server
# Mercurial's I/O helpers (pycompat.open/mkstemp, vfs, util: atomictempfile, copyfile,
# makelock) serve every caller: skipping them names the code that asked (the dirstate, the
# transaction, the revlogs, the lock).
CHECK_OPTS=(--frame-skip '/mercurial/(?:pycompat|vfs|util)\.py$')
