# git study (sourced by study/run.sh; contract in study/README.md): Debian 12's git 2.39
# adds two files to an existing repository and commits them (thesis 004 §4.2).
CONFIGS=(fsync default)
QUICK_CONFIGS=(fsync)
case "${STUDY_CONFIG:-}" in
  fsync)   APP_TITLE="git (Debian 12 source of the installed package, built with -g), core.fsync=all, core.fsyncMethod=fsync" ;;
  default) APP_TITLE="git (Debian 12 source of the installed package, built with -g), git's default settings" ;;
  *) echo "git: unknown configuration ${STUDY_CONFIG:-}" >&2; return 1 ;;
esac

# The traced git is Debian's own source of the installed version (patches applied), built
# with -g: the same code as /usr/bin/git, but with line tables, so each vulnerability is
# named by a git source line (Debian's binary is stripped: offsets only; the source comes
# from study/debian-source.sh); the checker and study_init use /usr/bin/git, a user's git.
study_build() {
  if ! [ -x /usr/bin/git ] || ! [ -x /usr/bin/python3 ] || ! dpkg -s zlib1g-dev >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq git python3 zlib1g-dev make gcc >/dev/null
  fi
  local version; version=$(dpkg-query -W -f '${Version}' git)
  if [ -x "$BUILD/git" ] && [ "$(cat "$BUILD/git.version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  local tree; tree=$(bash "$APP_DIR/../debian-source.sh" git "$BUILD/src")
  make -C "$tree" -j"$(nproc)" CFLAGS="-g -O2" NO_CURL=1 NO_GETTEXT=1 NO_TCLTK=1 \
    NO_PERL=1 NO_PYTHON=1 NO_EXPAT=1 NO_OPENSSL=1 git >"$BUILD/build.log" 2>&1 ||
    { tail -5 "$BUILD/build.log" >&2; return 1; }
  cp "$tree/git" "$BUILD/git" && echo "$version" >"$BUILD/git.version"
}
study_version() { dpkg-query -W -f '${Version}' git; }

# Every git run reads only the repository's own configuration (no /etc/gitconfig, no
# ~/.gitconfig), ignores the caller's GIT_* variables, and uses a fixed identity and
# fixed dates: the same objects, with the same names, on every run.
GIT_STUDY_ENV=(-u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE -u GIT_OBJECT_DIRECTORY
  -u GIT_CONFIG_PARAMETERS -u GIT_CONFIG_COUNT
  GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null LC_ALL=C
  GIT_AUTHOR_NAME="Study User" GIT_AUTHOR_EMAIL=study@example.org
  GIT_COMMITTER_NAME="Study User" GIT_COMMITTER_EMAIL=study@example.org)

study_init() {
  (
    cd "$1"
    g() { env "${GIT_STUDY_ENV[@]}" GIT_AUTHOR_DATE='1700000000 +0000' \
            GIT_COMMITTER_DATE='1700000000 +0000' /usr/bin/git "$@"; }
    # --template= : no sample hooks (inactive anyway), no description, no info/exclude.
    g init -q --template= -b main .
    g config user.name "Study User"
    g config user.email study@example.org
    # Nothing in the background or after the command: no auto-gc, and no
    # `git maintenance run --auto`, which git commit would otherwise start.
    g config gc.auto 0
    g config maintenance.auto false
    if [ "$STUDY_CONFIG" = fsync ]; then
      g config core.fsync all
      g config core.fsyncMethod fsync
    fi
    # An initial commit: the workload updates an existing branch.
    printf 'initial file\n' > base.txt
    g add base.txt
    g commit -q -m 'initial commit'
  )
}

# Run by intact in the repository. The expected contents and messages are repeated in
# check.py (BASE, ADDED, INITIAL_MSG, WORKLOAD_MSG).
WORKLOAD=(env "${GIT_STUDY_ENV[@]}" GIT_AUTHOR_DATE='1700000100 +0000'
  GIT_COMMITTER_DATE='1700000100 +0000' /bin/sh -c
  'printf "first file\n" > one.txt && printf "second file\n" > two.txt &&
"$0" add one.txt two.txt && echo added &&
"$0" commit -q -m "add two files" && echo committed' "$BUILD/git")
RECORD_OPTS=()
# Debian's python3, isolated (-I) and without site (-S): ~35 ms to start; a pyenv shim
# first on PATH costs ~150 ms per crash state.
# The durability rule is documented with core.fsync=all ("added": the results of git add
# are hardened; "committed": git commit's), a lay expectation with git's defaults ("risks
# losing recent work"): git help config, core.fsync (check.py).
durability=lay
[ "${STUDY_CONFIG:-}" = fsync ] && durability=documented
CHECKER="/usr/bin/python3 -I -S $APP_DIR/check.py --durability=$durability"
# A warm checker: the interpreter starts once per worker, each state runs main() in a
# forked child (check.py, study/README.md).
CHECKER_PROTOCOL=server
# git's I/O wrappers (wrapper.c: xwrite, write_in_full, xopen...; write-or-die.c:
# fsync_or_die; lockfile.c / tempfile.c: commit and rename of lock files) serve every
# caller: skipping them names the code that asked (index, refs, object files).
CHECK_OPTS=(--frame-skip '\|[^|]*/(?:wrapper|write-or-die|lockfile|tempfile)\.c$')
