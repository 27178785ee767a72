#!/usr/bin/env bash
# The installed C++ package works for a program outside the tree: install this build into a
# temporary prefix, build tests/package against it with find_package(crest), run it. Given a
# PYTHON (the module's), the Python package installed into the prefix is imported and run too.
# Usage: consumer_test.sh BUILD_DIR [PYTHON]
set -euo pipefail
build=$1
python=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" ||
  { cat "$tmp/install.log"; exit 1; }
test -f "$tmp/prefix/lib/cmake/crest/crestConfig.cmake" ||
  { echo "no crestConfig.cmake under $tmp/prefix/lib/cmake/crest"; exit 1; }
# The program is compiled with the build's own flags: a sanitizer build's libcrest needs its
# runtime loaded first, which only an instrumented program does.
flags=$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$build/CMakeCache.txt")
cmake -S "$here" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$flags" > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
# The program loads libcrest.so from the prefix, not from the build tree.
# (ldd's whole output first: `ldd | grep -q` under pipefail fails when grep stops reading early.)
libs=$(ldd "$tmp/build/consumer")
[[ $libs == *"$tmp/prefix/lib/libcrest.so"* ]] ||
  { echo "consumer does not load the installed libcrest:"; echo "$libs"; exit 1; }
"$tmp/build/consumer" "$tmp/run"

[ -n "$python" ] || exit 0
# The Python package: <prefix>/lib/pythonX.Y/site-packages/crest, its module loaded from there,
# the prefix's binary as DeepCAM's HDF5 reader, and a prediction from the installed module.
site=$(echo "$tmp"/prefix/lib/python*/site-packages)
[ -f "$site/crest/__init__.py" ] || { echo "no Python package under $tmp/prefix/lib"; exit 1; }
PYTHONPATH=$site "$python" - "$tmp/prefix" "$here/../../configs/cosmoflow-demo.yaml" <<'PY'
import os, sys
import numpy as np
import crest
prefix, config_file = os.path.realpath(sys.argv[1]), sys.argv[2]
assert os.path.realpath(crest._crest.__file__).startswith(prefix), crest._crest.__file__
reader = os.environ.get("CREST_HDF5_READER", "")
assert os.path.realpath(reader) == os.path.join(prefix, "bin", "crest"), reader
model = crest.Model(crest.Config.load(config_file), batch=1, threads=1)
out = np.asarray(model.predict(np.zeros((1, 32, 32, 32, 4), np.float32)))
assert out.shape == (1, 4) and np.isfinite(out).all(), out
print("the Python package installed in the prefix predicts", out.shape)
PY
