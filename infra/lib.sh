# Shared by infra/up and infra/test (sourced, not run): the project root, its virtualenv, and a
# quick re-run check so `pip install -e` only runs again when pyproject.toml, the native module's
# sources (setup.py, brokers/records/_native.c, brokers/wire/_buffers.c) or the extras change.

PIER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PIER_VENV:-$PIER_ROOT/.venv}"
PIER_PYTHON="${PIER_PYTHON:-python3.11}"

# pier_venv EXTRAS: make sure $VENV exists and has the project installed editable with EXTRAS
# (e.g. "" or "[test,dev,bench]"). The marker holds one line per (pyproject hash, extras) installed.
pier_venv() {
  local extras="$1" marker="$VENV/.pier-installed" stamp
  if [ ! -x "$VENV/bin/python" ]; then
    echo "infra: creating $VENV with $PIER_PYTHON" >&2
    "$PIER_PYTHON" -m venv "$VENV"
  fi
  local hash # of what the install builds from: metadata, and the native module (setup.py)
  hash="$(cat "$PIER_ROOT/pyproject.toml" "$PIER_ROOT/setup.py" "$PIER_ROOT/brokers/records/_native.c" \
    "$PIER_ROOT/brokers/wire/_buffers.c" |
    sha256sum | cut -c1-16)"
  stamp="$hash ${extras:-[]}"
  if grep -qxF -- "$stamp" "$marker" 2>/dev/null; then
    return 0
  fi
  # Extras only add packages: the plain install is covered by any install of the same pyproject.
  if [ -z "$extras" ] && grep -q -- "^$hash " "$marker" 2>/dev/null; then
    return 0
  fi
  echo "infra: pip install -e '.$extras' into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$PIER_ROOT$extras"
  echo "$stamp" >>"$marker"
}

# pier_spark_jars: Spark's Kafka source for billing (spark-sql-kafka-0-10 at the installed PySpark's
# version, with the dependencies Spark's own jars lack) fetched from Maven Central once into
# ~/.cache/pier/spark-kafka-<version> (infra/spark_jars.py; needs mvn); the billing job never
# downloads. A no-op once cached.
pier_spark_jars() {
  (cd "$PIER_ROOT" && "$VENV/bin/python" -m infra.spark_jars fetch >/dev/null)
}

# pier_usage SCRIPT: print SCRIPT's leading comment block (after the shebang), without the `# `.
pier_usage() {
  sed -n '2,/^[^#]/{/^#/!d;/shellcheck/d;s/^# \{0,1\}//;p}' "$1"
}

# pier_has_python_headers: whether the interpreter that builds the native module (the venv's, or
# PIER_PYTHON before the venv exists) has Python.h.
pier_has_python_headers() {
  local python="$VENV/bin/python"
  [ -x "$python" ] || python="$PIER_PYTHON"
  "$python" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    2>/dev/null
}

# pier_system_packages STANDALONE BILLING: the Debian packages infra/up needs (ZooKeeper unless
# STANDALONE is 1; Java unless STANDALONE is 1 and BILLING is 0, since Spark runs on it; gcc and
# Python's headers for the native record walker; kcat and jq, which the README's
# examples use; Python 3.11 while .venv does not exist),
# installed with apt when missing and we are root (`apt-get update` once, only then). Not root: a
# missing required package is an error naming the apt-get command; a missing kcat or jq only a note.
pier_system_packages() {
  local standalone="$1" billing="${2:-1}" required=() optional=()
  if [ "$standalone" != 1 ] || [ "$billing" = 1 ]; then
    command -v java >/dev/null 2>&1 || required+=(default-jre-headless)
  fi
  if [ "$billing" = 1 ]; then # fetches Spark's Kafka source once (pier_spark_jars)
    command -v mvn >/dev/null 2>&1 || required+=(maven)
    command -v javac >/dev/null 2>&1 || required+=(default-jdk-headless) # billing's usage scan
  fi
  if [ "$standalone" != 1 ]; then
    dpkg -s zookeeper >/dev/null 2>&1 || [ -n "${PIER_ZOOKEEPER_CLASSPATH:-}" ] || required+=(zookeeper)
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PIER_PYTHON" >/dev/null 2>&1 || required+=(python3.11)
    "$PIER_PYTHON" -c 'import ensurepip' 2>/dev/null || required+=(python3.11-venv)
  fi
  command -v gcc >/dev/null 2>&1 || required+=(gcc) # pip install builds brokers/records/_native.c
  pier_has_python_headers || required+=(python3.11-dev)
  command -v kcat >/dev/null 2>&1 || optional+=(kcat)
  command -v jq >/dev/null 2>&1 || optional+=(jq)
  local missing=("${required[@]}" "${optional[@]}")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "infra: installing Debian packages: ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
    return 0
  fi
  if [ ${#required[@]} -gt 0 ]; then
    echo "infra: missing Debian packages: ${required[*]}; run as root, or: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "infra: note: ${optional[*]} missing (the README's examples use kcat and jq): sudo apt-get install ${optional[*]}" >&2
}

# now_seconds: wall clock with sub-second precision, for step timings.
now_seconds() {
  echo "${EPOCHREALTIME:-$(date +%s.%N)}"
}
