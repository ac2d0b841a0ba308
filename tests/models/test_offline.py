"""lmaudit never reaches a model hub, and importing it changes nothing of the user's environment: a training script
that imports lmaudit.training and then loads a model from the Hub itself keeps its own hub settings."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from lmaudit.errors import InputError
from lmaudit.models.folders import resolve_model_folder

IMPORTS = "lmaudit.training, lmaudit.api, lmaudit.models.load, lmaudit.models.pretrained, lmaudit.cli, lmaudit.serving.scorers"


# what the libraries lmaudit uses set on their own import (scikit-learn its OpenMP flags, peft torch's inductor cache)
LIBRARIES = "torch, transformers, peft, sklearn, pandas, numpy"


def test_importing_lmaudit_leaves_the_environment_as_it_was():
    code = (f"import json, os, {LIBRARIES}; before = dict(os.environ); import {IMPORTS}; "
            "after = dict(os.environ); print(json.dumps({k: [before.get(k), after.get(k)] for k in set(before) | set(after) "
            "if before.get(k) != after.get(k)}))")
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "TRANSFORMERS_"))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


def test_a_hub_id_not_in_the_local_cache_is_refused_without_any_connection(monkeypatch, tmp_path):
    """With the hub reachable as far as the environment says (no HF_HUB_OFFLINE), resolving a hub id opens no socket:
    the lookup is in the local cache only, and a miss is one line."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    attempts = []

    def no_connection(self, address, *args):
        attempts.append(address)
        raise OSError("the test allows no connection")

    monkeypatch.setattr(socket.socket, "connect", no_connection)
    with pytest.raises(InputError, match="no model of that id in the local Hugging Face cache"):
        resolve_model_folder("someone/some-model")
    assert attempts == []
