#!/usr/bin/env bash
# The CUDA backend's device check (docs/cuda.md): built here, run on the GPU machine that the
# `device` tool lends some sessions (one H200, 15 minutes of device time in all).
#
#   scripts/device-check.sh prepare   # here, on a CPU machine with the CUDA toolkit: build crest
#                                     # and crest_tests with the CUDA backend, then pack them with
#                                     # the shared libraries they load into .device-check/
#   scripts/device-check.sh run       # there: unpack, find CUDA's libraries on that machine, run
#                                     # the checks; one summary line per check in $OUT/summary.txt,
#                                     # their logs in $OUT/logs.tar.gz
#
# Every check has its own time limit, and all of them together end by CHECK_DEADLINE_S (default
# 420 s) after the start, so that one hung check cannot spend the session's device time (15
# minutes, a machine's start included) and a second run still fits. The checks run in the order
# of what they prove (agreement first, the least needed figures last): what the deadline cuts
# is reported SKIPPED. CHECK_PEERS=0 skips the
# PyTorch peers.
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
  mkdir -p "$pack/stage/fixtures" && cp tests/fixtures/learnable_cosmoflow.yaml "$pack/stage/fixtures/"
  strip --strip-unneeded "$pack/stage/bin/"*
  # Every library the binaries load but glibc's, the C++ runtime's and CUDA's: the device has
  # those, newer (its cuDNN may need a newer libstdc++ than Debian 12's).
  ldd "$build/bin/crest" "$build/bin/crest_tests" "$build/bin/libcrest_cuda.so" | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl)\.so' |
    while read -r lib; do cp -L "$lib" "$pack/stage/lib/"; done
  strip --strip-unneeded "$pack/stage/lib/"*.so* 2>/dev/null || true
  # The PyTorch peers, for the same-device comparison, where this checkout has ../shared.
  if [ -d ../shared/peers ]; then
    mkdir -p "$pack/stage/peers"
    cp ../shared/peers/cosmoflow_torch.py ../shared/peers/deepcam_torch.py "$pack/stage/peers/"
    # deepcam_torch.py counts its multiply-adds with a probe input made on the CPU, after the
    # model has moved to the GPU: the copy here makes the probe on the model's device.
    sed -i 's/model(torch.zeros(1, n_input, ph, pw))/model(torch.zeros(1, n_input, ph, pw, device=next(model.parameters()).device))/' \
      "$pack/stage/peers/deepcam_torch.py"
  fi
  tar -C "$pack/stage" -cJf "$pack/bundle.tar.xz" .
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
  } | grep -E '/lib(cudart|cublas|cublasLt|cudnn|nccl|nvrtc|nvJitLink)[a-z_-]*\.so' | xargs -r -n1 dirname | sort -u |
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

# One check: its name, its time limit in seconds, then the command; "PASS|FAIL|TIMEOUT name
# (seconds s)" into the summary, the output into $logs/name.log. The limit shrinks to what is
# left before the deadline. After each check the logs are packed again into $OUT/logs.tar.gz:
# the device tool returns at most 8 files, and a call cut short still returns what ran.
check() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS))
  if ((left < limit)); then limit=$left; fi
  if ((limit < 5)); then
    echo "SKIPPED $name (deadline reached)" | tee -a "$OUT/summary.txt"
    return
  fi
  local t0=$SECONDS status=PASS rc=0
  # Through bash, so that the command may be one of this script's functions (exported below).
  timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  if ((rc == 124 || rc == 137)); then
    status=TIMEOUT
  elif ((rc != 0)); then
    status=FAIL
  fi
  echo "$status $name ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
  tar -C "$logs" -czf "$OUT/logs.tar.gz" .
}

# The PyTorch peers on the same GPU (the image's python3 holds PyTorch, and none of the
# bundle's libraries), one JSON line each: fp32 (PyTorch's default lets cuDNN use TF32) and
# channels-last bf16 autocast.
torch_peers() {
  local peers=$1
  local py=(env -u LD_LIBRARY_PATH python3)
  local cosmoflow=("$peers/cosmoflow_torch.py" --device cuda --size 128 --batch 8 --steps 5)
  local deepcam=("$peers/deepcam_torch.py" --device cuda --height 768 --width 1152 --batch 2
    --steps 5)
  "${py[@]}" "${cosmoflow[@]}" --warmup 2
  "${py[@]}" "${cosmoflow[@]}" --warmup 2 --cl --bf16
  "${py[@]}" "${deepcam[@]}" --warmup 2
  "${py[@]}" "${deepcam[@]}" --warmup 2 --cl --bf16
}

