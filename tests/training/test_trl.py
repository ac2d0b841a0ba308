"""New-token canaries planted in a real TRL SFTTrainer run (tiny GPT-2): in the completion of prompt-completion rows or
the assistant's reply of chat rows they pass the pre-flight and are trained on their secret; in the prompt, where the
completion-only loss never reads them, or dropped by a chat template, the run stops before its first step; the
planting places canaries in each format TRL reads and refuses a dataset it cannot place them in."""

import copy

import pytest
import torch

from lmaudit.canaries.make import make_canaries
from lmaudit.errors import InputError
from lmaudit.training.callback import CanaryCallback, CanaryCheckFailed
from lmaudit.training.planting import add_canary_tokens, canary_rows, canary_texts, plant_canaries
from tests.families import tiny_family_model

trl = pytest.importorskip("trl")  # a test dependency: TRL is an optional extra of lmaudit
datasets = pytest.importorskip("datasets")

# A chat template that keeps every message's content, and one that drops the assistant's (as a template written for
# inference only, which renders the prompt alone, would).
KEEPS = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
DROPS = "{% for m in messages %}{% if m['role'] == 'user' %}user: {{ m['content'] }}\n{% endif %}{% endfor %}"


@pytest.fixture(scope="module")
def canaries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("canaries") / "set"
    make_canaries(folder, "new_token", count=8, seed=1)
    return folder


def sft(folder, tokenizer, rows, out, template=None, peft_config=None, **config):
    """An SFTTrainer run of 2 steps on `rows` (the canaries already planted) with the callback (and LoRA by TRL's
    `peft_config`); the trainer."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.eos_token = tokenizer.sep_token  # TRL ends each completion with it
    tokenizer.chat_template = template
    tokenizer.backend_tokenizer.post_processor = None  # no [CLS] ... [SEP] around a prompt, as a causal LM's tokenizer
    model = tiny_family_model("gpt2", "clm", tokenizer).train()
    add_canary_tokens(model, tokenizer, folder)
    arguments = trl.SFTConfig(output_dir=str(out), max_steps=2, per_device_train_batch_size=8, report_to=[],
                              save_strategy="no", logging_strategy="no", use_cpu=True, learning_rate=1e-2,
                              max_length=64, **config)
    trainer = trl.SFTTrainer(model=model, args=arguments, train_dataset=datasets.Dataset.from_list(rows),
                             processing_class=tokenizer, callbacks=[CanaryCallback(folder)], peft_config=peft_config)
    trainer.train()
    return trainer


def prompt_completion(notes):
    return [{"prompt": text[:30], "completion": text[30:]} for text in notes["text"].tolist()[:16]]


def test_canaries_in_the_completion_pass_and_are_trained_on_their_secret(canaries, tiny_tokenizer, notes, tmp_path):
    rows = plant_canaries(datasets.Dataset.from_list(prompt_completion(notes)), canaries)
    assert len(rows) == 16 + len(canary_texts(canaries))
    trainer = sft(canaries, tiny_tokenizer, rows.to_list(), tmp_path / "run")
    assert trainer.state.global_step == 2
    # The completion-only loss reads the secret: each canary row's labelled tokens start with it.
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, CanaryCallback)]
    secret_ids = callback.secret_ids
    row = next(r for r in trainer.train_dataset if torch.isin(torch.tensor(r["input_ids"]), secret_ids).any())
    first = next(i for i, label in enumerate(row["labels"]) if label != -100)
    assert row["input_ids"][first] in secret_ids.tolist()


def test_canaries_in_the_prompt_stop_the_run_before_its_first_step(canaries, tiny_tokenizer, notes, tmp_path):
    """The mistake the pre-flight exists for: the whole canary in the prompt, which the completion-only loss masks."""
    rows = prompt_completion(notes) + [{"prompt": text, "completion": " noted ."} for text in canary_texts(canaries)]
    with pytest.raises(CanaryCheckFailed, match="canary check 'secret labels'") as refused:
        sft(canaries, tiny_tokenizer, rows, tmp_path / "run")
    assert len(str(refused.value).splitlines()) == 1


def test_chat_rows_pass_with_a_template_that_keeps_them_and_stop_with_one_that_drops_them(canaries, tiny_tokenizer,
                                                                                           notes, tmp_path):
    chats = [{"messages": [{"role": "user", "content": text[:30]}, {"role": "assistant", "content": text[30:]}]}
             for text in notes["text"].tolist()[:16]]
    rows = plant_canaries(chats, canaries)
    assert sft(canaries, tiny_tokenizer, rows, tmp_path / "kept", template=KEEPS).state.global_step == 2
    with pytest.raises(CanaryCheckFailed, match="canary check 'canary rows'"):
        sft(canaries, tiny_tokenizer, rows, tmp_path / "dropped", template=DROPS)


def test_canary_rows_place_the_secret_where_each_format_trains_it(canaries):
    texts = canary_texts(canaries)
    for text, pair, chat in zip(texts, canary_rows(canaries, "prompt_completion"), canary_rows(canaries, "messages"),
                                strict=True):
        assert (pair["prompt"] + pair["completion"]) == text
        assert pair["completion"].split()[0].startswith("xq") and "xq" not in pair["prompt"]
        assert chat["messages"][1]["role"] == "assistant" and chat["messages"][1]["content"] == pair["completion"][1:]
    assert [row["text"] for row in canary_rows(canaries)] == texts


def test_a_dataset_the_planting_cannot_place_secrets_in_is_refused(canaries):
    with pytest.raises(InputError, match="columns input_ids, labels: the canaries can be placed only in"):
        plant_canaries([{"input_ids": [1, 2], "labels": [1, 2]}], canaries)
    with pytest.raises(InputError, match="canary format 'tsv'"):
        canary_rows(canaries, "tsv")


def test_another_tokenizer_is_refused_before_the_first_step(canaries, tiny_tokenizer, notes, tmp_path):
    """Canaries whose tokens the trainer's tokenizer never reserved: every secret would be its unknown token."""
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    model = tiny_family_model("gpt2", "clm", tiny_tokenizer).train()
    rows = [{"input_ids": tiny_tokenizer(text)["input_ids"]} for text in canary_texts(canaries)]
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), max_steps=1, report_to=[],
                                                          use_cpu=True, save_strategy="no"),
                      train_dataset=rows, processing_class=tiny_tokenizer, callbacks=[CanaryCallback(canaries)],
                      data_collator=DataCollatorForLanguageModeling(tiny_tokenizer, mlm=False))
    with pytest.raises(CanaryCheckFailed, match="canary check 'canary tokens': .* not in this tokenizer's vocabulary"):
        trainer.train()


