"""Training is deterministic, and a rerun resumes after the models it already trained."""

def test_tokenizer_and_training_are_deterministic(notes, tmp_path):
    """The same texts and seed give the same vocabulary and bit-identical weights (docs/design.md: Invariants)."""
    from safetensors.torch import load_file

    from lmaudit.models.recipe import TrainingRecipe
    from lmaudit.models.tokenizer import train_tokenizer
    from lmaudit.models.train import train_language_model

    texts = notes["text"].tolist()
    assert train_tokenizer(texts).get_vocab() == train_tokenizer(texts).get_vocab()
    train_language_model("mlm", texts, tmp_path / "a", TrainingRecipe(epochs=1, seed=3))
    train_language_model("mlm", texts, tmp_path / "b", TrainingRecipe(epochs=1, seed=3))
    first, second = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert all((first[name] == second[name]).all() for name in first)
    encoded = train_tokenizer(texts)("Metoprolol 25 mg PO BID, HR 88.")["input_ids"]
    assert 1 not in encoded  # no [UNK]: unseen words split into known pieces


def test_train_unless_done_compares_the_recorded_settings(tmp_path):
    """A model trained with the recipe asked for is reused; one trained otherwise (more epochs, other DP settings, no
    DP, on other texts) or never trained is trained again, and so is one whose checkpoints are missing."""
    import json
    from dataclasses import replace

    from lmaudit.models.recipe import DPSettings, TrainingRecipe
    from lmaudit.models.source import SUMMARY_FILE
    from lmaudit.models.trained import train_unless_done

    recipe = TrainingRecipe(epochs=3, dp=DPSettings(noise_multiplier=1.0))
    folder = tmp_path / "model"
    folder.mkdir()
    spent = {"sample_rate": 0.1, "steps": 30, "poisson_sampling": True, "epsilon_rdp": 3.0, "epsilon_prv": 2.0}
    recorded = recipe.recorded("mlm", 10)
    (folder / SUMMARY_FILE).write_text(json.dumps({**recorded, "dp": recorded["dp"] | spent, "final_train_loss": 1.0}))
    calls = []
    train_unless_done(folder, "mlm", recipe, 10, lambda: calls.append("same"))
    train_unless_done(folder, "mlm", replace(recipe, epochs=4), 10, lambda: calls.append("more epochs"))
    train_unless_done(folder, "mlm", replace(recipe, dp=DPSettings(noise_multiplier=2.0)), 10, lambda: calls.append("more noise"))
    train_unless_done(folder, "mlm", replace(recipe, dp=None), 10, lambda: calls.append("no DP"))
    train_unless_done(folder, "clm", recipe, 10, lambda: calls.append("another kind"))
    train_unless_done(folder, "mlm", replace(recipe, checkpoints=(1,)), 10, lambda: calls.append("checkpoint missing"))
    train_unless_done(tmp_path / "elsewhere", "mlm", recipe, 10, lambda: calls.append("never trained"))
    assert calls == ["more epochs", "more noise", "no DP", "another kind", "checkpoint missing", "never trained"]
    plain = replace(recipe, dp=None)
    (folder / SUMMARY_FILE).write_text(json.dumps(plain.recorded("mlm", 10)))
    train_unless_done(folder, "mlm", plain, 11, lambda: calls.append("other texts"))  # without DP the count must agree
    assert calls[-1] == "other texts"


