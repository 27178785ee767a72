#!/usr/bin/env bash
# The parts' include directions (docs/architecture.md): a part may include the public headers
# (crest/<part>/...) only of the parts below it. Private headers are enforced by the build (each
# part compiles with only its own src/<part> on the include path); this checks the public ones.
# Usage: check_include_directions.sh REPO_ROOT
set -euo pipefail
root=${1:?repository root}
declare -A allowed=(
  [core]=""
  [backends]="core"
  [graph]="core backends"
  [layers]="core backends graph"
  [models]="core graph layers"
  [dist]="core graph"
  [data]="core dist"
  [spatial]="core backends graph dist"
  [optim]="core backends graph"
  [engine]="core backends graph models dist data optim"
  [train]="core backends graph layers models dist data spatial optim engine"
  [search]="core backends graph layers models dist data spatial optim engine train"
  [export]="core backends graph layers models data spatial engine train"
  [plan]="core backends graph layers models dist data spatial optim engine train"
)
status=0
for part in "${!allowed[@]}"; do
  dirs=()
  [ -d "$root/src/$part" ] && dirs+=("$root/src/$part")
  [ -d "$root/include/crest/$part" ] && dirs+=("$root/include/crest/$part")
  [ ${#dirs[@]} -eq 0 ] && continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    used=$(sed -E 's|.*#include "crest/([a-z_]+)/.*|\1|' <<<"$hit")
    [ "$used" = "$part" ] && continue
    if [[ " ${allowed[$part]} " != *" $used "* ]]; then
      echo "${file#$root/}: part '$part' includes crest/$used/ (allowed: ${allowed[$part]:-none})"
      status=1
    fi
  done < <(grep -rn --include='*.cpp' --include='*.hpp' '#include "crest/' "${dirs[@]}" || true)
done
[ $status -eq 0 ] && echo "include directions: every part includes only the parts below it"
exit $status
