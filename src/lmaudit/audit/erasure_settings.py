"""What `lmaudit erasure` is given besides an audit's settings: the models before and after erasure (and retrained
without the erased data), the three sets of texts, and the test's level and equivalence margin. No torch."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lmaudit.models.source import QUANTIZATIONS, ModelSource


class ErasureSettings(BaseModel):
    """The erasure audit's own settings: model folders (each with an optional PEFT adapter), the forget, holdout and
    retain files, the declared attack (None: the loss, or the likelihood ratio with references), the family-wise level
    of the verdict, the equivalence margin (in AUC) and the quantizations the after model is probed in."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    before: str
    before_adapter: str | None = None
    after: str
    after_adapter: str | None = None
    retrained: str | None = None
    retrained_adapter: str | None = None
    forget: str
    holdout: str
    retain: str | None = None
    attack: str | None = None
    level: float = Field(0.05, gt=0, lt=0.5, description="the verdict's false-alarm level, family-wise over its tests")
    margin: float = Field(0.05, gt=0, lt=0.5, description="the equivalence margin: how far (in AUC) the after model "
                                                          "may be from the retrained one, or from 1/2, and count as it")
    quantized: tuple[Literal[QUANTIZATIONS], ...] = Field(
        ("rtn8", "rtn4"), description="the after model is also tested loaded in each of these quantizations, which "
                                      "can bring forgotten data back (Zhang et al., ICLR 2025)")
    relearn_epochs: int = Field(1, ge=0, description="epochs of the relearning probe: the after model fine-tuned on "
                                                     "half of every subject's texts, tested on the other half (0: none)")
    relearn_learning_rate: float | None = Field(None, gt=0, description="the relearning probe's AdamW learning rate "
                                                                        "(default: fine-tuning's, 5e-5)")
    relearn_public: str | None = Field(None, description="related public text (none of the subjects'): the after model "
                                                         "is also fine-tuned on it and tested on every text")
    extraction_tokens: int = Field(16, ge=0, description="extraction estimate of a causal LM: each text's first so many "
                                                         "tokens given, its next so many reproduced? (0: none)")

    def sources(self) -> dict[str, ModelSource]:
        """Each model by its part: before, after, and retrained when given."""
        models = {"before": ModelSource(self.before, self.before_adapter),
                  "after": ModelSource(self.after, self.after_adapter)}
        if self.retrained:
            models["retrained"] = ModelSource(self.retrained, self.retrained_adapter)
        return models

    def probes(self) -> list[str]:
        """The names of the models tested for still holding the forget set: the after model, each quantized, and the
        after model relearnt on half of every subject's texts and on the public text (without an adapter: the probe
        fine-tunes whole weights)."""
        relearned = []
        if self.relearn_epochs and self.after_adapter is None:
            relearned = ["after_relearned", *(["after_relearned_public"] if self.relearn_public else [])]
        return ["after", *(f"after_{quantization}" for quantization in self.quantized), *relearned]
