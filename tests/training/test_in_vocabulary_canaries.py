"""In-vocabulary secret canaries in the user's own run, the recipe unchanged: a LoRA run with its embeddings frozen
plants them at 1, 4 and 16 copies through `plant_canaries`/`canary_texts` and `CanaryCallback`; the pre-flight finds
every planted copy and stops a run whose loss masks the secrets or whose truncation cuts them; `lmaudit canaries audit`
of the saved adapter, the base as reference, draws the memorisation curve (terminal, canary_report.json, the page, the
scores' tiers), and `CheckpointAudit` draws it at every save."""

import copy
import json

import pandas as pd
import pytest
import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from lmaudit.canaries.make import KEY_FILE, make_canaries
from lmaudit.canaries.settings import SecretShape
from lmaudit.errors import InputError
from lmaudit.training.callback import CanaryCallback, CanaryCheckFailed
from lmaudit.training.checkpoint_audit import CheckpointAudit, read_audits
from lmaudit.training.planting import canary_texts
from tests.families import tiny_family_model
from tests.helpers import run_cli


@pytest.fixture(scope="module")
def curve_canaries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("in-vocabulary") / "set"
    make_canaries(folder, "secret", count=250, seed=5, shape=SecretShape(digits=4), repeats=(1, 4, 16))
    return folder


def masking_secret_tail(collator):
    """A collator whose loss never reads a row's last two tokens before the full stop: a completion-only loss that
    stops short of the secret, as a template cutting it would."""
    def collate(rows):
        batch = collator(rows)
        batch["labels"][:, -4:] = -100
        return batch
    return collate


def run(folder, tokenizer, texts, out, epochs=1, max_length=64, collator_of=None, population=None):
    """A Trainer run with LoRA on attention and MLP, embeddings frozen (the recipe as most are written), with a
    checkpoint audit at each epoch's save against `population` where given; the trainer and the base model's folder."""
    tokenizer = copy.deepcopy(tokenizer)
    torch.manual_seed(0)
    model = tiny_family_model("gpt2", "clm", tokenizer)
    base = out.parent / f"{out.name}-base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(model, LoraConfig(r=8, target_modules=["c_attn", "c_fc"], fan_in_fan_out=True))
    rows = [{"input_ids": tokenizer(text, truncation=True, max_length=max_length)["input_ids"]}
            for text in [*texts, *canary_texts(folder)]]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    saves = {"save_strategy": "epoch", "save_only_model": True} if population else {"save_strategy": "no"}
    arguments = TrainingArguments(output_dir=str(out), num_train_epochs=epochs, per_device_train_batch_size=16,
                                  report_to=[], logging_strategy="no", use_cpu=True, learning_rate=1e-2, seed=0,
                                  **saves)
    audits = [CheckpointAudit(texts, population, canaries=folder)] if population else []
    trainer = Trainer(model=model, args=arguments, train_dataset=rows, processing_class=tokenizer,
                      data_collator=collator if collator_of is None else collator_of(collator),
                      callbacks=[CanaryCallback(folder), *audits])
    trainer.train()
    return trainer, base


