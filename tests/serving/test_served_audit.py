"""An audit through an endpoint, against the stand-in server (tests/serving/standin.py: transformers behind vLLM's and
SGLang's APIs, in fp32): the same numbers as the audit in process, the conformance check refusing each wrong server,
the client's retries, key and errors, the roles sent mixed, and nothing of the audited text in what it writes."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from tests.serving.standin import Faults, StandInServer, WrongProxy
from tests.serving.tiny_clm import audit_files

COMMON = ["--bootstrap", "30", "--permutations", "100", "--no-figures", "--max-length", "48", "--retries", "1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return audit_files(tmp_path_factory.mktemp("served"), n_patients=16, seed=7, steps=40)


def run(files, out, *extra, target="target"):
    return CliRunner().invoke(main, ["audit", "--target", str(files[target]), "--members", str(files["members"]),
                                     "--nonmembers", str(files["nonmembers"]), "--population", str(files["population"]),
                                     "--out", str(out), *COMMON, *extra])


def aucs(out) -> dict:
    report = json.loads((out / "report.json").read_text())
    return {(r["attack"], r["signal"], r["level"], r["slice"]): r["auc"] for r in report["results"]}


@pytest.fixture(scope="module")
def in_process(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "report"
    result = run(files, out)
    assert result.exit_code == 0, result.output
    return aucs(out)


@pytest.mark.parametrize("api", ["vllm", "openai", "sglang"])
def test_an_audit_through_each_api_equals_the_audit_in_process(files, in_process, tmp_path, api):
    with StandInServer(files["target"]) as server:
        result = run(files, tmp_path / "r", "--target-url", server.url, "--api", api, "--release", "public-api")
    assert result.exit_code == 0, result.output
    through = aucs(tmp_path / "r")
    # every attack ran both ways but Min-K%++, which reads the whole next-token distribution that no API gives
    assert set(in_process) - set(through) == {key for key in in_process if key[0] == "min_k_plus_plus"}
    assert max(abs(in_process[key] - through[key]) for key in through) < 0.002
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    check = report["provenance"]["serving"]["target"]
    assert check["passed"] and check["api"] == api and check["largest_difference_from_transformers"] < 1e-4
    reasons = {entry["attack"]: entry["reason"] for entry in report["skipped"]}
    assert "not the whole next-token distribution" in reasons["min_k_plus_plus"]
    # the release context says which attacks the API allowed and which an attacker holding the weights adds
    context = report["coverage"]["context"]
    assert f"through its endpoint ({server.url})" in context and "min_k_plus_plus, which an attacker" in context


@pytest.mark.parametrize("kind, says", [("shift", "off-by-one alignment"),
                                        ("batch_noise", "change when sent with others"),
                                        ("tokens", "tokenizer makes other ids")])
def test_the_conformance_check_refuses_each_wrong_server_before_any_audit_text(files, tmp_path, kind, says):
    with StandInServer(files["target"]) as server, WrongProxy(server.url, kind, seed=0) as proxy:
        result = run(files, tmp_path / "r", "--target-url", proxy.url)
        sent = [request.body for request in server.requests if request.method == "POST"]
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "r" / "report.json").exists()
    # only the check's own requests reached the server (one text to tokenize, its 9 prompts alone, then 18 together),
    # never one of the audit's 200-odd texts
    assert len(sent) <= 28


def test_a_server_of_another_checkpoint_is_refused(files, tmp_path):
    with StandInServer(files["other"]) as server:
        result = run(files, tmp_path / "r", "--target-url", server.url)
    assert result.exit_code == 2 and "another checkpoint" in result.output, result.output
    assert "differ from transformers'" in result.output


@pytest.mark.parametrize("faults, says", [
    (Faults(no_prompt_logprobs=True), "the server's tokenizer makes other ids"),  # its echo holds no prompt
    (Faults(truncate_to=10), "the server's tokenizer makes other ids"),  # its echo is cut short
    (Faults(delay_s=1.5), "no answer within 0.5 s"),
    (Faults(require_api_key="sesame"), "answered 401"),
])
def test_a_wrong_or_slow_server_is_one_line_naming_its_address(files, tmp_path, faults, says):
    with StandInServer(files["target"], faults=faults) as server:
        result = run(files, tmp_path / "r", "--target-url", server.url, "--request-timeout", "0.5")
    last = result.output.strip().splitlines()[-1]
    assert result.exit_code == 2 and says in last and server.url in last, result.output
    assert last.startswith("lmaudit: error:") and not (tmp_path / "r" / "report.json").exists()


def test_a_server_that_is_down_or_serves_another_name_is_one_line(files, tmp_path):
    with StandInServer(files["target"]) as server:
        url = server.url
        named = run(files, tmp_path / "a", "--target-url", url, "--served-model", "llama")
    assert named.exit_code == 2 and "serves no model 'llama' (it serves tiny)" in named.output
    down = run(files, tmp_path / "b", "--target-url", url)  # the server is gone: its port answers nothing
    assert down.exit_code == 2 and f"{url}/v1/models: no server answers" in down.output, down.output
    credentials = run(files, tmp_path / "c", "--target-url", "http://someone:hunter2@127.0.0.1:1")
    assert credentials.exit_code == 2 and "holding credentials" in credentials.output
    assert "hunter2" not in credentials.output and "someone" not in credentials.output


def test_retries_ride_out_503s_and_429s_and_the_key_is_sent_never_written(files, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SERVER_KEY", "sesame-0123")
    monkeypatch.setattr("lmaudit.serving.http_client.BACKOFF_S", 0.05)  # the waits' length is not what is tested here
    faults = Faults(fail_first=2, rate_limited_first=2, require_api_key="sesame-0123")
    with caplog.at_level(logging.DEBUG), StandInServer(files["target"], faults=faults) as server:
        result = run(files, tmp_path / "r", "--target-url", server.url, "--api-key-env", "SERVER_KEY", "--retries", "4")
        headers = [request.headers.get("authorization") for request in server.requests]
    assert result.exit_code == 0, result.output
    assert set(headers) == {"Bearer sesame-0123"}
    written = "".join(path.read_bytes().decode("latin-1") for path in tmp_path.rglob("*") if path.is_file())
    assert "sesame" not in written + result.output + caplog.text
    assert "SERVER_KEY" in json.loads((tmp_path / "r" / "report.json").read_text())["config"]["api_key_env"]


def test_roles_are_sent_mixed_in_a_recorded_random_order(files, tmp_path):
    with StandInServer(files["target"]) as server:
        result = run(files, tmp_path / "r", "--target-url", server.url, "--no-lowercase")
        prompts = [tuple(request.body["prompt"]) for request in server.requests
                   if request.method == "POST" and isinstance(request.body.get("prompt"), list)]
    assert result.exit_code == 0, result.output
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.signals.base import encode

    tokenizer = load_tokenizer(files["target"])
    role_of = {}
    for role in ("members", "nonmembers", "population"):
        texts = pd.read_csv(files[role])["text"].tolist()
        for sample in encode(tokenizer, texts, [str(i) for i in range(len(texts))], 48):
            role_of[tuple(sample.input_ids.tolist())] = role
    sent = [role_of[prompt] for prompt in prompts if prompt in role_of]
    assert set(sent) == set(role_of.values())
    first_quarter = set(sent[: len(sent) // 4])
    assert first_quarter == {"members", "nonmembers", "population"}  # in the files' order, the first quarter is members
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["provenance"]["serving"]["target"]["request_order_seed"] == 0


def test_a_scoring_pass_cut_short_resumes_from_the_store(files, tmp_path, monkeypatch):
    import functools

    from lmaudit.audit import records
    from lmaudit.serving.scorers import HttpScorer

    monkeypatch.setattr(records, "Scoring", functools.partial(records.Scoring, chunk_size=50))
    calls = {"n": 0}
    original = HttpScorer.score

    def dropped_after_one_chunk(self, prompts, done=None):
        calls["n"] += 1
        if calls["n"] == 3:  # the check's batched pass is the first call; then one chunk of the audit is stored
            from lmaudit.errors import InputError

            raise InputError("connection dropped")
        return original(self, prompts, done)

    with StandInServer(files["target"]) as server:
        monkeypatch.setattr(HttpScorer, "score", dropped_after_one_chunk)
        first = run(files, tmp_path / "r", "--target-url", server.url)
        assert first.exit_code == 2 and "connection dropped" in first.output
        monkeypatch.setattr(HttpScorer, "score", original)
        before = len(server.requests)
        second = run(files, tmp_path / "r", "--target-url", server.url)
        resent = len(server.requests) - before
    assert second.exit_code == 0, second.output
    total = sum(len(pd.read_csv(files[role])) for role in ("members", "nonmembers", "population"))
    # the check again (28 requests), then the tokens pass without its stored chunk of 50, then ReCaLL's prefixed pass
    assert resent == 28 + (total - 50) + total


@pytest.mark.parametrize("option", [["--whitebox"], ["--samia", "2"], ["--extraction"], ["--reference-kl"]])
def test_passes_a_server_cannot_give_are_refused_before_anything_runs(files, tmp_path, option):
    result = run(files, tmp_path / "r", "--target-url", "http://127.0.0.1:9", *option)
    assert result.exit_code == 2 and option[0] in result.output and "token log-probabilities only" in result.output
