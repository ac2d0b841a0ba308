"""What names a model and how it is placed: value types and constants that every stage shares, without torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
SUMMARY_FILE = "lmaudit_training.json"  # what `lmaudit train` writes next to a model or adapter
WEIGHT_DTYPES = ("fp32", "bf16", "fp16")
QUANTIZATIONS = ("8bit", "4bit")


@dataclass(frozen=True)
class ModelSource:
    """A model to load: a folder written by save_pretrained (or a hub id in the local cache), and optionally the folder
    of a PEFT adapter (LoRA) applied on top of it. The base folder's config and tokenizer are the model's."""

    folder: str
    adapter: str | None = None

    def __str__(self) -> str:
        return self.folder if self.adapter is None else f"{self.folder} with adapter {self.adapter}"


def as_source(model: str | Path | ModelSource) -> ModelSource:
    """A ModelSource for a folder (or hub id), or the source itself."""
    return model if isinstance(model, ModelSource) else ModelSource(str(model))


@dataclass(frozen=True)
class Placement:
    """How weights are loaded and where they run: the device, the weights' dtype, an accelerate device map ('auto'
    spreads a model larger than one GPU over the GPUs and the CPU), bitsandbytes quantization, and whether code shipped
    with the model may run. dtype and quantization change the numbers, so they are part of the weights' fingerprint."""

    device: str = "cpu"
    dtype: str = "fp32"
    device_map: str | None = None
    quantization: str | None = None
    trust_remote_code: bool = False


DEFAULT_PLACEMENT = Placement()  # fp32 weights on the CPU
TORCH_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # each of WEIGHT_DTYPES as torch names it
