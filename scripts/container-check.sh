#!/usr/bin/env bash
# Builds the container image (packaging/container/Dockerfile) with buildah and checks it: no
# compiler or -dev package in it, every library the binary loads present, the demo training on
# 1 and 2 MPI ranks, and how long `crest train` takes to its first step in the image and out of
# it (docs/deployment.md, "Container").
#
# Usage (as root, from the checkout):
#   scripts/container-check.sh [--reuse] [BASE_IMAGE | --base-from-debootstrap]
#   BASE_IMAGE  the Debian 12 image to build from (default debian:bookworm)
#   --base-from-debootstrap  where no image registry is reachable: a minimal Debian 12 root
#               (debootstrap) with this machine's package sources, certificates and pip
#               settings, imported as localhost/crest-debian-base:bookworm
#   --reuse     check the image built before (localhost/crest:check) instead of building
# The start-up comparison runs build/bin/crest outside the image when it is built.
# Needs buildah (Debian package; installed here if missing). The build takes 30-60 minutes on
# 2 cores: it compiles crest. Logs in /tmp/crest-container/.
set -euo pipefail
cd "$(dirname "$0")/.."
work=/tmp/crest-container
image=localhost/crest:check
base=debian:bookworm
reuse=false
for arg in "$@"; do
  case $arg in
    --reuse) reuse=true ;;
    --base-from-debootstrap) base=from-debootstrap ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) base=$arg ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 2; }
command -v buildah >/dev/null || { apt-get update -qq && apt-get install -y -qq buildah >/dev/null; }
mkdir -p "$work"

debootstrap_base() {
  local root=$work/root
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  if [ ! -x "$root/usr/bin/apt-get" ]; then
    local mirror
    mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1
  fi
  cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
  rm -f "$root/etc/apt/sources.list"
  mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
  tar -C "$root" -c . | buildah import - localhost/crest-debian-base:bookworm >/dev/null 2>&1 ||
    tar -C "$root" -c . | podman import - localhost/crest-debian-base:bookworm >/dev/null
  base=localhost/crest-debian-base:bookworm
}

# chroot isolation: builds and runs where an OCI runtime may not set resource limits (a VM
# sandbox); the image is the same one docker or podman would build.
if ! $reuse; then
  [ "$base" = from-debootstrap ] && debootstrap_base
  start=$(date +%s)
  buildah bud --layers --isolation chroot --network host -f packaging/container/Dockerfile \
    --build-arg DEBIAN_IMAGE="$base" -t "$image" . >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; echo "the image did not build: $work/build.log" >&2; exit 1; }
  echo "{\"what\": \"image_build_s\", \"value\": $(( $(date +%s) - start ))}"
fi

container=$(buildah from "$image")
trap 'buildah rm "$container" >/dev/null' EXIT
inside() { buildah run --isolation chroot "$container" -- sh -c "$1"; }
fail() { echo "container check failed: $1" >&2; exit 1; }

inside '! command -v cc && ! command -v c++ && ! command -v cmake' >/dev/null ||
  fail "a compiler or cmake is in the run image"
devs=$(inside "dpkg-query -W -f '\${Package}\n' | grep -- '-dev\$' || true")
[ -z "$devs" ] || fail "-dev packages in the run image: $devs"
missing=$(inside 'ldd /opt/crest/bin/crest /opt/crest/lib/libcrest.so | grep "not found" || true')
[ -z "$missing" ] || fail "libraries not found: $missing"
inside 'crest --version'

demo="/opt/crest/share/crest/configs/cosmoflow-demo.yaml"
one_step="data.n_train=4 data.n_valid=0 data.n_epochs=1 crest.threads=1 --overwrite"
inside "crest train --config $demo data.n_epochs=1 output_dir=/tmp/one --overwrite" \
  >"$work/train-1rank.log" 2>&1 || fail "crest train: $work/train-1rank.log"
inside "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --bind-to none -np 2 crest train \
  --config $demo data.n_epochs=1 crest.threads=1 output_dir=/tmp/two --overwrite" \
  >"$work/train-2ranks.log" 2>&1 || fail "mpirun -np 2 crest train: $work/train-2ranks.log"
echo "demo training: 1 rank and 2 ranks passed (logs in $work)"

# Start-up to the first step, the whole command timed (in the image: with buildah's own set-up
# of the container), best of 3 rounds, interleaved with the same binary's run outside.
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'; }
smaller() { awk -v a="$1" -v b="$2" 'BEGIN {print (a < b) ? a : b}'; }
best_in=999 best_out=null best_empty=999
for _ in 1 2 3; do
  best_empty=$(smaller "$best_empty" "$(seconds inside true)")  # the container's own set-up
  best_in=$(smaller "$best_in" "$(seconds inside "crest train --config $demo $one_step \
    output_dir=/tmp/s")")
  if [ -x build/bin/crest ]; then
    # shellcheck disable=SC2086  # $one_step is several arguments
    native=$(seconds build/bin/crest train --config configs/cosmoflow-demo.yaml $one_step \
      output_dir="$work/native")
    best_out=$([ "$best_out" = null ] && echo "$native" || smaller "$best_out" "$native")
  fi
done
echo "{\"what\": \"crest_train_to_end_of_one_step_s\", \"container\": $best_in, \"native\": $best_out, \"container_running_true\": $best_empty}"
size=$(buildah images --format '{{.Size}}' "$image" | head -1)
echo "{\"what\": \"image_size\", \"value\": \"$size\"}"
