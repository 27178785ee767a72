"""Shared fixtures of the Python module's tests (tests/python, docs/python.md).

CTest runs them with PYTHONPATH=<build>/python (the built module) and CREST_BINARY (the CLI, for
runs to compare with): `ctest -R python.` or, by hand,
    PYTHONPATH=build/python CREST_BINARY=build/bin/crest .venv/bin/python -m pytest tests/python
"""
import os
import subprocess

import pytest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures")
CREST = os.environ.get("CREST_BINARY", os.path.join(SOURCE, "build", "bin", "crest"))
LEARNABLE_COSMOFLOW = os.path.join(FIXTURES, "learnable_cosmoflow.yaml")


def run_crest(*args: str) -> str:
    r = subprocess.run([CREST, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"crest {' '.join(args)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


@pytest.fixture(scope="session")
def cosmo_data(tmp_path_factory) -> str:
    """A small learnable CosmoFlow dataset (32^3 x 4 volumes), made once per session."""
    out = str(tmp_path_factory.mktemp("cosmo") / "data")
    run_crest("datagen", "cosmoflow", "--out", out, "--train", "32", "--valid", "8",
              "--size", "32", "--seed", "1", "--threads", "1")
    return out


@pytest.fixture
def cosmo_overrides(cosmo_data, tmp_path) -> list:
    """The learnable CosmoFlow fixture cut to 2 short epochs on cosmo_data, writing to tmp_path."""
    return [f"data.data_dir={cosmo_data}", "data.n_train=32", "data.n_valid=8",
            "data.n_epochs=2", "train.target_mae=null", f"output_dir={tmp_path / 'run'}"]


@pytest.fixture
def cosmo_config(cosmo_overrides):
    import crest

    return crest.Config.load(LEARNABLE_COSMOFLOW, overrides=cosmo_overrides)
