"""Split a masked LM into its encoder and its LM head, so the head runs only on masked positions.

The head projects onto the whole vocabulary (18-30% of a BERT's FLOPs and most of its activation
memory); a masked copy needs it at l positions, not at all T.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _distilbert_head(model) -> Callable[[torch.Tensor], torch.Tensor]:
    def head(hidden: torch.Tensor) -> torch.Tensor:
        return model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(hidden))))

    return head


# model class name -> the LM head applied to the encoder's last hidden states
HEADS: dict[str, Callable] = {
    "BertForMaskedLM": lambda model: model.cls,
    "RobertaForMaskedLM": lambda model: model.lm_head,
    "XLMRobertaForMaskedLM": lambda model: model.lm_head,
    "CamembertForMaskedLM": lambda model: model.lm_head,
    "DistilBertForMaskedLM": _distilbert_head,
}


def masked_position_logits(model) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """A function (input_ids, rows, cols) -> logits at those positions only, shape (positions, vocab).

    Families outside HEADS fall back to the full model's logits, gathered afterwards (same numbers,
    more work).
    """
    head_of = HEADS.get(type(model).__name__)
    if head_of is None:
        def full(input_ids: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
            return model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits[rows, cols]

        return full
    encoder, head = model.base_model, head_of(model)

    def gathered(input_ids: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        hidden = encoder(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state
        return head(hidden[rows, cols])

    return gathered
