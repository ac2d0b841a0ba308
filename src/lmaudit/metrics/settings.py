"""How attacks are evaluated: one settings type, shared by the configuration and the metrics."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EvaluationSettings(BaseModel):
    """How attacks are evaluated: FPR levels (fractions), threshold FPRs, bootstrap and balanced repeats, seed, and the
    delta of the empirical epsilon bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    alphas: tuple[float, ...] = (0.1, 0.01, 0.001)
    threshold_alphas: tuple[float, ...] = (0.1, 0.01)
    bootstrap: int = Field(1000, ge=10)
    permutations: int = Field(1000, ge=100, description="relabellings of whole groups in the verdict's permutation "
                                                        "tests (metrics/permutation_tests.py); p-values resolve 1/(n+1)")
    balanced_repeats: int = Field(10, ge=1)
    seed: int = 0
    delta: float = Field(1e-5, gt=0, lt=1, description="delta of the empirical epsilon lower bounds")
    length_slices: int = Field(3, ge=0, description="sample-level slices by token length: this many quantile bins of "
                                                    "the audited samples' lengths (0 = none)")
    length_bounds: tuple[int, ...] = Field((), description="token-length bounds of the length slices instead of "
                                                          "quantiles, e.g. (20, 60): [min, 20), [20, 60), [60, max]")
    slice_by: tuple[str, ...] = Field((), description="corpus columns whose values each make a sample-level slice")
