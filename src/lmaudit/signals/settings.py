"""How a signal is computed: its settings (all that decides a stored value besides the model and the text) and the
precisions and devices it may run in. No torch, no numpy: the configuration and the command line read these."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PRECISIONS = ("fp32", "bf16", "auto")  # of the matrix multiplies; log-softmax is always fp32
DEVICES = ("cpu", "cuda", "auto")
# Tokens a batch holds when not given, by device: a CPU gains nothing from more (and pads less with fewer); a GPU idles
# at 4,096 (docs/performance.md), and the out-of-memory back-off (signals/memory.py) halves a batch that does not fit.
DEFAULT_BATCH_TOKENS = {"cpu": 4096, "cuda": 32768}


class SignalSettings(BaseModel):
    """Everything that determines a signal's value besides the model and the text, and the token budget of a batch
    (which does not change the value). Mask settings apply to the MLM signals only."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    signal: str = "mlm_energy"
    k: int = Field(10, ge=1)
    masks: Literal["random", "all"] = "random"
    normalize: Literal["sum", "mean"] | None = None
    mask_fraction: float = Field(0.15, gt=0, le=1)
    seed: int = 0
    max_length: int | None = Field(None, ge=3)
    all_masks_cap: int = Field(5000, ge=1)
    precision: Literal[PRECISIONS] = "fp32"
    batch_tokens: int | None = Field(None, ge=64, description="None: sized for the device (DEFAULT_BATCH_TOKENS)")

    def value_key(self) -> dict:
        """The settings a stored value depends on (all but the batch size)."""
        return self.model_dump(exclude={"batch_tokens"})


def has_fast_bf16(device_type: str) -> bool:
    """CUDA, or a CPU with native bf16 matrix instructions (AVX512_BF16 or AMX)."""
    if device_type == "cuda":
        return True
    try:
        with open("/proc/cpuinfo") as handle:
            flags = handle.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device_type: str) -> str:
    """'auto' becomes bf16 where the hardware has fast bf16, else fp32."""
    if precision == "auto":
        return "bf16" if has_fast_bf16(device_type) else "fp32"
    return precision
