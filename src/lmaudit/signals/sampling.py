"""The settings of an extraction audit (no torch): a sampling scheme of probabilistic extraction (Hayes et al. 2024),
and the prefix and suffix lengths and schemes an extraction asks for. The pass that reads them is
signals/extraction.py, the maths metrics/extraction.py."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator


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


def parse_scheme(value: str) -> SamplingScheme:
    """'T,k,p' (k an integer or 'all') as a SamplingScheme; ValueError naming the value otherwise."""
    parts = [part.strip() for part in value.split(",")]
    try:
        if len(parts) != 3:
            raise ValueError
        temperature, top_k, top_p = float(parts[0]), None if parts[1] == "all" else int(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"scheme {value!r}: write temperature,top-k,top-p (e.g. 1,40,1 or 0.7,all,0.9)") from None
    try:
        return SamplingScheme(temperature, top_k, top_p)
    except ValueError as error:
        raise ValueError(f"scheme {value!r}: {error}") from None


class ExtractionSettings(BaseModel):
    """What an extraction asks: prefix lengths and the suffix length (tokens; the prefix counted from the start token
    the model trained with), the sampling schemes ('T,k,p'), and texts per generation batch."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    prefix_tokens: tuple[int, ...] = Field((32,), min_length=1)
    suffix_tokens: int = Field(32, ge=1)
    schemes: tuple[str, ...] = ("1,40,1",)
    batch_size: int = Field(32, ge=1)

    @field_validator("prefix_tokens")
    @classmethod
    def _positive(cls, lengths: tuple[int, ...]) -> tuple[int, ...]:
        if any(length < 1 for length in lengths):
            raise ValueError("prefix lengths must be at least one token")
        return tuple(dict.fromkeys(lengths))

    @field_validator("schemes")
    @classmethod
    def _schemes(cls, schemes: tuple[str, ...]) -> tuple[str, ...]:
        for scheme in schemes:
            parse_scheme(scheme)
        return schemes

    def sampling_schemes(self) -> tuple[SamplingScheme, ...]:
        """The schemes, parsed."""
        return tuple(map(parse_scheme, self.schemes))
