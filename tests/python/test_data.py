"""crest.train on Python data: the same run as crest's own reader on the same samples, and bad
items named."""
import glob
import os

import numpy as np
import pytest

import crest
from conftest import LEARNABLE_COSMOFLOW, run_crest


class NpyFiles:
    """A map-style dataset over crest's CosmoFlow npy files (docs/data.md), read with numpy."""

    def __init__(self, directory):
        self.files = sorted(glob.glob(os.path.join(directory, "*.data.npy")))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        x = np.load(self.files[i]).astype(np.float32)
        y = np.load(self.files[i].replace(".data.npy", ".label.npy"))
        return x, y


@pytest.fixture(scope="module")
def npy_data(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("npy") / "data")
    run_crest("datagen", "cosmoflow", "--out", out, "--train", "32", "--valid", "8",
              "--size", "32", "--seed", "2", "--format", "npy", "--threads", "1")
    return out


@pytest.fixture
def npy_config(cosmo_overrides, npy_data):
    # apply_log off: the files' counts go to the model as they are, in both runs.
    return crest.Config.load(LEARNABLE_COSMOFLOW, overrides=[
        *cosmo_overrides, f"data.data_dir={npy_data}", "data.format=npy", "data.apply_log=false"])


def test_python_data_trains_as_the_native_reader(npy_config, npy_data, tmp_path):
    native = crest.train(npy_config.with_overrides(f"output_dir={tmp_path / 'native'}"),
                         save_weights=tmp_path / "native.safetensors", quiet=True)
    train = NpyFiles(os.path.join(npy_data, "train"))
    valid = NpyFiles(os.path.join(npy_data, "validation"))
    assert len(train) == 32 and len(valid) == 8
    mine = crest.train(npy_config.with_overrides(f"output_dir={tmp_path / 'python'}"),
                       save_weights=tmp_path / "python.safetensors", quiet=True,
                       train_data=train, valid_data=valid)
    for a, b in zip(native.epochs, mine.epochs, strict=True):
        for key in ("train_loss", "val_loss", "lr", "val_metrics"):
            assert a[key] == b[key], key
    w1 = crest.Model(npy_config, weights=tmp_path / "native.safetensors").state_dict()
    w2 = crest.Model(npy_config, weights=tmp_path / "python.safetensors").state_dict()
    assert all(np.array_equal(w1[k], w2[k]) for k in w1)


def test_a_list_or_a_generator_of_pairs_trains(npy_config):
    rng = np.random.default_rng(0)
    pairs = [(rng.random((32, 32, 32, 4)), rng.uniform(-1, 1, 4)) for _ in range(16)]  # float64
    history = crest.train(npy_config.with_overrides("data.n_epochs=1"), train_data=pairs,
                          quiet=True)
    assert history.steps == 2  # 16 samples, batch 8
    assert history.epochs[0]["val_loss"] is None  # no validation data given
    again = crest.train(npy_config.with_overrides("data.n_epochs=1"), overwrite=True,
                        train_data=(p for p in pairs), quiet=True)
    assert again.epochs[0]["train_loss"] == history.epochs[0]["train_loss"]


def test_a_sample_of_the_wrong_shape_is_named(npy_config):
    good = (np.zeros((32, 32, 32, 4), np.float32), np.zeros(4, np.float32))
    bad = [good] * 16
    bad[5] = (np.zeros((32, 32, 4), np.float32), np.zeros(4, np.float32))
    with pytest.raises(crest.InputError, match=r"item 5: its sample has shape \[32, 32, 4\]"):
        crest.train(npy_config, train_data=bad, quiet=True)


def test_an_exception_in_getitem_is_named(npy_config):
    class Broken:
        def __len__(self):
            return 16

        def __getitem__(self, i):
            raise KeyError(f"no sample {i} here")

    named = r"(?s)the Python train dataset's item \d+: .*no sample \d+ here"  # with its traceback
    with pytest.raises(crest.InputError, match=named):
        crest.train(npy_config, train_data=Broken(), quiet=True)


def test_validation_data_needs_training_data(npy_config):
    with pytest.raises(crest.UsageError, match="valid_data needs train_data"):
        crest.train(npy_config, valid_data=[], quiet=True)
