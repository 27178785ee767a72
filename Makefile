# The two commands a newcomer needs (README.md): `make run` and `make test`.
# Both install missing Debian packages first (when root), then build with CMake.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps venv configure build run test clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) > /dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The default job: CosmoFlow on built-in synthetic data, a few epochs, about a minute on 2 cores.
run: build
	$(BUILD_DIR)/bin/crest train --config configs/cosmoflow-demo.yaml --overwrite

# Python packages for tests/interop (PyPI, into .venv).
venv:
	@bash scripts/setup-venv.sh

# The whole test suite through CTest.
test: build venv
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

clean:
	rm -rf $(BUILD_DIR)
