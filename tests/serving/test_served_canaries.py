"""The canary audit and dataset inference score through the audit's one pipeline, so a served model is theirs too:
through the stand-in server (tests/serving/standin.py, transformers behind vLLM's API in fp32) the canaries' scores and
bounds are those of the audit in process, and a server that scores otherwise is refused before a canary is sent."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.canaries.make import make_canaries
from lmaudit.cli import main
from tests.serving.standin import StandInServer, WrongProxy
from tests.serving.tiny_clm import audit_files

COMMON = ["--max-length", "48", "--retries", "1", "--candidates", "0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("served-canaries")
    made = audit_files(root, n_patients=16, seed=3, steps=20)
    make_canaries(root / "canaries", "secret", 12, seed=0)
    return made | {"canaries": root / "canaries"}


def audit(files, out, *extra):
    return CliRunner().invoke(main, ["canaries", "audit", "--target", str(files["target"]), "--canaries",
                                     str(files["canaries"]), "--out", str(out), *COMMON, *extra])


def test_the_canary_audit_through_an_endpoint_equals_the_audit_in_process(files, tmp_path):
    local = audit(files, tmp_path / "local")
    assert local.exit_code == 0, local.output
    with StandInServer(files["target"]) as server:
        served = audit(files, tmp_path / "served", "--target-url", server.url, "--api", "vllm")
    assert served.exit_code == 0, served.output
    scores = [pd.read_parquet(tmp_path / name / "canary_scores.parquet").set_index("sample_id").sort_index()
              for name in ("local", "served")]
    np.testing.assert_allclose(scores[1]["score"], scores[0]["score"], atol=1e-4)
    reports = [json.loads((tmp_path / name / "canary_report.json").read_text()) for name in ("local", "served")]
    assert reports[1]["config"]["target_url"] == server.url
    assert reports[1]["one_run"]["correct"] == reports[0]["one_run"]["correct"]


def test_a_server_that_scores_otherwise_is_refused_before_a_canary_is_sent(files, tmp_path):
    with StandInServer(files["target"]) as server, WrongProxy(server.url, "shift", seed=0) as proxy:
        result = audit(files, tmp_path / "r", "--target-url", proxy.url)
        sent = [request.body for request in server.requests if request.method == "POST"]
    assert result.exit_code == 2 and "off-by-one alignment" in result.output, result.output
    assert [line for line in result.output.splitlines() if "error" in line] == [result.output.strip().splitlines()[-1]]
    assert "Traceback" not in result.output and not (tmp_path / "r").exists()
    assert len(sent) <= 28  # the check's own requests only (as the audit's), never one of the 12 canaries


def test_dataset_inference_through_an_endpoint_equals_it_in_process(files, tmp_path):
    def infer(out, *extra):
        return CliRunner().invoke(main, ["dataset-inference", "--target", str(files["target"]), "--suspect",
                                         str(files["members"]), "--validation", str(files["nonmembers"]), "--out",
                                         str(out), "--max-length", "48", *extra])

    local = infer(tmp_path / "local")
    assert local.exit_code == 0, local.output
    with StandInServer(files["target"]) as server:
        served = infer(tmp_path / "served", "--target-url", server.url)
    assert served.exit_code == 0, served.output
    documents = [json.loads((tmp_path / name / "dataset_inference.json").read_text()) for name in ("local", "served")]
    assert documents[1]["config"]["target_url"] == server.url
    assert documents[1]["p_value"] == pytest.approx(documents[0]["p_value"], abs=0.02)
