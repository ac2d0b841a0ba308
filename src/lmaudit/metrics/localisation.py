"""Localisation: which kinds of token of the members' texts the model holds. Per token a member-likeness score (the
statistic the audit's values allow, `token_scores`); per class of token (a declared field, a number, a capitalised word,
another word, punctuation) the members' and the comparison texts' mean scores, their difference with a patient
bootstrap interval, how often the class is among each member text's highest-scoring tokens (enrichment), and a
one-sided patient-level permutation test, Bonferroni over the classes, that says which classes stand out.

Everything is pure numpy over flat token arrays (`ScoredTokens`); numbers out, no words (report/localisation.py words
them). The unit of every interval and test is the patient (`metrics/clusters.py`): one patient's notes share the
patient, so their tokens are not independent observations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lmaudit.attacks.base import REFERENCE_KL, REFERENCE_TOKEN_LOG_PROBS, TOKEN_LOG_PROBS, TOKEN_MEANS, TOKEN_STDS
from lmaudit.attacks.min_k_plus_plus import SMALLEST_STD
from lmaudit.metrics.auc_interval import strata_weights
from lmaudit.metrics.permutation_tests import relabellings

LEVEL = 0.05  # family-wise, over the classes tested
TOP_SHARE = 0.1  # each member text's highest-scoring tenth of its tokens
MAX_SPANS = 3  # the most top spans kept per member text


def token_scores(values: Mapping[str, np.ndarray]) -> tuple[str, np.ndarray] | None:
    """The best token statistic `values` allow, by name, and its (n, T) scores (higher = more member-like; NaN padding),
    or None without per-token log-probabilities: 'informia', InfoRMIA's s_t with the first reference's KL (nats); else
    'gain' over the first reference (nats); else 'calibrated', Min-K%++'s score (standard deviations).
    report/localisation.py words each."""
    if TOKEN_LOG_PROBS not in values:
        return None
    target = np.asarray(values[TOKEN_LOG_PROBS], dtype=float)
    if REFERENCE_TOKEN_LOG_PROBS in values:
        gain = target - np.asarray(values[REFERENCE_TOKEN_LOG_PROBS], dtype=float)
        if values.get(REFERENCE_KL) is not None:
            return "informia", gain + np.asarray(values[REFERENCE_KL], dtype=float)
        return "gain", gain
    if TOKEN_MEANS in values and TOKEN_STDS in values:
        stds = np.maximum(np.asarray(values[TOKEN_STDS], dtype=float), SMALLEST_STD)  # as Min-K%++ guards a sure token
        return "calibrated", (target - np.asarray(values[TOKEN_MEANS], dtype=float)) / stds
    return None


@dataclass(frozen=True)
class ScoredTokens:
    """Every classified, scored token of the compared texts, flat (N,): its score, class (an index into `classes`), text
    (an index into the texts), patient (cluster code from 0, `metrics/clusters.py`) and whether its text is a member's."""

    scores: np.ndarray
    classes: np.ndarray
    texts: np.ndarray
    patients: np.ndarray
    member: np.ndarray
    class_names: tuple[str, ...]
    patient_names: tuple[str, ...]


@dataclass(frozen=True)
class ClassStatistics:
    """One class of token: tokens and patients counted on each side; the members' and comparison's mean token score
    (tokens pooled, the statistic's unit) and their difference with a 95% stratified patient-bootstrap interval; the
    share of the members' top tokens in the class against its share of member tokens, and their ratio (enrichment);
    the one-sided permutation p-value (None: fewer than 2 patients with such tokens on a side) and whether the class
    stands out at the family-wise level."""

    name: str
    member_tokens: int
    comparison_tokens: int
    member_patients: int
    comparison_patients: int
    member_mean: float | None
    comparison_mean: float | None
    difference: float | None
    difference_ci: tuple[float, float] | None
    top_share: float
    token_share: float
    enrichment: float | None
    p_value: float | None
    stands_out: bool


@dataclass(frozen=True)
class PatientClass:
    """A member patient's class with the largest excess of its mean token score over the comparison's class mean."""

    patient: str
    token_class: str
    excess: float


@dataclass(frozen=True)
class Localisation:
    """What the members' texts hold, class by class: the rule's level and Bonferroni level per class, how many classes
    were tested, the permutations and bootstrap draws, each class's statistics, and each member patient's strongest
    class with the count of patients per class."""

    level: float
    per_class_level: float
    classes_tested: int
    permutations: int
    bootstrap: int
    classes: list[ClassStatistics]
    patients: list[PatientClass]
    patients_by_class: dict[str, int]