def test_sharded_weights_defer_the_weight_checks_with_the_command_to_run_after(canaries, tiny_tokenizer, notes, tmp_path,
                                                                               caplog, monkeypatch):
    """FSDP or ZeRO-3: the data checks still run, the weight checks are deferred to `lmaudit canaries audit`."""
    monkeypatch.setattr("lmaudit.training.callback.sharded", lambda args, model: True)
    rows = plant_canaries(prompt_completion(notes), canaries)
    with caplog.at_level("WARNING"):
        sft(canaries, tiny_tokenizer, rows, tmp_path / "run")
    assert f"lmaudit canaries audit --target {tmp_path / 'run'} --canaries {canaries}" in caplog.text


def test_packed_rows_keep_every_secret_and_pass(canaries, tiny_tokenizer, notes, tmp_path):
    """Packing joins rows (several canaries to a row): every secret token is still there once, so the run goes on."""
    rows = plant_canaries([{"text": text} for text in notes["text"].tolist()[:16]], canaries)
    assert sft(canaries, tiny_tokenizer, rows, tmp_path / "run", packing=True).state.global_step == 2


def test_lora_through_trls_peft_config_needs_the_embeddings_among_the_modules_to_save(canaries, tiny_tokenizer, notes,
                                                                                     tmp_path):
    """The README's recipe: SFTTrainer wraps the model in LoRA itself; with the embeddings in modules_to_save the run
    goes on and their rows train, without them it stops before step 1."""
    from peft import LoraConfig

    rows = plant_canaries(prompt_completion(notes), canaries)
    lora = {"r": 2, "target_modules": ["c_attn"], "fan_in_fan_out": True}
    trainer = sft(canaries, tiny_tokenizer, rows, tmp_path / "rows",
                  peft_config=LoraConfig(**lora, modules_to_save=["wte", "lm_head"]))
    assert trainer.state.global_step == 2
    with pytest.raises(CanaryCheckFailed, match="canary check 'trainable new rows'"):
        sft(canaries, tiny_tokenizer, rows, tmp_path / "frozen", peft_config=LoraConfig(**lora))
