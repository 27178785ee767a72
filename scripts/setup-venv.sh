#!/usr/bin/env bash
# Creates .venv with the Python packages tests/interop needs (real third-party clients: h5py,
# tfrecord, ...). Idempotent: does nothing when the requirements are already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
req=tests/interop/requirements.txt
stamp=.venv/.requirements-installed
if [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
