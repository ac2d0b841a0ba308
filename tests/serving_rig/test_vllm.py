"""Audits through a real vLLM: its OpenAI-compatible server and its engine in process give the in-process audit's
numbers (fp32: every AUC within 0.002), and the conformance check refuses a server that is wrong in each of the ways the
bug trackers report (an off-by-one alignment, batch-dependent numbers, another tokenizer, another checkpoint)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from tests.serving.standin import WrongProxy
from tests.serving_rig.conftest import ENGINE_ARGS, VLLM_PYTHON

# One token under the context length: vLLM needs room for the one token it generates, so a served audit scores at most
# max_model_len - 1 tokens; the in-process audit is given the same limit.
COMMON = ["--bootstrap", "50", "--permutations", "200", "--no-figures", "--max-length", "63"]


def audit(files, out, *extra) -> dict:
    result = CliRunner().invoke(main, ["audit", "--target", str(files["target"]), "--members", str(files["members"]),
                                       "--nonmembers", str(files["nonmembers"]), "--population", str(files["population"]),
                                       "--out", str(out), *COMMON, *extra])
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text())


def aucs(report: dict) -> dict:
    return {(r["attack"], r["signal"], r["level"], r["slice"]): r["auc"] for r in report["results"]}


@pytest.fixture(scope="module")
def in_process(rig_data, tmp_path_factory) -> dict:
    return audit(rig_data, tmp_path_factory.mktemp("local") / "report")


def test_the_audit_through_vllm_serve_equals_the_in_process_audit(rig_data, vllm_server, in_process, tmp_path):
    served = audit(rig_data, tmp_path / "served", "--target-url", vllm_server)
    own, through = aucs(in_process), aucs(served)
    # every attack but Min-K%++ (which reads the whole next-token distribution, which no server gives) ran both ways
    assert set(own) - set(through) == {key for key in own if key[0] == "min_k_plus_plus"}
    assert max(abs(own[key] - through[key]) for key in through) < 0.002
    check = served["provenance"]["serving"]["target"]
    assert check["passed"] and check["version"] == "0.32.0" and check["tokenizer"] == "same ids"
    assert check["largest_difference_from_transformers"] < 1e-4


def test_vllm_in_process_equals_the_in_process_audit(rig_data, in_process, tmp_path):
    engine = [part for key, value in ENGINE_ARGS.items() for part in ("--vllm-arg", f"{key}={value}")]
    served = audit(rig_data, tmp_path / "engine", "--engine", "vllm", "--vllm-python", VLLM_PYTHON, *engine)
    own, through = aucs(in_process), aucs(served)
    assert max(abs(own[key] - through[key]) for key in through) < 0.002
    assert served["provenance"]["serving"]["target"]["dtype"] == "float32"


@pytest.mark.parametrize("kind, says", [
    ("shift", "off-by-one alignment"),
    ("batch_noise", "change when sent with others"),
    ("tokens", "tokenizer makes other ids"),
])
def test_the_conformance_check_refuses_a_wrong_server(rig_data, vllm_server, tmp_path, kind, says):
    with WrongProxy(vllm_server, kind, seed=0) as proxy:
        result = CliRunner().invoke(main, ["audit", "--target", str(rig_data["target"]), "--members",
                                           str(rig_data["members"]), "--nonmembers", str(rig_data["nonmembers"]),
                                           "--out", str(tmp_path / "r"), "--target-url", proxy.url, *COMMON])
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "r" / "report.json").exists()


def test_the_conformance_check_refuses_a_server_of_another_checkpoint(rig_data, vllm_server, tmp_path):
    # the server serves the target; --target names another checkpoint: the weights audited are not those served
    result = CliRunner().invoke(main, ["audit", "--target", str(rig_data["other"]), "--members", str(rig_data["members"]),
                                       "--nonmembers", str(rig_data["nonmembers"]), "--out", str(tmp_path / "r"),
                                       "--target-url", vllm_server, *COMMON])
    assert result.exit_code == 2 and "another checkpoint" in result.output, result.output
