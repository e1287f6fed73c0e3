# Python study: the standard library's dbm.dumb (sourced by study/run.sh; see study/README.md).
CONFIGS=(default)
QUICK_CONFIGS=(default)
APP_TITLE="Python $(python3 -c 'import platform; print(platform.python_version())') dbm.dumb (standard library)"
study_build() { command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }; }
study_version() { python3 -c 'import platform; print(platform.python_version())'; }
study_init() { :; }
WORKLOAD=(python3 "$APP_DIR/workload.py")
# dbm/dumb.py is the application under study: its frames are kept although the standard
# library is skipped by default (intact would otherwise name workload.py's lines).
RECORD_OPTS=(--frame-keep '/dbm/dumb\.py$')
CHECKER="python3 -S $APP_DIR/check.py"  # -S: no site import, a faster start per state
# A warm checker: the interpreter starts once per worker, each state runs main() in a
# forked child (check.py, study/README.md).
CHECKER_PROTOCOL=server
CHECK_OPTS=()
