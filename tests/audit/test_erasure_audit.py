"""`lmaudit erasure` end to end on tiny causal LMs trained on generated notes: a model never unlearnt reads "still
detectable", a model retrained without the erased patients "not detected"; erasure.json is sealed, verified and holds
no text of the forget set; bad input is refused in one line, nothing written."""

from pathlib import Path

import pandas as pd
import pytest

from lmaudit.data.synth import generate_notes
from lmaudit.metrics.erasure import NOT_DETECTED, STILL_DETECTABLE
from tests.helpers import assert_document_round_trips, assert_one_line_error, invoke, member_only_terms, run_cli, terms_written
from tests.serving.tiny_clm import train_tiny_clm

FORGET, RETAIN = 2, 17  # patients; every other patient of the 100 is holdout


@pytest.fixture(scope="module")
def erasure_files(tmp_path_factory) -> dict[str, Path]:
    """forget (2 patients with at least 10 notes), retain (17) and holdout (81) files; the model before erasure, trained
    on forget + retain; the model retrained on retain alone; the tokenizer of both trained on every text (as a retrain
    keeps its tokenizer)."""
    root = tmp_path_factory.mktemp("erasure")
    notes = generate_notes(n_patients=100, seed=3)
    counts = notes.groupby("group_id").size()
    forget = list(counts[counts >= 10].index[:FORGET])
    others = [patient for patient in counts.index if patient not in forget]
    sets = {"forget": forget, "retain": others[:RETAIN], "holdout": others[RETAIN:]}
    files = {}
    for name, patients in sets.items():
        files[name] = root / f"{name}.csv"
        notes[notes["group_id"].isin(patients)].to_csv(files[name], index=False)
    texts = notes["text"].tolist()
    trained = notes[notes["group_id"].isin(forget + sets["retain"])]
    files["before"] = train_tiny_clm(root / "before", trained, steps=300, seed=0, vocabulary_texts=texts)
    retained = notes[notes["group_id"].isin(sets["retain"])]
    files["retrained"] = train_tiny_clm(root / "retrained", retained, steps=300, seed=1, vocabulary_texts=texts)
    files["other_tokenizer"] = train_tiny_clm(root / "other", retained, steps=1, seed=2)
    files["public"] = root / "public.csv"
    generate_notes(n_patients=10, seed=99, id_prefix="PUB-").to_csv(files["public"], index=False)
    files["root"] = root
    return files


def erasure_args(files: dict, after: Path, out: Path, *extra) -> list:
    return ["erasure", "--before", files["before"], "--after", after, "--forget", files["forget"], "--holdout",
            files["holdout"], "--retain", files["retain"], "--out", out, "--permutations", 999, "--bootstrap", 100,
            *extra]


def test_a_model_never_unlearnt_still_holds_the_erased_patients(erasure_files):
    """After = before: the pooled verdict and each patient's read "still detectable", resting on the after model; the
    output is sealed, `lmaudit verify` finds it intact, and it reads back into its model."""
    out = erasure_files["root"] / "audit-none"
    output = invoke(*erasure_args(erasure_files, erasure_files["before"], out))
    assert output.splitlines()[0].startswith(f"All {FORGET} erased subjects: still detectable.")
    document = pd.read_json(out / "erasure.json", typ="series")
    findings = document["findings"]
    assert [finding["finding"] for finding in findings] == [STILL_DETECTABLE] * (FORGET + 1)
    assert all(finding["found_before"] for finding in findings)
    assert document["change"]["auc"] == pytest.approx(0.5)  # the two models are the same: nothing changed
    before, after = document["extraction"]["models"]  # the same model gives the same texts back
    assert (before["model"], after["model"]) == ("before", "after") and before["forget_texts"] == after["forget_texts"]
    assert before["forget_texts"]["units"] + before["holdout_texts"]["units"] > 0
    assert any(line.startswith("Extraction (greedy, the next 16 tokens") for line in document["statements"])
    assert invoke("verify", out).strip().endswith(f"intact: {out}")
    assert_document_round_trips(out / "erasure.json")


