"""Per-token values shared by the causal and masked LM scorers: the target's log-probability at a position, the mean
and standard deviation of the log-probability under the model's predictive distribution there (Min-K%++), and whether
the model's first choice there (EZ-MIA's error zone is where it is not the true token; PETAL compares the two)."""

from __future__ import annotations

import torch


def token_statistics(log_probs: torch.Tensor, targets: torch.Tensor,
                     scratch: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """(positions, 4) float64, the columns of signals/base.py:STATISTICS: log p of each target, the mean and standard
    deviation of log p(z) for z drawn from the predictive distribution at its position, and the id of that
    distribution's most likely token (a greedy decoder's next token), from fp32 log-probabilities (positions,
    vocabulary). `scratch`: two fp32 tensors on the same device, written over: at least `positions` rows, exactly the
    vocabulary wide."""
    positions = len(log_probs)
    # A caller scoring chunk after chunk passes the same scratch each time: two fresh positions x vocabulary tensors
    # per chunk (128 MiB each for GPT-2's 667-position chunks) pay their page faults every time.
    probs = torch.exp(log_probs, out=scratch[0][:positions]) if scratch else log_probs.exp()
    # Row-wise dot products (einsum runs them as batched BLAS dots): no positions x vocabulary product is stored.
    mean = torch.einsum("ij,ij->i", probs, log_probs)
    # The centred form: E[(log p - mu)^2] does not cancel the way E[(log p)^2] - mu^2 does in fp32.
    centred = (torch.sub(log_probs, mean[:, None], out=scratch[1][:positions]) if scratch
               else log_probs - mean[:, None]).square_()
    variance = torch.einsum("ij,ij->i", probs, centred)
    first_choice = log_probs.argmax(dim=1).double()  # exact in float64 for any vocabulary below 2**53
    return torch.stack([log_probs.gather(1, targets[:, None])[:, 0].double(), mean.double(), variance.sqrt().double(),
                        first_choice], dim=1)
