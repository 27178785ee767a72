#!/usr/bin/env bash
# The installed C++ package works for a program outside the tree: install this build into a
# temporary prefix, build tests/package against it with find_package(crest), run it.
# Usage: consumer_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" ||
  { cat "$tmp/install.log"; exit 1; }
test -f "$tmp/prefix/lib/cmake/crest/crestConfig.cmake" ||
  { echo "no crestConfig.cmake under $tmp/prefix/lib/cmake/crest"; exit 1; }
cmake -S "$here" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
# The program loads libcrest.so from the prefix, not from the build tree.
# (ldd's whole output first: `ldd | grep -q` under pipefail fails when grep stops reading early.)
libs=$(ldd "$tmp/build/consumer")
[[ $libs == *"$tmp/prefix/lib/libcrest.so"* ]] ||
  { echo "consumer does not load the installed libcrest:"; echo "$libs"; exit 1; }
"$tmp/build/consumer" "$tmp/run"
