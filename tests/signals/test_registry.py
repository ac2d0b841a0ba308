"""The signal registry: every entry resolves to a scorer, the CLI and the configuration take their choices from it,
and an unknown signal is a clear error, never a silent fallback to another scorer."""

import pytest

from lmaudit.config import validated
from lmaudit.errors import InputError
from lmaudit.signals.registry import SIGNALS, resolved, signal_names, signal_spec
from lmaudit.signals.settings import SignalSettings
from tests.helpers import assert_one_line_error, run_cli


def test_every_scorer_resolves():
    for spec in SIGNALS:
        assert callable(spec.scoring_function()), spec.name
        if spec.joint_scorer:
            assert callable(spec.scoring_function(joint=True)), spec.name


def test_defaults_are_filled_from_the_registry():
    assert resolved(SignalSettings(signal="mlm_energy")).normalize == "sum"
    assert resolved(SignalSettings(signal="mlm_pll")).normalize == "mean"
    assert resolved(SignalSettings(signal="mlm_pll", normalize="sum")).normalize == "sum"
    assert resolved(SignalSettings(precision="fp32"), "cuda").precision == "fp32"
    assert resolved(SignalSettings(precision="auto"), "cuda").precision == "bf16"


def test_unknown_signal_is_an_error_everywhere(tiny_model_dirs, notes, tmp_path):
    from lmaudit.signals.compute import Scoring, model_signal

    with pytest.raises(InputError, match="unknown signal 'mlm_energi'; use one of mlm_energy"):
        signal_spec("mlm_energi")
    with pytest.raises(InputError, match="unknown signal"):
        model_signal(tiny_model_dirs[0], ["a"], ["text"], SignalSettings(signal="mlm_energi"), Scoring(tmp_path))
    assert not list(tmp_path.iterdir())  # refused before anything was stored
    with pytest.raises(InputError, match="signal: .*unknown signal 'gradient_norms' for an audit"):
        validated({"target": "t", "members": "m", "nonmembers": "n", "out": "o", "signal": {"signal": "gradient_norms"}}, "x")


def test_command_line_choices_come_from_the_registry(tmp_path):
    code, output = run_cli("score", "--target", tmp_path, "--data", tmp_path / "d.csv", "--signal", "nope", "--out", tmp_path / "o.csv")
    assert code == 2 and all(name in output for name in signal_names("loss")) and "classifier" not in output.split("nope")[-1]
    code, output = run_cli("audit", "--target", tmp_path, "--members", tmp_path, "--nonmembers", tmp_path, "--out", tmp_path,
                           "--signal", "nope")
    assert code == 2 and all(name in output for name in signal_names("loss", "log_probabilities"))


def test_bad_signal_in_yaml_is_one_line(tmp_path):
    config = tmp_path / "audit.yaml"
    config.write_text("target: t\nmembers: m.csv\nnonmembers: n.csv\nout: o\nsignal: {signal: attention_concentration}\n")
    assert_one_line_error(*run_cli("audit", "--config", config), "audit.yaml: signal:", "attention_concentration")


def test_a_batchs_token_budget_is_sized_for_the_device_unless_given():
    """None (the default) becomes 4,096 tokens on a CPU and 32,768 on a GPU; a given budget stands on either."""
    assert resolved(SignalSettings(), "cpu").batch_tokens == 4096
    assert resolved(SignalSettings(), "cuda").batch_tokens == 32768
    assert resolved(SignalSettings(batch_tokens=512), "cuda").batch_tokens == 512
    assert "batch_tokens" not in SignalSettings().value_key()  # the budget never keys a stored value
