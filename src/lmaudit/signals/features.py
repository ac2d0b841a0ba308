"""Classifier features of Shejwalkar et al. (Appendix A.1), from log-probability vectors; numpy only.

Each feature is in its natural unit; `FEATURE_DIRECTIONS` says which way is "member": the
attacks multiply by it, so that every membership score is higher for a likely member.
"""

from __future__ import annotations

import numpy as np

# +1: a larger value means a likelier member; -1: a smaller one does.
FEATURE_DIRECTIONS = {"loss": -1.0, "mentropy": -1.0, "rank": -1.0, "confidence": 1.0, "correctness": 1.0}


def _true_label_log_probability(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]


def cross_entropy_loss(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """-log p_y (nats)."""
    return -_true_label_log_probability(log_probs, labels)


def modified_entropy(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Song and Mittal's Mentr: -(1 - p_y) log p_y - sum_{c != y} p_c log(1 - p_c) (nats).

    Shejwalkar et al. print log(p_c) in the second term, which would make a confidently wrong
    prediction look like a member's; this is the definition of the paper they cite.
    """
    probs = np.exp(log_probs)
    true = np.zeros_like(probs, dtype=bool)
    true[np.arange(len(labels)), labels] = True
    # log(1 - p) from the log-probability, accurate when p is near 1.
    log_complement = np.log1p(-np.minimum(probs, 1.0 - 1e-16))
    true_term = -(1.0 - probs[true]) * log_probs[true]
    other_terms = -np.where(true, 0.0, probs * log_complement).sum(axis=1)
    return true_term + other_terms


def label_rank(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """1 + the number of classes strictly more probable than the true one (1 = top prediction)."""
    true = _true_label_log_probability(log_probs, labels)
    return 1.0 + (log_probs > true[:, None]).sum(axis=1)


def confidence(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """p_y, the probability of the true label."""
    return np.exp(_true_label_log_probability(log_probs, labels))


def correctness(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """1.0 when the predicted label (argmax, the first on ties) is the true one, else 0.0: label-only access."""
    return (np.argmax(log_probs, axis=1) == labels).astype(float)


FEATURES = {
    "loss": cross_entropy_loss,
    "mentropy": modified_entropy,
    "rank": label_rank,
    "confidence": confidence,
    "correctness": correctness,
}


def classifier_features(log_probs: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Every feature for samples with log-probability rows `log_probs` (n x classes) and true label indices."""
    log_probs = np.asarray(log_probs, dtype=float)
    labels = np.asarray(labels, dtype=np.int64)
    return {name: feature(log_probs, labels) for name, feature in FEATURES.items()}
