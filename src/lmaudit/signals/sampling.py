"""A sampling scheme of probabilistic extraction (Hayes et al. 2024), settings only (no torch): the pass that reads it
is signals/extraction.py, the maths metrics/extraction.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingScheme:
    """How one query samples each next token, as transformers' `generate(do_sample=True, ...)` does: the logits divided
    by `temperature`, then only the `top_k` likeliest tokens kept (None: all), then the smallest set whose probability
    reaches `top_p` (1.0: all), renormalised."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature {self.temperature}: sampling needs a temperature above 0 (greedy decoding "
                             "is the greedy audit)")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top-k {self.top_k}: keep at least one token, or none for no top-k")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top-p {self.top_p}: it must lie in (0, 1]")

    @property
    def name(self) -> str:
        """The scheme as reports name it: 'T=1, top-k 40, top-p 1'."""
        return f"T={self.temperature:g}, top-k {self.top_k or 'all'}, top-p {self.top_p:g}"