def test_a_model_retrained_without_them_is_not_detected(erasure_files):
    """After = the model retrained without the forget patients, also relearnt on public notes of other patients: "not
    detected by these tests", the same tests having
    found them in the model before; PrivLeak against itself is 0; equivalence not tested with 2 erased patients; the
    change singles them out (they were trained on before, not after), which the statement says any erasure does."""
    out = erasure_files["root"] / "audit-retrained"
    output = invoke(*erasure_args(erasure_files, erasure_files["retrained"], out,
                                  "--retrained", erasure_files["retrained"], "--relearn-public", erasure_files["public"]))
    document = pd.read_json(out / "erasure.json", typ="series")
    pooled = document["findings"][0]
    assert pooled["finding"] == NOT_DETECTED and pooled["found_before"], output
    assert [probe["score"] for probe in document["probes"]][-2:] == ["after_relearned", "after_relearned_public"]
    assert len(pooled["family_p_values"]) == 6  # five probes and the lower test
    assert document["privleak"]["value"] == pytest.approx(0)
    assert not document["equivalence"]["equivalent"] and "Equivalence to the retrained model not tested" in output
    assert "singles out the erased subjects" in output
    assert document["counts"] == {"forget": document["counts"]["forget"], "holdout": document["counts"]["holdout"],
                                  "retain": document["counts"]["retain"]}
    assert document["counts"]["holdout"]["subjects"] == 100 - FORGET - RETAIN


def test_no_forget_text_is_written(erasure_files):
    """No word or word pair found only in the forget texts is in any output file (the patients' ids are, by design:
    the officer asks about them)."""
    out = erasure_files["root"] / "audit-none"
    if not (out / "erasure.json").is_file():
        invoke(*erasure_args(erasure_files, erasure_files["before"], out))
    forget = pd.read_csv(erasure_files["forget"])["text"]
    others = pd.concat([pd.read_csv(erasure_files[name])["text"] for name in ("holdout", "retain")])
    assert terms_written(out, member_only_terms(forget, others)) == {}


def bad(files: dict, tmp_path: Path, **changes) -> tuple[int, str, Path]:
    """The command with some options changed, and its output folder."""
    out = tmp_path / "out"
    args = erasure_args(files, changes.pop("after", files["retrained"]), out)
    for option, value in changes.items():
        args[args.index(f"--{option}") + 1] = value
    code, output = run_cli(*args)
    return code, output, out


def test_a_patient_in_forget_and_holdout_is_refused(erasure_files, tmp_path):
    holdout = pd.read_csv(erasure_files["holdout"])
    forget = pd.read_csv(erasure_files["forget"])
    mixed = tmp_path / "holdout.csv"
    pd.concat([holdout, forget.head(1)]).to_csv(mixed, index=False)
    code, output, out = bad(erasure_files, tmp_path, holdout=mixed)
    assert_one_line_error(code, output, f"subject '{forget['group_id'][0]}'", "--forget", "--holdout")
    assert not out.exists()


def test_an_empty_forget_set_is_refused(erasure_files, tmp_path):
    empty = tmp_path / "forget.csv"
    pd.read_csv(erasure_files["forget"]).head(0).to_csv(empty, index=False)
    code, output, out = bad(erasure_files, tmp_path, forget=empty)
    assert_one_line_error(code, output, str(empty))
    assert not out.exists()


def test_a_forget_text_without_its_subject_is_refused(erasure_files, tmp_path):
    unnamed = tmp_path / "forget.csv"
    forget = pd.read_csv(erasure_files["forget"])
    forget.loc[3, "group_id"] = None
    forget.to_csv(unnamed, index=False)
    code, output, out = bad(erasure_files, tmp_path, forget=unnamed)
    assert_one_line_error(code, output, "row 4", "group_id")
    assert not out.exists()


def test_a_model_with_another_tokenizer_is_refused(erasure_files, tmp_path):
    code, output, out = bad(erasure_files, tmp_path, after=erasure_files["other_tokenizer"])
    assert_one_line_error(code, output, "--after differs from --before")
    assert not out.exists()


def test_a_model_of_another_depth_is_refused(erasure_files, tmp_path):
    """GPT-2 names its depth n_layer: the after model's config saying 3 layers against 2 is told apart."""
    import json
    import shutil

    deeper = shutil.copytree(erasure_files["before"], tmp_path / "deeper")
    config = json.loads((deeper / "config.json").read_text())
    (deeper / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    code, output, out = bad(erasure_files, tmp_path, after=deeper)
    assert_one_line_error(code, output, "num_hidden_layers 2 vs 3")
    assert not out.exists()


def test_the_relearning_probe_relearns_half_of_every_subject():
    """Half of each subject's texts rounded down are relearnt, drawn by the seed, so that every subject keeps at least
    one to test; the probes are the after model, each quantization, and the relearnt model unless --after-adapter."""
    import numpy as np

    from lmaudit.audit.erasure_settings import ErasureSettings
    from lmaudit.audit.relearning import relearned_rows

    subjects = np.array(["a"] * 5 + ["b"] + ["c"] * 2)
    relearned = relearned_rows(subjects, 0)
    assert [int(relearned[subjects == name].sum()) for name in "abc"] == [2, 0, 1]
    assert not np.array_equal(relearned_rows(np.repeat(subjects, 3), 0), relearned_rows(np.repeat(subjects, 3), 1))
    settings = ErasureSettings(before="b", after="a", forget="f", holdout="h")
    assert settings.probes() == ["after", "after_rtn8", "after_rtn4", "after_relearned"]
    assert settings.model_copy(update={"after_adapter": "x", "quantized": ()}).probes() == ["after"]


def test_a_holdout_patient_the_split_trained_on_is_refused(erasure_files, tmp_path):
    """A --holdout file in a folder `lmaudit split` wrote (split.json beside it): a patient of its train.parquet among
    the holdout patients is refused, naming the row and the split's file."""
    from lmaudit.data.corpus import write_table

    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "split.json").write_text("{}", encoding="utf-8")
    retain = pd.read_csv(erasure_files["retain"])
    write_table(retain, plan / "train.parquet")
    holdout = plan / "nonmembers.parquet"
    write_table(pd.concat([pd.read_csv(erasure_files["holdout"]), retain.head(2)]), holdout)
    code, output, out = bad(erasure_files, tmp_path, holdout=holdout)
    assert_one_line_error(code, output, f"subject '{retain['group_id'][0]}' of --holdout", "train.parquet")
    assert not out.exists()


