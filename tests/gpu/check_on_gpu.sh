#!/usr/bin/env bash
# GPU isolation on a real GPU machine, in under 5 minutes: install the project into a fresh venv
# from the wheels in .whl/ (no network: prepare them with
#   python3 -m pip download -d .whl -r tests/gpu/requirements.txt
# for this machine's Python), start a master (SQLite) and a root agent that finds the GPUs through
# NVML, run one activity that asks for a GPU and one that asks for none, and write what each saw
# (CUDA_VISIBLE_DEVICES, nvidia-smi -L, the device nodes it may open, torch's device count where
# a Python with torch is on PATH) to $OUT/gpu-check.txt. Exit 0 when both saw what they should.
#
# For a run without a GPU (the script's own test): GPU_CHECK_PYTHON=a python that imports
# apportion (skips the install), GPU_CHECK_GPUS=0,1 (stated GPUs), GPU_CHECK_DEV_DIR=fake nodes.
# GPU_CHECK_REQUIREMENTS: another requirements file for the install (a smaller set of wheels).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
REPORT=$OUT/gpu-check.txt
WORK=$(mktemp -d /tmp/apportion-gpu-check.XXXXXX)
chmod 711 "$WORK"   # the activities' users pass through to the agent's directory
started=$(date +%s)
cleanup() {
  # the driver stops what it started; this is for a driver killed by its timeout
  if [ -n "${DRIVER_PID:-}" ]; then kill -TERM -- "-$DRIVER_PID" 2>/dev/null; sleep 1; kill -KILL -- "-$DRIVER_PID" 2>/dev/null; fi
  for f in "$WORK"/*.log; do [ -f "$f" ] && cp "$f" "$OUT/" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

PY=${GPU_CHECK_PYTHON:-}
if [ -z "$PY" ]; then
  echo "== installing into $WORK/venv from $ROOT/.whl"
  python3 -m venv "$WORK/venv" || { echo "FAIL: python3 -m venv" | tee "$REPORT"; exit 1; }
  PIP=("$WORK/venv/bin/python" -m pip install --no-index --find-links "$ROOT/.whl" --disable-pip-version-check -q)
  timeout 240 "${PIP[@]}" -r "${GPU_CHECK_REQUIREMENTS:-$ROOT/tests/gpu/requirements.txt}" > "$OUT/install.log" 2>&1 &&
    timeout 120 "${PIP[@]}" --no-build-isolation --no-deps -e "$ROOT" >> "$OUT/install.log" 2>&1 ||
    { echo "FAIL: install (see install.log)" | tee "$REPORT"; tail -20 "$OUT/install.log"; exit 1; }
  PY=$WORK/venv/bin/python
  echo "== installed in $(( $(date +%s) - started )) s"
fi

args=(--out "$REPORT" --work "$WORK" --dev-dir "${GPU_CHECK_DEV_DIR:-/dev}")
[ -n "${GPU_CHECK_GPUS:-}" ] && args+=(--gpus "$GPU_CHECK_GPUS")
left=$(( 280 - ($(date +%s) - started) ))
[ "$left" -lt 60 ] && left=60
cd "$ROOT"
setsid timeout -k 10 "$left" "$PY" "$ROOT/tests/gpu/gpu_check.py" "${args[@]}" &
DRIVER_PID=$!
wait "$DRIVER_PID"
rc=$?
DRIVER_PID=
[ "$rc" = 124 ] && echo "FAIL: the check ran past ${left} s" >> "$REPORT"
echo "== done in $(( $(date +%s) - started )) s, rc=$rc; report: $REPORT"
exit "$rc"