def patient_sums(tokens: ScoredTokens, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(patients,) sum of scores and count of the tokens under `mask`, by patient code."""
    size = len(tokens.patient_names)
    return (np.bincount(tokens.patients[mask], tokens.scores[mask], minlength=size),
            np.bincount(tokens.patients[mask], minlength=size).astype(float))


def welch_t(values: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Welch's t of mean(values[member]) - mean(values[~member]), for each row of a (B, n) boolean `member` (or one (n,)
    row); +-inf where both sides are constant and their means differ, 0 where they are equal (ties)."""
    member = np.atleast_2d(member).astype(float)
    other = 1.0 - member
    counts = member.sum(axis=1), other.sum(axis=1)
    means = [side @ values / n for side, n in zip((member, other), counts, strict=True)]
    squares = [(side * (values[None, :] - mean[:, None]) ** 2).sum(axis=1) / (n - 1)
               for side, mean, n in zip((member, other), means, counts, strict=True)]
    difference = means[0] - means[1]
    error = np.sqrt(squares[0] / counts[0] + squares[1] / counts[1])
    # a difference of a few ulps between equal means of constant sides is no difference
    tied = np.isclose(means[0], means[1], rtol=1e-12, atol=1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(error > 0, difference / np.where(error > 0, error, 1.0), np.sign(difference) * np.inf)
    return np.where(tied & (error == 0), 0.0, t)


def permutation_p(values: np.ndarray, member: np.ndarray, permutations: int, seed: int) -> float:
    """One-sided p-value that the members' per-patient mean exceeds the others': the share of `permutations` random
    relabellings of the patients (`permutation_tests.relabellings`, the observed labelling first) whose Welch t is at least
    the observed one.

    Relabelling whole patients is exact when member and comparison patients are exchangeable (drawn alike, as the null
    says), whatever the dependence within a patient, ties or skew; studentising keeps it asymptotically valid where the
    two sides' spreads differ (members with more notes have less variable means; Janssen 1997, Chung and Romano 2013),
    which a plain difference of means is not. With 8 comparison patients a t-distribution's tail at a Bonferroni level
    is not to be trusted; the permutation distribution needs no such approximation."""
    statistics = welch_t(values, relabellings(member, permutations, seed))
    observed = statistics[0]
    # the observed labelling drawn again sums in another order: its t may come out a few ulps lower
    slack = 1e-9 * max(1.0, abs(observed)) if np.isfinite(observed) else 0.0
    return float(np.sum(statistics >= observed - slack) / (permutations + 1))


def bootstrap_difference(sums: np.ndarray, counts: np.ndarray, member: np.ndarray, draws: int,
                         rng: np.random.Generator) -> tuple[float, float]:
    """95% percentile interval of mean(member tokens) - mean(comparison tokens), tokens pooled, from `draws` stratified
    resamples of whole patients (each side's patients with replacement, as many as it has: `auc_interval.strata_weights`)."""
    weights = strata_weights(member, np.arange(len(member)), draws, rng)
    pooled = [weights[:, side] @ sums[side] / (weights[:, side] @ counts[side]) for side in (member, ~member)]
    low, high = np.percentile(pooled[0] - pooled[1], [2.5, 97.5])
    return float(low), float(high)


def top_token_mask(scores: np.ndarray, texts: np.ndarray, fraction: float = TOP_SHARE) -> np.ndarray:
    """(N,) whether each token is among its text's ceil(fraction * count) highest scores (at least one per text; ties
    broken by the earlier position)."""
    order = np.lexsort((-scores, texts))  # by text, then by score, highest first; lexsort is stable
    ordered_texts = texts[order]
    starts = np.searchsorted(ordered_texts, ordered_texts, side="left")
    counts = np.bincount(texts)[ordered_texts]
    rank = np.arange(len(order)) - starts
    top = np.zeros(len(scores), dtype=bool)
    top[order] = rank < np.ceil(fraction * counts)
    return top


def class_statistics(tokens: ScoredTokens, index: int, top: np.ndarray, permutations: int, bootstrap: int,
                     rng: np.random.Generator) -> ClassStatistics:
    """The statistics of class `index` (its p-value not yet compared with the level)."""
    in_class = tokens.classes == index
    member_tokens, other_tokens = in_class & tokens.member, in_class & ~tokens.member
    sums, counts = patient_sums(tokens, in_class)
    present = counts > 0
    is_member = np.zeros(len(counts), dtype=bool)
    is_member[np.unique(tokens.patients[tokens.member])] = True
    sides = (present & is_member, present & ~is_member)
    means = [float(sums[side].sum() / counts[side].sum()) if side.any() else None for side in sides]
    difference = means[0] - means[1] if None not in means else None
    p_value = interval = None
    if min(side.sum() for side in sides) >= 2:
        patient_means = sums[present] / counts[present]
        p_value = permutation_p(patient_means, is_member[present], permutations, int(rng.integers(2**32)))
        interval = bootstrap_difference(sums[present], counts[present], is_member[present], bootstrap, rng)
    top_members = top & tokens.member
    top_share = float((top_members & in_class).sum() / max(top_members.sum(), 1))
    token_share = float(member_tokens.sum() / max(tokens.member.sum(), 1))
    return ClassStatistics(
        name=tokens.class_names[index], member_tokens=int(member_tokens.sum()), comparison_tokens=int(other_tokens.sum()),
        member_patients=int(sides[0].sum()), comparison_patients=int(sides[1].sum()), member_mean=means[0],
        comparison_mean=means[1], difference=difference, difference_ci=interval, top_share=top_share,
        token_share=token_share, enrichment=top_share / token_share if token_share > 0 else None, p_value=p_value,
        stands_out=False)


def strongest_classes(tokens: ScoredTokens, comparison_means: Sequence[float | None]) -> list[PatientClass]:
    """Per member patient, the class whose mean token score most exceeds the comparison's mean of that class (classes
    the comparison texts lack are left out), by patient name."""
    size, names = len(tokens.patient_names), len(tokens.class_names)
    key = tokens.patients * names + tokens.classes
    sums = np.bincount(key, tokens.scores, minlength=size * names).reshape(size, names)
    counts = np.bincount(key, minlength=size * names).reshape(size, names)
    reference = np.array([np.nan if mean is None else mean for mean in comparison_means])
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan) - reference[None, :]
    chosen = []
    for patient in np.unique(tokens.patients[tokens.member]):
        row = excess[patient]
        if np.isfinite(row).any():
            best = int(np.nanargmax(row))
            chosen.append(PatientClass(tokens.patient_names[patient], tokens.class_names[best], float(row[best])))
    return sorted(chosen, key=lambda entry: entry.patient)


def localise(tokens: ScoredTokens, permutations: int = 1999, bootstrap: int = 1000, seed: int = 0,
             level: float = LEVEL) -> Localisation:
    """Every class's statistics, the classes that stand out (permutation p-value at most level / classes tested:
    Bonferroni, so the chance that any class stands out when none differs is at most `level`), and each member
    patient's strongest class."""
    rng = np.random.default_rng(seed)
    top = top_token_mask(tokens.scores, tokens.texts)
    computed = [class_statistics(tokens, index, top, permutations, bootstrap, rng)
                for index in range(len(tokens.class_names))]
    tested = sum(entry.p_value is not None for entry in computed)
    per_class = level / max(tested, 1)
    classes = [ClassStatistics(**{**vars(entry), "stands_out": entry.p_value is not None and entry.p_value <= per_class})
               for entry in computed]
    patients = strongest_classes(tokens, [entry.comparison_mean for entry in classes])
    by_class = {name: sum(entry.token_class == name for entry in patients) for name in tokens.class_names}
    return Localisation(level=level, per_class_level=per_class, classes_tested=tested, permutations=permutations,
                        bootstrap=bootstrap, classes=classes, patients=patients, patients_by_class=by_class)


def top_spans(scores: np.ndarray, fraction: float = TOP_SHARE, max_spans: int = MAX_SPANS) -> list[tuple[int, int, float]]:
    """One text's (T,) token scores (NaN: not scored) -> its top spans: runs of consecutive tokens among its
    ceil(fraction * scored) highest scores, as (first token, last token + 1, highest score), the `max_spans` with the
    highest scores, in text order."""
    scored = np.flatnonzero(~np.isnan(scores))
    if not len(scored):
        return []
    kept = scored[np.argsort(-scores[scored], kind="stable")[: int(np.ceil(fraction * len(scored)))]]
    chosen = np.zeros(len(scores), dtype=bool)
    chosen[kept] = True
    runs, start = [], None
    for position in range(len(scores) + 1):
        inside = position < len(scores) and chosen[position]
        if inside and start is None:
            start = position
        elif not inside and start is not None:
            runs.append((start, position, float(np.max(scores[start:position]))))
            start = None
    return sorted(sorted(runs, key=lambda run: -run[2])[:max_spans])
