"""`lmaudit extract` end to end on a tiny GPT-2 trained to memorise its members: members' suffixes come back more
often than non-members', every number in extraction.json agrees with the per-sample table, no text or token id is
written without --include-text, and bad requests are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.data.synth import generate_notes
from lmaudit.signals.store import default_cache_dir
from tests.helpers import assert_document_round_trips


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    """A 2-layer GPT-2 trained 30 epochs (180 steps) on 24 member notes of 12 patients, each note opening with its
    patient's name; 24 non-member notes of 12 others."""
    folder = tmp_path_factory.mktemp("extract")
    notes = generate_notes(40, seed=5, insert_names=True)
    notes = notes[notes["text"].str.split().str.len() >= 24].drop_duplicates("text")
    patients = notes["group_id"].unique()
    members = notes[notes["group_id"].isin(patients[:12])].groupby("group_id").head(2)
    nonmembers = notes[notes["group_id"].isin(patients[12:24])].groupby("group_id").head(2)
    members.to_csv(folder / "members.csv", index=False)
    nonmembers.to_csv(folder / "nonmembers.csv", index=False)
    result = CliRunner().invoke(main, ["train", "clm", "--data", str(folder / "members.csv"), "--out",
                                       str(folder / "model"), "--epochs", "30", "--batch-size", "4", "--model-size", "tiny"])
    assert result.exit_code == 0, result.output
    return folder, members, nonmembers


def test_members_suffixes_come_back_and_nothing_of_the_text_is_written(memorised, tmp_path):
    folder, members, nonmembers = memorised
    arguments = ["extract", "--target", str(folder / "model"), "--members", str(folder / "members.csv"), "--nonmembers",
                 str(folder / "nonmembers.csv"), "--prefix-tokens", "4,8,40", "--suffix-tokens", "6", "--scheme", "1,40,1",
                 "--scheme", "0.7,all,0.9", "--out", str(tmp_path / "x")]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "x" / "extraction.json").read_text())
    assert_document_round_trips(tmp_path / "x" / "extraction.json")
    too_short = document["prefix_lengths"]["40"]["too_short"]  # texts under 46 tokens: said, not extracted
    assert too_short and f"prefix 40: {too_short} texts shorter than 46 tokens left out" in result.output
    table = pd.read_parquet(tmp_path / "x" / "extraction.parquet")
    for prefix in ("4", "8"):
        [entry] = document["prefix_lengths"][prefix]["sets"].values()
        rows = table[table["prefix_tokens"] == int(prefix)]
        exact = entry["greedy"]["sample"]["exact"]
        assert exact["member"]["exposed"] == rows.loc[rows["role"] == "member", "exact"].sum()
        assert exact["member"]["rate"] > exact["nonmember"]["rate"]
        curve = entry["probabilistic"][0]
        assert curve["member"][-1] >= curve["nonmember"][-1]
    assert "greedy exact" in result.output
    written = (tmp_path / "x" / "extraction.json").read_text() + table.to_csv()
    assert not any(text in written for text in pd.concat([members, nonmembers])["text"])
    assert not {"prefix", "suffix", "generated"} & set(table.columns)
    # a rerun reads every pass from the signal store (nothing new is computed) and gives the same document
    parts = sorted(default_cache_dir(tmp_path / "x").rglob("part-*.parquet"))
    assert parts and not any(text in part.read_bytes().decode("latin-1") for part in parts
                             for text in members["text"])
    again = CliRunner().invoke(main, arguments)
    assert again.exit_code == 0, again.output
    assert sorted(default_cache_dir(tmp_path / "x").rglob("part-*.parquet")) == parts
    assert json.loads((tmp_path / "x" / "extraction.json").read_text())["prefix_lengths"] == document["prefix_lengths"]


