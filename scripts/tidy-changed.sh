#!/usr/bin/env bash
# clang-tidy (the committed .clang-tidy) on what a change touches: the C++ files that differ from a
# base ref, reporting only findings on the lines the change added or modified. A finding in code
# the change did not touch never fails, so the tree's older findings do not block anyone; fix
# what you touch. `.ci/run` runs this after `make test`; run it (or `make tidy`) before pushing.
#
#   scripts/tidy-changed.sh [--all-lines] [BASE]
#
# BASE: a commit or ref (default $TIDY_BASE, else origin/main, else main); the change is what
# HEAD's branch did since its merge-base with BASE, working tree included (uncommitted edits
# count). On main itself (merge-base = HEAD, no BASE given): since HEAD~1. --all-lines: whole
# changed files, not only their changed lines.
# Translation units: the changed .cpp files, plus for a changed header its own .cpp (same name,
# include/crest/X/y.hpp -> src/X/y.cpp) where one exists; a header is checked in every unit that
# includes it. Needs $BUILD_DIR/compile_commands.json (default build/; any configured build).
# Exit status: 0 clean or nothing to check, 1 findings, 2 cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
all_lines=0
if [ "${1:-}" = "--all-lines" ]; then
  all_lines=1
  shift
fi
base=${1:-${TIDY_BASE:-}}

if ! command -v clang-tidy >/dev/null; then
  echo "tidy: clang-tidy is not installed (Debian package clang-tidy; make test-deps installs it)" >&2
  exit 2
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "tidy: $build/compile_commands.json is missing: configure a build first (make build)" >&2
  exit 2
fi

if [ -n "$base" ]; then
  # What this branch changed since it left BASE (as `git diff BASE...`), whatever BASE did since.
  git rev-parse -q --verify "$base^{commit}" >/dev/null || {
    echo "tidy: '$base' is not a commit" >&2
    exit 2
  }
  base=$(git merge-base HEAD "$base")
else
  for ref in origin/main main; do
    if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
      base=$(git merge-base HEAD "$ref")
      break
    fi
  done
  if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
    base=$(git rev-parse -q --verify 'HEAD~1^{commit}' || true)
  fi
  if [ -z "$base" ]; then
    echo "tidy: no base to compare with (no main branch, no parent commit): nothing checked"
    exit 0
  fi
fi

mapfile -t changed < <(git diff --name-only --diff-filter=AMR "$base" -- '*.cpp' '*.hpp' '*.h')
if [ ${#changed[@]} -eq 0 ]; then
  echo "tidy: no C++ file changed since $(git rev-parse --short "$base")"
  exit 0
fi

# The units to compile: changed .cpp files and the headers' own .cpp files, if the build has them.
in_build() { grep -qF "\"file\": \"$PWD/$1\"" "$build/compile_commands.json"; }
units=()
headers=()
for f in "${changed[@]}"; do
  case "$f" in
    *.cpp) in_build "$f" && units+=("$f") ;;
    *)
      headers+=("$f")
      stem=${f%.*}
      for c in "$stem.cpp" "src/${stem#include/crest/}.cpp"; do
        [ -f "$c" ] && in_build "$c" && units+=("$c")
      done
      ;;
  esac
done
mapfile -t units < <(printf '%s\n' "${units[@]+"${units[@]}"}" | sed '/^$/d' | sort -u)
if [ ${#units[@]} -eq 0 ]; then
  echo "tidy: ${#changed[@]} changed C++ files, none compiled in $build (nothing to check)"
  exit 0
fi

args=(-p "$build" --quiet --warnings-as-errors='*'
  # The build's flags are GCC's: clang does not know all of them, and compiler warnings are GCC's
  # to judge (-Werror would make clang's own warnings errors, which filters cannot hold back).
  --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-error)
# clang-tidy 14 (Debian 12) has no _Float16 on x86-64, which include/crest/core/fp16.hpp uses;
# a stand-in of the same size lets those units parse (checks see integer conversions there).
version=$(clang-tidy --version | sed -n 's/.*version \([0-9]*\).*/\1/p' | head -1)
if [ "${version:-0}" -lt 15 ]; then
  args+=(--extra-arg=-D_Float16=short)
fi

if [ $all_lines -eq 1 ]; then
  # Whole changed files: findings in the changed headers too, in no other header.
  regex=""
  for h in "${headers[@]+"${headers[@]}"}"; do
    regex+="${regex:+|}$(printf '%s' "$h" | sed 's/[.[\*^$()+?{|]/\\&/g')"
  done
  args+=("--header-filter=${regex:-^\$}")
  what="whole files"
else
  # clang-tidy's -line-filter: [{"name": file, "lines": [[first, last], ...]}, ...]; a file it does
  # not name reports nothing. The ranges are the new side of `git diff -U0`.
  filter=$(git diff -U0 --diff-filter=AMR "$base" -- '*.cpp' '*.hpp' '*.h' | awk '
    /^\+\+\+ / { file = substr($0, 7); next }
    /^@@ / {
      split($3, p, ",")
      first = substr(p[1], 2) + 0
      n = (p[2] == "" ? 1 : p[2] + 0)
      if (n > 0) ranges[file] = ranges[file] (ranges[file] == "" ? "" : ",") "[" first "," first + n - 1 "]"
    }
    END {
      out = ""
      for (f in ranges) out = out (out == "" ? "" : ",") "{\"name\":\"" f "\",\"lines\":[" ranges[f] "]}"
      print "[" out "]"
    }')
  if [ "$filter" = "[]" ]; then
    echo "tidy: the changes since $(git rev-parse --short "$base") only delete lines: nothing to check"
    exit 0
  fi
  args+=("--line-filter=$filter")
  what="changed lines"
fi

echo "tidy: clang-tidy $version on the $what of ${#changed[@]} files changed since" \
  "$(git rev-parse --short "$base"), through ${#units[@]} units"
jobs=$(nproc 2>/dev/null || echo 2)
# (clang-tidy's per-unit "N warnings generated." counts what the filters then held back: dropped.)
if printf '%s\n' "${units[@]}" | xargs -P "$jobs" -n 1 clang-tidy "${args[@]}" \
  2> >(grep -v '^[0-9]* warnings\? generated\.$' >&2); then
  echo "tidy: no findings"
else
  echo "tidy: findings above (on lines this change touches; .clang-tidy says what each check wants)" >&2
  exit 1
fi
