"""crest.Model: inference on arrays without copies, weights as a state_dict, errors by name."""
import numpy as np
import pytest

import crest


@pytest.fixture
def model(cosmo_config):
    return crest.Model(cosmo_config, batch=2)


def samples(model, n, seed):
    rng = np.random.default_rng(seed)
    return rng.random((n, *model.sample_shape), dtype=np.float32)


def test_forward_returns_a_view_of_crests_output_buffer(model):
    x1, x2 = samples(model, 2, 1), samples(model, 2, 2)
    y1 = model.forward(x1)
    first = y1.copy()
    y2 = model.forward(x2)
    # The same memory both times: the second pass wrote into what y1 views.
    assert y1.ctypes.data == y2.ctypes.data
    assert np.array_equal(y1, y2)
    assert not np.array_equal(first, y2)
    assert y1.shape == (2, 4) and y1.dtype == np.float32


def test_a_contiguous_float32_batch_is_read_in_place(model):
    x = samples(model, 2, 3)
    y = model.forward(x).copy()
    assert model.last_input_copied is False
    # Any other array is converted once, to the same prediction.
    fortran = np.asfortranarray(x)
    assert np.array_equal(model.forward(fortran), y)
    assert model.last_input_copied is True
    assert np.allclose(model.forward(x.astype(np.float64)), y, rtol=0, atol=1e-6)
    assert model.last_input_copied is True
    # The caller's array is not kept: a later input that is converted goes into crest's own
    # memory, not into the array an earlier call read in place.
    kept = x.copy()
    model.forward(samples(model, 2, 8).astype(np.float64))
    assert np.array_equal(x, kept)


def test_predict_takes_any_number_of_samples(model):
    x = samples(model, 5, 4)
    p = model.predict(x)
    assert p.shape == (5, 4)
    for start in (0, 2):
        assert np.allclose(p[start:start + 2], model.forward(x[start:start + 2]), atol=1e-6)
    last = model.forward(np.concatenate([x[4:], np.zeros_like(x[:1])]))[:1]
    assert np.allclose(p[4:], last, atol=1e-6)
    assert p.ctypes.data != model.forward(x[:2]).ctypes.data  # predictions own their memory


def test_a_fresh_model_has_the_trainers_initial_weights(cosmo_config):
    a = crest.Model(cosmo_config).state_dict()
    b = crest.Model(cosmo_config.with_overrides("data.batch_size=2")).state_dict()
    other_seed = crest.Model(cosmo_config.with_overrides("data.seed=5")).state_dict()
    assert list(a) == list(b)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["conv1.weight"], other_seed["conv1.weight"])


def test_state_dict_round_trip(model):
    state = model.state_dict()
    assert state["conv1.weight"].shape == (8, 4, 3, 3, 3)
    assert state["fc3.bias"].shape == (4,)
    halved = {k: v * 0.5 for k, v in state.items()}
    model.load_state_dict(halved)
    again = model.state_dict()
    assert all(np.array_equal(again[k], halved[k]) for k in state)
    # state_dict gives copies: changing them leaves the model alone.
    again["conv1.weight"][:] = 7
    assert np.array_equal(model.state_dict()["conv1.weight"], halved["conv1.weight"])


def test_loading_changes_the_prediction_and_float64_is_taken(model):
    x = samples(model, 2, 6)
    before = model.forward(x).copy()
    state = model.state_dict()
    model.load_state_dict({k: (v * 1.5).astype(np.float64) for k, v in state.items()})
    assert not np.allclose(model.forward(x), before)
    model.load_state_dict(state)
    assert np.array_equal(model.forward(x), before)


def test_a_bad_state_dict_is_refused_by_key_and_changes_nothing(model):
    state = model.state_dict()
    x = samples(model, 2, 7)
    before = model.forward(x).copy()
    missing = dict(state)
    del missing["fc2.bias"]
    with pytest.raises(crest.InputError, match="missing parameter 'fc2.bias'"):
        model.load_state_dict({k: v * 2 for k, v in missing.items()})
    wrong = {k: v * 2 for k, v in state.items()}
    wrong["conv2.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(crest.InputError, match=r"'conv2.weight' has shape \[3, 3\]"):
        model.load_state_dict(wrong)
    extra = {k: v * 2 for k, v in state.items()}
    extra["head.weight"] = np.zeros(3, np.float32)
    with pytest.raises(crest.InputError, match="'head.weight' is not a parameter"):
        model.load_state_dict(extra)
    ints = dict(state)
    ints["fc1.bias"] = np.zeros(state["fc1.bias"].shape, np.int32)
    with pytest.raises(crest.InputError, match="fc1.bias"):
        model.load_state_dict(ints)
    assert np.array_equal(model.forward(x), before)


def test_not_strict_loads_what_matches_and_reports_the_rest(model):
    state = model.state_dict()
    partial = {"fc3.bias": np.full(4, 0.25, np.float32), "head.weight": np.zeros(2, np.float32)}
    result = model.load_state_dict(partial, strict=False)
    assert result.unexpected_keys == ["head.weight"]
    assert "conv1.weight" in result.missing_keys and "fc3.bias" not in result.missing_keys
    now = model.state_dict()
    assert np.array_equal(now["fc3.bias"], partial["fc3.bias"])
    assert np.array_equal(now["conv1.weight"], state["conv1.weight"])


def test_bad_samples_are_named(model):
    with pytest.raises(crest.InputError, match=r"shape \[3, 32, 32, 32, 4\].*\[2, 32, 32, 32, 4\]"):
        model.forward(np.zeros((3, 32, 32, 32, 4), np.float32))
    with pytest.raises(crest.InputError, match="float32 or float64"):
        model.forward(np.zeros((2, 32, 32, 32, 4), np.int64))
    with pytest.raises(crest.InputError, match="no samples"):
        model.predict(np.zeros((0, 32, 32, 32, 4), np.float32))


def test_a_spatial_split_is_refused(cosmo_config):
    with pytest.raises(crest.UsageError, match="dist.spatial"):
        crest.Model(cosmo_config.with_overrides("dist.spatial=[2,1,1]"))


def test_weights_from_a_file_and_from_a_run_directory(cosmo_config, tmp_path):
    from conftest import run_crest, LEARNABLE_COSMOFLOW

    weights = tmp_path / "w.safetensors"
    run_crest("train", "--config", LEARNABLE_COSMOFLOW, "--save-weights", str(weights),
              *[o for o in cosmo_config.overrides if not o.startswith("data.n_epochs")],
              "data.n_epochs=1")
    from_file = crest.Model(cosmo_config, weights=weights).state_dict()
    from_run = crest.Model(cosmo_config, checkpoint=cosmo_config.output_dir).state_dict()
    fresh = crest.Model(cosmo_config).state_dict()
    assert all(np.array_equal(from_file[k], from_run[k]) for k in fresh)
    assert not np.array_equal(from_file["conv1.weight"], fresh["conv1.weight"])
    with pytest.raises(crest.UsageError, match="--checkpoint"):
        crest.Model(cosmo_config, weights=weights, checkpoint=cosmo_config.output_dir)
    with pytest.raises(crest.InputError, match="nothing-here"):
        crest.Model(cosmo_config, weights=tmp_path / "nothing-here.safetensors")


def test_predict_takes_nested_lists(model):
    x = samples(model, 3, 9)
    assert np.array_equal(model.predict(x.tolist()), model.predict(x))
