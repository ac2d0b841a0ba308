"""vLLM's engine in a process of its own, run by the Python of an environment that has vLLM (which pins its own
torch and transformers, so it never shares lmaudit's environment). Standard library and vLLM only: this file is run as
a script, not imported from lmaudit.

It reads one JSON request per line on stdin and answers one JSON line on the channel it is given (its stdout before
vLLM's logs, which go to stderr): {"start": {model, adapter, args}} -> {"ready": identity};
{"score": [[token ids], ...]} -> {"scored": [[[log p, top-1 id], ...], ...]} (every token after the first).
"""

import json
import os
import sys


def engine(start: dict):
    """vLLM's LLM over the model folder, with its own arguments as given, and the adapter's LoRARequest if any."""
    from vllm import LLM
    from vllm.lora.request import LoRARequest

    args = {key: _value(value) for key, value in start["args"].items()}
    if start.get("adapter"):
        args.setdefault("enable_lora", True)
    llm = LLM(model=start["model"], **args)
    lora = LoRARequest("adapter", 1, start["adapter"]) if start.get("adapter") else None
    return llm, lora


def _value(text: str):
    """An engine argument from its text: JSON where it parses (numbers, true/false, lists), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def identity(llm) -> dict:
    """What the engine says of itself: vLLM's version, the model's dtype and context length, the sequences per batch."""
    import vllm

    config = llm.llm_engine.vllm_config
    return {"server": "vllm", "version": vllm.__version__, "dtype": str(config.model_config.dtype).replace("torch.", ""),
            "max_model_len": config.model_config.max_model_len, "max_num_seqs": config.scheduler_config.max_num_seqs}


def score(llm, lora, prompts: list) -> list:
    """Each prompt's (log p, top-1 id) of every token after the first, from one prompt_logprobs pass."""
    from vllm import SamplingParams

    params = SamplingParams(prompt_logprobs=1, max_tokens=1, temperature=0)
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, lora_request=lora, use_tqdm=False)
    scored = []
    for ids, output in zip(prompts, outputs, strict=True):
        rows = []
        for token, entry in zip(ids[1:], output.prompt_logprobs[1:], strict=True):
            top = next((key for key, value in entry.items() if value.rank == 1), None)
            rows.append([entry[token].logprob, top])
        scored.append(rows)
    return scored


def main() -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # vLLM and its worker processes print to stdout: send them to stderr, keep stdout for answers
    llm = lora = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "start" in request:
                llm, lora = engine(request["start"])
                answer = {"ready": identity(llm)}
            else:
                answer = {"scored": score(llm, lora, request["score"])}
        except Exception as error:  # the parent turns it into one line naming what failed
            answer = {"error": f"{error.__class__.__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]}
        channel.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
