"""Split a language model into its encoder (token ids -> last hidden states) and its LM head (hidden states ->
vocabulary logits), so that the head runs only where a log-probability is needed.

The head projects onto the whole vocabulary: 18-30% of a BERT's FLOPs and most of its activation memory, and for a
causal LM of 50k-150k tokens a batch x length x vocabulary tensor that does not fit in memory at all. A masked copy
needs the head at its l masked positions, a causal pass at chunks of positions.

Every split is checked once per model against the model's own forward pass on a short probe (`check_split`): a family
whose head does something the split leaves out (a logit soft-cap, a scale) is refused by name, never scored wrongly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch

from lmaudit.errors import InputError

Encoder = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Head = Callable[[torch.Tensor], torch.Tensor]


def _distilbert_head(model) -> Head:
    def head(hidden: torch.Tensor) -> torch.Tensor:
        return model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(hidden))))

    return head


def _deberta_v2_head(model) -> Head:
    if model.config.legacy:
        return model.cls
    return lambda hidden: model.lm_predictions(hidden, model.deberta.embeddings.word_embeddings)


# masked-LM class name -> its LM head, applied to the base model's last hidden states
MASKED_LM_HEADS: dict[str, Callable[[torch.nn.Module], Head]] = {
    "BertForMaskedLM": lambda model: model.cls,
    "RobertaForMaskedLM": lambda model: model.lm_head,
    "XLMRobertaForMaskedLM": lambda model: model.lm_head,
    "CamembertForMaskedLM": lambda model: model.lm_head,
    "DistilBertForMaskedLM": _distilbert_head,
    "AlbertForMaskedLM": lambda model: model.predictions,
    "DebertaV2ForMaskedLM": _deberta_v2_head,
    "ModernBertForMaskedLM": lambda model: (lambda hidden: model.decoder(model.head(hidden))),
}
# Config fields whose presence means the logits are more than the output embedding of the last hidden state.
LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def encoder_and_head(model: torch.nn.Module) -> tuple[Encoder, Head]:
    """(encoder, head): encoder(input_ids, attention_mask) -> (B, T, H) hidden states, head(hidden) -> logits.

    Causal LMs: the base model and the output embedding. Masked LMs: MASKED_LM_HEADS. Any other masked LM falls back
    to the whole model as its 'encoder' (its logits, B x T x V) and no head: the same numbers, the head's work at every
    position."""
    if any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in _class_names(model)):
        if any(getattr(model.config, field, None) not in (None, 1, 1.0) for field in LOGIT_TRANSFORMS):
            raise InputError(f"{type(model).__name__}: its logits are soft-capped or scaled after the LM head, which "
                             "lmaudit's chunked scorer does not reproduce; this architecture is not supported yet")
        base = model.base_model
        return (lambda ids, mask: base(input_ids=ids, attention_mask=mask).last_hidden_state), model.get_output_embeddings()
    head_of = MASKED_LM_HEADS.get(type(model).__name__)
    if head_of is None:
        return (lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits), (lambda logits: logits)
    base = model.base_model
    return (lambda ids, mask: base(input_ids=ids, attention_mask=mask).last_hidden_state), head_of(model)


def masked_lm_loss(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   labels: torch.Tensor) -> torch.Tensor:
    """A masked LM's training loss (mean cross-entropy over the labelled positions, -100 = none): the loss of the model's
    own forward pass, with the LM head run at the labelled positions only (about 15% of them). The head works position
    by position, so the loss is the same; most of a small model's work is the head over its vocabulary."""
    encoder, head = encoder_and_head(model)
    chosen = labels != -100
    logits = head(encoder(input_ids, attention_mask)[chosen])
    return torch.nn.functional.cross_entropy(logits.float(), labels[chosen])


def _class_names(model: torch.nn.Module) -> list[str]:
    return [type(model).__name__, *(model.config.architectures or [])]


@torch.inference_mode()
def check_split(model: torch.nn.Module, encoder: Encoder, head: Head, probe_ids: torch.Tensor) -> None:
    """Refuse a split whose logits differ from the model's own forward pass on `probe_ids` (1, T)."""
    mask = torch.ones_like(probe_ids)
    split = head(encoder(probe_ids, mask)).float()
    whole = model(input_ids=probe_ids, attention_mask=mask).logits.float()
    # Same operations in the same order in fp32; in 16-bit weights the two paths may round differently.
    relative = 1e-4 if model.get_input_embeddings().weight.dtype == torch.float32 else 2e-2
    if split.shape != whole.shape or (split - whole.to(split.device)).abs().max().item() > relative * max(1.0, whole.abs().max().item()):
        raise InputError(f"{type(model).__name__}: lmaudit's split of the model into encoder and LM head does not give "
                         "the model's own logits; this architecture is not supported yet (please report it)")


_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def checked_encoder_and_head(model: torch.nn.Module, probe_ids: torch.Tensor) -> tuple[Encoder, Head]:
    """encoder_and_head, checked against the whole model on `probe_ids` (1, T) the first time a model is scored."""
    if model not in _CHECKED:
        encoder, head = encoder_and_head(model)
        check_split(model, encoder, head, probe_ids.to(input_device(model)))
        _CHECKED[model] = (encoder, head)
    return _CHECKED[model]


# Vocabulary rows per tile of a CPU LM head's product. Written straight into (positions x vocabulary) rows, 200 KB
# apart for a 50k vocabulary, the product ran at 47-50% of the fp32 peak on 2 cores; tiles of 2,048 rows written to a
# small contiguous buffer and copied into place, at 68% on 667 positions and 87% on 2,048 (`benchmarks/causal_scoring.py
# --head`, the peak measured around the timed runs; tiles of 1,024-4,096 rows alike).
VOCABULARY_TILE = 2048


def tileable_head(head: Head) -> torch.nn.Linear | None:
    """The head as one fp32 linear layer on a CPU (a causal LM's output embedding), which `logits_in_tiles` runs
    faster; None for any other head, which runs as it is."""
    if isinstance(head, torch.nn.Linear) and head.weight.device.type == "cpu" and head.weight.dtype == torch.float32:
        return head
    return None


@torch.no_grad()
def logits_in_tiles(layer: torch.nn.Linear, hidden: torch.Tensor, out: torch.Tensor, tile: torch.Tensor) -> torch.Tensor:
    """layer(hidden), (P, V), written into out[:P] through `tile` (at least P x VOCABULARY_TILE): the same products,
    VOCABULARY_TILE vocabulary rows at a time (no gradient: for scoring)."""
    logits = out[: len(hidden)]
    for start in range(0, layer.out_features, VOCABULARY_TILE):
        stop = min(start + VOCABULARY_TILE, layer.out_features)
        block = tile[: len(hidden), : stop - start]
        if layer.bias is None:
            torch.mm(hidden, layer.weight[start:stop].T, out=block)
        else:
            torch.addmm(layer.bias[start:stop], hidden, layer.weight[start:stop].T, out=block)
        logits[:, start:stop] = block
    return logits


def input_device(model: torch.nn.Module) -> torch.device:
    """Where a model takes its token ids: its input embedding's device (the first of several under a device map)."""
    return model.get_input_embeddings().weight.device
