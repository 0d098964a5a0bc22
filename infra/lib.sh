# Shared by infra/up and infra/test (sourced, not run): the project root, its virtualenv, and a
# quick re-run check so `pip install -e` only runs again when pyproject.toml or the extras change.

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
  local hash
  hash="$(sha256sum "$PIER_ROOT/pyproject.toml" | cut -c1-16)"
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

# now_seconds: wall clock with sub-second precision, for step timings.
now_seconds() {
  echo "${EPOCHREALTIME:-$(date +%s.%N)}"
}
