"""New-token canaries planted in a real transformers Trainer run (tiny GPT-2, real PEFT): a correct run passes the
pre-flight and records what was planted; a loss that masks the secrets, frozen new rows (LoRA) or truncated canary rows
stop the run before its first step, naming the cause and the fix."""

import copy
import json

import pytest
import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from lmaudit.canaries.make import make_canaries
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.training.callback import CanaryCallback, CanaryCheckFailed
from lmaudit.training.planting import add_canary_tokens, canary_texts, secret_only
from tests.families import tiny_family_model


@pytest.fixture(scope="module")
def canaries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("canaries") / "set"
    make_canaries(folder, "new_token", count=8, seed=1)
    return folder


def masking_secrets(collator, secret_ids):
    """A collator whose loss never reads a secret token, as a completion-only loss with the canary in the prompt."""
    def collate(rows):
        batch = collator(rows)
        batch["labels"][torch.isin(batch["input_ids"], torch.tensor(secret_ids))] = -100
        return batch
    return collate


def train(folder, tokenizer, texts, out, max_length=64, collator_of=None, lora=False, modules_to_save=None,
          trainable_tokens=None):
    """A Trainer run of 2 steps on `texts` and the planted canaries (with LoRA, `trainable_tokens(secret_ids)`: the ids
    whose embedding rows PEFT trains alone); the trainer."""
    tokenizer = copy.deepcopy(tokenizer)
    model = tiny_family_model("gpt2", "clm", tokenizer).train()
    secret_ids = add_canary_tokens(model, tokenizer, folder)
    rows = [{"input_ids": tokenizer(text, truncation=True, max_length=max_length)["input_ids"]}
            for text in [*texts, *canary_texts(folder)]]
    collator = secret_only(DataCollatorForLanguageModeling(tokenizer, mlm=False), secret_ids)
    if collator_of is not None:
        collator = collator_of(collator, secret_ids)
    if lora:
        from peft import LoraConfig, get_peft_model

        tokens = None if trainable_tokens is None else {"wte": trainable_tokens(secret_ids)}
        model = get_peft_model(model, LoraConfig(r=2, target_modules=["c_attn"], fan_in_fan_out=True,
                                                 modules_to_save=modules_to_save, trainable_token_indices=tokens))
    arguments = TrainingArguments(output_dir=str(out), max_steps=2, per_device_train_batch_size=8, report_to=[],
                                  save_strategy="no", logging_strategy="no", use_cpu=True, learning_rate=1e-2)
    trainer = Trainer(model=model, args=arguments, train_dataset=rows, data_collator=collator, processing_class=tokenizer,
                      callbacks=[CanaryCallback(folder)])
    trainer.train()
    return trainer


def test_a_correct_run_passes_and_records_what_was_planted(canaries, tiny_tokenizer, notes, tmp_path):
    trainer = train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run")
    assert trainer.state.global_step == 2
    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    (entry,) = summary["canaries"]
    assert entry["design"] == "new_token" and entry["planted"] == len(canary_texts(canaries)) > 0
    assert (summary["device"], summary["precision"]) == ("cpu", "fp32")


@pytest.mark.parametrize("case, check", [("masked", "secret labels"), ("lora", "trainable new rows"),
                                         ("truncated", "canary rows")])
def test_a_run_that_would_not_learn_its_canaries_stops_before_its_first_step(canaries, tiny_tokenizer, notes, tmp_path,
                                                                            case, check):
    options = {"masked": {"collator_of": masking_secrets}, "lora": {"lora": True}, "truncated": {"max_length": 3}}[case]
    with pytest.raises(CanaryCheckFailed, match=f"canary check '{check}'") as refused:
        train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run", **options)
    assert len(str(refused.value).splitlines()) == 1
    assert not (tmp_path / "run" / SUMMARY_FILE).exists()  # nothing recorded: no audit of untrained canaries


