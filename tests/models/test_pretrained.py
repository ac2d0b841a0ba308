"""Fine-tuning a pretrained checkpoint (`train --init-from`), fully or with LoRA adapters, with or without DP-SGD, and
auditing a base model with an adapter (`--adapter`): the adapter's signals equal the merged model's and an unmerged
PEFT forward pass, and the report names the base and the adapter by fingerprint."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from tests.families import save_family_model
from tests.helpers import assert_one_line_error, invoke, run_cli


@pytest.fixture(scope="module")
def corpus(notes, tmp_path_factory):
    """Training notes (4 patients), and held-out role files by patient, with labels for the classifiers."""
    folder = tmp_path_factory.mktemp("corpus")
    labelled = notes.assign(label=np.where(np.arange(len(notes)) % 2 == 0, "a", "b"))
    patients = sorted(notes["group_id"].unique())
    parts = {"train": patients[:4], "validation": patients[4:6], "nonmembers": patients[6:9], "population": patients[9:12]}
    for name, group in parts.items():
        labelled[labelled["group_id"].isin(group)].to_csv(folder / f"{name}.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def llama_base(tiny_tokenizer, tmp_path_factory):
    """A tiny Llama checkpoint (random weights) with its tokenizer, as a user's pretrained model."""
    return save_family_model("llama", "clm", tiny_tokenizer, tmp_path_factory.mktemp("base") / "llama")


@pytest.fixture(scope="module")
def lora_adapter(llama_base, corpus, tmp_path_factory):
    """LoRA adapters (rank 4) fine-tuned on the training notes for 2 epochs."""
    out = tmp_path_factory.mktemp("adapter") / "lora"
    invoke("train", "clm", "--data", corpus / "train.csv", "--out", out, "--init-from", llama_base, "--lora",
           "--lora-rank", 4, "--epochs", 2, "--learning-rate", 1e-2)
    return out