# Step graphs (crest.cuda_graphs, bench train --graphs) against queued steps, two interleaved
# rounds, on a model small enough for kernel launches to matter: CosmoFlow 64^3 at batch 1, bf16.
step_graphs() {
  local crest=$1 graphs
  for _ in 1 2; do
    for graphs in "" --graphs; do
      # shellcheck disable=SC2086 # an empty $graphs is no argument
      "$crest" bench train --model cosmoflow --size 64 --batch 1 --steps 10 --warmup 2 \
        --backend cuda --precision bf16 $graphs || return 1
    done
  done
}

# Whole training steps of both models on the device, with the per-layer profile (each layer's
# kernels waited for): every layer compiled for cuda (a refused one names itself in the log).
# The tag names the variant; then the precision, the DeepCAM batches, and extra environment
# (the cuDNN algorithm choice).
train_checks() {
  local tag=$1 precision=$2 batches=$3
  shift 3
  check "train_cosmoflow_128$tag" 60 env "$@" "$dir/bin/crest" bench train --model cosmoflow \
    --size 128 --batch 8 --steps 5 --warmup 2 --backend cuda --profile --precision "$precision"
  local b
  for b in $batches; do
    check "train_deepcam_768_b$b$tag" 60 env "$@" "$dir/bin/crest" bench train --model deepcam \
      --height 768 --width 1152 --batch "$b" --steps 4 --warmup 2 --backend cuda --profile \
      --precision "$precision"
  done
}

# A bf16 CosmoFlow run on the learnable synthetic set (tests/fixtures/learnable_cosmoflow.yaml)
# reaches MLPerf's target quality, validation MAE <= 0.124, on the device.
learnable_bf16() {
  local crest=$1 fixture=$2 work=$3
  "$crest" datagen cosmoflow --out "$work/data" --train 1024 --valid 128 --size 32 --seed 1
  "$crest" train --config "$fixture" data.data_dir="$work/data" output_dir="$work/run" \
    crest.backend=cuda crest.precision=bf16 | tee "$work/train.log"
  grep -q 'target reached: val_mae' "$work/train.log"
}

# Whether the loader keeps up with the device: CosmoFlow's reference network (conv_size 32) at
# 128^3 in bf16, batch 8, trained from npy files through the loader (page-locked batches, each
# copied while the step before it computes), then again without that overlap
# (CREST_TEST_READ_AHEAD=0: each batch copied after the step before it). Their epochs' samples/s
# against bench train's (no loader) and the data-wait share are the figures; epoch 1 holds the
# warm-up.
loader_keeps_up() {
  local crest=$1 fixture=$2 work=$3
  "$crest" datagen cosmoflow --out "$work/data" --train 128 --valid 8 --size 128 --format npy \
    --seed 1
  local args=(--config "$fixture" data.data_dir="$work/data" data.format=npy data.n_train=128
    data.n_valid=8 'data.sample_shape=[128,128,128,4]' 'model.input_shape=[128,128,128,4]'
    model.conv_size=32 model.fc1_size=128 model.fc2_size=64 data.n_epochs=3
    train.target_mae=1e-9 crest.threads=16 crest.backend=cuda crest.precision=bf16)
  echo "== overlapped"
  "$crest" train "${args[@]}" output_dir="$work/run"
  echo "== not overlapped (CREST_TEST_READ_AHEAD=0)"
  CREST_TEST_READ_AHEAD=0 "$crest" train "${args[@]}" output_dir="$work/run0"
}

# A model far larger than the device (CosmoFlow 512^3, batch 64: a terabyte of activations) is
# refused by the compiler's check against the device's free memory, exit 2, before allocating.
too_large_refused() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  echo "$out"
  ((rc == 2)) && grep -q 'crest.max_memory_gb sets another limit): the compiled program needs' <<<"$out"
}

export -f libraries_resolve gtest_all_ran torch_peers learnable_bf16 loader_keeps_up \
  too_large_refused step_graphs