def test_include_text_writes_the_texts_and_bad_requests_are_one_line(memorised, tmp_path):
    folder, members, _ = memorised
    base = ["extract", "--target", str(folder / "model"), "--members", str(folder / "members.csv"),
            "--nonmembers", str(folder / "nonmembers.csv"), "--out", str(tmp_path / "y")]
    result = CliRunner().invoke(main, [*base, "--prefix-tokens", "4", "--suffix-tokens", "4", "--include-text"])
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(tmp_path / "y" / "extraction.parquet")
    assert {"prefix_text", "suffix_text", "generated_text"} <= set(table.columns)
    assert table["suffix_text"].str.len().gt(0).all() and table["generated_text"].notna().all()
    for bad, says in ((["--scheme", "0,40,1"], "temperature"), (["--scheme", "1,0,1"], "top-k"),
                      (["--suffix-tokens", "0"], "--suffix-tokens"), (["--prefix-tokens", "0"], "at least one token"),
                      (["--scheme", "1,40"], "temperature,top-k,top-p"), (["--prefix-tokens", "4,x"], "comma")):
        refused = CliRunner().invoke(main, [*base, *bad])
        assert refused.exit_code == 2 and says in refused.output and len(refused.output.strip().splitlines()) == 1
    too_long = CliRunner().invoke(main, [*base, "--prefix-tokens", "40", "--suffix-tokens", "30", "--out",
                                         str(tmp_path / "z")])
    assert too_long.exit_code == 0 and "texts shorter than" in too_long.output
    beyond = CliRunner().invoke(main, [*base, "--prefix-tokens", "5000", "--out", str(tmp_path / "w")])
    assert beyond.exit_code == 2 and "positions" in beyond.output and len(beyond.output.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["extract"], ["audit", "--extraction"]])
def test_a_masked_lm_is_refused_in_one_line(memorised, tiny_model_dirs, tmp_path, command):
    """Greedy continuation needs a causal LM: a masked LM is named and refused, exit 2, nothing written (an audit
    refuses before computing any signal)."""
    folder = memorised[0]
    result = CliRunner().invoke(main, [*command, "--target", str(tiny_model_dirs[0]), "--members",
                                       str(folder / "members.csv"), "--nonmembers", str(folder / "nonmembers.csv"),
                                       "--out", str(tmp_path / "m")])
    assert result.exit_code == 2 and "needs a causal LM" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not [path for path in (tmp_path / "m").rglob("*") if path.is_file()]


def test_reconstruct_restores_members_names_and_writes_no_value(memorised, tmp_path):
    """The memorised model puts the members' own names first more often than the non-members'; every count in
    reconstruction.json agrees with the per-span table; no name or text is written without --include-text."""
    folder, members, nonmembers = memorised
    base = ["reconstruct", "--target", str(folder / "model"), "--members", str(folder / "members.csv"),
            "--nonmembers", str(folder / "nonmembers.csv"), "--field", r"name=^(\w+ \w+) ", "--field", "year=(19\\d\\d)"]
    result = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "r" / "reconstruction.json").read_text())
    assert_document_round_trips(tmp_path / "r" / "reconstruction.json")
    table = pd.read_parquet(tmp_path / "r" / "reconstruction.parquet")
    name = document["fields"]["name"]
    [result_of_set] = name["sets"].values()
    top1 = result_of_set["top1"]
    assert top1["member"]["units"] == (table["role"] == "member").sum() == len(members)
    assert top1["member"]["exposed"] == ((table["role"] == "member") & (table["rank"] == 1)).sum()
    assert top1["member"]["rate"] > top1["nonmember"]["rate"]
    assert result_of_set["mean_rank"]["member"] < result_of_set["mean_rank"]["nonmember"]
    assert name["candidates"] == len({text.split()[0] + " " + text.split()[1]
                                      for text in pd.concat([members, nonmembers])["text"]})
    assert document["fields"]["year"]["not_applicable"] == "fewer than two candidates"
    written = (tmp_path / "r" / "reconstruction.json").read_text() + table.to_csv() + result.output
    everyone = pd.concat([members, nonmembers])["text"]
    assert not any(text in written for text in everyone)
    assert not any(" ".join(text.split()[:2]) in written for text in everyone)
    shown = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "s"), "--include-text"])
    assert shown.exit_code == 0, shown.output
    assert {"value", "first_choice"} <= set(pd.read_parquet(tmp_path / "s" / "reconstruction.parquet").columns)


