"""RMIA (Zarifzadeh, Liu, Shokri 2024), offline: the target's likelihood of x relative to the reference models'
average, compared pairwise against the same ratio of population samples.

P(x | model) = exp(-loss), the per-token geometric-mean probability for the causal and pseudo-likelihood signals (the
whole-sample probability of the masked tokens for the MLM energy). Offline (references never trained on x), the paper
estimates P(x) = ((1 + a) * mean_i P(x | reference_i) + (1 - a)) / 2. Its a < 1 assumes member probabilities near 1,
as a classifier's confidences are; a language model's per-token probabilities are far from 1 and a < 1 drowns the
reference term in the constant, so lmaudit's default is a = 1 (P(x) = the references' mean); --rmia-offline-a sets it.
The score of x is the fraction of population samples z (other than x) with LR(x, z) = (P(x|target) / P(x)) /
(P(z|target) / P(z)) >= gamma (1 by default).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from lmaudit.attacks.base import (
    REFERENCE_LOSSES,
    TARGET_LOSS,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    evaluated_rows,
    score_frame,
)
from lmaudit.data.roles import POPULATION


def log_likelihood_ratio(target_loss: np.ndarray, reference_losses: np.ndarray, offline_a: float) -> np.ndarray:
    """log(P(x | target) / P(x)) per sample, with P(x) the offline estimate from the references' losses (n, R)."""
    references = np.asarray(reference_losses, dtype=float)
    log_mean_reference = logsumexp(-references, axis=1) - np.log(references.shape[1])
    log_constant = np.log1p(-offline_a) if offline_a < 1 else -np.inf
    log_prior = np.logaddexp(np.log1p(offline_a) + log_mean_reference, log_constant) - np.log(2)
    return -np.asarray(target_loss, dtype=float) - log_prior


def rmia_score(log_ratio: np.ndarray, population_log_ratio: np.ndarray, gamma: float,
               is_population: np.ndarray) -> np.ndarray:
    """Fraction of population samples z with log_ratio(x) - log_ratio(z) >= log(gamma), leaving x itself out when it is
    one of them (`is_population`, aligned with `log_ratio`): higher = likelier a member."""
    ordered = np.sort(population_log_ratio)
    beaten = np.searchsorted(ordered, np.asarray(log_ratio) - np.log(gamma), side="right").astype(float)
    counted = np.full(len(log_ratio), float(len(ordered)))
    if gamma <= 1:  # x against itself: ratio 1 >= gamma, counted above; take it out
        beaten -= is_population
    counted -= is_population
    return beaten / counted


def build(data: AttackInput) -> Scored | NotRun:
    """Scores of the audited and population samples, against the population."""
    roles = data.samples["role"].to_numpy()
    population = roles == POPULATION
    if population.sum() < 2:
        return NotRun("needs population samples (at least 2) to compare each sample against")
    settings = data.settings
    ratio = log_likelihood_ratio(data.values[TARGET_LOSS], data.values[REFERENCE_LOSSES], settings.rmia_offline_a)
    rows = evaluated_rows(data)
    scores = rmia_score(ratio[rows], ratio[population], settings.rmia_gamma, population[rows])
    return Scored(score_frame(data.samples[rows], scores),
                  calibration={"offline_a": settings.rmia_offline_a, "gamma": settings.rmia_gamma,
                               "references": int(np.shape(data.values[REFERENCE_LOSSES])[1]),
                               "compared_with": "population samples", "probability": "exp(-loss)"})


SPEC = AttackSpec(
    name="rmia",
    description="the target's likelihood over the references' mean, compared pairwise with population samples' (the "
                "share of them it beats); offline, works with one reference and better with several",
    reads=(TARGET_LOSS, REFERENCE_LOSSES),
    build=build,
    fitted_on=(POPULATION,),
    score_label="membership score = share of population samples beaten",
    paper="Zarifzadeh, Liu, Shokri 2024, Low-cost high-power membership inference attacks (ICML)",
)
