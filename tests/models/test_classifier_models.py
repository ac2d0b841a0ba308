"""Classifier training (BERT and LSTM, early stopping), safetensors round trip, and the label
log-probabilities equal the model's own softmax one sample at a time."""

import numpy as np
import pytest
import torch

from lmaudit.data.users import generate_user_posts
from lmaudit.errors import InputError
from lmaudit.models.classifier import ClassifierData, accuracy, train_classifier
from lmaudit.models.config_json import classifier_labels
from lmaudit.models.load import load_classifier
from lmaudit.models.recipe import TrainingRecipe
from lmaudit.signals.classifier import class_log_probabilities
from lmaudit.signals.settings import SignalSettings


@pytest.fixture(scope="module")
def posts():
    return generate_user_posts(n_users=40, seed=2)


def split(posts, users):
    rows = posts[posts["group_id"].isin(users)]
    return rows["text"].tolist(), rows["label"].tolist()


@pytest.fixture(scope="module", params=["bert", "lstm"])
def trained(request, posts, tmp_path_factory):
    users = sorted(posts["group_id"].unique())
    folder = tmp_path_factory.mktemp(request.param) / "model"
    texts, labels = split(posts, users[:24])
    summary = train_classifier(ClassifierData(texts, labels, split(posts, users[24:32]), split(posts, users[32:])), folder,
                               TrainingRecipe(architecture=request.param, epochs=8, patience=2, seed=0, checkpoints=(1, 2)))
    return request.param, folder, summary


def validation_accuracy(folder, posts) -> float:
    """The accuracy of the saved model in `folder` on the validation users, reloaded."""
    loaded = load_classifier(folder)
    users = sorted(posts["group_id"].unique())
    texts, labels = split(posts, users[24:32])
    label_ids = np.array([classifier_labels(folder).index(label) for label in labels])
    encoded = loaded.tokenizer(texts, truncation=True, max_length=128)["input_ids"]
    return accuracy(loaded.model, encoded, label_ids, loaded.tokenizer.pad_token_id)


def test_generated_posts_are_deterministic_and_labelled(posts):
    again = generate_user_posts(n_users=40, seed=2)
    assert posts.equals(again)
    assert not posts.equals(generate_user_posts(n_users=40, seed=3))
    per_user = posts.groupby("group_id").size()
    assert per_user.min() >= 8 and posts["sample_id"].is_unique
    # Users have favourite topics: most of a user's posts share a few labels.
    top_share = posts.groupby("group_id")["label"].agg(lambda labels: labels.value_counts().iloc[0] / len(labels))
    assert top_share.mean() > 1 / 3


def test_early_stopping_keeps_the_best_validation_epoch(trained, posts):
    architecture, folder, summary = trained
    assert summary.architecture == architecture
    assert summary.best_epoch == 1 + int(np.argmax(summary.validation_accuracies))
    assert summary.epochs_run <= summary.best_epoch + 2  # patience 2
    assert summary.validation_accuracy == max(summary.validation_accuracies)
    # The saved weights are those of the best epoch: the reloaded model scores that validation accuracy.
    assert validation_accuracy(folder, posts) == pytest.approx(summary.validation_accuracy)
    assert summary.generalization_gap == pytest.approx(summary.train_accuracy - summary.test_accuracy)
    assert summary.gap_measured_on == "test"
    assert list((folder).glob("*.safetensors")) and not list(folder.glob("*.bin"))


def test_checkpoints_are_the_model_after_their_epoch_not_the_best_so_far(trained, posts):
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.models.training_file import read_training_summary

    _, folder, summary = trained
    for epoch in (1, 2):
        checkpoint = checkpoint_folder(folder, epoch)
        recorded = read_training_summary(checkpoint)
        assert (recorded.epochs_run, recorded.checkpoint_of) == (epoch, 8)
        assert recorded.validation_accuracy == summary.validation_accuracies[epoch - 1]
        assert validation_accuracy(checkpoint, posts) == pytest.approx(summary.validation_accuracies[epoch - 1])


def test_log_probabilities_equal_one_sample_at_a_time(trained, posts):
    _, folder, _ = trained
    loaded = load_classifier(folder)
    texts = posts["text"].tolist()[:30]
    ids = posts["sample_id"].tolist()[:30]
    settings = SignalSettings(signal="classifier", batch_tokens=256)
    batched, encoded = class_log_probabilities(loaded.model, loaded.tokenizer, texts, ids, settings)
    for row, text in enumerate(texts):
        inputs = loaded.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            expected = torch.log_softmax(loaded.model(**inputs).logits[0].double(), dim=-1).numpy()
        np.testing.assert_allclose(batched[row], expected, atol=1e-5)
    assert [e.n_tokens for e in encoded] == [len(loaded.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]


def test_labels_sorted_and_recorded_in_the_config(trained, posts):
    _, folder, summary = trained
    assert classifier_labels(folder) == sorted(set(posts["label"])) == summary.labels


def test_a_label_no_training_sample_has_is_still_predicted_and_evaluated(posts, tmp_path):
    """With few posts per user a topic may be written only by held-out users: without `all_labels` the validation data
    is refused; with it the head has that label too, and its held-out posts count as errors, not as missing."""
    users = sorted(posts["group_id"].unique())
    texts, labels = split(posts, users[:24])
    kept = [i for i, label in enumerate(labels) if label != labels[0]]  # drop one topic from training
    texts, labels = [texts[i] for i in kept], [labels[i] for i in kept]
    validation = split(posts, users[24:32])
    with pytest.raises(InputError, match="do not occur in the training data"):
        train_classifier(ClassifierData(texts, labels, validation), tmp_path / "refused", TrainingRecipe(epochs=1))
    summary = train_classifier(ClassifierData(texts, labels, validation, all_labels=sorted(set(posts["label"]))),
                               tmp_path / "model", TrainingRecipe(epochs=1))
    assert summary.labels == classifier_labels(tmp_path / "model") == sorted(set(posts["label"]))
