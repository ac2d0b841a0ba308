"""The stand-in server answers what a direct transformers forward pass gives, in vLLM's and SGLang's shapes; each fault
does what it says; each wrong proxy changes what it says and nothing else."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from lmaudit.data.synth import generate_notes
from lmaudit.errors import InputError
from lmaudit.models.source import ServedBy
from lmaudit.models.tokenizer import train_tokenizer
from lmaudit.serving.http_client import Endpoint
from lmaudit.serving.protocol import parse_response, request_body, server_token_ids, tokenizing_body
from tests.serving.standin import Faults, StandInServer, WrongProxy

RESPONSES = Path(__file__).with_name("responses")


@dataclass
class Tiny:
    folder: Path
    model: object
    tokenizer: object
    texts: list[str]

    def ids(self, index: int = 0, length: int = 20) -> list[int]:
        return self.tokenizer(self.texts[index], truncation=True, max_length=length)["input_ids"]

    def rows(self, ids: list[int]) -> torch.Tensor:
        """log_softmax of the logits at every position, straight from the model."""
        with torch.no_grad():
            return torch.log_softmax(self.model(input_ids=torch.tensor([ids])).logits[0], dim=-1)

    def log_probs(self, ids: list[int]) -> np.ndarray:
        """log p(token t | tokens before it) for t >= 1, by hand."""
        return self.rows(ids)[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Tiny:
    texts = generate_notes(n_patients=6, seed=1)["text"].tolist()
    tokenizer = train_tokenizer(texts, vocab_size=300, max_length=64)
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64, vocab_size=len(tokenizer),
                        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("tiny-clm")
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return Tiny(folder, model, tokenizer, texts)


@pytest.fixture(scope="module")
def server(tiny):
    with StandInServer(tiny.folder) as running:
        yield running


def call(url: str, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, object, dict]:
    """(status, JSON answer, headers) of a GET (no body) or POST."""
    request = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null"), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), dict(error.headers)


def ok(url: str, path: str, body: dict | None = None) -> dict:
    status, answer, _ = call(url, path, body)
    assert status == 200, answer
    return answer


def recorded(name: str) -> dict:
    return json.loads((RESPONSES / f"vllm-0.32.0-{name}.json").read_text())


def test_models_and_version(server, tiny):
    models = ok(server.url, "/v1/models")
    card = models["data"][0]
    assert models["object"] == "list" and len(models["data"]) == 1
    assert (card["id"], card["object"], card["owned_by"], card["root"], card["max_model_len"]) == \
        ("tiny", "model", "vllm", str(tiny.folder), 64)
    assert isinstance(card["created"], int)
    assert ok(server.url, "/version") == {"version": "standin-0"}


def test_echo_logprobs_are_one_forward_pass(server, tiny):
    ids = tiny.ids()
    answer = ok(server.url, "/v1/completions", request_body("openai", "tiny", ids))
    choice, rows = answer["choices"][0], tiny.rows(ids)
    block, generated = choice["logprobs"], int(torch.argmax(rows[-1]))
    assert block["token_logprobs"][0] is None and block["top_logprobs"][0] is None
    np.testing.assert_allclose(block["token_logprobs"][1:len(ids)], tiny.log_probs(ids), atol=1e-5)
    assert block["tokens"] == [f"token_id:{i}" for i in [*ids, generated]]
    assert block["token_logprobs"][-1] == pytest.approx(float(rows[-1, generated]), abs=1e-5)
    assert block["text_offset"] == list(np.cumsum([0, *map(len, block["tokens"][:-1])]))
    for t in range(1, len(ids)):  # each position's top: its own token, then the most likely one
        assert list(block["top_logprobs"][t])[0] == f"token_id:{ids[t]}"
        assert f"token_id:{int(torch.argmax(rows[t - 1]))}" in block["top_logprobs"][t]
    assert choice["prompt_logprobs"] is not None  # vLLM: echo with logprobs gives prompt_logprobs too
    assert answer["usage"]["prompt_tokens"] == len(ids) and answer["usage"]["completion_tokens"] == 1
    np.testing.assert_allclose(parse_response("openai", answer, ids).log_probs, tiny.log_probs(ids), atol=1e-5)
    prompt_only = ok(server.url, "/v1/completions", request_body("openai", "tiny", ids) | {"max_tokens": 0})
    assert prompt_only["choices"][0]["logprobs"]["tokens"] == block["tokens"][:-1]
    assert prompt_only["usage"]["completion_tokens"] == 0
    vllm = recorded("echo")  # the same fields as vLLM answers, at every level
    assert answer.keys() == vllm.keys() and answer["usage"].keys() == vllm["usage"].keys()
    assert choice.keys() == vllm["choices"][0].keys() and block.keys() == vllm["choices"][0]["logprobs"].keys()


def test_prompt_logprobs_are_one_forward_pass(server, tiny):
    ids = tiny.ids(1)
    answer = ok(server.url, "/v1/completions", request_body("vllm", "tiny", ids) | {"prompt_logprobs": 3})
    choice, rows = answer["choices"][0], tiny.rows(ids)
    entries = choice["prompt_logprobs"]
    assert choice["logprobs"] is None and entries[0] is None and len(entries) == len(ids)
    for t in range(1, len(ids)):
        entry, row = entries[t], rows[t - 1]
        own = entry[str(ids[t])]
        assert list(entry)[0] == str(ids[t])
        assert own["logprob"] == pytest.approx(float(row[ids[t]]), abs=1e-5)
        assert own["rank"] == int((row > row[ids[t]]).sum()) + 1
        assert own["decoded_token"] == tiny.tokenizer.decode([ids[t]])
        for place, token in enumerate(torch.topk(row, 3).indices.tolist(), start=1):
            assert entry[str(token)]["rank"] == place
    np.testing.assert_allclose(parse_response("vllm", answer, ids).log_probs, tiny.log_probs(ids), atol=1e-5)
    greedy = int(torch.argmax(rows[-1]))
    assert choice["text"] == tiny.tokenizer.decode(ids + [greedy], skip_special_tokens=True)[
        len(tiny.tokenizer.decode(ids, skip_special_tokens=True)):]


def test_a_text_prompt_is_tokenized_with_special_tokens(server, tiny):
    text = "cxr portable ap: a l"
    answer = ok(server.url, "/v1/completions", tokenizing_body("vllm", "tiny", text))
    expected = tiny.tokenizer(text, add_special_tokens=True)["input_ids"]
    assert server_token_ids("vllm", answer) == expected
    assert answer["choices"][0]["text"].startswith(text)  # vLLM echoes the text as sent
    np.testing.assert_allclose(parse_response("openai", answer, expected).log_probs, tiny.log_probs(expected), atol=1e-5)


def test_sglang_generate_is_one_forward_pass(server, tiny):
    ids = tiny.ids(2)
    meta = ok(server.url, "/generate", request_body("sglang", None, ids))["meta_info"]
    rows = tiny.rows(ids)
    assert meta["input_token_logprobs"][0] == [None, ids[0], None] and meta["input_top_logprobs"][0] is None
    np.testing.assert_allclose([e[0] for e in meta["input_token_logprobs"][1:]], tiny.log_probs(ids), atol=1e-5)
    assert [e[1] for e in meta["input_token_logprobs"]] == ids
    assert [top[0][1] for top in meta["input_top_logprobs"][1:]] == torch.argmax(rows[:-1], dim=-1).tolist()
    assert meta["prompt_tokens"] == len(ids) and meta["output_token_logprobs"] == []
    np.testing.assert_allclose(parse_response("sglang", {"meta_info": meta}, ids).log_probs, tiny.log_probs(ids), atol=1e-5)
    body = request_body("sglang", None, ids) | {"sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    generated = ok(server.url, "/generate", body)
    greedy = int(torch.argmax(rows[-1]))
    assert generated["output_ids"] == [greedy]
    assert generated["meta_info"]["output_token_logprobs"][0][:2] == [pytest.approx(float(rows[-1, greedy]), abs=1e-5), greedy]


def test_errors_are_vllms(server, tiny):
    status, answer, _ = call(server.url, "/v1/completions", request_body("vllm", "other", tiny.ids()))
    assert status == 404 and answer["error"]["message"].startswith("The model `other` does not exist.")
    assert answer["error"]["type"] == "NotFoundError" and answer["error"]["code"] == 404
    assert answer["error"].keys() == recorded("unknown-model")["error"].keys()
    too_long = [tiny.tokenizer.cls_token_id, *range(10, 79)]  # 70 tokens
    status, answer, _ = call(server.url, "/v1/completions", request_body("vllm", "tiny", too_long))
    assert status == 400 and "maximum context length is 64 tokens" in answer["error"]["message"]
    assert "70 input tokens" in answer["error"]["message"]
    status, answer, _ = call(server.url, "/v1/completions", request_body("vllm", "tiny", too_long[:64]))
    assert status == 400 and "64 input tokens" in answer["error"]["message"]  # no room left for the one generated
    status, answer, _ = call(server.url, "/v1/completions", request_body("vllm", "tiny", tiny.ids()) | {"max_tokens": 0})
    assert status == 400 and "max_tokens must be at least 1" in answer["error"]["message"]  # vLLM: only echo may ask 0
    status, answer, _ = call(server.url, "/generate", request_body("sglang", None, too_long))
    assert status == 400 and "(70 tokens)" in answer["error"]["message"]
    with StandInServer(tiny.folder, max_model_len=16) as short:
        status, answer, _ = call(short.url, "/v1/completions", request_body("vllm", "tiny", tiny.ids(0, 16)))
        assert status == 400 and "maximum context length is 16 tokens" in answer["error"]["message"]
        assert ok(short.url, "/v1/models")["data"][0]["max_model_len"] == 16


def test_rate_limits_and_failures_come_first(tiny):
    body = request_body("vllm", "tiny", tiny.ids())
    with StandInServer(tiny.folder, faults=Faults(fail_first=2, rate_limited_first=1)) as flaky:
        status, _, headers = call(flaky.url, "/v1/completions", body)
        assert status == 429 and headers["Retry-After"] == "0"
        ok(flaky.url, "/v1/models")  # not a scoring request: not counted
        assert [call(flaky.url, "/v1/completions", body)[0] for _ in range(3)] == [503, 503, 200]
        assert len(flaky.requests) == 5


def test_the_audits_client_gets_through_a_rate_limit(tiny):
    ids = tiny.ids()
    with StandInServer(tiny.folder, faults=Faults(rate_limited_first=1)) as limited:
        endpoint = Endpoint(ServedBy(engine="http", url=limited.url, model="tiny", retries=2, timeout_s=10))
        answer = endpoint.post("/v1/completions", request_body("vllm", "tiny", ids))
        np.testing.assert_allclose(parse_response("vllm", answer, ids).log_probs, tiny.log_probs(ids), atol=1e-5)
        assert len(limited.requests) == 2


def test_delay(tiny):
    with StandInServer(tiny.folder, faults=Faults(delay_s=0.3)) as slow:
        started = time.monotonic()
        ok(slow.url, "/v1/completions", request_body("vllm", "tiny", tiny.ids()))
        assert time.monotonic() - started >= 0.3


def test_no_prompt_logprobs_answers_for_the_generated_token_only(tiny):
    ids = tiny.ids()
    with StandInServer(tiny.folder, faults=Faults(no_prompt_logprobs=True)) as generation_only:
        answer = ok(generation_only.url, "/v1/completions", request_body("openai", "tiny", ids))
        choice = answer["choices"][0]
        assert choice["prompt_logprobs"] is None and len(choice["logprobs"]["tokens"]) == 1
        assert choice["logprobs"]["tokens"] == [f"token_id:{int(torch.argmax(tiny.rows(ids)[-1]))}"]
        with pytest.raises(InputError, match="generated tokens' only"):
            parse_response("openai", answer, ids)
        with pytest.raises(InputError, match="no prompt log-probabilities"):
            parse_response("vllm", ok(generation_only.url, "/v1/completions", request_body("vllm", "tiny", ids)), ids)
        meta = ok(generation_only.url, "/generate", request_body("sglang", None, ids))["meta_info"]
        assert "input_token_logprobs" not in meta


def test_truncation_scores_the_first_tokens_only(tiny):
    ids = tiny.ids()
    with StandInServer(tiny.folder, faults=Faults(truncate_to=5)) as cutting:
        answer = ok(cutting.url, "/v1/completions", request_body("vllm", "tiny", ids))
        entries = answer["choices"][0]["prompt_logprobs"]
        assert len(entries) == 5 and answer["usage"]["prompt_tokens"] == 5
        np.testing.assert_allclose([entries[t][str(ids[t])]["logprob"] for t in range(1, 5)], tiny.log_probs(ids[:5]),
                                   atol=1e-5)
        with pytest.raises(InputError, match=f"scores 5 of the {len(ids)} tokens"):
            parse_response("vllm", answer, ids)


def test_api_key(tiny, monkeypatch):
    body = request_body("vllm", "tiny", tiny.ids())
    with StandInServer(tiny.folder, faults=Faults(require_api_key="sekret")) as guarded:
        assert call(guarded.url, "/v1/completions", body)[0] == 401
        assert call(guarded.url, "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert call(guarded.url, "/version")[0] == 200
        monkeypatch.setenv("STANDIN_KEY", "sekret")
        Endpoint(ServedBy(engine="http", url=guarded.url, api_key_env="STANDIN_KEY", retries=0)).post("/v1/completions", body)
        assert guarded.requests[-1].headers["authorization"] == "Bearer sekret"
        assert guarded.requests[-1].body == body


def test_shift_moves_each_value_one_position_later(server, tiny):
    ids = tiny.ids()
    body = request_body("openai", "tiny", ids) | {"logprobs": 2}
    right = ok(server.url, "/v1/completions", body)["choices"][0]
    with WrongProxy(server.url, "shift") as proxy:
        wrong = ok(proxy.url, "/v1/completions", body)["choices"][0]
        meta = ok(proxy.url, "/generate", request_body("sglang", None, ids))["meta_info"]
    n, values = len(ids), right["logprobs"]["token_logprobs"]
    shifted = [None, values[1], *values[1:n - 1], values[n]]  # the generated token's value stays
    assert wrong["logprobs"]["token_logprobs"] == shifted
    assert wrong["logprobs"]["tokens"] == right["logprobs"]["tokens"] and wrong["text"] == right["text"]
    for t in range(1, n):
        assert wrong["logprobs"]["top_logprobs"][t].keys() == right["logprobs"]["top_logprobs"][t].keys()
        assert wrong["prompt_logprobs"][t][str(ids[t])]["logprob"] == shifted[t]
        assert wrong["prompt_logprobs"][t].keys() == right["prompt_logprobs"][t].keys()
    assert [e[0] for e in meta["input_token_logprobs"]] == shifted[:n]
    assert [e[1] for e in meta["input_token_logprobs"]] == ids


def test_batch_noise_changes_concurrent_requests_only(server, tiny):
    bodies = [request_body("vllm", "tiny", tiny.ids(i)) for i in range(4)]
    right = [ok(server.url, "/v1/completions", body)["choices"][0]["prompt_logprobs"] for body in bodies]
    with WrongProxy(server.url, "batch_noise", seed=3) as proxy:
        alone = [ok(proxy.url, "/v1/completions", body)["choices"][0]["prompt_logprobs"] for body in bodies]
        assert alone == right and proxy.noised == 0
        together: list = [None] * len(bodies)
        start = threading.Barrier(len(bodies))

        def send(i: int) -> None:
            start.wait()
            together[i] = ok(proxy.url, "/v1/completions", bodies[i])["choices"][0]["prompt_logprobs"]

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # the four were sent together; a loaded machine may still let one through alone, and that one stays right
        assert proxy.noised >= 2
        assert sum(noisy != clean for noisy, clean in zip(together, right, strict=True)) == proxy.noised
    for body, clean, noisy in zip(bodies, right, together, strict=True):
        ids = body["prompt"]
        difference = np.array([noisy[t][str(ids[t])]["logprob"] - clean[t][str(ids[t])]["logprob"] for t in range(1, len(ids))])
        assert noisy == clean or 0.005 < np.abs(difference).max() < 0.3
        assert [None if e is None else e.keys() for e in noisy] == [None if e is None else e.keys() for e in clean]


def test_tokens_become_other_ids(server, tiny):
    ids = tiny.ids()
    with WrongProxy(server.url, "tokens") as proxy:
        answer = ok(proxy.url, "/v1/completions", request_body("openai", "tiny", ids))
        sglang = ok(proxy.url, "/generate", request_body("sglang", None, ids))
    right = ok(server.url, "/v1/completions", request_body("openai", "tiny", ids))["choices"][0]["logprobs"]
    block = answer["choices"][0]["logprobs"]
    assert block["token_logprobs"] == right["token_logprobs"]
    assert block["tokens"] == [f"token_id:{int(token.split(':')[1]) + 1}" for token in right["tokens"]]
    assert server_token_ids("openai", answer) == [i + 1 for i in ids]
    with pytest.raises(InputError, match="other tokens than those sent"):
        parse_response("vllm", answer, ids)
    assert [e[1] for e in sglang["meta_info"]["input_token_logprobs"]] == [i + 1 for i in ids]
    np.testing.assert_allclose([e[0] for e in sglang["meta_info"]["input_token_logprobs"][1:]], tiny.log_probs(ids), atol=1e-5)


def test_the_proxy_passes_refusals_and_keys_through(tiny):
    body = request_body("vllm", "tiny", tiny.ids())
    with StandInServer(tiny.folder, faults=Faults(require_api_key="k", rate_limited_first=1)) as upstream, \
            WrongProxy(upstream.url, "shift") as proxy:
        assert call(proxy.url, "/v1/completions", body)[0] == 401
        status, _, headers = call(proxy.url, "/v1/completions", body, {"Authorization": "Bearer k"})
        assert status == 429 and headers["Retry-After"] == "0"
        assert call(proxy.url, "/v1/models", headers={"Authorization": "Bearer k"})[0] == 200
        assert upstream.requests[-1].headers["authorization"] == "Bearer k"
