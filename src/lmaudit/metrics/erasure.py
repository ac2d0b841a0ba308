"""Was an erased subject forgotten? The numbers of an erasure audit, over membership scores (higher = more likely a
member) of the erased subjects' texts (forget) and of never-trained texts drawn alike (holdout). No torch.

Every test relabels whole subjects (patients, users; a text without a group id alone): its null is that the forget
subjects are exchangeable with the holdout subjects under the score tested, which is what "nothing of them remains"
means when the two sets were drawn alike. Each statistic is an AUC standardised by its Mann-Whitney null standard
deviation, sqrt((n + m + 1) / (12 n m)) for n and m texts, so that a subject with few texts, whose AUC varies more,
does not stand out by chance: the pooled test's is the forget texts' AUC against the holdout texts, recomputed under
random relabellings; one subject's is its texts' AUC against everyone else's, ranked among the holdout subjects' own.
Intervals resample subjects of each set with replacement, and the models' AUCs under one draw are paired
(`bootstrap_aucs` draws the same subjects for the same seed whatever the scores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata
from scipy.stats import t as student_t

from lmaudit.metrics.auc_interval import auc_interval, bootstrap_aucs
from lmaudit.metrics.permutation_tests import auc_statistics, max_t_adjusted, relabellings
from lmaudit.metrics.results import Interval, Number
from lmaudit.metrics.roc import auc

MIN_EQUIVALENCE_SUBJECTS = 5  # fewer erased subjects: the bootstrap cannot see how much subjects differ


@dataclass(frozen=True)
class SubjectSeparation:
    """One forget subject's texts against the holdout texts: their AUC, and the share of the holdout subjects (and
    itself) whose standardised AUC is at least (`p_higher`) or at most (`p_lower`) its own."""

    subject: str
    texts: int
    auc: Number
    p_higher: Number
    p_lower: Number


@dataclass(frozen=True)
class Separation:
    """The forget texts against the holdout texts under one score: the AUC with its 95% interval, one-sided permutation
    p-values for forget scoring higher (still held) and lower (over-unlearnt), and each subject's own test."""

    score: str
    auc: Number
    auc_ci: Interval
    p_higher: Number
    p_lower: Number
    forget_subjects: int
    holdout_subjects: int
    permutations: int
    subjects: list[SubjectSeparation]


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests that the after model's AUC is within `margin` of the reference's (the retrained model's,
    or 1/2 for a subject never trained on): equivalent where the (1 - 2 level) interval of the difference lies inside
    (-margin, margin). `before_equivalent`: the same test on the model before erasure, whose passing means the test
    could not have told a held subject either."""

    reference: str
    margin: float
    level: float
    difference: Number
    difference_ci: Interval
    equivalent: bool
    before_equivalent: bool | None


@dataclass(frozen=True)
class Change:
    """A quantity before and after erasure and the change (after - before) with its 95% interval, subjects resampled."""

    quantity: str
    before: Number
    after: Number
    change: Number
    change_ci: Interval


@dataclass(frozen=True)
class PrivLeak:
    """MUSE's PrivLeak of the after model against the retrained one (percent) and its 95% interval."""

    value: Number
    ci: Interval


def subject_codes(groups: np.ndarray) -> np.ndarray:
    """(n,) integer codes from 0, one per distinct subject id."""
    return np.unique(np.asarray(groups, dtype=str), return_inverse=True)[1].ravel()


