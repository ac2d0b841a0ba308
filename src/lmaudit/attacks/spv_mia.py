"""SPV-MIA (Fu et al., NeurIPS 2024): a memorised text is a local maximum of the target's likelihood, so small
changes to it cost more probability than they cost under a reference; the reference is the public base fine-tuned on
the target's own generations (models/self_prompt.py), which learns the target's distribution but none of its members.

    PV_M(x) = mean_n p_M(x~_n) - p_M(x),   p_M(x) = exp(-NLL_M(x))  (the per-token geometric-mean probability)
    score(x) = -(PV_target(x) - PV_reference(x))

as the authors' `feat_prepare`. The perturbations x~_n are the audit's neighbour texts, words replaced by a language
model's proposals (signals/neighbours.py; the fine-tune's base can propose them): the authors mask-fill with T5, which
lmaudit would have to download.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    NEIGHBOUR_LOSSES,
    SELF_PROMPT_LOSS,
    SELF_PROMPT_NEIGHBOUR_LOSSES,
    TARGET_LOSS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    score_frame,
)


def probabilistic_variation(loss: np.ndarray, perturbed_losses: np.ndarray) -> np.ndarray:
    """(n,) PV = mean over the perturbations of exp(-NLL) less exp(-NLL) of the text, from (n,) and (n, m) mean NLLs
    (nats per token)."""
    return np.exp(-np.asarray(perturbed_losses, float)).mean(axis=1) - np.exp(-np.asarray(loss, float))


def spv_mia_score(target_loss: np.ndarray, target_perturbed: np.ndarray, reference_loss: np.ndarray,
                  reference_perturbed: np.ndarray) -> np.ndarray:
    """(n,) -(PV_target - PV_reference), a difference of probabilities (dimensionless)."""
    return -(probabilistic_variation(target_loss, target_perturbed)
             - probabilistic_variation(reference_loss, reference_perturbed))


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    scores = spv_mia_score(data.values[TARGET_LOSS][rows], data.values[NEIGHBOUR_LOSSES][rows],
                           data.values[SELF_PROMPT_LOSS][rows], data.values[SELF_PROMPT_NEIGHBOUR_LOSSES][rows])
    return Scored(score_frame(data.samples[rows], scores),
                  calibration={"perturbations": data.values[NEIGHBOUR_LOSSES].shape[1]})


SPEC = AttackSpec(
    name="spv_mia",
    description="SPV-MIA: how much more probability the target than a self-prompt reference (the base fine-tuned on "
                "the target's generations) loses when a few of the text's words are replaced",
    reads=(TARGET_LOSS, SELF_PROMPT_LOSS, NEIGHBOUR_LOSSES, SELF_PROMPT_NEIGHBOUR_LOSSES),
    build=build,
    score_label="membership score = -(PV_target - PV_reference), PV = mean exp(-NLL) of the neighbours less the text's",
    paper="Fu et al. 2024, Membership inference attacks against fine-tuned large language models via self-prompt "
          "calibration (NeurIPS; arXiv 2311.06062)",
)
