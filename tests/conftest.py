"""Shared fixtures: tiny masked LMs built in the tests (random weights are enough for scorer tests)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import torch

from lmaudit.data.synth import generate_notes
from lmaudit.models.architectures import mlm_config
from lmaudit.models.tokenizer import train_tokenizer

# `make test` runs the suite in two pytest-xdist workers, one per core of a 2-core machine: each worker computes on one
# thread (and so do the processes it starts), since two processes of two torch threads each slow each other down.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

# Fingerprints remembered by the tests stay out of the user's ~/.cache, in a folder removed when the session ends.
CACHE_HOME = tempfile.mkdtemp(prefix="lmaudit-test-cache-")
os.environ["LMAUDIT_CACHE_HOME"] = CACHE_HOME


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(CACHE_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def notes():
    """A small synthetic clinical corpus."""
    return generate_notes(n_patients=12, seed=3)


@pytest.fixture(scope="session")
def tiny_tokenizer(notes):
    """A WordPiece tokenizer trained on the small corpus."""
    return train_tokenizer(notes["text"].tolist(), vocab_size=600, max_length=64)


def _random_bert(tokenizer, seed: int):
    from transformers import BertForMaskedLM

    torch.manual_seed(seed)
    model = BertForMaskedLM(mlm_config("tiny", len(tokenizer), 64, tokenizer.pad_token_id))
    return model.eval()


@pytest.fixture(scope="session")
def tiny_bert(tiny_tokenizer):
    """A randomly initialised 2-layer BERT masked LM (fp32, eval mode)."""
    return _random_bert(tiny_tokenizer, seed=0)


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory, tiny_tokenizer):
    """Two saved tiny BERTs with the same tokenizer: (target_dir, reference_dir)."""
    root = tmp_path_factory.mktemp("models")
    paths = []
    for name, seed in (("target", 0), ("reference", 1)):
        model = _random_bert(tiny_tokenizer, seed)
        model.save_pretrained(root / name)
        tiny_tokenizer.save_pretrained(root / name)
        paths.append(root / name)
    return tuple(paths)