def test_extract_and_reconstruct_refuse_another_runs_results_unless_overwrite(memorised, tmp_path):
    """Like `audit`: a rerun of the same extraction goes on; other settings, or a folder holding an audit's report or a
    reconstruction, are refused in one line naming the folder, the file untouched; --overwrite replaces."""
    from tests.helpers import assert_one_line_error, run_cli

    folder = memorised[0]
    roles = ["--target", folder / "model", "--members", folder / "members.csv", "--nonmembers", folder / "nonmembers.csv"]
    extract = ["extract", *roles, "--prefix-tokens", "4", "--suffix-tokens", "4", "--scheme", "1,40,1"]
    out = tmp_path / "x"
    assert run_cli(*extract, "--out", out)[0] == 0
    assert run_cli(*extract, "--out", out)[0] == 0
    # What the refused run must leave untouched: the rerun's file (written anew, its `created` a second later or not).
    first = (out / "extraction.json").read_text()
    code, output = run_cli(*extract[:-1], "0.7,all,0.9", "--out", out)
    assert_one_line_error(code, output, str(out), "holds an extraction's result configured otherwise", "--overwrite")
    assert (out / "extraction.json").read_text() == first
    assert run_cli(*extract[:-1], "0.7,all,0.9", "--out", out, "--overwrite")[0] == 0
    assert json.loads((out / "extraction.json").read_text())["schemes"] != json.loads(first)["schemes"]
    reconstruct = ["reconstruct", *roles, "--field", r"name=^(\w+ \w+) "]
    code, output = run_cli(*reconstruct, "--out", out)
    assert_one_line_error(code, output, str(out), "holds an extraction's result (extraction.json)", "--overwrite")
    assert not (out / "reconstruction.json").exists()
    assert run_cli(*reconstruct, "--out", tmp_path / "r")[0] == 0
    code, output = run_cli(*reconstruct, "--max-candidates", "5", "--out", tmp_path / "r")
    assert_one_line_error(code, output, "holds a reconstruction's result configured otherwise (its reconstruction "
                                        "differs)")
    audited = tmp_path / "audited"
    audited.mkdir()
    (audited / "report.json").write_text(json.dumps({"config": {}}))
    code, output = run_cli(*extract, "--out", audited)
    assert_one_line_error(code, output, "holds an audit's report (report.json)")
    assert sorted(path.name for path in audited.iterdir()) == ["report.json"]


