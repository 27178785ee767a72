"""crest.Config: the CLI's loading and validation, read by attribute; errors as exceptions."""
import pytest

import crest
from conftest import LEARNABLE_COSMOFLOW


def test_sections_read_as_attributes_and_items(cosmo_config):
    assert cosmo_config.data.batch_size == 8
    assert cosmo_config.data["sample_shape"] == [32, 32, 32, 4]
    assert cosmo_config.model.name == "cosmoflow"
    assert cosmo_config.optimizer.momentum == pytest.approx(0.9)
    assert "target_mae" not in cosmo_config.train  # "null" unsets it: the resolved file omits it
    assert cosmo_config.output_dir.endswith("run")
    assert isinstance(cosmo_config.lr_schedule, crest.Section)
    assert "data" in cosmo_config.to_dict()


def test_overrides_apply_in_order_and_are_kept(cosmo_config):
    c = cosmo_config.with_overrides("data.batch_size=2", "data.batch_size=4")
    assert c.data.batch_size == 4
    assert c.overrides == ["data.batch_size=2", "data.batch_size=4"]
    assert cosmo_config.data.batch_size == 8  # the original is unchanged


def test_dump_loads_back_to_the_same_config(cosmo_config):
    again = crest.Config.from_yaml(cosmo_config.dump(), source="dumped")
    def body(c):  # the header comment names the source
        return [line for line in c.dump().splitlines() if not line.startswith("#")]
    assert body(again) == body(cosmo_config)
    assert again.to_dict() == cosmo_config.to_dict()


def test_sections_are_read_only(cosmo_config):
    with pytest.raises(AttributeError, match="with_overrides"):
        cosmo_config.data.batch_size = 3
    with pytest.raises(AttributeError, match="no key 'no_such_key'"):
        cosmo_config.data.no_such_key
    with pytest.raises(AttributeError, match="no section"):
        cosmo_config.no_such_section


def test_a_bad_value_raises_input_error_naming_file_and_key():
    with pytest.raises(crest.InputError) as e:
        crest.Config.load(LEARNABLE_COSMOFLOW, overrides=["data.batch_size=-1"])
    assert e.value.exit_code == 2
    assert "learnable_cosmoflow.yaml" in str(e.value)
    assert "data.batch_size" in str(e.value)
    assert isinstance(e.value, crest.Error)


def test_an_unknown_key_is_named():
    with pytest.raises(crest.Error, match="data.batch_sise"):
        crest.Config.load(LEARNABLE_COSMOFLOW, overrides=["data.batch_sise=2"])


def test_a_malformed_override_is_a_usage_error():
    with pytest.raises(crest.UsageError) as e:
        crest.Config.load(LEARNABLE_COSMOFLOW, overrides=["data.batch_size"])
    assert e.value.exit_code == 2


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(crest.InputError, match="missing.yaml"):
        crest.Config.load(missing)


def test_yaml_text_errors_name_the_source():
    with pytest.raises(crest.Error, match="my-notebook"):
        crest.Config.from_yaml("data: [unclosed", source="my-notebook")
