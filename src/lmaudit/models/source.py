"""What names a model and how it is placed: value types and constants that every stage shares, without torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
SUMMARY_FILE = "lmaudit_training.json"  # what `lmaudit train` writes next to a model or adapter
WEIGHT_DTYPES = ("fp32", "bf16", "fp16")
BITSANDBYTES = ("8bit", "4bit")  # bitsandbytes' quantizations, CUDA only
QUANTIZATIONS = (*BITSANDBYTES, "rtn8", "rtn4")  # and round-to-nearest in process, any device (models/rounding.py)


@dataclass(frozen=True)
class ServedBy:
    """Where a model's log-probabilities come from when not from transformers in this process: vLLM's engine (`engine`
    'vllm', run by the Python at `vllm_python` with vLLM's own arguments `vllm_args`) or an HTTP endpoint (`engine`
    'http': `url`, its `api` and served `model` name, an API key read from the environment variable `api_key_env`,
    `concurrency` requests at a time, each given `timeout_s` seconds and `retries` more tries)."""

    engine: str
    url: str | None = None
    api: str = "vllm"
    model: str | None = None
    api_key_env: str | None = None
    concurrency: int = 4
    timeout_s: float = 60.0
    retries: int = 4
    vllm_args: tuple[tuple[str, str], ...] = ()
    vllm_python: str | None = None

    def __str__(self) -> str:
        return f"vLLM in process ({self.vllm_python or 'this Python'})" if self.engine == "vllm" else display_url(self.url)


def display_url(url: str | None) -> str:
    """An endpoint's address as errors and reports show it: scheme, host, port and path, never a user, password or
    query (which may hold a key)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url or "")
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}".rstrip("/")


@dataclass(frozen=True)
class ModelSource:
    """A model to load: a folder written by save_pretrained (or a hub id in the local cache), and optionally the folder
    of a PEFT adapter (LoRA) applied on top of it. The base folder's config and tokenizer are the model's. `served`:
    the model's log-probabilities come from vLLM or an endpoint serving these weights, not from transformers."""

    folder: str
    adapter: str | None = None
    served: ServedBy | None = None

    def __str__(self) -> str:
        own = self.folder if self.adapter is None else f"{self.folder} with adapter {self.adapter}"
        return own if self.served is None else f"{own}, served by {self.served}"


def as_source(model: str | Path | ModelSource) -> ModelSource:
    """A ModelSource for a folder (or hub id), or the source itself."""
    return model if isinstance(model, ModelSource) else ModelSource(str(model))


@dataclass(frozen=True)
class Placement:
    """How weights are loaded and where they run: the device, the weights' dtype, an accelerate device map ('auto'
    spreads a model larger than one GPU over the GPUs and the CPU), quantization (bitsandbytes', or round-to-nearest in
    process), and whether code shipped with the model may run. dtype and quantization change the numbers, so they are part of the weights' fingerprint."""

    device: str = "cpu"
    dtype: str = "fp32"
    device_map: str | None = None
    quantization: str | None = None
    trust_remote_code: bool = False

    @property
    def bitsandbytes(self) -> bool:
        """Whether bitsandbytes loads the weights quantized (they then stay where it put them, and take no merge)."""
        return self.quantization in BITSANDBYTES


DEFAULT_PLACEMENT = Placement()  # fp32 weights on the CPU
TORCH_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # each of WEIGHT_DTYPES as torch names it