def test_reconstruct_bad_requests_are_one_line(memorised, tmp_path):
    """A span column that does not match its text, a bad pattern, no field, a kind declared twice: exit 2, one line,
    nothing written."""
    folder, members, nonmembers = memorised
    members.assign(name=["Nobody Atall"] * len(members)).to_csv(tmp_path / "members.csv", index=False)
    nonmembers.assign(name=None).to_csv(tmp_path / "nonmembers.csv", index=False)
    base = ["reconstruct", "--target", str(folder / "model"), "--nonmembers", str(tmp_path / "nonmembers.csv"),
            "--out", str(tmp_path / "bad")]
    for bad, says in ((["--members", str(tmp_path / "members.csv"), "--field-column", "name=name"],
                       "members.csv, row 1: the 'name' column's value does not occur in the text"),
                      (["--members", str(folder / "members.csv"), "--field", "name=(\\w+"], "not a regular expression"),
                      (["--members", str(folder / "members.csv")], "at least one field"),
                      (["--members", str(folder / "members.csv"), "--field", "a=x", "--field", "a=y"], "declared twice")):
        refused = CliRunner().invoke(main, [*base, *bad])
        assert refused.exit_code == 2 and says in refused.output, refused.output
        assert len(refused.output.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_reconstruct_runs_on_a_masked_lm(memorised, tiny_model_dirs, tmp_path):
    """A masked LM fills the name in, its family stated in the result."""
    folder = memorised[0]
    base = ["--members", str(folder / "members.csv"), "--nonmembers", str(folder / "nonmembers.csv"),
            "--field", r"name=^(\w+ \w+) "]
    result = CliRunner().invoke(main, ["reconstruct", "--target", str(tiny_model_dirs[0]), *base, "--out",
                                       str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "m" / "reconstruction.json").read_text())
    assert document["model_family"] == "mlm" and document["fields"]["name"]["sets"]


def test_the_extraction_job_travels_to_another_process_and_gives_the_same_values(memorised):
    """A backend (Ray) runs the job it receives pickled: the copy's stored values equal the original's, and each value
    unpacks into the greedy continuation and one log p_z per scheme."""
    import pickle

    from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource
    from lmaudit.signals.extraction import ExtractionJob, unpack_extraction
    from lmaudit.signals.sampling import ExtractionSettings

    folder, members, _ = memorised
    job = ExtractionJob(ModelSource(str(folder / "model")), DEFAULT_PLACEMENT,
                        ExtractionSettings(prefix_tokens=(4,), suffix_tokens=5, schemes=("1,40,1", "0.7,all,0.9")), 4)
    ids, texts = members["sample_id"].tolist()[:6], members["text"].tolist()[:6]
    [here] = job(ids, texts)
    [there] = pickle.loads(pickle.dumps(job))(ids, texts)
    for first, second in zip(here["value"], there["value"], strict=True):
        np.testing.assert_array_equal(first, second)
        generated, log_p = unpack_extraction(first, 5)
        assert len(generated) <= 5 and log_p.shape == (2,) and (log_p <= 0).all()


def test_samia_continuations_of_members_come_back_more_and_are_stable(memorised):
    """SaMIA's pass on the memorised model: members' second halves come back more than non-members'; a rerun with the
    same seed gives the same values; every value is a share; a one-word text is not scored."""
    from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource
    from lmaudit.signals.samia import SamiaJob, halves, rouge1_recall, words

    folder, members, nonmembers = memorised
    job = SamiaJob(ModelSource(str(folder / "model")), DEFAULT_PLACEMENT, draws=4, seed=0)
    [on_members] = job(members["sample_id"].tolist(), members["text"].tolist())
    [on_nonmembers] = job(nonmembers["sample_id"].tolist(), nonmembers["text"].tolist())
    member_values, nonmember_values = np.stack(on_members["value"]), np.stack(on_nonmembers["value"])
    assert ((member_values >= 0) & (member_values <= 1)).all()
    assert member_values.mean() > nonmember_values.mean()
    [again] = job(members["sample_id"].tolist(), members["text"].tolist())
    np.testing.assert_array_equal(np.stack(again["value"]), member_values)
    [short] = job(["one"], ["Word"])
    assert np.isnan(short["value"][0]).all()
    assert halves("Mary Smith, aged 54.") == ("Mary Smith,", ["aged", "54", "."])
    assert words("Na 137, K 4.1") == ["na", "137", ",", "k", "4", ".", "1"]
    assert rouge1_recall(["a", "b", "b", "c", "d"], ["b", "a", "b"]) == 1.0  # cut to 3: a b b
    assert rouge1_recall(["b", "x", "x"], ["b", "b", "a"]) == pytest.approx(1 / 3)


def test_self_prompt_reference_is_trained_on_the_targets_own_continuations_and_feeds_spv_mia(memorised, tmp_path):
    """`lmaudit train self-prompt`: every text it trains on starts with a prompt's first tokens and goes on in the
    target's words (seeded: the same texts again); the audit then runs SPV-MIA (and the neighbourhood attack) on the
    neighbours the reference, a causal LM, proposes; prompts too short for a prompt are a one-line error."""
    from lmaudit.models.self_prompt import SelfPromptSettings, self_prompt_texts
    from lmaudit.models.source import ModelSource
    from lmaudit.models.tokenizer import load_tokenizer
    from tests.helpers import assert_one_line_error, run_cli

    folder, _, nonmembers = memorised
    model = str(folder / "model")
    texts = self_prompt_texts(ModelSource(model), nonmembers["text"].tolist(), SelfPromptSettings(prompt_tokens=4, seed=1))
    assert texts == self_prompt_texts(ModelSource(model), nonmembers["text"].tolist(), SelfPromptSettings(4, 1))
    tokenizer = load_tokenizer(model)
    heads = {tokenizer.decode(tokenizer(text)["input_ids"][:5], skip_special_tokens=True) for text in nonmembers["text"]}
    assert len(texts) == len(nonmembers) and all(any(text.startswith(head) for head in heads) for text in texts)
    assert set(texts) != set(nonmembers["text"].str.lower())
    code, output = run_cli("train", "self-prompt", "--target", model, "--base", model, "--prompts",
                           folder / "nonmembers.csv", "--out", tmp_path / "reference", "--epochs", "1", "--prompt-tokens", 4)
    assert code == 0 and f"wrote {len(nonmembers)} texts" in output, output
    audit = ["audit", "--target", model, "--reference", model, "--members", folder / "members.csv", "--nonmembers",
             folder / "nonmembers.csv", "--out", tmp_path / "a", "--self-prompt-reference", tmp_path / "reference"]
    code, output = run_cli(*audit, "--neighbours", 2, "--neighbour-words", 3, "--recall-prefix", 0, "--no-lowercase")
    assert code == 0, output
    assert {"spv_mia", "neighbourhood"} <= {r["attack"] for r in json.loads((tmp_path / "a" / "report.json").read_text())["results"]}
    code, output = run_cli("train", "self-prompt", "--target", model, "--base", model, "--prompts", folder / "nonmembers.csv",
                           "--out", tmp_path / "r2", "--prompt-tokens", 500)
    assert_one_line_error(code, output, "longer than 500 tokens")
    assert not (tmp_path / "r2").exists()


def test_the_suites_self_prompt_reference_is_reused_only_for_the_same_target(memorised, tmp_path, monkeypatch):
    """Made once; called again for the same target and prompts it samples nothing; for a target whose weights changed
    (trained again) it samples and trains anew."""
    import shutil

    import lmaudit.studies.finetune_suite as suite
    from lmaudit.models.recipe import TrainingRecipe
    from lmaudit.models.source import ModelSource

    folder, _, nonmembers = memorised
    target = tmp_path / "target"
    shutil.copytree(folder / "model", target)
    prompts, recipe = nonmembers["text"].tolist(), TrainingRecipe(epochs=5, learning_rate=1e-3)
    sampled = []
    original = suite.self_prompt_texts
    monkeypatch.setattr(suite, "self_prompt_texts", lambda *args, **kw: sampled.append(1) or original(*args, **kw))
    for _ in range(2):
        suite.train_self_prompt_reference(ModelSource(str(target)), folder / "model", prompts, tmp_path / "ref", recipe, 0)
    assert len(sampled) == 1 and (tmp_path / "ref" / "model.safetensors").is_file()
    from safetensors.torch import load_file, save_file

    weights = load_file(target / "model.safetensors")
    save_file({name: tensor * 1.01 for name, tensor in weights.items()}, target / "model.safetensors",
              metadata={"format": "pt"})
    suite.train_self_prompt_reference(ModelSource(str(target)), folder / "model", prompts, tmp_path / "ref", recipe, 0)
    assert len(sampled) == 2


def test_an_audit_bundle_verifies_whole_and_any_changed_byte_of_its_results_is_found(memorised, tmp_path):
    """One model's audit, extraction and reconstruction kept in one folder (a bundle): `verify` passes it untouched and
    finds a flipped byte in any of its sealed documents (exit 3, naming it), as it does for the report."""
    from tests.helpers import run_cli

    folder, _, _ = memorised
    bundle = tmp_path / "bundle"
    roles = ["--target", folder / "model", "--members", folder / "members.csv", "--nonmembers", folder / "nonmembers.csv"]
    for command in (["audit", *roles, "--out", bundle, "--signal", "clm_loss"],
                    ["extract", *roles, "--out", bundle / "extraction", "--prefix-tokens", "8", "--suffix-tokens", "4"],
                    ["reconstruct", *roles, "--out", bundle / "reconstruction", "--field", r"name=^(\w+ \w+) "]):
        code, output = run_cli(*command)
        assert code == 0, output
    code, output = run_cli("verify", bundle)
    assert code == 0 and f"intact: {bundle}" in output, output
    for document in (bundle / "extraction" / "extraction.json", bundle / "reconstruction" / "reconstruction.json"):
        original = document.read_bytes()
        index = original.index(b'"target"') + 1  # a byte inside the document, the JSON left readable
        document.write_bytes(original[:index] + b"T" + original[index + 1:])
        code, output = run_cli("verify", bundle)
        assert code == 3 and str(document) in output, output
        document.write_bytes(original)
    code, output = run_cli("verify", tmp_path / "nothing-here")
    assert code == 2, output
