"""The shapes, tokenizers, texts and random-weight models of benchmarks/gpu.py, and the FLOPs of their forward passes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


@dataclass(frozen=True)
class Shape:
    family: str  # gpt_neox, llama, gpt2 (causal LMs) or bert (masked LM)
    layers: int
    hidden: int
    heads: int
    feed_forward: int
    vocabulary: int


CAUSAL = {"Pythia-1B-sized": Shape("gpt_neox", 16, 2048, 8, 8192, 50304),
          "Pythia-2.8B-sized": Shape("gpt_neox", 32, 2560, 32, 10240, 50304),
          "Llama-7B-sized": Shape("llama", 32, 4096, 32, 11008, 32000)}
MASKED = {"BERT-base-sized": Shape("bert", 12, 768, 12, 3072, 30522),
          "BERT-large-sized": Shape("bert", 24, 1024, 16, 4096, 30522)}
TRAINED = {"GPT-2-small-sized": Shape("gpt2", 12, 768, 12, 3072, 50257)}
TINY = {"causal": {"tiny GPT-NeoX 2x64": Shape("gpt_neox", 2, 64, 2, 256, 2000)},
        "masked": {"tiny BERT 2x64": Shape("bert", 2, 64, 2, 256, 2000)},
        "trained": {"tiny GPT-2 2x64": Shape("gpt2", 2, 64, 2, 256, 2000)}}
# (causal texts, masked-LM texts, training texts, training epochs) of each kind of run
COUNTS = {"full": (2048, 512, 2048, 3), "quick": (1024, 256, 1024, 3), "tiny": (12, 12, 12, 2)}
MAX_TOKENS = 512  # BERT's positions; the longest text, and training's max_length


def tokenizer_of_size(texts: list[str], vocabulary: int):
    """lmaudit's WordPiece tokenizer of the notes, filled up with '[unused N]' tokens to exactly `vocabulary` ids."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from lmaudit.models.tokenizer import train_tokenizer

    trained = train_tokenizer(texts, vocab_size=vocabulary, max_length=MAX_TOKENS)
    core = json.loads(trained.backend_tokenizer.to_str())
    ids = core["model"]["vocab"]
    ids.update({f"[unused{index}]": index for index in range(len(ids), vocabulary)})
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(core)), unk_token="[UNK]",
                                   pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=MAX_TOKENS)


def make_texts(notes: list[str], tokenizer, count: int, seed: int = 0, longest: int = MAX_TOKENS) -> list[str]:
    """`count` texts of consecutive one-token words of `notes`, 16-`longest` tokens with [CLS] and [SEP] (log-normal)."""
    vocabulary = tokenizer.get_vocab()
    words = [word for word in " ".join(notes).split() if word.isalpha() and word.lower() in vocabulary]
    lengths = np.clip(np.round(np.random.default_rng(seed).lognormal(np.log(100), 0.75, count)), 16, longest)
    starts = np.cumsum(np.r_[0, lengths[:-1]]).astype(int) % (len(words) - MAX_TOKENS)
    return [" ".join(words[start:start + int(length) - 2]) for start, length in zip(starts, lengths, strict=True)]


def build_model(shape: Shape, tokenizer, folder: Path | None, device: str, dtype: torch.dtype):
    """A random-weight model of `shape` made on `device` in `dtype`, in eval mode; saved (safetensors) with `tokenizer`
    into `folder` when one is given."""
    import transformers

    special = {"vocab_size": shape.vocabulary, "pad_token_id": tokenizer.pad_token_id,
               "bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id}
    if shape.family == "gpt2":
        config, name = transformers.GPT2Config(n_embd=shape.hidden, n_layer=shape.layers, n_head=shape.heads,
                                               n_inner=shape.feed_forward, n_positions=1024, **special), "GPT2LMHeadModel"
    else:
        prefix, head = {"gpt_neox": ("GPTNeoX", "ForCausalLM"), "llama": ("Llama", "ForCausalLM"),
                        "bert": ("Bert", "ForMaskedLM")}[shape.family]
        config = getattr(transformers, f"{prefix}Config")(
            hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
            intermediate_size=shape.feed_forward, max_position_embeddings=MAX_TOKENS if prefix == "Bert" else 2048,
            **special)
        name = prefix + head
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = getattr(transformers, name)(config).eval()
    finally:
        torch.set_default_dtype(default)
    if folder is not None:
        model.save_pretrained(folder)  # transformers 5 writes safetensors only (safe_serialization is gone)
        tokenizer.save_pretrained(folder)
    return model


def matmul_weights(module: torch.nn.Module) -> int:
    """Weights of `module`'s matrix multiplies (Linear, GPT-2's Conv1D), the output embedding excluded."""
    return sum(m.weight.numel() for m in module.modules() if type(m).__name__ in ("Linear", "Conv1D"))


def causal_flops(model, shape: Shape, tokens: np.ndarray) -> float:
    """Forward FLOPs of the texts: weights, the LM head at every position, attention."""
    weights = matmul_weights(model.base_model)
    return float(np.sum(2 * weights * tokens + 2 * shape.hidden * shape.vocabulary * tokens
                        + 4 * shape.layers * shape.hidden * tokens.astype(float) ** 2))


def energy_flops(model, shape: Shape, tokens: np.ndarray, ids: list[str], k: int = 10) -> float:
    """Forward FLOPs of K masked copies of each text: the encoder at every position, the MLM head at the masked ones."""
    from lmaudit.signals.masks import random_masks

    encoder = matmul_weights(model.base_model)
    head = matmul_weights(model.cls) + shape.hidden * shape.vocabulary  # transform, then the decoder (tied)
    masked = np.array([random_masks(i, int(t) - 2, k, 0).shape[1] for i, t in zip(ids, tokens, strict=True)])
    return float(np.sum(k * (2 * encoder * tokens + 4 * shape.layers * shape.hidden * tokens.astype(float) ** 2)
                        + 2 * head * k * masked))
