"""The 2-layer LSTM text classifier, as a transformers model class of our own registered with the Auto classes, so
that it saves as safetensors with save_pretrained and loads through the same code as any classifier, with no
`trust_remote_code`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput


class LSTMClassifierConfig(PretrainedConfig):
    """Embedding, stacked LSTM, mean over real tokens, linear layer to the labels."""

    model_type = "lmaudit-lstm"

    def __init__(self, vocab_size: int = 4000, hidden_size: int = 64, num_layers: int = 2, dropout: float = 0.1,
                 pad_token_id: int = 0, **kwargs):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = dropout


class LSTMForSequenceClassification(PreTrainedModel):
    """The 2-layer LSTM text classifier of Shejwalkar et al. (Section 3), at our tiny sizes."""

    config_class = LSTMClassifierConfig
    base_model_prefix = "lstm"

    def __init__(self, config: LSTMClassifierConfig):
        super().__init__(config)
        self.embeddings = torch.nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.lstm = torch.nn.LSTM(config.hidden_size, config.hidden_size, num_layers=config.num_layers,
                                  batch_first=True, dropout=config.dropout if config.num_layers > 1 else 0.0)
        self.dropout = torch.nn.Dropout(config.dropout)
        self.classifier = torch.nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def get_input_embeddings(self) -> torch.nn.Embedding:
        """The token embedding (transformers' accessor, through which lmaudit finds where inputs go)."""
        return self.embeddings

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        """Logits (batch x labels) and, with labels, the mean cross-entropy."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden, _ = self.lstm(self.embeddings(input_ids))
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        logits = self.classifier(self.dropout(pooled))
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


AutoConfig.register(LSTMClassifierConfig.model_type, LSTMClassifierConfig)
AutoModelForSequenceClassification.register(LSTMClassifierConfig, LSTMForSequenceClassification)


def swap_lstm(model: torch.nn.Module, private: bool) -> None:
    """Give an LSTM classifier Opacus's DPLSTM (private=True), whose per-sample gradients Opacus can compute,
    or the plain LSTM back; both hold the same weights under the same names and compute the same outputs."""
    from opacus.layers import DPLSTM

    if not isinstance(model, LSTMForSequenceClassification):
        return
    config = model.config
    kind = DPLSTM if private else torch.nn.LSTM
    replacement = kind(config.hidden_size, config.hidden_size, num_layers=config.num_layers, batch_first=True,
                       dropout=config.dropout if config.num_layers > 1 else 0.0)
    state = model.lstm.state_dict()
    if isinstance(model.lstm, DPLSTM):
        # In DP-SGD training its LSTM-named aliases are hidden from Opacus (make_private): read its cells' own weights.
        state = {model.lstm.old_to_new.get(name, name): value.detach() for name, value in model.lstm.named_parameters()}
    replacement.load_state_dict(state)
    model.lstm = replacement


@contextmanager
def plain_lstm(model: torch.nn.Module) -> Iterator[None]:
    """While the block runs, the plain LSTM in place of a DP-SGD run's DPLSTM (whose state holds every weight under
    two names, which safetensors refuses to save); the DPLSTM, which Opacus and the optimizer hold, is put back after."""
    private_lstm = getattr(model, "lstm", None)
    swap_lstm(model, private=False)
    try:
        yield
    finally:
        if private_lstm is not None:
            model.lstm = private_lstm
