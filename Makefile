# The two commands a newcomer needs (README.md): `make run` and `make test`.
# Both install missing Debian packages first (when root), then build with CMake.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
PREFIX ?= /usr/local

.PHONY: all deps test-deps venv configure build build-crest install run test format format-check \
        tidy clean

all: build

deps:
	@bash scripts/install-deps.sh
	@bash scripts/install-onednn.sh

# What only the test suite needs (GoogleTest, Python venv tools, Chromium, clang-format/-tidy).
test-deps:
	@bash scripts/install-deps.sh --test
	@bash scripts/install-onednn.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) > /dev/null

# The crest binary alone: what `make run` needs (the test suite is not compiled for it).
build-crest: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target crest

# The venv first: CMake builds the Python module for its Python (python/CMakeLists.txt).
build: test-deps venv configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Puts the crest binary on PATH ($(PREFIX)/bin/crest) and installs libcrest with its headers and
# CMake package (docs/library.md), and the Python package where the build has the module
# (docs/python.md). Root for /usr/local; else PREFIX=$HOME/.local.
install: configure
	@targets="crest crest_library"; \
	if cmake --build $(BUILD_DIR) --target help | grep -q '_crest_stub'; then \
	  targets="$$targets _crest _crest_stub"; fi; \
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $$targets
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The default job: CosmoFlow on built-in synthetic data, a few epochs, about a minute on 2 cores.
run: build-crest
	$(BUILD_DIR)/bin/crest train --config configs/cosmoflow-demo.yaml --overwrite

# Python packages for tests/interop (PyPI, into .venv).
venv: test-deps
	@bash scripts/setup-venv.sh

# Every C++ source must match .clang-format (CI runs this before the tests): the tracked ones and
# the new ones not yet added (git's ignored files aside), so a file is right before its commit.
SOURCES = git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.h' '*.inc' '*.cu' '*.cuh'
format-check: test-deps
	@$(SOURCES) | xargs clang-format --dry-run -Werror

format: test-deps
	@$(SOURCES) | xargs clang-format -i

# clang-tidy (.clang-tidy) on the lines changed since BASE (default: the merge-base with main).
tidy: test-deps configure
	@bash scripts/tidy-changed.sh $(BASE)

# The whole test suite through CTest. Tests run $(JOBS) at a time and most use 2 threads, so the
# cores are oversubscribed: with libgomp's default spin-waiting, a thread spins at every barrier
# while the thread it waits for is descheduled. Two training tests side by side took 410 s
# instead of 35 s and 75 s (one then timed out in CI); passive waiting took 64 s and 73 s.
# A run alone keeps the default (spinning is ~35 % faster there): docs/testing.md.
test: format-check build venv
	cd $(BUILD_DIR) && OMP_WAIT_POLICY=PASSIVE ctest --output-on-failure -j $(JOBS) --timeout 900

clean:
	rm -rf $(BUILD_DIR)
