"""audit/records.py's decisions made before any model runs: how references are named in the report, each model's
family read once, which signal a target of each family is audited on when none is asked for, and which model proposes
neighbours (read from each folder's config.json; the folders here hold no real weights, so a test that loaded one would
fail, but for the tiny BERTs of conftest.py)."""

import json

import pytest

from lmaudit.audit.records import neighbour_proposer, reference_names, with_signal
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.models.config_json import family_of
from lmaudit.models.source import ModelSource
from lmaudit.signals.settings import SignalSettings


def folder(root, name: str, architecture: str) -> str:
    """A model folder that passes the folder checks, of `architecture` according to its config.json."""
    path = root / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    (path / "model.safetensors").write_bytes(b"")
    (path / "tokenizer.json").write_text("{}")
    return str(path)


def config(target: str, **fields) -> AuditConfig:
    return AuditConfig(target=target, members="m.csv", nonmembers="n.csv", out="out", **fields)


def test_one_reference_is_the_reference_and_several_are_numbered_from_one():
    """report.json's reference names: 'reference' alone, else reference_1, reference_2, ... in the order given."""
    assert reference_names(0) == []
    assert reference_names(1) == ["reference"]
    assert reference_names(3) == ["reference_1", "reference_2", "reference_3"]


@pytest.mark.parametrize(("architecture", "signal"), [
    ("GPT2LMHeadModel", "clm_tokens"), ("BertForMaskedLM", "mlm_energy"),
    ("BertForSequenceClassification", "classifier")])
def test_a_target_is_audited_on_its_familys_signal_unless_one_is_asked(tmp_path, architecture, signal):
    """No signal given: the target's family decides (a causal LM read with a masked LM's signal would fail or mean
    nothing). A signal given is kept, whatever the family; the other settings are kept either way."""
    target, family = folder(tmp_path, "target", architecture), family_of([architecture])
    chosen = with_signal(config(target, signal=SignalSettings(k=3)), family)
    assert chosen.signal.signal == signal and chosen.signal.k == 3
    asked = config(target, signal=SignalSettings(signal="mlm_pll"))
    assert with_signal(asked, family).signal.signal == "mlm_pll"


def test_an_architecture_of_no_known_family_keeps_the_default_for_the_loader_to_refuse(tmp_path):
    """An unknown architecture is not refused here: the configuration comes back as it was."""
    given = config(folder(tmp_path, "t5", "T5ForConditionalGeneration"))
    assert with_signal(given, None) == given


def test_neighbours_are_proposed_by_the_named_model_else_the_first_language_model_reference(tmp_path):
    """No neighbours asked: no proposer. Asked: --neighbour-model if given, else the first reference, if it is a masked
    or causal LM; a classifier as the only candidate is refused in one line with the way out (--neighbour-model)."""
    mlm, clm = folder(tmp_path, "mlm", "BertForMaskedLM"), folder(tmp_path, "clm", "GPT2LMHeadModel")
    classifier = folder(tmp_path, "clf", "BertForSequenceClassification")
    references = {"reference_1": ModelSource(mlm), "reference_2": ModelSource(clm)}
    families = {"target": "clm", "reference_1": "mlm", "reference_2": "clm"}  # as resolve read them
    assert neighbour_proposer(config(clm), references, families) == (None, None)
    assert neighbour_proposer(config(clm, neighbours=2), references, families) == (ModelSource(mlm), "mlm")
    assert neighbour_proposer(config(clm, neighbours=2, neighbour_model=clm), references, families) == (clm, "clm")
    with pytest.raises(InputError, match="--neighbours 2 needs a language model .* give --neighbour-model FOLDER"):
        neighbour_proposer(config(clm, neighbours=2), {"reference": ModelSource(classifier)}, {"reference": "classifier"})
    with pytest.raises(InputError, match="--neighbours 2 needs a language model"):
        neighbour_proposer(config(clm, neighbours=2, neighbour_model=classifier), references, families)
    with pytest.raises(InputError, match="--neighbours 1 needs a language model"):
        neighbour_proposer(config(clm, neighbours=1), {}, {"target": "clm"})


def test_resolve_reads_each_audited_models_family_once_and_carries_it(tiny_model_dirs, tmp_path, monkeypatch):
    """The tiny BERTs' family is read once per folder in resolve and carried by the resolved audit (by the models'
    report names), for the default signal, the neighbours' proposer and every later stage."""
    import lmaudit.models.config_json
    from lmaudit.audit.records import resolve

    reads = []
    read = lmaudit.models.config_json.model_family
    monkeypatch.setattr(lmaudit.models.config_json, "model_family", lambda model: reads.append(str(model)) or read(model))
    target, reference = (str(path) for path in tiny_model_dirs)
    audit = resolve(AuditConfig(target=target, reference=[reference], members="m.csv", nonmembers="n.csv",
                                out=str(tmp_path / "out"), device="cpu", token_signal="mlm_tokens", neighbours=2))
    assert audit.families == {"target": "mlm", "reference": "mlm"} and audit.target_family == "mlm"
    assert audit.models == {"target": ModelSource(target), "reference": ModelSource(reference)}
    assert audit.signal.signal == "mlm_energy"  # chosen from the carried family
    assert (audit.tokens.neighbour_model, audit.tokens.neighbour_family) == (ModelSource(reference), "mlm")
    assert sorted(reads) == sorted([target, reference])
