"""audit/extraction.py's own bookkeeping, without a model: which texts are split into which prefix and suffix, which
models it refuses before loading one, and how one prefix length's table becomes a summary per non-member set (the
end-to-end runs are tests/e2e/test_extraction.py's; the maths, tests/metrics/test_extraction.py's)."""

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.audit.extraction import checked_generator, per_set_summaries, split_tokens
from lmaudit.audit.records import known_family
from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.models.source import ModelSource
from lmaudit.signals.sampling import ExtractionSettings


def test_split_tokens_keeps_the_texts_long_enough_and_cuts_each_at_the_prefix():
    """A text of exactly prefix + suffix tokens is used, one token shorter is not; each prefix is the first `prefix`
    tokens and each suffix the next `suffix` (tokens past them are dropped), in the texts' order."""
    ids = [[1, 2, 3, 4, 5, 6], [7, 8, 9], [10, 11, 12, 13], [14, 15, 16, 17, 18]]
    long_enough, prefixes, suffixes = split_tokens(ids, prefix=2, suffix=2)
    assert long_enough.dtype == bool and long_enough.tolist() == [True, False, True, True]
    assert prefixes == [[1, 2], [10, 11], [14, 15]]
    assert suffixes == [[3, 4], [12, 13], [16, 17]]
    # the same texts with a longer prefix: only the six-token one is left
    long_enough, prefixes, suffixes = split_tokens(ids, prefix=4, suffix=2)
    assert long_enough.tolist() == [True, False, False, False]
    assert (prefixes, suffixes) == ([[1, 2, 3, 4]], [[5, 6]])


def test_split_tokens_of_no_text_long_enough_is_empty():
    """Every text too short: nothing chosen (extraction_section then skips the prefix length and counts them)."""
    long_enough, prefixes, suffixes = split_tokens([[1], [2, 3]], prefix=2, suffix=1)
    assert long_enough.tolist() == [False, False] and prefixes == [] and suffixes == []


def model_folder(root, name: str, architecture: str) -> ModelSource:
    """A folder that passes the model-folder checks and says `architecture` in config.json (no real weights: the family
    is read from config.json before anything loads)."""
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    return ModelSource(str(folder))


def generator_checked(source: ModelSource) -> None:
    """checked_generator with the family resolve reads once from the folder's config.json."""
    checked_generator(source, known_family(source))


def test_only_a_causal_lm_is_accepted_as_the_generator(tmp_path):
    """Extraction continues texts: a causal LM passes; a masked LM is refused with the way out (`lmaudit reconstruct`),
    a classifier by its family and an architecture of no known family as such, each naming the folder."""
    generator_checked(model_folder(tmp_path, "gpt", "GPT2LMHeadModel"))
    generator_checked(model_folder(tmp_path, "llama", "LlamaForCausalLM"))
    bert = model_folder(tmp_path, "bert", "BertForMaskedLM")
    with pytest.raises(InputError, match="needs a causal LM, not a masked LM") as refused:
        generator_checked(bert)
    assert bert.folder in str(refused.value) and "lmaudit reconstruct" in str(refused.value)
    with pytest.raises(InputError, match="needs a causal LM, not a classifier"):
        generator_checked(model_folder(tmp_path, "clf", "BertForSequenceClassification"))
    t5 = model_folder(tmp_path, "t5", "T5ForConditionalGeneration")
    with pytest.raises(InputError, match="needs a causal LM; its config.json names an architecture of no family") as refused:
        generator_checked(t5)
    assert t5.folder in str(refused.value)


def extraction_table(log_p_by_row: list[float]) -> tuple[pd.DataFrame, np.ndarray]:
    """Two members (one patient) and two non-member sets of two notes each: 'mimic', whose notes are reproduced
    exactly, and 'i2b2', whose are not; the members are reproduced exactly too."""
    exact = [True, True, True, True, False, False]
    table = pd.DataFrame({
        "sample_id": ["m1", "m2", "a1", "a2", "b1", "b2"], "role": [MEMBER] * 2 + [NONMEMBER] * 4,
        "group_id": ["p", "p", "q", "r", "s", "t"], NONMEMBER_SET: [None, None, "mimic", "mimic", "i2b2", "i2b2"],
        "exact": exact, "common_prefix": [4, 4, 4, 4, 1, 0], "similarity": np.array(exact, float), "approximate": exact})
    return table, np.array(log_p_by_row)[:, None]


def test_each_non_member_set_is_summarised_against_the_members_with_its_own_rows():
    """One summary per set, in the sets' order, each counting the members and that set's non-members only; the greedy
    rates, the mean common prefix and the probabilistic curves read that set's rows (of the table and of log p_z): a
    set mixed up with the other, or log p_z taken from the wrong rows, changes every number checked here."""
    # members and mimic: p_z = 1 (one query reproduces the suffix); i2b2: p_z = 1e-300 (never, at any n asked)
    table, log_p = extraction_table([0.0, 0.0, 0.0, 0.0, -690.0, -690.0])
    summaries = per_set_summaries(table, log_p, ExtractionSettings().sampling_schemes())
    assert list(summaries) == ["mimic", "i2b2"]
    for name, exposed, prefix, share in (("mimic", 2, 4.0, 1.0), ("i2b2", 0, 0.5, 0.0)):
        summary = summaries[name]
        assert (summary["n_member"], summary["n_nonmember"]) == (2, 2), name
        greedy = summary["greedy"]
        assert (greedy["sample"]["exact"]["member"]["exposed"], greedy["sample"]["exact"]["member"]["units"]) == (2, 2)
        assert greedy["sample"]["exact"]["nonmember"]["exposed"] == exposed, name
        assert greedy["mean_common_prefix"] == {"member": 4.0, "nonmember": prefix}, name
        # the members' two notes are one patient's: one unit at the patient level, where groups are known
        assert greedy["group"]["exact"]["member"]["units"] == 1
        assert greedy["group"]["exact"]["nonmember"]["units"] == 2
        for curve in summary["probabilistic"]:
            assert curve["member"] == [1.0] * len(curve["queries"])
            assert curve["nonmember"] == [share] * len(curve["queries"]), (name, curve)


def test_without_group_ids_there_is_no_patient_level_and_one_set_is_called_nonmembers():
    """No sample with a group id: per sample only (no 'group' level, whose units would be invented); non-members with
    no set name are one comparison named 'nonmembers'."""
    table, log_p = extraction_table([0.0] * 6)
    table = table.assign(group_id=None, **{NONMEMBER_SET: None})
    [(name, summary)] = per_set_summaries(table, log_p, ExtractionSettings().sampling_schemes()).items()
    assert name == "nonmembers" and (summary["n_member"], summary["n_nonmember"]) == (2, 4)
    assert "group" not in summary["greedy"] and summary["greedy"]["sample"]["exact"]["nonmember"]["exposed"] == 2

