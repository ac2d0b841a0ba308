"""Train a WordPiece tokenizer and a small BERT-style masked LM from scratch, saved as safetensors."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SIZES = {
    # layers, hidden, heads, feed-forward width
    "tiny": (2, 64, 2, 256),
    "small": (4, 256, 4, 1024),
}


def train_tokenizer(texts: Sequence[str], vocab_size: int = 4000, max_length: int = 128):
    """A lower-casing WordPiece tokenizer trained on `texts`, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    core.normalizer = normalizers.BertNormalizer(lowercase=True)
    core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    core.decoder = decoders.WordPiece()
    core.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS))
    cls_id, sep_id = core.token_to_id("[CLS]"), core.token_to_id("[SEP]")
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_length,
    )


def mlm_config(size: str, vocab_size: int, max_length: int, pad_token_id: int):
    """A BERT config of the named size."""
    from transformers import BertConfig

    layers, hidden, heads, feed_forward = SIZES[size]
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=feed_forward, max_position_embeddings=max_length, pad_token_id=pad_token_id,
    )


@dataclass
class TrainingSummary:
    """What a training run did, written next to the model as lmaudit_training.json."""

    kind: str
    size: str
    n_samples: int
    epochs: int
    seed: int
    batch_size: int
    learning_rate: float
    max_length: int
    final_train_loss: float
    epoch_losses: list[float]


def train_mlm(
    texts: Sequence[str],
    out_dir: str | Path,
    tokenizer_dir: str | Path | None = None,
    size: Literal["tiny", "small"] = "tiny",
    epochs: int = 30,
    seed: int = 0,
    batch_size: int = 32,
    learning_rate: float = 2e-3,
    max_length: int = 128,
    vocab_size: int = 4000,
    progress: bool = False,
) -> TrainingSummary:
    """Train a masked LM on `texts` (15% masking, 80/10/10) and save it with its tokenizer."""
    from transformers import AutoTokenizer, BertForMaskedLM, DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

    torch.manual_seed(seed)
    if tokenizer_dir is not None:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    else:
        tokenizer = train_tokenizer(texts, vocab_size, max_length)
    model = BertForMaskedLM(mlm_config(size, len(tokenizer), max_length, tokenizer.pad_token_id))
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=seed)
    order_rng = np.random.default_rng(seed)
    steps_per_epoch = math.ceil(len(encoded) / batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, steps_per_epoch, steps_per_epoch * epochs)
    epoch_losses = []
    model.train()
    for _ in tqdm(range(epochs), desc=f"training {size} MLM", unit="epoch", disable=not progress or None):
        order = order_rng.permutation(len(encoded))
        losses = []
        for start in range(0, len(order), batch_size):
            batch = collator([{"input_ids": encoded[i]} for i in order[start : start + batch_size]])
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
        epoch_losses.append(float(np.mean(losses)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    summary = TrainingSummary(
        kind="mlm", size=size, n_samples=len(encoded), epochs=epochs, seed=seed, batch_size=batch_size,
        learning_rate=learning_rate, max_length=max_length, final_train_loss=epoch_losses[-1], epoch_losses=epoch_losses,
    )
    (out / "lmaudit_training.json").write_text(json.dumps(asdict(summary), indent=2))
    return summary