@pytest.mark.parametrize("case", ["masked", "truncated"])
def test_a_run_that_cannot_learn_its_secrets_stops_before_its_first_step(curve_canaries, tiny_tokenizer, notes,
                                                                        tmp_path, case):
    options = {"masked": {"collator_of": masking_secret_tail}, "truncated": {"max_length": 6}}[case]
    check = {"masked": "secret labels", "truncated": "canary rows"}[case]
    with pytest.raises(CanaryCheckFailed, match=f"canary check '{check}'"):
        run(curve_canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run", **options)


def test_a_lora_run_as_it_is_gets_its_memorisation_curve(curve_canaries, tiny_tokenizer, notes, tmp_path):
    """Embeddings stay frozen (the recipe unchanged) and the run passes the pre-flight; the audit of its adapter, the
    base as reference, reports one tier per count against the same never-planted controls (as many as the key's
    unplanted canaries), in every output."""
    texts = notes["text"].tolist()
    trainer, base = run(curve_canaries, tiny_tokenizer, texts[:24], tmp_path / "run", epochs=3, population=texts[24:48])
    assert not trainer.model.get_input_embeddings().weight.requires_grad
    saves = read_audits(tmp_path / "run")  # the curve at every save, over training
    assert len(saves) == 3 and all([point["repeats"] for point in save["memorisation"]] == [1, 4, 16] for save in saves)
    trainer.save_model(str(tmp_path / "run"))
    code, output = run_cli("canaries", "audit", "--target", base, "--adapter", tmp_path / "run", "--reference", base,
                           "--canaries", curve_canaries, "--candidates", "100", "--out", tmp_path / "audit")
    assert code == 0, output
    report = json.loads((tmp_path / "audit" / "canary_report.json").read_text())
    curve = report["memorisation"]
    unplanted = int((~pd.read_parquet(curve_canaries / KEY_FILE)["included"]).sum())
    assert [tier["repeats"] for tier in curve["tiers"]] == [1, 4, 16]
    assert all(tier["controls"] == unplanted >= 100 for tier in curve["tiers"])
    assert sum(tier["planted"] for tier in curve["tiers"]) == 250 - unplanted
    assert "planted 16x:" in output and "Memorisation by repetition:" in output
    page = (tmp_path / "audit" / "canary_report.html").read_text()
    assert "Memorisation by repetition" in page and page.count("<tr>") >= 4
    scores = pd.read_parquet(tmp_path / "audit" / "canary_scores.parquet")
    assert set(scores["repeats"]) == {1, 4, 16} and "included" not in scores
    # greedy decoding: counted per tier, and the never-planted secrets as a control
    assert all(tier["given_back"] is not None for tier in curve["tiers"]) and curve["controls_given_back"] is not None
    assert "given back by greedy decoding" in output


def test_prompt_completion_rows_put_the_in_vocabulary_secret_in_the_completion(curve_canaries):
    """A completion-only loss then reads the secret: each row's completion starts with it, one row per planted copy."""
    from lmaudit.training.planting import canary_rows, planted_secrets

    rows, secrets = canary_rows(curve_canaries, "prompt_completion"), planted_secrets(curve_canaries)
    assert len(rows) == len(canary_texts(curve_canaries)) == len(secrets)
    assert all(row["completion"].startswith(" " + secret) for row, secret in zip(rows, secrets, strict=True))


@pytest.fixture(scope="module")
def sample_canaries(tmp_path_factory, notes):
    """Held-out notes as canaries (one per patient), none of them a training text."""
    folder = tmp_path_factory.mktemp("samples")
    notes.iloc[:24].to_csv(folder / "train.csv", index=False)
    notes.iloc[24:].to_csv(folder / "heldout.csv", index=False)
    make_canaries(folder / "set", "sample", count=10, seed=3, source=folder / "heldout.csv",
                  exclude=(folder / "train.csv",))
    return folder / "set"


def test_held_out_samples_are_planted_in_the_users_run_and_checked_like_a_secret(sample_canaries, tiny_tokenizer,
                                                                               notes, tmp_path):
    """The `sample` design through `plant_canaries`/`CanaryCallback`: a LoRA run with frozen embeddings passes the
    pre-flight, which looks for each copy's text after its first word (the span its rows train); a completion-only
    row puts that span in the completion; truncation that cuts it stops the run; a one-word text is refused, and so is
    `CheckpointAudit`, which scores secrets alone."""
    from lmaudit.training.planting import canary_rows, planted_secrets, trained_span

    texts, spans = canary_texts(sample_canaries), planted_secrets(sample_canaries)
    assert len(texts) == 5 and all(text == text.split(" ", 1)[0] + " " + span for text, span in zip(texts, spans,
                                                                                                    strict=True))
    rows = canary_rows(sample_canaries, "prompt_completion")
    assert [row["prompt"] + row["completion"] for row in rows] == texts
    run(sample_canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run", max_length=128)
    assert (tmp_path / "run" / "lmaudit_training.json").is_file()
    with pytest.raises(CanaryCheckFailed, match="canary check 'canary rows'"):
        run(sample_canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "cut", max_length=6)
    with pytest.raises(InputError, match="'canary-0003' is one word"):
        trained_span("canary-0003", "furosemide")
    with pytest.raises(InputError, match="CheckpointAudit scores canaries by their secret"):
        CheckpointAudit(notes["text"].tolist()[:24], notes["text"].tolist()[24:48], canaries=sample_canaries)
