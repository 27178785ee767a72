#!/usr/bin/env bash
# A lambda that takes a 64-byte vector value (lanes.hpp, double_lanes.hpp) outside the
# instruction-set copies (the .inc files) must be inlined, CREST_INLINED_LAMBDA: left out of line
# it is compiled for the baseline target and reads from the stack what the AVX-512 copy calling
# it passes in a zmm register (src/backends/widest_vectors.hpp). The .inc files are compiled once
# per copy, their lambdas with their copy's target, so they need nothing.
# Usage: check_vector_lambdas.sh REPO_ROOT
set -euo pipefail
root=${1:?repository root}
vector_types='Lanes|LaneBits|LaneCodes|LaneIndex|Doubles|Int64s|EightFloats|EightDoubles'
# A lambda introducer, then a parameter list naming one of the types by value (not * or &).
by_value="\]\([^)]*\b($vector_types)\s+[A-Za-z_]"
hits=$(grep -rnP --include='*.cpp' --include='*.hpp' "$by_value" "$root/src" |
       grep -v 'CREST_INLINED_LAMBDA' || true)
if [ -n "$hits" ]; then
  echo "lambdas taking vector values without CREST_INLINED_LAMBDA (src/backends/widest_vectors.hpp):"
  echo "$hits"
  exit 1
fi
echo "every lambda taking a vector value outside the .inc copies is CREST_INLINED_LAMBDA"
