"""Every supported architecture family, saved to a folder as a user would have it, through `lmaudit score` and
`lmaudit audit`: the scores equal a plain transformers forward pass, and the audit runs to a report."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from tests.families import CAUSAL_FAMILIES, MASKED_FAMILIES, save_family_model
from tests.helpers import invoke

FAMILIES = [(family, "clm") for family in CAUSAL_FAMILIES] + [(family, "mlm") for family in MASKED_FAMILIES]


@pytest.fixture(scope="module")
def role_files(notes, tmp_path_factory):
    """Members, non-members and population by patient (never one patient in two roles), each with a label column."""
    folder = tmp_path_factory.mktemp("roles")
    patients = sorted(notes["group_id"].unique())
    labelled = notes.assign(label=np.where(np.arange(len(notes)) % 2 == 0, "a", "b"))
    parts = {"members": patients[:3], "nonmembers": patients[3:6], "population": patients[6:8],
             "shadow_members": patients[8:10], "shadow_nonmembers": patients[10:12]}
    for name, group in parts.items():
        labelled[labelled["group_id"].isin(group)].head(12).to_csv(folder / f"{name}.csv", index=False)
    return folder


def plain_losses(folder, kind: str, texts: list[str]) -> np.ndarray:
    """The loss as a user computes it with transformers alone, one text per pass: the mean next-token NLL (causal), or
    the mean NLL of each token masked alone (masked: the pseudo-log-likelihood)."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)  # the tokenizer that was saved, whatever the family
    model = (AutoModelForCausalLM if kind == "clm" else AutoModelForMaskedLM).from_pretrained(folder).eval()
    losses = []
    for text in texts:
        encoded = tokenizer(text, truncation=True, max_length=64, return_tensors="pt", return_special_tokens_mask=True)
        ids = encoded["input_ids"]
        with torch.no_grad():
            if kind == "clm":
                losses.append(model(input_ids=ids, labels=ids).loss.item())
                continue
            nll = []
            for position in np.flatnonzero(encoded["special_tokens_mask"][0].numpy() == 0):
                masked = ids.clone()
                masked[0, position] = tokenizer.mask_token_id
                log_probs = torch.log_softmax(model(input_ids=masked).logits[0, position], -1)
                nll.append(-log_probs[ids[0, position]].item())
        losses.append(float(np.mean(nll)))
    return np.array(losses)


