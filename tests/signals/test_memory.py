"""Out-of-memory back-off: a device that holds fewer tokens than the batch budget (simulated: the encoder raises CUDA's
out-of-memory error above a token count) slows scoring down, changes no number beyond fp32 rounding (smaller batches
pad differently), and a sample that fits nowhere is named."""

import numpy as np
import pytest
import torch

from lmaudit.errors import InputError
from lmaudit.signals.causal import causal_token_values
from lmaudit.signals.memory import run_backing_off
from lmaudit.signals.mlm import mlm_signal
from lmaudit.signals.settings import SignalSettings
from tests.families import tiny_family_model


def limit_memory(model: torch.nn.Module, most_tokens: int) -> list[int]:
    """Make the model's encoder fail as a full GPU would above `most_tokens` tokens a pass; returns the sizes it ran."""
    ran: list[int] = []

    def check(module, args, kwargs):
        tokens = (kwargs["input_ids"] if "input_ids" in kwargs else args[0]).numel()
        if tokens > most_tokens:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        ran.append(tokens)

    model.base_model.register_forward_pre_hook(check, with_kwargs=True)
    return ran


@pytest.mark.parametrize("kind", ["clm", "mlm"])
def test_a_tiny_memory_budget_gives_the_same_numbers_in_smaller_batches(kind, tiny_tokenizer, notes):
    texts, ids = notes["text"].tolist()[:12], notes["sample_id"].tolist()[:12]
    settings = SignalSettings(signal="clm_tokens" if kind == "clm" else "mlm_energy", k=3, max_length=64, batch_tokens=4096)

    def score(model):
        if kind == "clm":
            return np.concatenate(causal_token_values(model, tiny_tokenizer, texts, ids, settings)[0])
        return mlm_signal(model, tiny_tokenizer, texts, ids, settings)[0]

    expected = score(tiny_family_model("llama" if kind == "clm" else "bert", kind, tiny_tokenizer))
    constrained = tiny_family_model("llama" if kind == "clm" else "bert", kind, tiny_tokenizer)
    ran = limit_memory(constrained, most_tokens=200)
    np.testing.assert_allclose(score(constrained), expected, rtol=1e-6, atol=1e-6)
    assert max(ran) <= 200 and len(ran) > 3


def test_a_sample_that_fits_nowhere_is_named(tiny_tokenizer, notes):
    model = tiny_family_model("gpt2", "clm", tiny_tokenizer)
    limit_memory(model, most_tokens=20)
    with pytest.raises(InputError, match=f"sample '{notes['sample_id'].iloc[0]}'.*does not fit in memory even alone"):
        causal_token_values(model, tiny_tokenizer, notes["text"].tolist()[:1], notes["sample_id"].tolist()[:1],
                            SignalSettings(signal="clm_tokens", max_length=64))


def test_back_off_splits_only_what_does_not_fit_and_keeps_the_order():
    """Batches above the size that last fitted are cut to it; every item runs once, in order."""
    done: list[list[int]] = []

    def run(batch):
        if len(batch) > 3:
            raise torch.cuda.OutOfMemoryError("out of memory")
        done.append(list(batch))

    run_backing_off([[0, 1, 2, 3, 4, 5, 6, 7], [8, 9], [10, 11, 12, 13, 14]], run, str)
    assert [item for batch in done for item in batch] == list(range(15))
    assert done == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14]]


def test_other_errors_are_not_mistaken_for_out_of_memory():
    def run(batch):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        run_backing_off([[0, 1]], run, str)
