"""The configuration's placement, token_passes and serving sections: their settings are still accepted flat (command
line, YAML, Python), the flat and the sectioned form are one configuration, a setting given both ways is refused in one
line naming it, and report.json's `config` echoes them flat, as before there were sections."""

import pytest

from lmaudit.config import AuditConfig, PlacementSettings, TokenPassSettings, load_config, validated
from lmaudit.errors import InputError
from lmaudit.serving.settings import ServingSettings
from tests.helpers import assert_one_line_error, run_cli

BASE = {"target": "t", "members": "m.csv", "nonmembers": "n.csv", "out": "o"}
FLAT = {"device": "cpu", "dtype": "bf16", "backend": "ray", "ray_workers": 2, "trust_remote_code": True,
        "token_signal": "mlm_tokens", "lowercase": False, "neighbours": 3, "camia": True, "samia": 5, "reference_kl": True}
SECTIONED = {"placement": {"device": "cpu", "dtype": "bf16", "backend": "ray", "ray_workers": 2, "trust_remote_code": True},
             "token_passes": {"token_signal": "mlm_tokens", "lowercase": False, "neighbours": 3, "camia": True, "samia": 5,
                              "reference_kl": True}}
BASE_YAML = "target: t\nmembers: m.csv\nnonmembers: n.csv\nout: o\n"


def test_every_flat_setting_of_a_section_is_a_field_of_its_model():
    """FLAT and SECTIONED above name the same settings (the test's own premise), in the section each belongs to."""
    assert set(SECTIONED["placement"]) <= set(PlacementSettings.model_fields)
    assert set(SECTIONED["token_passes"]) <= set(TokenPassSettings.model_fields)
    assert FLAT == SECTIONED["placement"] | SECTIONED["token_passes"]


def test_a_flat_setting_and_its_section_form_give_the_same_configuration():
    """device: cpu is placement: {device: cpu}, in Python as in a mix of both forms across sections; the values land
    in the sections and the rest keeps its defaults."""
    flat, sectioned = validated({**BASE, **FLAT}, "test"), validated({**BASE, **SECTIONED}, "test")
    mixed = validated({**BASE, "placement": SECTIONED["placement"], **SECTIONED["token_passes"]}, "test")
    assert flat == sectioned == mixed
    assert (flat.placement.device, flat.placement.ray_workers, flat.token_passes.neighbours) == ("cpu", 2, 3)
    assert flat.placement.quantization is None and flat.token_passes.recall_prefix == TokenPassSettings().recall_prefix


def test_yaml_takes_either_form_with_paths_relative_to_the_file(tmp_path):
    """In a YAML file the flat and the sectioned form are one configuration, path settings (neighbour_model,
    frequency_data) relative to the file's folder either way."""
    (tmp_path / "flat.yaml").write_text(BASE_YAML + "device: cpu\nneighbours: 2\nneighbour_model: mlm\n"
                                        "frequency_data: /abs/corpus.csv\n")
    (tmp_path / "sections.yaml").write_text(BASE_YAML + "placement: {device: cpu}\ntoken_passes: {neighbours: 2, "
                                            "neighbour_model: mlm, frequency_data: /abs/corpus.csv}\n")
    flat, sectioned = load_config(tmp_path / "flat.yaml"), load_config(tmp_path / "sections.yaml")
    assert flat == sectioned
    assert flat.token_passes.neighbour_model == str(tmp_path / "mlm")
    assert flat.token_passes.frequency_data == "/abs/corpus.csv"


def test_a_command_line_option_overrides_the_files_section_and_leaves_the_rest(tmp_path):
    """--device (flat, as every option is) overrides the file's placement.device, whichever form the file uses, and
    leaves the section's other settings."""
    for text in ("placement: {device: cuda, dtype: bf16}\n", "device: cuda\ndtype: bf16\n"):
        (tmp_path / "audit.yaml").write_text(BASE_YAML + text)
        config = load_config(tmp_path / "audit.yaml", {"device": "cpu", "neighbours": 4, "dtype": None})
        assert (config.placement.device, config.placement.dtype, config.token_passes.neighbours) == ("cpu", "bf16", 4)


@pytest.mark.parametrize(("flat", "section"), [({"device": "cpu"}, {"placement": {"device": "cuda"}}),
                                               ({"neighbours": 2}, {"token_passes": {"neighbours": 2}})])
def test_a_setting_given_both_flat_and_in_its_section_is_refused_naming_it(flat, section):
    """Which of the two would win is a guess: refused in one line naming the setting and its section, even when the
    two values agree."""
    [(key, _)] = flat.items()
    [(name, _)] = section.items()
    with pytest.raises(InputError, match=f"test: '{key}' is given both flat and as {name}.{key}; give it once"):
        validated({**BASE, **flat, **section}, "test")


def test_a_config_file_giving_a_setting_both_ways_is_refused_on_the_command_line(tmp_path):
    """The audit stops before any model runs, with one line naming the file and the setting."""
    (tmp_path / "audit.yaml").write_text(BASE_YAML + "lowercase: false\ntoken_passes: {lowercase: true}\n")
    code, output = run_cli("audit", "--config", tmp_path / "audit.yaml")
    assert_one_line_error(code, output, str(tmp_path / "audit.yaml"), "'lowercase' is given both flat and as "
                          "token_passes.lowercase")


def test_a_bad_section_value_is_named_by_its_option():
    """An invalid value in a section names its command-line option (the section is invisible on the command line)."""
    with pytest.raises(InputError, match="command line: --ray-workers: "):
        validated({**BASE, "ray_workers": 0}, "command line")
    with pytest.raises(InputError, match="--token-signal: 'mlm_energy' is not a per-token signal"):
        validated({**BASE, "token_passes": {"token_signal": "mlm_energy"}}, "command line")


def test_the_report_echoes_the_configuration_flat_as_before_the_sections():
    """model_dump (report.json's `config`, which a rerun compares with the stored one) writes the sections' settings
    flat, in their old place and order; the dump reads back into the same configuration."""
    config = validated({**BASE, **SECTIONED}, "test")
    dumped = config.model_dump()
    assert "placement" not in dumped and "token_passes" not in dumped
    assert {key: dumped[key] for key in FLAT} == FLAT
    keys = list(dumped)
    assert keys[keys.index("whitebox") + 1:keys.index("attacks")] == list(TokenPassSettings.model_fields)
    assert keys[keys.index("allow_tokenizer_mismatch") + 1:] == [*PlacementSettings.model_fields,
                                                                 *ServingSettings.model_fields]
    assert AuditConfig.model_validate(dumped) == config
    assert AuditConfig.model_validate_json(config.model_dump_json()) == config
