"""vLLM's engine as an audit's scorer: lmaudit starts `vllm_worker.py` under the Python that has vLLM, once per model
and process, and sends it prompts of token ids; vLLM's own arguments pass through as given (tensor parallel, dtype,
quantization, a LoRA adapter as its LoRARequest)."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models.source import ModelSource

WORKER = Path(__file__).with_name("vllm_worker.py")


class VllmEngine:
    """One vLLM engine in its own process, serving one model (and its adapter)."""

    def __init__(self, source: ModelSource):
        served = source.served
        python = served.vllm_python or sys.executable
        self.log = tempfile.NamedTemporaryFile("w+", prefix="lmaudit-vllm-", suffix=".log", delete=False)
        try:
            # vLLM's own process, offline like every load of lmaudit's: it reads the model from its folder only
            offline = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
            self.process = subprocess.Popen([python, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self.log, text=True, bufsize=1, env=offline)
        except OSError as error:
            raise InputError(f"--vllm-python {python}: cannot run it ({error.strerror}); give the Python of an "
                             "environment with vLLM installed") from None
        atexit.register(self.close)
        start = {"model": source.folder, "adapter": source.adapter, "args": dict(served.vllm_args)}
        self.identity = self._ask({"start": start}, "ready", f"vLLM could not start {source}")

    def score(self, prompts: list[list[int]]) -> list[list[list[float]]]:
        """Each prompt's [log p, top-1 id] of every token after the first."""
        return self._ask({"score": prompts}, "scored", "vLLM failed to score")

    def _ask(self, request: dict, key: str, failure: str):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        answer = json.loads(line) if line else {"error": self._last_log_line()}
        if key not in answer:
            raise InputError(f"{failure}: {answer.get('error')}; vLLM's log: {self.log.name}")
        return answer[key]

    def _last_log_line(self) -> str:
        self.log.flush()
        lines = [line for line in Path(self.log.name).read_text(errors="replace").splitlines() if line.strip()]
        if any("No module named 'vllm'" in line for line in lines):
            return "vLLM is not installed for that Python (give --vllm-python, the Python of an environment with vLLM)"
        return f"its process ended ({lines[-1][:200] if lines else 'no output'})"

    def close(self) -> None:
        """End the engine's process."""
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
