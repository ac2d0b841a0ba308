"""Mask positions for the MLM energy: a pure function of (seed, sample_id, k), never of batch or model.

Positions index a sample's content tokens (0..T-1, special tokens excluded), so two models
with the same tokenizer see exactly the same masks for the same sample.
"""

from __future__ import annotations

import hashlib
import itertools
import math

import numpy as np

from lmaudit.errors import InputError


def mask_size(n_content: int, fraction: float = 0.15) -> int:
    """Positions masked per pattern: ceil(fraction * T), at least 1 (docs/design.md: MLM energy)."""
    # round() first so that float noise such as 0.15 * 20 = 3.0000000000000004 does not add a position.
    return max(1, math.ceil(round(fraction * n_content, 9)))


def sample_key(sample_id: str) -> list[int]:
    """Four 32-bit words of the sample id's SHA-256: what seeds every per-sample random choice."""
    digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def random_masks(sample_id: str, n_content: int, k: int, seed: int, fraction: float = 0.15) -> np.ndarray:
    """K sorted mask patterns, shape (k, l): pattern j depends only on (seed, sample_id, j)."""
    size = mask_size(n_content, fraction)
    key = sample_key(sample_id)
    patterns = [
        np.sort(np.random.default_rng([seed, *key, j]).choice(n_content, size=size, replace=False))
        for j in range(k)
    ]
    return np.asarray(patterns, dtype=np.int64).reshape(k, size)


def all_masks(n_content: int, fraction: float = 0.15, cap: int = 5000, sample_id: str = "") -> np.ndarray:
    """Every C(T, l) mask pattern, shape (C, l), for the exact energy; refuses more than `cap`."""
    size = mask_size(n_content, fraction)
    count = math.comb(n_content, size)
    if count > cap:
        raise InputError(
            f"sample '{sample_id}': exact energy needs C({n_content}, {size}) = {count} masked copies, "
            f"over the cap of {cap}; use --masks random or shorter texts"
        )
    return np.asarray(list(itertools.combinations(range(n_content), size)), dtype=np.int64).reshape(count, size)


def single_position_masks(n_content: int) -> np.ndarray:
    """Each content position masked once, shape (T, 1): the pseudo-log-likelihood's patterns."""
    return np.arange(n_content, dtype=np.int64).reshape(n_content, 1)
