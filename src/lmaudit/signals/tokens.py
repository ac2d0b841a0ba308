"""Per-token values shared by the causal and masked LM scorers: the target's log-probability at a position, and the
mean and standard deviation of the log-probability under the model's predictive distribution there (Min-K%++)."""

from __future__ import annotations

import torch


def token_statistics(log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(positions, 3) float64: log p of each target, and the mean and standard deviation of log p(z) for z drawn from
    the predictive distribution at its position, from fp32 log-probabilities (positions, vocabulary)."""
    probs = log_probs.exp()
    # Products in fp32, sums over the vocabulary in fp64: an fp32 sum of 50k terms drifts by ~1e-6 nats.
    mean = (probs * log_probs).sum(dim=1, dtype=torch.float64)
    # The centred form: E[(log p - mu)^2] does not cancel the way E[(log p)^2] - mu^2 does.
    variance = (probs * (log_probs - mean.float()[:, None]) ** 2).sum(dim=1, dtype=torch.float64)
    return torch.stack([log_probs.gather(1, targets[:, None])[:, 0].double(), mean, variance.sqrt()], dim=1)
