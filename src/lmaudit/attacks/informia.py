"""InfoRMIA (Tao and Shokri, ICLR 2026; arXiv 2510.05582): RMIA's pairwise count against population samples replaced
by a continuous statistic, the log of how much more likely the target finds x than a reference does, less what the
target gains on average over a population. Token level, as the authors' code (`taojiashu/mimir`,
`mimir/attacks/info_rmia.py`, checked in wave4-methods.md §2), the population is the reference's next-token distribution:

    s_t = lp_target(x_t) - lp_reference(x_t) + KL(p_reference(. | x_<t) || p_target(. | x_<t))   (nats),

whose largest values mark the memorised tokens (`token_scores`), and a text's score is the mean of its s_t (the code's
default aggregate; it returns minus that only because MIMIR's ROC negates scores). The KL term needs both models' full
next-token distributions at each position: the audit stores it (REFERENCE_KL) only when asked (--reference-kl, one
joint pass of the target and the first reference), and `informia_tokens` (TOKEN_SPEC) is then this token-level score.

`informia` (SPEC), which needs no such pass, is the sequence level: the code's InfoRMIASeq statistic,
mean_t (lp_target - lp_reference) per token (nats), less the population term of the paper's composite test as a
third-party port writes it (unverified against the paper's equation):

    InfoRMIA(x) = r(x) - sum_z w_z r(z),  r = mean_t (lp_target - lp_reference),  w_z proportional to p_reference(z),

over the population samples z only, with p_reference(z) = exp(mean_t lp_reference), the per-token geometric-mean
probability (as RMIA's P(x)). The term is one constant per audit: texts rank exactly as the likelihood ratio against the
first reference, and a score above 0 means more member-like than the population's reference-weighted average.

Departures from the code: the reference scores the target's very tokens (the code tokenizes separately with each model
and cuts both to the shorter length), read from the first reference only when its token ids equal the target's (else
the attacks are skipped with that reason in one line); with several references only the first is used (the code
averages their log-probabilities, which makes its KL term inexact); a text with no scored token scores 0, not NaN.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from lmaudit.attacks.base import (
    REFERENCE_KL,
    REFERENCE_TOKEN_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    evaluated_rows,
    score_frame,
)
from lmaudit.data.roles import POPULATION


def token_scores(target_log_probs: np.ndarray, reference_log_probs: np.ndarray, reference_kl: np.ndarray) -> np.ndarray:
    """(n, T) InfoRMIA token scores s_t = lp_target - lp_reference + KL(p_reference || p_target) at each position
    (nats), from NaN-padded (n, T) arrays; higher = likelier memorised."""
    return (np.asarray(target_log_probs, dtype=float) - np.asarray(reference_log_probs, dtype=float)
            + np.asarray(reference_kl, dtype=float))


def mean_per_token(values: np.ndarray) -> np.ndarray:
    """(n,) mean of each row's non-NaN entries of an (n, T) array (its unit per token); 0 for a row with none."""
    values = np.asarray(values, dtype=float)
    counts = np.sum(~np.isnan(values), axis=1)
    return np.divide(np.nansum(values, axis=1), counts, out=np.zeros(len(values)), where=counts > 0)


def population_term(log_ratios: np.ndarray, reference_log_likelihoods: np.ndarray) -> float:
    """sum_z w_z r(z) over population texts (nats per token), w_z proportional to exp(reference_log_likelihoods(z))."""
    return float(np.dot(softmax(np.asarray(reference_log_likelihoods, dtype=float)), log_ratios))


def build(data: AttackInput) -> Scored | NotRun:
    """Scores of the audited and population samples, less the population term."""
    target = np.asarray(data.values[TOKEN_LOG_PROBS], dtype=float)
    reference = np.asarray(data.values[REFERENCE_TOKEN_LOG_PROBS], dtype=float)
    # a text with no scored token has no probability to weigh it by: it stays out of the population term
    population = (data.samples["role"].to_numpy() == POPULATION) & np.any(~np.isnan(target - reference), axis=1)
    if not population.any():
        return NotRun("needs population samples with at least one scored token, to calibrate against")
    ratios = mean_per_token(target - reference)
    term = population_term(ratios[population], mean_per_token(reference)[population])
    rows = evaluated_rows(data)
    return Scored(score_frame(data.samples[rows], ratios[rows] - term),
                  calibration={"population_term": term, "population": int(population.sum()),
                               "token_kl": "left out: the sequence-level statistic (informia_tokens adds it, with --reference-kl)"})


SPEC = AttackSpec(
    name="informia",
    description="InfoRMIA (sequence level): the target's mean per-token log-likelihood gain over the reference, less "
                "the population's reference-weighted mean gain",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, REFERENCE_TOKEN_LOG_PROBS),
    build=build,
    fitted_on=(POPULATION,),
    score_label="membership score = mean_t (lp_target - lp_reference) - the population's weighted mean (nats per token)",
    paper="Tao and Shokri 2026, Information-theoretic membership inference for granular quantification of memorization "
          "(ICLR; arXiv 2510.05582) and the first author's MIMIR fork",
)


def build_tokens(data: AttackInput) -> Scored:
    """Scores of the audited and population samples: mean_t s_t, s_t = lp_target - lp_reference + KL(p_reference ||
    p_target) at each scored token (`token_scores`; nats per token, higher = likelier a member, 0 for a text with no
    scored token), against the first reference only, whatever the number of references."""
    rows = evaluated_rows(data)
    scores = token_scores(data.values[TOKEN_LOG_PROBS][rows], data.values[REFERENCE_TOKEN_LOG_PROBS][rows],
                          data.values[REFERENCE_KL][rows])
    return Scored(score_frame(data.samples[rows], mean_per_token(scores)),
                  calibration={"aggregate": "mean of s_t over the scored tokens (0 for a text with none)",
                               "references": "the first only"})


TOKEN_SPEC = AttackSpec(
    name="informia_tokens",
    description="InfoRMIA (token level, the authors' code): per token, the target's log-likelihood gain over the "
                "reference plus KL(reference || target) of their next-token distributions, averaged over the text",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, REFERENCE_TOKEN_LOG_PROBS, REFERENCE_KL),
    build=build_tokens,
    score_label="membership score = mean_t (lp_target - lp_reference + KL(p_reference || p_target)) (nats per token)",
    paper=SPEC.paper,
)
SPECS = (SPEC, TOKEN_SPEC)