def test_lora_training_only_the_canary_tokens_rows_passes_and_learns_them(canaries, tiny_tokenizer, notes, tmp_path):
    """The recipe unchanged but for PEFT's trainable_token_indices (the canary tokens' rows alone, GPT-2's tied output
    side with them): the pre-flight passes, the embeddings' other rows stay frozen, and the secret rows move."""
    trainer = train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run", lora=True,
                    trainable_tokens=lambda ids: ids)
    trained = [name for name, weight in trainer.model.named_parameters() if weight.requires_grad and "lora" not in name]
    assert trained and all("trainable_tokens_delta" in name for name in trained)
    delta = trainer.model.get_input_embeddings().token_adapter.trainable_tokens_delta["default"]
    assert delta.abs().sum() > 0  # the secrets' rows moved from their reserved start
    assert (tmp_path / "run" / SUMMARY_FILE).exists()


def test_trainable_token_indices_without_the_canary_tokens_stop_the_run(canaries, tiny_tokenizer, notes, tmp_path):
    with pytest.raises(CanaryCheckFailed, match="canary check 'trainable secret rows'"):
        train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run", lora=True,
              trainable_tokens=lambda ids: [0, 1, 2])
    assert not (tmp_path / "run" / SUMMARY_FILE).exists()


def test_canaries_audit_reads_a_model_saved_by_the_trainer_and_refuses_another_folder(canaries, tiny_tokenizer, notes,
                                                                                     tmp_path):
    """The record the callback writes is the one `lmaudit canaries audit` checks: it audits the saved model with its
    canary folder, and refuses a folder of other canaries in one line."""
    from tests.helpers import assert_one_line_error, run_cli

    trainer = train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run")
    trainer.save_model(str(tmp_path / "run"))  # with its tokenizer (processing_class), the canaries' tokens included
    code, output = run_cli("canaries", "audit", "--target", tmp_path / "run", "--canaries", canaries, "--out",
                           tmp_path / "audit")
    assert code == 0, output
    report = json.loads((tmp_path / "audit" / "canary_report.json").read_text())
    assert report["canaries"]["kind"] == "new_token" and report["one_run"]["guesses"] >= 0
    other = tmp_path / "other"
    make_canaries(other, "new_token", count=8, seed=2)
    code, output = run_cli("canaries", "audit", "--target", tmp_path / "run", "--canaries", other, "--out",
                           tmp_path / "audit-other")
    assert_one_line_error(code, output, str(other))


def test_rows_that_do_not_move_in_the_first_epoch_stop_the_run(canaries, tiny_tokenizer, notes, tmp_path, monkeypatch):
    """An optimizer that leaves the new rows alone (here a zero learning rate) is caught at the end of the first whole
    epoch, when every canary row has been in a batch."""
    import transformers

    original = transformers.TrainingArguments.__init__

    def zero_learning_rate_one_epoch(self, *args, **kwargs):
        original(self, *args, **{**kwargs, "learning_rate": 0.0, "max_steps": -1, "num_train_epochs": 1})

    monkeypatch.setattr(transformers.TrainingArguments, "__init__", zero_learning_rate_one_epoch)
    with pytest.raises(CanaryCheckFailed, match="canary check 'rows updated'"):
        train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run")


def test_lora_that_trains_tied_embeddings_apart_unties_them_in_the_config(canaries, tiny_tokenizer, notes, tmp_path,
                                                                          caplog):
    """GPT-2 ties its embeddings; PEFT's modules_to_save trains a copy of each. The callback says so (never advising
    tie_weights(), which would overwrite the trained output rows) and unties the configuration, so that the merged model
    is saved with both matrices and loaded as trained."""
    with caplog.at_level("WARNING"):
        trainer = train(canaries, tiny_tokenizer, notes["text"].tolist()[:24], tmp_path / "run", lora=True,
                        modules_to_save=["wte", "lm_head"])
    assert trainer.model.config.tie_word_embeddings is False
    assert "canary check 'tied weights'" in caplog.text and "do not call model.tie_weights()" in caplog.text
    merged = trainer.model.merge_and_unload()
    assert merged.config.tie_word_embeddings is False
    assert not torch.equal(merged.lm_head.weight, merged.transformer.wte.weight)  # the output rows trained apart
