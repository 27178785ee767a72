#!/usr/bin/env bash
# The CUDA backend's device check (docs/cuda.md): built here, run on the GPU machine that the
# `device` tool lends some sessions (one H200, 15 minutes of device time in all).
#
#   scripts/device-check.sh prepare   # here, on a CPU machine with the CUDA toolkit: build crest
#                                     # and crest_tests with the CUDA backend, then pack them with
#                                     # the shared libraries they load into .device-check/
#   scripts/device-check.sh run       # there: unpack, find CUDA's libraries on that machine, run
#                                     # the checks; one summary line per check in $OUT/summary.txt,
#                                     # logs beside it
#
# The device is called with carry [".device-check"] and the command
#   bash scripts/device-check.sh run
# Building here, not there: the device image has nvcc and CUDA's libraries but none of crest's
# Debian dependencies, and the x86-64 binaries of Debian 12 (glibc 2.36) run on its newer glibc.
# CUDA's own libraries (cudart, cuBLAS, cuDNN, NCCL) are not packed: the device has them, in
# /usr/local/cuda and in its PyTorch's nvidia-* wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
pack=.device-check

prepare() {
  cmake -S . -B "$build" -DCREST_WITH_CUDA=ON >/dev/null
  cmake --build "$build" -j "$(nproc)" --target crest crest_tests crest_cuda
  rm -rf "$pack/stage" && mkdir -p "$pack/stage/bin" "$pack/stage/lib"
  # The plugin beside the binaries, where crest's loader looks for it.
  cp "$build/bin/crest" "$build/bin/crest_tests" "$build/bin/libcrest_cuda.so" "$pack/stage/bin/"
  strip --strip-unneeded "$pack/stage/bin/"*
  # Every library the binaries load but glibc's, the C++ runtime's and CUDA's: the device has
  # those, newer (its cuDNN may need a newer libstdc++ than Debian 12's).
  ldd "$build/bin/crest" "$build/bin/crest_tests" "$build/bin/libcrest_cuda.so" | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl)\.so' |
    while read -r lib; do cp -L "$lib" "$pack/stage/lib/"; done
  strip --strip-unneeded "$pack/stage/lib/"*.so* 2>/dev/null || true
  tar -C "$pack/stage" -cJf "$pack/bundle.tar.xz" bin lib
  rm -rf "$pack/stage"
  grep -qxF "/$pack/" .git/info/exclude 2>/dev/null || echo "/$pack/" >>.git/info/exclude
  du -h "$pack/bundle.tar.xz"
}

# Directories holding CUDA's shared libraries on this machine, for LD_LIBRARY_PATH.
cuda_library_dirs() {
  {
    find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib -maxdepth 1 \
      -name 'lib*.so*' 2>/dev/null
    python3 - <<'PY' 2>/dev/null || true
import glob, os, site
for root in site.getsitepackages():
    for lib in glob.glob(os.path.join(root, "nvidia", "**", "lib*.so*"), recursive=True):
        print(lib)
PY
  } | grep -E '/lib(cudart|cublas|cublasLt|cudnn|nccl)[a-z_]*\.so' | xargs -r -n1 dirname | sort -u |
    paste -sd:
}

# Every library the files load is found (ldd exits 0 even when one is not).
libraries_resolve() {
  ldd "$@" | tee /dev/stderr | { ! grep -q 'not found'; }
}

# A GoogleTest run in which every selected test ran and passed: on the device a skip means the
# GPU was not usable, which is a failure of the check.
gtest_all_ran() {
  local log
  log=$("$@" 2>&1) || {
    echo "$log"
    return 1
  }
  echo "$log"
  ! grep -q '^\[  SKIPPED \]' <<<"$log"
}

# One check: its name, then the command; "PASS|FAIL name (seconds s)" into the summary.
check() {
  local name=$1
  shift
  local t0=$SECONDS status=PASS
  "$@" >"$OUT/$name.log" 2>&1 || status=FAIL
  echo "$status $name ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
}

run() {
  : "${OUT:?run on the device machine, where OUT is set}"
  local dir=/tmp/crest-device-check
  rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$pack/bundle.tar.xz"
  export LD_LIBRARY_PATH="$dir/lib:$(cuda_library_dirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  {
    echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  } | tee "$OUT/summary.txt"
  check libraries libraries_resolve "$dir/bin/crest_tests" "$dir/bin/libcrest_cuda.so"
  check agreement gtest_all_ran "$dir/bin/crest_tests" \
    --gtest_filter='CudaAgreement.*:CudaVectorOps.*:CudaRegisteredKernels.*:CudaGraphAgreement.*'
  check op_table "$dir/bin/crest_tests" --gtest_filter='*OpTable.EveryBackendAgrees*'
  check peak "$dir/bin/crest" bench peak --backend cuda --size 8192 --iters 10
  # Whole training steps on the device: every layer of both models compiled for cuda (a refused
  # one names itself in the log) and run; the samples/s are first figures, not the benchmark.
  check train_cosmoflow_128 "$dir/bin/crest" bench train --model cosmoflow --size 128 --batch 8 \
    --steps 10 --warmup 3 --backend cuda
  check train_deepcam_768 "$dir/bin/crest" bench train --model deepcam --height 768 --width 1152 \
    --batch 2 --steps 5 --warmup 2 --backend cuda
  grep -h -E '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z].*\([0-9]+ ms\)$' "$OUT/agreement.log" >>"$OUT/summary.txt" || true
  grep -h -E '^\[ (UNSUPPORTED | +FAILED +)\] [A-Za-z]' "$OUT/op_table.log" >>"$OUT/summary.txt" || true
  tail -n 3 "$OUT/peak.log" >>"$OUT/summary.txt" || true
  tail -q -n 2 "$OUT/train_cosmoflow_128.log" "$OUT/train_deepcam_768.log" >>"$OUT/summary.txt" ||
    true
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *)
    echo "usage: scripts/device-check.sh prepare|run (docs/cuda.md)" >&2
    exit 2
    ;;
esac