def standardised_aucs(scores: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per subject (code): the AUC of its texts against every other text, and that AUC's distance from 1/2 in
    Mann-Whitney null standard deviations, sqrt((n + m + 1) / (12 n m)) for n own and m other texts."""
    ranks = rankdata(scores)
    sizes = np.bincount(codes).astype(float)
    others = len(scores) - sizes
    own_pairs = np.bincount(codes, weights=ranks) - sizes * (sizes + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        aucs = own_pairs / (sizes * others)
        spread = np.sqrt((sizes + others + 1) / (12 * sizes * others))
    return aucs, (aucs - 0.5) / spread


def subject_statistics(scores: np.ndarray, groups: np.ndarray, is_forget: np.ndarray, subject: str) -> np.ndarray:
    """(H + 1,) the standardised AUC of `subject` (first), then of each holdout subject in the order of their ids, each
    computed over the subject's texts with every holdout text (a NaN score: a text this probe does not test): under
    the null the subject's rank among them is uniform."""
    rows = ((groups == subject) | ~is_forget) & np.isfinite(scores)
    codes = subject_codes(groups[rows])
    own = codes[groups[rows] == subject][0]
    _, z = standardised_aucs(scores[rows], codes)
    return np.r_[z[own], np.delete(z, own)]


def pooled_statistics(scores: np.ndarray, groups: np.ndarray, is_forget: np.ndarray, permutations: int,
                      seed: int) -> np.ndarray:
    """(permutations + 1,) the forget texts' standardised AUC against the holdout texts (first), then under random
    relabellings of as many subjects as forget ones, each standardised with the texts its chosen subjects have. The
    relabellings depend on the subjects and the seed only, so that every probe is tested under the same ones, its NaN
    scores (texts it does not test) left out."""
    codes = subject_codes(groups)
    forget_subject = np.zeros(codes.max() + 1, bool)
    forget_subject[codes[is_forget]] = True
    members = relabellings(forget_subject, permutations, seed)
    tested = np.isfinite(scores)
    forget_texts = members @ np.bincount(codes[tested], minlength=len(forget_subject)).astype(float)
    holdout_texts = tested.sum() - forget_texts
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((auc_statistics(scores[tested], codes[tested], members) - 0.5)
                / np.sqrt((forget_texts + holdout_texts + 1) / (12 * forget_texts * holdout_texts)))


def at_least(statistics: np.ndarray) -> float:
    """The share of a null's values (the observed one first, and among them) at least the observed one."""
    return float((statistics >= statistics[0] - 1e-12).mean())


def subject_separations(scores: np.ndarray, groups: np.ndarray, is_forget: np.ndarray) -> list[SubjectSeparation]:
    """Each forget subject's test (module docstring), both directions."""
    out = []
    for subject in dict.fromkeys(groups[is_forget]):
        z = subject_statistics(scores, groups, is_forget, subject)
        rows = groups == subject
        out.append(SubjectSeparation(str(subject), int(rows.sum()), auc(rows[rows | ~is_forget],
                                                                         scores[rows | ~is_forget]),
                                     at_least(z), at_least(-z)))
    return out


def separation(score: str, scores: np.ndarray, groups: np.ndarray, is_forget: np.ndarray, permutations: int = 1999,
               seed: int = 0, bootstrap: int = 1000) -> Separation:
    """The forget texts against the holdout texts under `scores` (module docstring; NaN: a text not tested); `groups`
    names each text's subject (a missing id made unique beforehand), `is_forget` marks the forget texts."""
    scores, groups, is_forget = np.asarray(scores, float), np.asarray(groups, dtype=str), np.asarray(is_forget, bool)
    tested = np.isfinite(scores)
    scores, groups, is_forget = scores[tested], groups[tested], is_forget[tested]
    statistics = pooled_statistics(scores, groups, is_forget, permutations, seed)
    observed = auc(is_forget, scores)
    interval = auc_interval(is_forget, scores, observed, subject_codes(groups), bootstrap, seed=seed)
    forget_subjects = len(set(groups[is_forget]))
    return Separation(score, observed, interval, at_least(statistics), at_least(-statistics), forget_subjects,
                      len(set(groups)) - forget_subjects, permutations, subject_separations(scores, groups, is_forget))


def privleak(auc_after: float | np.ndarray, auc_retrained: float | np.ndarray) -> float | np.ndarray:
    """MUSE's PrivLeak in percent, as OpenUnlearning computes it: ((1 - AUC_after) - (1 - AUC_retrained)) /
    (1 - AUC_retrained) x 100; about -100 when nothing was unlearnt, 0 as retrained, positive when over-unlearnt."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((1 - np.asarray(auc_after)) - (1 - np.asarray(auc_retrained))) / (1 - np.asarray(auc_retrained)) * 100


def paired_aucs(scores: dict[str, np.ndarray], groups: np.ndarray, is_forget: np.ndarray, bootstrap: int,
                seed: int) -> dict[str, np.ndarray]:
    """(bootstrap,) AUCs of the forget against the holdout texts under each score, each draw resampling the same
    subjects for every score."""
    codes = subject_codes(groups)
    return {name: bootstrap_aucs(is_forget, values, codes, bootstrap, seed) for name, values in scores.items()}


def percentile_interval(draws: np.ndarray, level: float) -> Interval:
    """The central `level` interval of bootstrap draws (NaN draws dropped; NaNs where none is left)."""
    finite = draws[np.isfinite(draws)]
    if not len(finite):
        return (math.nan, math.nan)
    tail = (1 - level) / 2
    return float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))


def privleak_interval(after: np.ndarray, retrained: np.ndarray, groups: np.ndarray, is_forget: np.ndarray,
                      bootstrap: int = 1000, seed: int = 0) -> PrivLeak:
    """PrivLeak of the after model against the retrained one, with its 95% interval (subjects resampled, paired)."""
    observed = float(privleak(auc(is_forget, after), auc(is_forget, retrained)))
    draws = paired_aucs({"after": after, "retrained": retrained}, groups, is_forget, bootstrap, seed)
    return PrivLeak(observed, percentile_interval(privleak(draws["after"], draws["retrained"]), 0.95))


def equivalence(after: np.ndarray, before: np.ndarray | None, retrained: np.ndarray | None, groups: np.ndarray,
                is_forget: np.ndarray, margin: float, level: float = 0.05, bootstrap: int = 1000,
                seed: int = 0) -> Equivalence:
    """Whether the after model's forget-vs-holdout AUC is within `margin` of the retrained model's (or of 1/2 without
    one) by two one-sided tests at `level`, and whether the before model would have passed the same test. The
    difference's interval is t-based on the paired bootstrap's spread, with G - 1 degrees of freedom and the spread
    scaled by sqrt(G / (G - 1)) for the G subjects of the smaller set (a bootstrap of few clusters is too narrow);
    with fewer than MIN_EQUIVALENCE_SUBJECTS it is not tested (its interval is NaN)."""
    scores = {"after": after, **({"before": before} if before is not None else {}),
              **({"retrained": retrained} if retrained is not None else {})}
    groups, is_forget = np.asarray(groups, dtype=str), np.asarray(is_forget, bool)
    fewest = min(len(set(groups[is_forget])), len(set(groups[~is_forget])))
    draws = paired_aucs(scores, groups, is_forget, bootstrap, seed)
    reference = draws["retrained"] if retrained is not None else 0.5
    reference_auc = auc(is_forget, retrained) if retrained is not None else 0.5

    def test(name: str) -> tuple[float, Interval, bool]:
        difference = auc(is_forget, scores[name]) - reference_auc
        if fewest < MIN_EQUIVALENCE_SUBJECTS:
            return difference, (math.nan, math.nan), False
        spread = float(np.nanstd(draws[name] - reference)) * math.sqrt(fewest / (fewest - 1))
        half = student_t.ppf(1 - level, fewest - 1) * spread
        return difference, (difference - half, difference + half), bool(-margin < difference - half
                                                                        and difference + half < margin)

    difference, interval, equivalent = test("after")
    return Equivalence("the retrained model" if retrained is not None else "never-trained texts (AUC 1/2)", margin,
                       level, difference, interval, equivalent, test("before")[2] if before is not None else None)


def mean_change(quantity: str, before: np.ndarray, after: np.ndarray, groups: np.ndarray, bootstrap: int = 1000,
                seed: int = 0) -> Change:
    """The mean of `before` and of `after` over the same texts (a per-text loss, say) and the change with its 95%
    interval, subjects resampled with replacement."""
    before, after = np.asarray(before, float), np.asarray(after, float)
    codes = subject_codes(groups)
    counts = np.bincount(codes).astype(float)
    sums = np.bincount(codes, weights=after - before)
    drawn = np.random.default_rng(seed).multinomial(len(counts), np.full(len(counts), 1 / len(counts)), size=bootstrap)
    with np.errstate(invalid="ignore", divide="ignore"):
        changes = (drawn @ sums) / (drawn @ counts)
    return Change(quantity, float(before.mean()), float(after.mean()), float((after - before).mean()),
                  percentile_interval(changes, 0.95))


def auc_change(quantity: str, before: np.ndarray, after: np.ndarray, groups: np.ndarray, is_first: np.ndarray,
               bootstrap: int = 1000, seed: int = 0) -> Change:
    """The AUC of the `is_first` texts against the others under the before and the after scores, and the change with
    its 95% interval (both AUCs from the same resampled subjects)."""
    draws = paired_aucs({"before": before, "after": after}, groups, is_first, bootstrap, seed)
    observed_before, observed_after = auc(is_first, before), auc(is_first, after)
    return Change(quantity, observed_before, observed_after, observed_after - observed_before,
                  percentile_interval(draws["after"] - draws["before"], 0.95))


STILL_DETECTABLE = "still detectable"
UNLEARNING_DETECTABLE = "the unlearning itself is detectable"
NOT_DETECTED = "not detected by these tests"
CANNOT_DECIDE = "cannot decide"


@dataclass(frozen=True)
class ErasureFinding:
    """The verdict for one subject, or for all of them pooled (`subject` None): the finding, the tests that rejected
    (a probe's name for "still held", 'after, lower' for "over-unlearnt"), each test's family-wise p-value, the smallest
    p-value the tests can give, and whether the same test found the subject(s) in the model before erasure
    (`found_before`, at `before_p_value`: the tests' power, seen)."""

    subject: str | None
    finding: str
    rests_on: list[str]
    family_p_values: dict[str, Number]
    smallest_p: float
    found_before: bool
    before_p_value: Number


def decide(statistics: np.ndarray, names: list[str], before: np.ndarray, smallest_p: float, level: float,
           subject: str | None) -> ErasureFinding:
    """One verdict from the null's statistics ((null rows, the observed first) x probes, larger = still held) and the
    before model's: each probe's test of still held and the first probe's (the after model's) of over-unlearnt,
    family-wise by Westfall and Young's max-T over the same null rows, so that any false alarm of the family has
    chance at most `level` whatever the probes' correlation. Max-T, not min-P: with one subject the null has only
    H + 1 rows, and min-P would stop at every row on which some test peaks, where a subject far above every null row
    stands out by max-T."""
    family = max_t_adjusted(np.column_stack([statistics, -statistics[:, 0]]))
    tests = [*names, f"{names[0]}, lower"]
    p_values = dict(zip(tests, (float(p) for p in family), strict=True))
    before_p = at_least(before)
    found_before = before_p <= level
    rejected = [name for name, p in zip(names, family, strict=False) if p <= level]
    if rejected:
        return ErasureFinding(subject, STILL_DETECTABLE, rejected, p_values, smallest_p, found_before, before_p)
    if family[-1] <= level:
        return ErasureFinding(subject, UNLEARNING_DETECTABLE, [tests[-1]], p_values, smallest_p, found_before,
                              before_p)
    finding = CANNOT_DECIDE if smallest_p > level else NOT_DETECTED
    return ErasureFinding(subject, finding, [], p_values, smallest_p, found_before, before_p)


def erasure_findings(probes: dict[str, np.ndarray], before: np.ndarray, groups: np.ndarray, is_forget: np.ndarray,
                     level: float, permutations: int = 1999, seed: int = 0) -> list[ErasureFinding]:
    """The pooled verdict, then one per forget subject (`decide`), from each probe's scores (the after model first;
    NaN where a probe does not test a text, each subject keeping at least one) and the before model's, all aligned
    with `groups` and `is_forget`."""
    groups, is_forget = np.asarray(groups, dtype=str), np.asarray(is_forget, bool)
    names = list(probes)
    pooled = np.column_stack([pooled_statistics(np.asarray(values, float), groups, is_forget, permutations, seed)
                              for values in probes.values()])
    forget_subjects = len(set(groups[is_forget]))
    holdout_subjects = len(set(groups)) - forget_subjects
    ways = math.comb(forget_subjects + holdout_subjects, forget_subjects)
    findings = [decide(pooled, names, pooled_statistics(np.asarray(before, float), groups, is_forget, permutations,
                                                        seed), max(1 / (permutations + 1), 1 / ways), level, None)]
    for subject in dict.fromkeys(groups[is_forget]):
        own = np.column_stack([subject_statistics(np.asarray(values, float), groups, is_forget, subject)
                               for values in probes.values()])
        findings.append(decide(own, names, subject_statistics(np.asarray(before, float), groups, is_forget, subject),
                               1 / (holdout_subjects + 1), level, str(subject)))
    return findings