@pytest.mark.parametrize("family, kind", FAMILIES)
def test_score_every_language_model_family(family, kind, tiny_tokenizer, role_files, tmp_path):
    """`lmaudit score` on a saved model of each family gives the loss transformers alone gives, one text per pass."""
    target = save_family_model(family, kind, tiny_tokenizer, tmp_path / "target", seed=0)
    signal = "clm_loss" if kind == "clm" else "mlm_pll"
    data = tmp_path / "data.csv"
    pd.read_csv(role_files / "members.csv").head(6).to_csv(data, index=False)
    invoke("score", "--target", target, "--data", data, "--signal", signal, "--max-length", 64, "--out", tmp_path / "scores.csv")
    scored = pd.read_csv(tmp_path / "scores.csv")
    members = pd.read_csv(data)
    assert scored["sample_id"].tolist() == members["sample_id"].tolist()
    np.testing.assert_allclose(scored[signal], plain_losses(target, kind, members["text"].tolist()), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind, families", [("clm", CAUSAL_FAMILIES), ("mlm", MASKED_FAMILIES)])
def test_audit_with_a_model_of_every_family(kind, families, tiny_tokenizer, role_files, tmp_path):
    """One audit whose target and references are models of every family (they share a tokenizer, so all of them are
    scored on the same batches) runs to a report, and each model's losses equal that model scored alone."""
    target, *references = [save_family_model(family, kind, tiny_tokenizer, tmp_path / family) for family in families]
    signal = "clm_loss" if kind == "clm" else "mlm_energy"
    (tmp_path / "audit.yaml").write_text(
        f"target: {target}\nreference: [{', '.join(map(str, references))}]\nmembers: {role_files / 'members.csv'}\n"
        f"nonmembers: {role_files / 'nonmembers.csv'}\npopulation: {role_files / 'population.csv'}\nout: {tmp_path / 'audit'}\n"
        f"signal: {{signal: {signal}, k: 2, max_length: 64}}\nevaluation: {{bootstrap: 20}}\n"
    )
    invoke("audit", "--config", tmp_path / "audit.yaml")
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert {"loss", "likelihood_ratio", "rmia", "lira"} <= {result["attack"] for result in report["results"]}
    scores = pd.read_parquet(tmp_path / "audit" / "scores.parquet").set_index("sample_id")
    members = pd.read_csv(role_files / "members.csv")
    for name, folder in zip(["target", *[f"reference_{i + 1}" for i in range(len(references))]], [target, *references],
                            strict=True):
        invoke("score", "--target", folder, "--data", role_files / "members.csv", "--signal", signal, "--k", 2,
               "--max-length", 64, "--out", tmp_path / f"{name}.csv", "--cache-dir", tmp_path / "alone")
        alone = pd.read_csv(tmp_path / f"{name}.csv")[signal].to_numpy()
        np.testing.assert_allclose(scores.loc[members["sample_id"], f"{name}_{signal}"], alone, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", CAUSAL_FAMILIES + MASKED_FAMILIES)
def test_every_sequence_classifier_family_gives_its_own_label_probabilities(family, tiny_tokenizer, notes, tmp_path):
    """The classifier signal, batched with right padding, equals each text's plain forward pass (the causal families
    read the last real token: padding must not move it)."""
    from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast

    from lmaudit.signals.compute import Scoring, model_signal
    from lmaudit.signals.settings import SignalSettings

    folder = save_family_model(family, "classifier", tiny_tokenizer, tmp_path / family)
    texts, ids = notes["text"].tolist()[:8], notes["sample_id"].tolist()[:8]
    batched = np.stack(model_signal(folder, ids, texts, SignalSettings(signal="classifier"), Scoring(tmp_path / "cache"))["value"])
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)  # the tokenizer that was saved, as lmaudit loads it
    with torch.no_grad():
        expected = [torch.log_softmax(model(**tokenizer(text, truncation=True, max_length=64, return_tensors="pt"))
                                      .logits[0].double(), -1).numpy() for text in texts]
    np.testing.assert_allclose(batched, np.stack(expected), rtol=1e-5, atol=1e-6)


def test_audit_a_classifier_with_a_shadow_of_another_family(tiny_tokenizer, role_files, tmp_path):
    """A classifier audit runs on a decoder-family target (Llama) with an encoder-family shadow (DeBERTa-v2)."""
    target = save_family_model("llama", "classifier", tiny_tokenizer, tmp_path / "target", seed=0)
    shadow = save_family_model("deberta_v2", "classifier", tiny_tokenizer, tmp_path / "shadow", seed=1)
    (tmp_path / "audit.yaml").write_text(
        f"target: {target}\nshadow: {shadow}\nsignal: {{signal: classifier}}\nevaluation: {{bootstrap: 20}}\n"
        f"out: {tmp_path / 'audit'}\n"
        + "".join(f"{name}: {role_files / (name + '.csv')}\n"
                  for name in ("members", "nonmembers", "shadow_members", "shadow_nonmembers")))
    invoke("audit", "--config", tmp_path / "audit.yaml")
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert {"loss", "confidence"} <= {result["signal"] for result in report["results"]}


def test_a_masked_lm_against_its_base_runs_the_fine_tune_attacks_that_apply(tiny_model_dirs, notes, tmp_path):
    """A masked LM audited token by token (mlm_tokens) against its base runs EZ-MIA and user inference on the base's
    per-token log-probabilities, and says in one line why the causal-only attacks (PETAL, SPV-MIA, token-level
    InfoRMIA) did not run."""
    target, base = tiny_model_dirs
    patients = sorted(notes["group_id"].unique())
    for name, group in (("members", patients[:4]), ("nonmembers", patients[4:8]), ("population", patients[8:])):
        notes[notes["group_id"].isin(group)].groupby("group_id").head(2).to_csv(tmp_path / f"{name}.csv", index=False)
    invoke("audit", "--target", target, "--reference", base, "--members", tmp_path / "members.csv", "--nonmembers",
           tmp_path / "nonmembers.csv", "--population", tmp_path / "population.csv", "--signal", "mlm_tokens",
           "--max-length", 64, "--bootstrap", 20, "--no-lowercase", "--out", tmp_path / "audit")
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    ran = {(result["attack"], result["level"]) for result in report["results"]}
    assert {("ez_mia", "sample"), ("user_inference", "group")} <= ran
    reasons = {row["attack"]: row["reason"] for row in report["skipped"]}
    assert "masked LM" in reasons["petal"] and "masked LM" in reasons["spv_mia"] and "masked LM" in reasons["informia_tokens"]
