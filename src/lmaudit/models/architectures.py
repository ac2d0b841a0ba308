"""The models lmaudit trains from scratch: BERT masked LMs, GPT-2 causal LMs and classifiers (a BERT encoder or the
2-layer LSTM) of the named sizes, untrained."""

from __future__ import annotations

from collections.abc import Sequence

from lmaudit.models.lstm import LSTMClassifierConfig, LSTMForSequenceClassification
from lmaudit.models.recipe import SIZES


def mlm_config(size: str, vocab_size: int, max_length: int, pad_token_id: int, dropout: float = 0.1):
    """A BERT config of the named size."""
    from transformers import BertConfig

    layers, hidden, heads, feed_forward = SIZES[size]
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=feed_forward, max_position_embeddings=max_length, pad_token_id=pad_token_id,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
    )


def clm_config(size: str, vocab_size: int, max_length: int, tokenizer, dropout: float = 0.1):
    """A GPT-2 config of the named size (the same layer and width table as the MLMs)."""
    from transformers import GPT2Config

    layers, hidden, heads, _ = SIZES[size]
    return GPT2Config(
        vocab_size=vocab_size, n_positions=max_length, n_embd=hidden, n_layer=layers, n_head=heads,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id,
    )


def language_model(kind: str, size: str, tokenizer, max_length: int, dropout: float):
    """An untrained BERT masked LM (`kind` mlm) or GPT-2 causal LM (clm) of the named size for `tokenizer`."""
    from transformers import BertForMaskedLM, GPT2LMHeadModel

    if kind == "mlm":
        return BertForMaskedLM(mlm_config(size, len(tokenizer), max_length, tokenizer.pad_token_id, dropout))
    return GPT2LMHeadModel(clm_config(size, len(tokenizer), max_length, tokenizer, dropout))


def classifier_model(architecture: str, size: str, tokenizer, labels: Sequence[str], max_length: int, dropout: float):
    """An untrained classifier of the named architecture and size, with label names in its config."""
    from transformers import BertForSequenceClassification

    id2label = dict(enumerate(labels))
    label2id = {name: index for index, name in id2label.items()}
    if architecture == "bert":
        config = mlm_config(size, len(tokenizer), max_length, tokenizer.pad_token_id, dropout)
        config.update({"num_labels": len(labels), "id2label": id2label, "label2id": label2id})
        return BertForSequenceClassification(config)
    _, hidden, _, _ = SIZES[size]
    return LSTMForSequenceClassification(LSTMClassifierConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_layers=2, dropout=dropout, pad_token_id=tokenizer.pad_token_id,
        num_labels=len(labels), id2label=id2label, label2id=label2id,
    ))
