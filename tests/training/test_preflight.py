"""The pre-flight checks one by one, each against a hand-made case that must pass and one that must fail."""

import pytest
import torch

from lmaudit.training.preflight import (
    frozen_new_rows,
    lost_canaries,
    too_few_canaries,
    unchanged_rows,
    unlabelled_secrets,
    unreserved_tokens,
    untied_weights,
)
from tests.families import tiny_family_model


def test_secrets_must_carry_labels():
    ids = torch.tensor([[5, 9, 7, 0]])
    assert unlabelled_secrets({"input_ids": ids, "labels": ids.clone()}, torch.tensor([9])) is None
    masked = unlabelled_secrets({"input_ids": ids, "labels": torch.tensor([[5, -100, 7, 0]])}, torch.tensor([9]))
    assert masked.fatal and masked.message.startswith("1 of 1 secret tokens")


def test_every_planted_canary_keeps_its_row():
    assert lost_canaries(4, 4) is None
    assert lost_canaries(3, 4).fatal


def test_weights_tied_by_the_configuration_must_stay_tied_and_new_rows_trainable(tiny_tokenizer):
    model = tiny_family_model("gpt2", "clm", tiny_tokenizer)
    assert untied_weights(model) is None and frozen_new_rows(model) is None
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())  # loaded or resized apart
    assert not untied_weights(model).fatal  # a warning: the rows still train, separately
    model.get_input_embeddings().weight.requires_grad_(False)
    assert frozen_new_rows(model).message.startswith("the input embedding weights are frozen")


def test_rows_must_move_after_the_first_step():
    rows = torch.ones(2, 3)
    assert unchanged_rows(rows, rows + 1e-3) is None
    assert unchanged_rows(rows, rows.clone()).fatal


def test_canary_tokens_must_be_the_tokenizers_own_within_the_models_rows():
    """A tokenizer that never reserved the tokens gives its unknown id; a model that was not resized lacks the rows."""
    assert unreserved_tokens([600, 601], unknown_id=1, rows=602) is None
    assert unreserved_tokens([600, 1], unknown_id=1, rows=602).message.startswith("1 of 2 canary tokens")
    assert unreserved_tokens([600, None], unknown_id=None, rows=602).fatal
    assert unreserved_tokens([600, 601], unknown_id=1, rows=601).fatal


def test_secret_tokens_lost_or_planted_twice_are_both_caught():
    assert "dropped some" in lost_canaries(3, 4).message
    assert "more than once" in lost_canaries(8, 4).message


def test_too_few_canaries_to_prove_much_are_a_warning_naming_how_many_would_do():
    """The ceiling is what the audit itself computes when every guess is right: checked against one_run_bound on
    perfect scores, and against the 200 -> 3.4 and 1,000 -> 4.9 docs/canaries.md states."""
    import numpy as np

    from lmaudit.metrics.one_run import one_run_bound, provable_ceiling

    for count in (10, 50, 200):
        included = np.arange(count) % 2 == 0
        perfect = one_run_bound(included.astype(float), included, 1e-5).epsilon_lower_bound
        assert provable_ceiling(count, 1e-5) == pytest.approx(perfect)
    assert provable_ceiling(200, 1e-5) == pytest.approx(3.4, abs=0.05)
    assert provable_ceiling(1000, 1e-5) == pytest.approx(4.9, abs=0.05)
    assert too_few_canaries(500) is None
    warning = too_few_canaries(16)
    assert not warning.fatal and warning.message.startswith("16 canaries can prove at most epsilon")
    needed = int(warning.message.split("make at least ")[1].split()[0])
    assert provable_ceiling(needed, 1e-5) >= 2.0 > provable_ceiling(needed // 2, 1e-5)