run() {
  : "${OUT:?run on the device machine, where OUT is set}"
  deadline=$((SECONDS + ${CHECK_DEADLINE_S:-420}))
  dir=/tmp/crest-device-check
  logs=$dir/logs
  rm -rf "$dir" && mkdir -p "$logs" && tar -C "$dir" -xJf "$pack/bundle.tar.xz"
  export LD_LIBRARY_PATH="$dir/lib:$(cuda_library_dirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  {
    echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  } | tee "$OUT/summary.txt"
  check libraries 30 libraries_resolve "$dir/bin/crest_tests" "$dir/bin/libcrest_cuda.so"
  check agreement 180 gtest_all_ran "$dir/bin/crest_tests" \
    --gtest_filter='CudaAgreement.*:CudaVectorOps.*:CudaRegisteredKernels.*:CudaGraphAgreement.*:CudaStepGraph.*:CudaNccl.*'
  check op_table 90 "$dir/bin/crest_tests" \
    --gtest_filter='*OpTable.EveryBackendAgrees*:*OpTable.HalfPrecision*'
  check peak 40 "$dir/bin/crest" bench peak --backend cuda --size 8192 --iters 10
  # Device memory through NCCL (one rank: the image has one GPU), the sum checked.
  check allreduce_nccl 30 "$dir/bin/crest" bench allreduce --backend cuda --sizes 4K,1M,64M \
    --iters 5
  check too_large_refused 20 too_large_refused "$dir/bin/crest" bench train --model cosmoflow \
    --size 512 --batch 64 --steps 1 --warmup 0 --backend cuda
  train_checks "" float32 2 CREST_CUDNN_ALGORITHMS=measured
  train_checks _bf16 bf16 "1 8" CREST_CUDNN_ALGORITHMS=measured
  check learnable_bf16 120 learnable_bf16 "$dir/bin/crest" "$dir/fixtures/learnable_cosmoflow.yaml" \
    "$dir/learnable"
  check loader_keeps_up 120 loader_keeps_up "$dir/bin/crest" \
    "$dir/fixtures/learnable_cosmoflow.yaml" "$dir/loader"
  # float32 with TF32 on the tensor cores (CREST_CUDA_TF32=1), PyTorch's default for cuDNN.
  train_checks _tf32 float32 2 CREST_CUDA_TF32=1 CREST_CUDNN_ALGORITHMS=measured
  check peak_tf32 30 env CREST_CUDA_TF32=1 "$dir/bin/crest" bench peak --backend cuda --size 8192 \
    --iters 10
  # A pipeline stage on the device (one rank: the image has no MPI launcher, so the stages'
  # messages are tested on the CPU's pretend device): micro-batches sharing one set of
  # parameters, their gradients summed on the device, recomputation's kept inputs.
  check pipeline_stage 60 "$dir/bin/crest" bench pipeline --backend cuda --model cosmoflow \
    --size 64 --micro-batches 4 --steps 2 --warmup 1 --recompute
  check step_graphs 60 step_graphs "$dir/bin/crest"
  # CHECK_PEERS=0 leaves the PyTorch peers out (about a minute), for a rerun after a fix.
  if [ -d "$dir/peers" ] && [ "${CHECK_PEERS:-1}" != 0 ]; then
    check torch_peers 120 torch_peers "$dir/peers"
  fi
  # bf16 with every kernel plain, beside the bf16 runs above, whose convolutions, batch norms and
  # poolings compute channels-last: what channels-last gains on the tensor cores.
  train_checks _bf16_plain bf16 8 CREST_CUDA_LAYOUT=plain CREST_CUDNN_ALGORITHMS=measured
  # The issue's batch 1 for CosmoFlow too (DeepCAM's ran above).
  check train_cosmoflow_128_b1_bf16 60 env CREST_CUDNN_ALGORITHMS=measured "$dir/bin/crest" bench \
    train --model cosmoflow --size 128 --batch 1 --steps 5 --warmup 2 --backend cuda --profile \
    --precision bf16
  train_checks _heuristic float32 2 CREST_CUDNN_ALGORITHMS=heuristic
  summarize >>"$OUT/summary.txt"
}

# The lines worth reading first: each test's result, refused op-table rows, the peak rates, each
# training run's figures, the peers' figures.
summarize() {
  grep -h -E '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z].*\([0-9]+ ms\)$' "$logs/agreement.log" || true
  grep -h '^\[ LAYOUT \]' "$logs/agreement.log" || true
  grep -h -E '^\[ (UNSUPPORTED | +FAILED +)\] [A-Za-z]' "$logs/op_table.log" || true
  grep -h '"bench":"peak"' "$logs/peak.log" "$logs/peak_tf32.log" 2>/dev/null || true
  grep -h '"bench":"allreduce"' "$logs/allreduce_nccl.log" 2>/dev/null || true
  grep -h '"bench":"pipeline"' "$logs/pipeline_stage.log" 2>/dev/null || true
  grep -h '"bench":"train"' "$logs/step_graphs.log" 2>/dev/null || true
  for f in "$logs"/train_*.log; do
    echo "${f##*/}: $(grep -m1 '"bench":"train"' "$f" || tail -n 1 "$f")"
  done
  grep -h -E '^epoch|target reached' "$logs/learnable_bf16.log" 2>/dev/null | tail -n 3 || true
  grep -h -E '^epoch|^== ' "$logs/loader_keeps_up.log" 2>/dev/null || true
  grep -h '^{' "$logs/torch_peers.log" 2>/dev/null || true
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *)
    echo "usage: scripts/device-check.sh prepare|run (docs/cuda.md)" >&2
    exit 2
    ;;
esac
