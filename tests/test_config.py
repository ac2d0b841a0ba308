"""The audit configuration: several references as a list everywhere (YAML, command line), one as the special case."""

import pytest

from lmaudit.config import load_config, validated
from lmaudit.errors import InputError
from tests.helpers import assert_one_line_error, run_cli

BASE = {"target": "t", "members": "m.csv", "nonmembers": "n.csv", "out": "o"}


def test_one_reference_is_a_list_of_one():
    assert validated({**BASE, "reference": "r"}, "test").reference == ["r"]
    assert validated(BASE, "test").reference == []


def test_yaml_takes_a_list_of_references_relative_to_the_file(tmp_path):
    (tmp_path / "audit.yaml").write_text("target: t\nreference: [r1, /abs/r2]\nmembers: m.csv\nnonmembers: n.csv\nout: o\n"
                                         "attacks: {min_k_fraction: 0.1}\n")
    config = load_config(tmp_path / "audit.yaml")
    assert config.reference == [str(tmp_path / "r1"), "/abs/r2"]
    assert config.attacks.min_k_fraction == 0.1


def test_attack_settings_are_validated():
    with pytest.raises(InputError, match="attacks.min_k_fraction"):
        validated({**BASE, "attacks": {"min_k_fraction": 0}}, "test")


def test_neighbours_without_a_proposing_model_is_refused_in_one_line(tmp_path):
    """--neighbours needs a language model to propose words (--neighbour-model, else the first reference): with
    neither, the audit stops before any model runs."""
    for name in ("m", "n"):
        (tmp_path / f"{name}.csv").write_text(f"text\nsome words of {name}\nmore words of {name}\n")
    (tmp_path / "t").mkdir()  # a causal LM's folder, never loaded: the audit stops before
    (tmp_path / "t" / "config.json").write_text('{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}')
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / "t" / name).write_bytes(b"")
    code, output = run_cli("audit", "--target", tmp_path / "t", "--members", tmp_path / "m.csv", "--nonmembers",
                           tmp_path / "n.csv", "--out", tmp_path / "o", "--signal", "clm_tokens", "--neighbours", "4")
    assert_one_line_error(code, output, "--neighbours 4 needs a language model", "--neighbour-model")


def test_reference_adapters_pair_with_references_in_order(tmp_path):
    """`--reference-adapter` applies to the `--reference` at the same position; the target's adapter to the target; a
    count that does not match the references is refused in one line."""
    from lmaudit.models.source import ModelSource

    config = validated({**BASE, "adapter": "target-lora", "reference": ["base", "base"],
                        "reference_adapter": ["ref-lora-1", "ref-lora-2"]}, "test")
    assert config.target_source() == ModelSource("t", "target-lora")
    assert config.reference_sources() == [ModelSource("base", "ref-lora-1"), ModelSource("base", "ref-lora-2")]
    assert validated({**BASE, "reference": ["r"]}, "test").reference_sources() == [ModelSource("r", None)]
    with pytest.raises(InputError, match="1 reference adapters for 2 references"):
        validated({**BASE, "reference": ["a", "b"], "reference_adapter": "only-one"}, "test")
    (tmp_path / "audit.yaml").write_text("target: base\nadapter: lora\nreference: [base]\nreference_adapter: [ref-lora]\n"
                                         "members: m.csv\nnonmembers: n.csv\nout: out\n")
    from_yaml = load_config(tmp_path / "audit.yaml")
    assert from_yaml.target_source() == ModelSource(str(tmp_path / "base"), str(tmp_path / "lora"))
    assert from_yaml.reference_sources() == [ModelSource(str(tmp_path / "base"), str(tmp_path / "ref-lora"))]


def test_spv_mia_says_what_it_misses():
    """SPV-MIA skipped never in silence: a masked LM, no self-prompt reference, or one without neighbours to score."""
    from types import SimpleNamespace

    from lmaudit.attacks.base import SELF_PROMPT_LOSS
    from lmaudit.audit.records import TokenPasses
    from lmaudit.audit.tokens import why_missing
    from lmaudit.models.source import ModelSource

    def reason(kind: str, **passes) -> str:
        return why_missing(SimpleNamespace(tokens=TokenPasses(**passes)), kind)[SELF_PROMPT_LOSS]

    assert "masked LM" in reason("mlm")
    assert "lmaudit train self-prompt" in reason("clm")
    assert "--neighbours" in reason("clm", self_prompt_reference=ModelSource("reference"))
