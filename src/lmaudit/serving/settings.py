"""How an audit reaches a served model: the configuration's `serving` section (no torch, no network)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lmaudit.models.source import ServedBy

ENGINES = ("transformers", "vllm")
APIS = ("vllm", "openai", "sglang")
API_KEY_ENV = "LMAUDIT_API_KEY"
# The largest difference (nats per token) between a server's log-probability and transformers' on the same weights
# that the conformance check lets pass. vLLM's CPU build in fp32 differed by at most 2.9e-6 on 500 tokens; a bf16
# server differs by about 0.02-0.05, so a bf16 audit gives a wider tolerance on purpose (docs/serving.md).
DEFAULT_TOLERANCE = 1e-3


class ServingSettings(BaseModel):
    """Where the audited models' log-probabilities come from: transformers in this process (the default), vLLM's
    engine (`engine: vllm`), or HTTP endpoints serving the target and the references (`target_url`, `reference_url`),
    and how the client behaves."""

    model_config = ConfigDict(extra="forbid")
    engine: Literal[ENGINES] = Field("transformers", description="what computes the models' log-probabilities in "
                                     "process: transformers, or vLLM's engine (vllm.LLM; the vllm extra, or --vllm-python)")
    vllm_args: dict[str, str] = Field(default_factory=dict, description="vLLM's own engine arguments, passed through "
                                      "as given (tensor_parallel_size, dtype, quantization, max_model_len, ...)")
    vllm_python: str | None = Field(None, description="the Python of a virtual environment that has vLLM (default: "
                                    "this one), which runs vLLM's engine in its own process")
    target_url: str | None = Field(None, description="an endpoint serving the target: its per-token log-probabilities "
                                   "come from there (the target folder still gives the tokenizer, and the weights the "
                                   "server's numbers are checked against)")
    reference_url: list[str] = Field(default_factory=list, description="endpoints serving the references, one per "
                                     "reference in the same order")
    api: Literal[APIS] = Field("vllm", description="the endpoints' API: vllm (/v1/completions with prompt_logprobs), "
                               "openai (/v1/completions with echo and logprobs, the prompt as token ids), sglang "
                               "(/generate with return_logprob)")
    served_model: str | None = Field(None, description="the model name the endpoint serves (default: the one it lists)")
    api_key_env: str = Field(API_KEY_ENV, description="the environment variable holding the endpoints' API key, if "
                             "any (read at run time, never written)")
    concurrency: int = Field(4, ge=1, description="requests in flight at a time, per endpoint")
    request_timeout: float = Field(60.0, gt=0, description="seconds one request may take before it is tried again")
    retries: int = Field(4, ge=0, description="more tries of a request that failed (connection, 429, 5xx), with "
                         "exponential back-off")
    tolerance: float = Field(DEFAULT_TOLERANCE, gt=0, description="conformance check: the largest difference in nats "
                             "per token allowed between the served log-probabilities and transformers' on the same "
                             "weights, and between a text scored alone and in a batch")

    @field_validator("target_url", "reference_url")
    @classmethod
    def _http(cls, value):
        from urllib.parse import urlsplit

        for url in [value] if isinstance(value, str) else value or []:
            parts = urlsplit(url)
            if parts.username or parts.password or parts.query:
                raise ValueError(f"an address holding credentials or a query ({parts.scheme}://{parts.hostname}...) "
                                 "would be written into the report; give the key in the environment (--api-key-env)")
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"'{url}' is not an http:// or https:// address")
        return value

    @property
    def served(self) -> bool:
        """Whether any model's log-probabilities come from elsewhere than transformers in this process."""
        return self.engine != "transformers" or self.target_url is not None or bool(self.reference_url)

    def served_by(self, url: str | None) -> ServedBy | None:
        """What serves a model: the endpoint at `url` when given, else vLLM's engine when chosen, else None
        (transformers in this process)."""
        client = {"api_key_env": self.api_key_env, "concurrency": self.concurrency, "timeout_s": self.request_timeout,
                  "retries": self.retries}
        if url is not None:
            return ServedBy("http", url=url, api=self.api, model=self.served_model, **client)
        if self.engine == "vllm":
            return ServedBy("vllm", vllm_args=tuple(sorted(self.vllm_args.items())), vllm_python=self.vllm_python)
        return None
