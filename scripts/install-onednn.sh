#!/usr/bin/env bash
# Installs oneDNN 3.2 into .deps/onednn (project-local, ignored by git) from Intel's pinned PyPI
# wheels (scripts/onednn-requirements.txt), when it is not there yet. CMake finds it there
# (CMakeLists.txt); a oneDNN >= 3.2 of your own (Spack, a site module) on CMAKE_PREFIX_PATH or
# dnnl_DIR is preferred, and then this script is not needed: CREST_ONEDNN=system skips it.
# Idempotent: a stamp holding the requirements file marks a finished install.
set -euo pipefail
cd "$(dirname "$0")/.."
req=scripts/onednn-requirements.txt
prefix=.deps/onednn
stamp=$prefix/.requirements-installed
if [ "${CREST_ONEDNN:-}" = "system" ]; then
  exit 0
fi
if [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  exit 0
fi

echo "installing oneDNN 3.2 into $prefix (Intel's PyPI wheels, 39 MB)"
rm -rf "$prefix" .deps/pip
# pip from a throwaway venv: Debian's python3 has no pip of its own (python3-venv brings it).
python3 -m venv .deps/pip
.deps/pip/bin/pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
  --only-binary=:all: --prefix "$prefix" -r "$req"
rm -rf .deps/pip "$prefix"/lib/python3*  # pip's record of the install: not needed
# The wheel holds three full copies of the library (a wheel cannot hold symlinks): keep one.
(cd "$prefix/lib" && ln -sf libdnnl.so.3.2 libdnnl.so.3 && ln -sf libdnnl.so.3 libdnnl.so)
cp "$req" "$stamp"