def test_fine_tuning_starts_from_the_checkpoint_and_keeps_its_tokenizer(llama_base, corpus, tmp_path):
    invoke("train", "clm", "--data", corpus / "train.csv", "--out", tmp_path / "tuned", "--init-from", llama_base,
           "--epochs", 2, "--learning-rate", 1e-3)
    summary = json.loads((tmp_path / "tuned" / "lmaudit_training.json").read_text())
    assert summary["init_from"] == str(llama_base) and summary["size"] == "pretrained" and len(summary["init_fingerprint"]) == 64
    assert json.loads((tmp_path / "tuned" / "config.json").read_text())["model_type"] == "llama"
    vocabularies = [json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"] for folder in (tmp_path / "tuned", llama_base)]
    assert vocabularies[0] == vocabularies[1]
    # Fine-tuning lowers the training texts' loss below the checkpoint's.
    train = pd.read_csv(corpus / "train.csv")
    for name, folder in (("base", llama_base), ("tuned", tmp_path / "tuned")):
        invoke("score", "--target", folder, "--data", corpus / "train.csv", "--signal", "clm_loss", "--out", tmp_path / f"{name}.csv")
    base, tuned = (pd.read_csv(tmp_path / f"{name}.csv")["clm_loss"] for name in ("base", "tuned"))
    assert len(base) == len(train) and tuned.mean() < base.mean() - 0.05


def test_lora_saves_only_the_adapter_and_leaves_the_base_untouched(llama_base, lora_adapter):
    assert {"adapter_config.json", "adapter_model.safetensors", "lmaudit_training.json"} <= {p.name for p in lora_adapter.iterdir()}
    assert not (lora_adapter / "config.json").exists()
    weights = load_file(lora_adapter / "adapter_model.safetensors")
    assert weights and all("lora_" in name for name in weights)
    assert any(w.abs().sum() > 0 for name, w in weights.items() if "lora_B" in name)  # B starts at zero: it trained
    summary = json.loads((lora_adapter / "lmaudit_training.json").read_text())
    assert summary["lora"] == {"rank": 4, "alpha": 8, "dropout": 0.05}


def test_adapter_signals_equal_the_merged_model_and_an_unmerged_peft_forward(llama_base, lora_adapter, corpus, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(llama_base).eval()
    unmerged = PeftModel.from_pretrained(base, lora_adapter).eval()
    tokenizer = AutoTokenizer.from_pretrained(llama_base)
    texts = pd.read_csv(corpus / "train.csv")["text"].tolist()
    with torch.no_grad():
        expected = [unmerged(input_ids=ids, labels=ids).loss.item()
                    for ids in (tokenizer(t, truncation=True, max_length=64, return_tensors="pt")["input_ids"] for t in texts)]
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(llama_base), lora_adapter).merge_and_unload()
    merged.save_pretrained(tmp_path / "merged")
    tokenizer.save_pretrained(tmp_path / "merged")
    invoke("score", "--target", llama_base, "--adapter", lora_adapter, "--data", corpus / "train.csv", "--signal", "clm_loss",
           "--out", tmp_path / "adapter.csv")
    invoke("score", "--target", tmp_path / "merged", "--data", corpus / "train.csv", "--signal", "clm_loss",
           "--out", tmp_path / "merged.csv")
    with_adapter = pd.read_csv(tmp_path / "adapter.csv")["clm_loss"].to_numpy()
    np.testing.assert_allclose(with_adapter, pd.read_csv(tmp_path / "merged.csv")["clm_loss"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(with_adapter, expected, rtol=1e-5, atol=1e-6)
    invoke("score", "--target", llama_base, "--data", corpus / "train.csv", "--signal", "clm_loss", "--out", tmp_path / "base.csv")
    assert np.abs(pd.read_csv(tmp_path / "base.csv")["clm_loss"].to_numpy() - with_adapter).max() > 1e-3  # it is applied


def test_audit_of_a_base_with_an_adapter_records_both_fingerprints(llama_base, lora_adapter, corpus, tmp_path):
    from lmaudit.models.fingerprints import adapter_fingerprint, model_fingerprint

    invoke("audit", "--target", llama_base, "--adapter", lora_adapter, "--reference", llama_base, "--signal", "clm_loss",
           "--members", corpus / "train.csv", "--nonmembers", corpus / "nonmembers.csv", "--population",
           corpus / "population.csv", "--out", tmp_path / "audit")
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    files = report["model_files"]
    import hashlib

    target = files["target"]
    assert {key: target[key] for key in ("folder", "fingerprint", "adapter", "adapter_fingerprint")} == {
        "folder": str(llama_base), "fingerprint": model_fingerprint(llama_base), "adapter": str(lora_adapter),
        "adapter_fingerprint": adapter_fingerprint(lora_adapter)}
    # Each file the audit read, with its SHA-256 (what `lmaudit verify` rehashes): the adapter's weights among them.
    assert target["adapter_files"]["adapter_model.safetensors"] == hashlib.sha256(
        (lora_adapter / "adapter_model.safetensors").read_bytes()).hexdigest()
    assert files["reference"]["adapter"] is None and files["reference"]["fingerprint"] == files["target"]["fingerprint"]
    loss = next(r for r in report["results"] if r["attack"] == "loss" and r["level"] == "sample")
    assert loss["auc"] > 0.5  # two epochs of LoRA at a high rate leave the members likelier than the non-members


def test_lora_and_full_fine_tuning_under_dp_sgd(tiny_tokenizer, corpus, tmp_path):
    """DP-SGD fine-tunes a checkpoint, fully (BERT) or only its adapters (Llama with LoRA: the base weights stay as
    they were), and records the epsilon spent; the white-box audit checks that the adapters it trained were saved."""
    bert = save_family_model("bert", "mlm", tiny_tokenizer, tmp_path / "bert")
    invoke("train", "mlm", "--data", corpus / "train.csv", "--out", tmp_path / "dp-bert", "--init-from", bert, "--epochs", 1,
           "--dp", "--noise-multiplier", 1.0)
    llama = save_family_model("llama", "clm", tiny_tokenizer, tmp_path / "llama")
    invoke("train", "clm", "--data", corpus / "train.csv", "--out", tmp_path / "dp-lora", "--init-from", llama, "--lora",
           "--epochs", 1, "--dp", "--noise-multiplier", 1.0, "--audit-dp", "--gradient-canaries", 200)
    for folder in ("dp-bert", "dp-lora"):
        dp = json.loads((tmp_path / folder / "lmaudit_training.json").read_text())["dp"]
        assert dp["noise_multiplier"] == 1.0 and 0 < dp["epsilon_rdp"] < float("inf") and dp["steps"] > 0
    tuned, original = load_file(tmp_path / "dp-bert" / "model.safetensors"), load_file(bert / "model.safetensors")
    assert any(not torch.equal(tuned[name], original[name]) for name in original)
    assert all("lora_" in name for name in load_file(tmp_path / "dp-lora" / "adapter_model.safetensors"))
    # the white-box audit under LoRA: every adapter that DP-SGD trained reached the adapter saved
    from lmaudit.metrics.dp_audit import white_box_audit

    checks = white_box_audit(json.loads((tmp_path / "dp-lora" / "lmaudit_training.json").read_text())["dp"])["checks"]
    weights = next(check for check in checks if check["name"] == "weights updated")
    adapters = load_file(tmp_path / "dp-lora" / "adapter_model.safetensors")
    assert weights["passed"] and f"all {len(adapters)} trained tensors" in weights["detail"]


def test_classifier_fine_tuned_from_a_masked_lm_with_lora_is_audited_through_its_adapter(tiny_tokenizer, corpus, tmp_path):
    """A classification head and LoRA adapters on a masked-LM checkpoint: the adapter carries the head and the labels,
    so `--target BASE --adapter OUT` audits the classifier."""
    bert = save_family_model("bert", "mlm", tiny_tokenizer, tmp_path / "bert")
    train = pd.read_csv(corpus / "train.csv")
    half = train["group_id"].isin(sorted(train["group_id"].unique())[:2])
    train[half].to_csv(tmp_path / "target-train.csv", index=False)
    train[~half].to_csv(tmp_path / "shadow-train.csv", index=False)
    for name, lora in (("target", ["--lora"]), ("shadow", [])):  # the shadow fully fine-tuned: a whole classifier
        invoke("train", "classifier", "--data", tmp_path / f"{name}-train.csv", "--validation", corpus / "validation.csv",
               "--out", tmp_path / name, "--init-from", bert, *lora, "--max-epochs", 2, "--patience", 1)
    summary = json.loads((tmp_path / "target" / "lmaudit_training.json").read_text())
    assert summary["architecture"] == "bert" and summary["labels"] == ["a", "b"] and summary["lora"]["rank"] == 8
    invoke("audit", "--target", bert, "--adapter", tmp_path / "target", "--shadow", tmp_path / "shadow", "--signal",
           "classifier", "--members", tmp_path / "target-train.csv", "--nonmembers", corpus / "nonmembers.csv",
           "--shadow-members", tmp_path / "shadow-train.csv", "--shadow-nonmembers", corpus / "population.csv",
           "--out", tmp_path / "audit")
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["model_files"]["target"]["adapter"] == str(tmp_path / "target")
    # The audited classifier is base + adapter (with its head): its loss on a member equals the PEFT model's own.
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = AutoModelForSequenceClassification.from_pretrained(bert, num_labels=2)
    model = PeftModel.from_pretrained(base, tmp_path / "target").eval()
    tokenizer = AutoTokenizer.from_pretrained(bert)
    member = pd.read_csv(tmp_path / "target-train.csv").iloc[0]
    with torch.no_grad():
        logits = model(**tokenizer(member["text"], truncation=True, max_length=64, return_tensors="pt")).logits[0]
    expected = -torch.log_softmax(logits.double(), -1)[0 if member["label"] == "a" else 1].item()
    scores = pd.read_parquet(tmp_path / "audit" / "scores.parquet").set_index("sample_id")
    assert scores.loc[member["sample_id"], "loss"] == pytest.approx(expected, rel=1e-5)


def test_bad_adapter_and_lora_use_are_one_line_errors(llama_base, lora_adapter, tiny_tokenizer, corpus, tmp_path):
    assert_one_line_error(*run_cli("train", "clm", "--data", corpus / "train.csv", "--out", tmp_path / "x", "--lora"),
                          "--lora needs --init-from")
    assert_one_line_error(*run_cli("score", "--target", lora_adapter, "--data", corpus / "train.csv", "--signal", "clm_loss",
                                   "--out", tmp_path / "s.csv"), str(lora_adapter), "PEFT adapter", "--adapter")
    gpt2 = save_family_model("gpt2", "clm", tiny_tokenizer, tmp_path / "gpt2")
    assert_one_line_error(*run_cli("score", "--target", gpt2, "--adapter", lora_adapter, "--data", corpus / "train.csv",
                                   "--signal", "clm_loss", "--out", tmp_path / "s.csv"), str(lora_adapter), "does not fit")
    assert not (tmp_path / "s.csv").exists()
