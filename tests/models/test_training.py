"""Training is deterministic, and a rerun resumes after the models it already trained."""

def test_tokenizer_and_training_are_deterministic(notes, tmp_path):
    """The same texts and seed give the same vocabulary and bit-identical weights (DESIGN.md: Conventions)."""
    from safetensors.torch import load_file

    from lmaudit.models.tokenizer import train_tokenizer
    from lmaudit.models.train import train_language_model

    texts = notes["text"].tolist()
    assert train_tokenizer(texts).get_vocab() == train_tokenizer(texts).get_vocab()
    train_language_model("mlm", texts, tmp_path / "a", epochs=1, seed=3)
    train_language_model("mlm", texts, tmp_path / "b", epochs=1, seed=3)
    first, second = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert all((first[name] == second[name]).all() for name in first)
    encoded = train_tokenizer(texts)("Metoprolol 25 mg PO BID, HR 88.")["input_ids"]
    assert 1 not in encoded  # no [UNK]: unseen words split into known pieces


def test_train_unless_done_compares_the_recorded_settings(tmp_path):
    """A model trained the same way is reused; one trained otherwise (or with other DP settings) is trained again."""
    import json

    from lmaudit.models.train import SUMMARY_FILE, train_unless_done

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / SUMMARY_FILE).write_text(json.dumps({"epochs": 3, "seed": 0, "dp": {"noise_multiplier": 1.0, "delta": 1e-5}}))
    calls = []
    train_unless_done(folder, {"epochs": 3, "dp": {"noise_multiplier": 1.0}}, lambda: calls.append("same"))
    train_unless_done(folder, {"epochs": 4}, lambda: calls.append("more epochs"))
    train_unless_done(folder, {"dp": {"noise_multiplier": 2.0}}, lambda: calls.append("more noise"))
    train_unless_done(folder, {"dp": None}, lambda: calls.append("no DP"))
    train_unless_done(tmp_path / "elsewhere", {"epochs": 3}, lambda: calls.append("never trained"))
    assert calls == ["more epochs", "more noise", "no DP", "never trained"]


def test_checkpoints_are_the_model_after_their_epoch_and_do_not_change_the_run(notes, tmp_path):
    """A run saving checkpoints ends with the same weights as one that does not; the checkpoint after epoch 1 records
    its epoch, the run it belongs to and that run's first epoch loss, and is not written for the last epoch."""
    from safetensors.torch import load_file

    from lmaudit.models.folders import read_training_summary
    from lmaudit.models.train import checkpoint_folder, train_language_model

    texts = notes["text"].tolist()[:40]
    plain = train_language_model("clm", texts, tmp_path / "plain", epochs=2, seed=1)
    saving = train_language_model("clm", texts, tmp_path / "saving", epochs=2, seed=1, checkpoints=(1, 2))
    first, second = load_file(tmp_path / "plain" / "model.safetensors"), load_file(tmp_path / "saving" / "model.safetensors")
    assert all((first[name] == second[name]).all() for name in first) and plain.epoch_losses == saving.epoch_losses
    checkpoint = read_training_summary(checkpoint_folder(tmp_path / "saving", 1))
    assert (checkpoint["epochs"], checkpoint["checkpoint_of"]) == (1, 2)
    assert checkpoint["epoch_losses"] == saving.epoch_losses[:1]
    assert not checkpoint_folder(tmp_path / "saving", 2).exists()
    after_one = load_file(checkpoint_folder(tmp_path / "saving", 1) / "model.safetensors")
    assert any((after_one[name] != second[name]).any() for name in second)
