# GDBM study (thesis 004 §4.3, Figure 4.3(A); sourced by study/run.sh, see study/README.md).
CONFIGS=(default sync)
QUICK_CONFIGS=()
case "$STUDY_CONFIG" in
  default) flag="" ;;
  sync)    flag=--sync ;;
  *) echo "gdbm: unknown configuration $STUDY_CONFIG" >&2; return 1 ;;
esac
APP_TITLE="GDBM (Debian source of libgdbm-dev, built with -g, linked statically): 24 stores of 100 bytes into 512-byte buckets, then close$([ "$STUDY_CONFIG" = sync ] && echo ", GDBM_SYNC")"

# GDBM itself is built from Debian's source of the installed libgdbm-dev (study/
# debian-source.sh) with -g and linked statically into the workload and the checker, so
# every frame has a GDBM source line (Debian's library has no line tables).
study_build() {
  { dpkg -s libgdbm-dev && command -v gdbmtool; } >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y -qq libgdbm-dev gdbmtool gcc make >/dev/null; }
  local version; version=$(dpkg-query -W -f '${Version}' libgdbm-dev)
  if ! [ -f "$BUILD/lib/libgdbm.a" ] || [ "$(cat "$BUILD/gdbm.version" 2>/dev/null)" != "$version" ]; then
    local tree; tree=$(bash "$APP_DIR/../debian-source.sh" libgdbm-dev "$BUILD/src")
    rm -rf "$BUILD/obj" && mkdir -p "$BUILD/obj" "$BUILD/lib"
    (cd "$BUILD/obj" && "$tree/configure" --disable-shared --enable-static --without-readline \
       --disable-nls CFLAGS="-g -O1" >"$BUILD/build.log" 2>&1 && make -C src >>"$BUILD/build.log" 2>&1) \
      || { tail -5 "$BUILD/build.log" >&2; return 1; }
    cp "$BUILD/obj/src/.libs/libgdbm.a" "$BUILD/lib/" && cp "$BUILD/obj/src/gdbm.h" "$BUILD/lib/"
    echo "$version" >"$BUILD/gdbm.version"
  fi
  for p in workload check; do
    if [ "$APP_DIR/$p.c" -nt "$BUILD/$p" ] || [ "$BUILD/lib/libgdbm.a" -nt "$BUILD/$p" ]; then
      gcc -g -O1 -Wall -I"$BUILD/lib" -o "$BUILD/$p" "$APP_DIR/$p.c" "$BUILD/lib/libgdbm.a"
    fi
  done
}
study_version() { dpkg-query -W -f '${Version}' libgdbm-dev; }
study_init() { :; }
WORKLOAD=("$BUILD/workload" "$STUDY_CONFIG")
CHECKER="$BUILD/check $flag"
# GDBM's own I/O layer (fullio.c: _gdbm_full_write/read; mmap.c: _gdbm_mapped_*) does the
# system calls for every caller; skipping it names the store, bucket or directory code
# that asked for the write.
CHECK_OPTS=(--frame-skip '\|[^|]*/src/(?:fullio\.c|mmap\.c|proto\.h)$')
