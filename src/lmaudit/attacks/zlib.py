"""zlib attack (Carlini et al. 2021): the target's loss relative to how compressible the text is, so that text any
model finds easy (repetitive, formulaic) is not mistaken for memorised text."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import COMPRESSED_BYTES, TARGET_LOSS, AttackInput, AttackSpec, Scored, evaluated_rows, score_frame


def zlib_score(target_loss: np.ndarray, compressed_bytes: np.ndarray) -> np.ndarray:
    """-(mean NLL / zlib-compressed length in bytes) (nats per token per byte): higher = likelier a member."""
    return -np.asarray(target_loss, dtype=float) / np.asarray(compressed_bytes, dtype=float)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    return Scored(score_frame(data.samples[rows], zlib_score(data.values[TARGET_LOSS][rows],
                                                             data.values[COMPRESSED_BYTES][rows])))


SPEC = AttackSpec(
    name="zlib",
    description="the target's mean NLL divided by the text's zlib-compressed length in bytes, negated: discounts text "
                "that is easy for any model",
    reads=(TARGET_LOSS, COMPRESSED_BYTES),
    build=build,
    score_label="membership score = -NLL / zlib bytes",
    paper="Carlini et al. 2021, Extracting training data from large language models (USENIX Security)",
)
