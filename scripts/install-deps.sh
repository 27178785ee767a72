#!/usr/bin/env bash
# Installs the Debian 12 packages crest needs, when they are missing: what `make run` needs to
# build and train, and with --test also what only the test suite needs (`make test`).
# As root it runs apt-get; otherwise it prints the command to run and stops with an error.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  python3 python3-venv   # pip for scripts/install-onednn.sh (oneDNN 3.2, the CPU kernels)
  libyaml-cpp-dev        # configs
  nlohmann-json3-dev     # JSON (bench output, safetensors headers)
  libcli11-dev           # the command line
  zlib1g-dev             # gzip TFRecords
  libhdf5-dev            # DeepCAM HDF5 samples and stats.h5
  libturbojpeg0-dev      # JPEG images (libjpeg-turbo's TurboJPEG API)
  libopenmpi-dev openmpi-bin  # multi-rank training (MPI) and mpirun for its tests
  # crest export --format onnx: ONNX's protobuf classes and checker; its CMake config links
  # protobuf without depending on its -dev package, so that is named too
  libonnx-dev libprotobuf-dev
)
if [ "${1:-}" = "--test" ]; then
  packages+=(
    libgtest-dev libgmock-dev  # the test suite
    # python3 and python3-venv (above) also make the tests/interop venv
    python3-dev            # Python's headers: the Python module (python/, nanobind) builds on them
    chromium               # headless, renders report.html in tests/interop/report_render.py
    clang-format           # the formatting check of .ci/run and `make format-check`
    clang-tidy             # .clang-tidy on changed lines (scripts/tidy-changed.sh, .ci/run, make tidy)
    libomp-dev             # omp.h for clang-tidy's parse (clang does not read GCC's own omp.h)
    clang libclang-rt-14-dev  # the libFuzzer harnesses' smoke run (tests/fuzz, FuzzSmoke.harnesses)
    # Debian's PyTorch 1.13 for /usr/bin/python3: interop.deepcam_weights loads crest's DeepCAM
    # weights into the reference network (the peer script in ../shared/peers, when beside the
    # checkout) and the reference's into crest
    python3-torch
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "crest needs these Debian packages: ${missing[*]}" >&2
  echo "run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