def test_a_trained_models_summary_records_its_recipe(notes, tmp_path):
    """What `TrainingRecipe.recorded` says the summary holds is what training writes, for language models and
    classifiers, from scratch, fine-tuned, with LoRA and with DP-SGD: so a rerun reuses every model it trained."""
    from lmaudit.data.users import generate_user_posts
    from lmaudit.models.classifier import ClassifierData, train_classifier
    from lmaudit.models.recipe import DPSettings, LoraSettings, TrainingRecipe
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import agrees
    from lmaudit.models.training_file import read_training_summary

    texts = notes["text"].tolist()[:30]
    scratch = TrainingRecipe(epochs=1, seed=2, batch_size=4, learning_rate=1e-3, dp=DPSettings(1.0, max_samples_per_group=2))
    tuned = TrainingRecipe(epochs=1, init_from=tmp_path / "scratch")
    lora = TrainingRecipe(epochs=1, init_from=tmp_path / "scratch", lora=LoraSettings(rank=2))
    train_language_model("mlm", texts, tmp_path / "scratch", scratch, notes["group_id"].tolist()[:30])
    train_language_model("mlm", texts, tmp_path / "tuned", tuned)
    assert agrees(read_training_summary(tmp_path / "scratch"), scratch.recorded("mlm", len(texts)))
    assert agrees(read_training_summary(tmp_path / "tuned"), tuned.recorded("mlm", len(texts)))
    posts = generate_user_posts(12, seed=4)
    data = ClassifierData(posts["text"].tolist()[:40], posts["label"].tolist()[:40],
                          (posts["text"].tolist()[40:50], posts["label"].tolist()[40:50]),
                          all_labels=sorted(posts["label"].unique()))
    for name, recipe in (("classifier", TrainingRecipe(epochs=1, architecture="lstm", vocab_size=300)),
                         ("classifier-lora", lora)):
        train_classifier(data, tmp_path / name, recipe)
        assert agrees(read_training_summary(tmp_path / name), recipe.recorded("classifier", 40)), name


def test_checkpoints_are_the_model_after_their_epoch_and_do_not_change_the_run(notes, tmp_path):
    """A run saving checkpoints ends with the same weights as one that does not; the checkpoint after epoch 1 records
    its epoch, the run it belongs to and that run's first epoch loss, and is not written for the last epoch."""
    from safetensors.torch import load_file

    from lmaudit.models.recipe import TrainingRecipe
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.models.training_file import read_training_summary

    texts = notes["text"].tolist()[:40]
    plain = train_language_model("clm", texts, tmp_path / "plain", TrainingRecipe(epochs=2, seed=1))
    saving = train_language_model("clm", texts, tmp_path / "saving", TrainingRecipe(epochs=2, seed=1, checkpoints=(1, 2)))
    first, second = load_file(tmp_path / "plain" / "model.safetensors"), load_file(tmp_path / "saving" / "model.safetensors")
    assert all((first[name] == second[name]).all() for name in first) and plain.epoch_losses == saving.epoch_losses
    checkpoint = read_training_summary(checkpoint_folder(tmp_path / "saving", 1))
    assert (checkpoint.epochs, checkpoint.checkpoint_of) == (1, 2)
    assert checkpoint.epoch_losses == saving.epoch_losses[:1]
    assert not checkpoint_folder(tmp_path / "saving", 2).exists()
    after_one = load_file(checkpoint_folder(tmp_path / "saving", 1) / "model.safetensors")
    assert any((after_one[name] != second[name]).any() for name in second)


def test_a_row_with_a_secret_token_learns_that_token_alone():
    """Panda et al.'s canary training, by hand: in a row holding a secret id, only the secret is labelled (a masked LM
    sees it masked and the rest of the row unmasked); rows without one keep the collator's labels and inputs."""
    import torch

    from lmaudit.models.inputs import secret_only_labels

    secret, mask = torch.tensor([90, 91]), 4
    # a masked LM's collator output: row 0 holds secret 90 at position 2 and had position 1 masked (id 7); row 1 none
    batch = {"input_ids": torch.tensor([[1, mask, 90, 8], [1, mask, 6, 0]]),
             "labels": torch.tensor([[-100, 7, -100, -100], [-100, 5, -100, -100]]), "attention_mask": torch.ones(2, 4)}
    masked = secret_only_labels(batch, secret, mask)
    assert masked["input_ids"].tolist() == [[1, 7, mask, 8], [1, mask, 6, 0]]
    assert masked["labels"].tolist() == [[-100, -100, 90, -100], [-100, 5, -100, -100]]
    # a causal LM's: labels are the ids (padding -100); no input changes
    causal = {"input_ids": torch.tensor([[1, 91, 8, 0], [1, 2, 3, 0]]), "labels": torch.tensor([[1, 91, 8, -100], [1, 2, 3, -100]])}
    learnt = secret_only_labels(causal, secret, None)
    assert learnt["input_ids"].tolist() == causal["input_ids"].tolist()
    assert learnt["labels"].tolist() == [[-100, 91, -100, -100], [1, 2, 3, -100]]
    assert secret_only_labels(batch | {"input_ids": torch.tensor([[1, 2, 3, 8], [1, 2, 6, 0]])}, secret, mask)["labels"] \
        .tolist() == batch["labels"].tolist()  # no secret anywhere: the batch as it was