def test_the_page_shows_the_verdict_and_is_sealed(erasure_files):
    """erasure.html opens with the statements and tables every finding and probe, and extraction's four rows (before
    and after, forget and holdout), and erasure.json records its
    SHA-256: an edited page is found by `lmaudit verify` (exit 3)."""
    import hashlib
    import json

    out = erasure_files["root"] / "audit-none"
    if not (out / "erasure.json").is_file():
        invoke(*erasure_args(erasure_files, erasure_files["before"], out))
    document = json.loads((out / "erasure.json").read_text(encoding="utf-8"))
    page = (out / "erasure.html").read_text(encoding="utf-8")
    assert document["outputs"]["erasure.html"] == hashlib.sha256(page.encode()).hexdigest()
    assert document["statements"][0].replace("'", "&#39;") in page
    assert page.count("<tr>") == 1 + len(document["findings"]) + 1 + len(document["probes"]) + 2 + 1 + 4
    (out / "erasure.html").write_text(page.replace("still detectable", "not detected"), encoding="utf-8")
    code, output = run_cli("verify", out)
    assert code == 3 and "erasure.html" in output, output
    (out / "erasure.html").write_text(page, encoding="utf-8")  # the module's other tests read this folder


def test_the_pdf_is_made_from_erasure_json_and_sealed_with_it(erasure_files):
    """`lmaudit pdf` of an erasure folder writes erasure.pdf (the statements' first words in it), recorded in
    derived.json; verify finds it intact, and an edited PDF (exit 3)."""
    pytest.importorskip("typst")
    out = erasure_files["root"] / "audit-none"
    if not (out / "erasure.json").is_file():
        invoke(*erasure_args(erasure_files, erasure_files["before"], out))
    assert invoke("pdf", out).strip() == f"pdf: {out / 'erasure.pdf'}"
    pdf = (out / "erasure.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and (out / "derived.json").is_file()
    assert invoke("verify", out).strip().endswith(f"intact: {out}")
    (out / "erasure.pdf").write_bytes(pdf + b"%")
    code, output = run_cli("verify", out)
    assert code == 3 and "erasure.pdf" in output, output
    (out / "erasure.pdf").write_bytes(pdf)


def test_public_text_of_an_audited_subject_is_refused(erasure_files, tmp_path):
    """--relearn-public holding a text of a forget patient (by its id) is no public text: refused, naming the row."""
    public = tmp_path / "public.csv"
    forget = pd.read_csv(erasure_files["forget"]).head(1)
    pd.concat([pd.read_csv(erasure_files["public"]), forget]).to_csv(public, index=False)
    out = tmp_path / "out"
    code, output = run_cli(*erasure_args(erasure_files, erasure_files["retrained"], out, "--relearn-public", public))
    assert_one_line_error(code, output, "public.csv, row", f"subject '{forget['group_id'][0]}'")
    assert not (out / "erasure.json").exists()


def test_a_classifier_is_refused(erasure_files, tmp_path):
    """A text classifier before erasure: refused in one line (its membership signal needs a shadow model)."""
    from transformers import AutoTokenizer, GPT2Config, GPT2ForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(erasure_files["before"])
    classifier = tmp_path / "classifier"
    GPT2ForSequenceClassification(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=len(tokenizer),
                                             pad_token_id=tokenizer.pad_token_id)).save_pretrained(classifier)
    tokenizer.save_pretrained(classifier)
    out = tmp_path / "out"
    args = erasure_args(erasure_files, classifier, out)
    args[args.index("--before") + 1] = classifier
    code, output = run_cli(*args)
    assert_one_line_error(code, output, "--before is a classifier", "masked and causal language models")
    assert not out.exists()
