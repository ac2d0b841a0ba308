"""Every signal lmaudit computes, in one list: adding a signal is one scorer module plus one entry here.

The command line's choices, the configuration's validation, the store's keys and the scoring runner
(`compute.py`) all read this list; nothing else spells a signal's name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lmaudit.errors import InputError
from lmaudit.signals.settings import DEFAULT_BATCH_TOKENS, SignalSettings, resolve_precision

ModelKind = Literal["mlm", "clm", "classifier", "any"]
Output = Literal["loss", "tokens", "log_probabilities", "features"]


@dataclass(frozen=True)
class SignalSpec:
    """A registered signal: what model it needs, what it outputs and in which unit, and where its scorer is.

    model_kind "any" means the model's own family (white-box features exist for every family).
    output "loss": one number per sample, lower = the model finds the sample likelier (audited as an LM);
    "tokens": per-token values of an LM (TOKEN_FIELDS), from which the sample's loss is their mean NLL;
    "log_probabilities": a classifier's log-probability of every label; "features": a feature vector.
    A scorer is named "module:function" and imported only when a model is scored, so listing the signals
    never imports torch. It is called as scorer(model, tokenizer, texts, sample_ids, settings, progress)
    and returns (values, encoded samples); `joint_scorer` does the same for several models that share a
    tokenizer, on the same batches. A label-dependent signal of a classifier (its gradient) also takes the
    samples' label indices, `labels=`, and is stored under the text and the label. `loss_signal`: for a per-token
    signal, the signal that gives only its loss (for passes that need no more). `squared_gradient_norms`: the feature
    vector holds squared gradient norms, whose roots are what GradNorm reads.
    """

    name: str
    model_kind: ModelKind
    output: Output
    unit: str
    description: str
    scorer: str
    joint_scorer: str | None = None
    default_normalize: Literal["sum", "mean"] | None = None
    needs_attention: bool = False
    label_dependent: bool = False
    loss_signal: str | None = None
    squared_gradient_norms: bool = False

    def scoring_function(self, joint: bool = False) -> Callable:
        """The scorer (or the joint scorer) itself."""
        module, function = (self.joint_scorer if joint else self.scorer).split(":")
        return getattr(importlib.import_module(module), function)


SIGNALS: tuple[SignalSpec, ...] = (
    SignalSpec(
        "mlm_energy", "mlm", "loss", "nats per sample (sum over masked tokens, mean over K masks)",
        "MLM energy (Mireshghallah et al. Eq. 2): NLL of 15% of the tokens, masked, averaged over K paired masks",
        scorer="lmaudit.signals.mlm:mlm_signal", joint_scorer="lmaudit.signals.mlm:mlm_signals", default_normalize="sum",
    ),
    SignalSpec(
        "mlm_pll", "mlm", "loss", "nats per token",
        "pseudo-log-likelihood (Mireshghallah et al. A.3.2): each token masked once, mean NLL",
        scorer="lmaudit.signals.mlm:mlm_signal", joint_scorer="lmaudit.signals.mlm:mlm_signals", default_normalize="mean",
    ),
    SignalSpec(
        "mlm_tokens", "mlm", "tokens", "nats per token (each token's log-probability, masked alone)",
        "masked-LM tokens: the pseudo-likelihood's per-position terms, each token's log-probability masked alone, and the "
        "mean and standard deviation of the log-probability under the predictive distribution at its position",
        scorer="lmaudit.signals.mlm:mlm_token_values", default_normalize="mean", loss_signal="mlm_pll",
    ),
    SignalSpec(
        "clm_loss", "clm", "loss", "nats per token",
        "causal-LM loss (Jagannatha et al.): mean NLL of each next token given the tokens before it",
        scorer="lmaudit.signals.causal:causal_lm_loss", default_normalize="mean",
    ),
    SignalSpec(
        "clm_tokens", "clm", "tokens", "nats per token (each token's log-probability; the loss is their mean NLL)",
        "causal-LM tokens: each next token's log-probability, and the mean and standard deviation of the log-probability "
        "under the predictive distribution at its position, from the clm_loss pass",
        scorer="lmaudit.signals.causal:causal_token_values", default_normalize="mean", loss_signal="clm_loss",
    ),
    SignalSpec(
        "classifier", "classifier", "log_probabilities", "nats (log-probability of each label)",
        "a sequence classifier's log-probability of every label, from which Shejwalkar et al.'s features are derived",
        scorer="lmaudit.signals.classifier:class_log_probabilities",
    ),
    SignalSpec(
        "attention_concentration", "any", "features", "nats (sum of a log a over an attention row; <= 0)",
        "white-box (Jagannatha et al.): layers x heads x mean, median, 5th and 95th percentile of attention concentration",
        scorer="lmaudit.signals.whitebox:attention_features", needs_attention=True,
    ),
    SignalSpec(
        "gradient_norms", "any", "features", "squared L2 norm of a gradient, one per parameter tensor",
        "white-box (Jagannatha et al.): squared norm of the gradient of the sample's own loss for each parameter tensor",
        scorer="lmaudit.signals.whitebox:gradient_features", label_dependent=True, squared_gradient_norms=True,
    ),
)
_BY_NAME = {spec.name: spec for spec in SIGNALS}
# The signal an audit reads when none is given, by the target's family (models/config_json.py:model_family).
DEFAULT_SIGNALS = {"mlm": "mlm_energy", "clm": "clm_tokens", "classifier": "classifier"}
# The per-token signal of each language-model family: every token's own log-probability (masked alone, for an MLM).
TOKEN_SIGNALS = {"mlm": "mlm_tokens", "clm": "clm_tokens"}


def signal_names(*outputs: Output) -> list[str]:
    """Names of the signals with one of the given outputs (all signals when none is given)."""
    return [spec.name for spec in SIGNALS if not outputs or spec.output in outputs]


def signal_spec(name: str) -> SignalSpec:
    """The registered signal of that name, or an InputError that lists the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise InputError(f"unknown signal '{name}'; use one of {', '.join(_BY_NAME)}") from None


def resolved(settings: SignalSettings, device_type: str = "cpu") -> SignalSettings:
    """Fill the defaults that depend on the signal or the hardware, so stored values are keyed by what was
    computed: normalisation (Eq. 2 sums, A.3.2 averages) and 'auto' precision; and the device's token budget of a batch
    where none is given."""
    spec = signal_spec(settings.signal)
    return settings.model_copy(update={"normalize": settings.normalize or spec.default_normalize,
                                       "precision": resolve_precision(settings.precision, device_type),
                                       "batch_tokens": settings.batch_tokens or DEFAULT_BATCH_TOKENS.get(device_type, 4096)})
