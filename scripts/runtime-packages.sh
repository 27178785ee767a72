#!/usr/bin/env bash
# Prints the Debian packages that hold the shared libraries the given binaries and libraries
# load, one per line: what a machine needs installed to run them, without their -dev packages
# or a compiler.
# The container's run stage installs exactly this list (packaging/container/Dockerfile).
# Libraries no package holds (oneDNN from scripts/install-onednn.sh) are named on stderr.
# Usage: scripts/runtime-packages.sh FILE...   (executables and shared libraries)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 FILE..." >&2; exit 2; }

owner() {  # the package holding library $1; Debian 12 records some under /lib, some /usr/lib
  local path=$1 real
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "${path#/usr}" "/usr${path}" "${real#/usr}" "/usr${real}"; do
    dpkg-query -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}

for binary in "$@"; do
  # Debian installs shared libraries without the execute bit: a readable file is enough.
  [ -f "$binary" ] && [ -r "$binary" ] || { echo "$0: $binary: no such file" >&2; exit 2; }
  # ldd's lines: "libx.so.1 => /path/libx.so.1 (0x...)"; a missing library reads "not found".
  if ldd "$binary" | grep -q 'not found'; then
    echo "$0: $binary: libraries not found:" >&2; ldd "$binary" | grep 'not found' >&2; exit 1
  fi
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r library; do
  owner "$library" || echo "$0: no Debian package holds $library (ship it beside crest)" >&2
done | sort -u
