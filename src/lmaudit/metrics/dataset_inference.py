"""Dataset inference (Maini, Jia, Papernot and Dziedzic 2024, *LLM dataset inference: did you train on my dataset?*):
was a suspect set, as a whole, used to train the model? Several membership scores of each unit are combined by a
linear model learnt on one half of the suspect and of the validation units (validation: drawn like the suspect ones and
known to be unseen), and a one-sided Student t-test on the other half asks whether the suspect units score higher.

Where the paper's code and lmaudit differ, on purpose:
- the learning and test halves split whole groups (patients, users), and the t-test compares group means when the
  units carry groups: a person's notes are not independent, and a t-test over them would reject too often; where
  some samples carry no group id, they are left out (and counted): as groups of their own they could put one
  patient's notes in both halves, and the model learnt on one half would then recognise the patient in the other
  (p < 0.01 in 2.8% of null audits at 10% of ids missing, 1.8% at 2%, measured; 0.5% with every id);
- clipping (2.5% each side, as the paper's code) and standardising use the learning half only, pooled, so that nothing
  of the test half, least of all which set a unit is in, shapes its scores;
- the linear model is scikit-learn's logistic regression (L2, C = 1) with suspect = 1, instead of a torch linear layer
  fitted by Adam with suspect = 0; the test is the same one-sided t-test, suspect above validation.
The p-value holds when suspect and validation units are drawn from one distribution: the blind baseline
(metrics/blind.py) checks that as far as the texts can tell. No torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from lmaudit.attacks.base import AttackScores
from lmaudit.attacks.registry import attack_spec
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.metrics.slices import nonmember_set_names

PAPER_LEVEL = 0.1  # Maini et al.'s decision rule: p < 0.1
STRICT_LEVEL = 0.01  # ours, beside it: one false claim in a hundred
CLIP_FRACTION = 0.025  # each side, per feature (the paper's code: remove_frac 0.05, clipped)
# Held-out units per side at which the p-value is reported (the paper's sizes), each the median over SIZE_DRAWS draws.
HELD_OUT_SIZES = (2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
SIZE_DRAWS = 21
MIN_UNITS = 4  # per side: two to learn from and two to test


@dataclass(frozen=True)
class DatasetInference:
    """The test's outcome: the p-value of 'the suspect units score no higher than the validation ones' (one-sided
    Student t-test) and its t statistic; the units (samples or groups) learnt from and tested on each side; the features
    and the weights learnt (on standardised features); the median p-value at each held-out size per side, and the
    smallest size at which that median falls below each decision level (None: not within the units held out)."""

    p_value: float
    t_statistic: float
    unit: str
    n_learn: dict[str, int]
    n_test: dict[str, int]
    features: list[str]
    weights: list[float]
    p_value_by_size: dict[int, float] = field(default_factory=dict)
    minimum_needed: dict[str, int | None] = field(default_factory=dict)
    decisions: dict[str, bool] = field(default_factory=dict)
    excluded: int = 0  # samples left out for want of a group id where others have one


def attack_features(attacks: list[AttackScores]) -> pd.DataFrame:
    """One column per sample-level attack score (named 'attack on signal') that is defined on every sample and was not
    fitted on the audited roles' labels, indexed by sample id: the membership scores dataset inference combines."""
    columns = {}
    for attack in attacks:
        if attack.level != "sample" or set(attack_spec(attack.attack).fitted_on) & set(AUDITED_ROLES):
            continue
        scores = attack.frame.set_index("id")["score"].astype(float)
        if np.isfinite(scores.to_numpy()).all():
            columns[f"{attack.attack} on {attack.signal}"] = scores
    return pd.DataFrame(columns)


def _halves(units: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(units)
    return order[: len(order) // 2], order[len(order) // 2:]


def _prepared(learn: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both halves clipped at the learning half's quantiles and standardised by its mean and deviation; the columns
    kept (those that vary in the learning half)."""
    low, high = np.quantile(learn, [CLIP_FRACTION, 1 - CLIP_FRACTION], axis=0)
    learn, test = np.clip(learn, low, high), np.clip(test, low, high)
    mean, std = learn.mean(axis=0), learn.std(axis=0)
    kept = std > 0
    return (learn[:, kept] - mean[kept]) / std[kept], (test[:, kept] - mean[kept]) / std[kept], kept


def _one_sided_p(suspect: np.ndarray, validation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p-value and t of Student's t-test (equal variances, as the paper) that the suspect scores are higher, along the
    last axis (so several draws test at once)."""
    from scipy.stats import ttest_ind

    test = ttest_ind(suspect, validation, alternative="greater", axis=-1)
    return test.pvalue, test.statistic


def _draws(values: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """SIZE_DRAWS rows, each `size` of `values` drawn without replacement."""
    return values[rng.random((SIZE_DRAWS, len(values))).argsort(axis=1)[:, :size]]


def _sizes(suspect: np.ndarray, validation: np.ndarray, seed: int) -> dict[int, float]:
    """The median p-value over SIZE_DRAWS draws of n held-out units per side, for each of HELD_OUT_SIZES that fits."""
    rng = np.random.default_rng(seed)
    fitting = [size for size in HELD_OUT_SIZES if size <= min(len(suspect), len(validation))]
    return {size: float(np.median(_one_sided_p(_draws(suspect, size, rng), _draws(validation, size, rng))[0]))
            for size in fitting}


def dataset_inference(features: pd.DataFrame, is_suspect: np.ndarray, groups: np.ndarray | None = None,
                      unit: str = "sample", seed: int = 0) -> DatasetInference:
    """Maini et al.'s test of whether the suspect rows (`is_suspect`) were trained on, against the validation rows,
    from `features` (one row per sample, higher = more member-like or not: the weights learn each direction).
    `groups`: each row's group (patient, user), which the halves keep whole and the t-test averages; `unit` names
    what is counted. InputError where a side has fewer than MIN_UNITS units or no feature varies."""
    from sklearn.linear_model import LogisticRegression

    is_suspect = np.asarray(is_suspect, dtype=bool)
    values = features.to_numpy(dtype=float)
    if values.shape[1] == 0:
        raise InputError("dataset inference needs membership scores defined on every sample; no attack gave any")
    groups = np.arange(len(is_suspect)) if groups is None else pd.factorize(np.asarray(groups, dtype=object))[0]
    rng = np.random.default_rng(seed)
    learn_rows, test_rows = np.zeros(len(groups), bool), np.zeros(len(groups), bool)
    for side, name in ((True, "suspect"), (False, "validation")):
        units = np.unique(groups[is_suspect == side])
        if len(units) < MIN_UNITS:
            raise InputError(f"dataset inference needs at least {MIN_UNITS} {name} {unit}s (half to learn from, half to "
                             f"test); there are {len(units)}")
        learn, test = _halves(units, rng)
        learn_rows |= np.isin(groups, learn) & (is_suspect == side)
        test_rows |= np.isin(groups, test) & (is_suspect == side)
    learn_x, test_x, kept = _prepared(values[learn_rows], values[test_rows])
    if not kept.any():
        raise InputError("dataset inference: no membership score varies over the units learnt from")
    model = LogisticRegression(max_iter=1000).fit(learn_x, is_suspect[learn_rows])
    scores = pd.Series(model.decision_function(test_x)).groupby(groups[test_rows]).mean()
    suspect_units = pd.Series(is_suspect[test_rows]).groupby(groups[test_rows]).first().loc[scores.index].to_numpy()
    suspect, validation = scores.to_numpy()[suspect_units], scores.to_numpy()[~suspect_units]
    p_value, statistic = (float(value) for value in _one_sided_p(suspect, validation))
    by_size = _sizes(suspect, validation, seed)
    needed = {f"p<{level:g}": next((size for size, p in by_size.items() if p < level), None)
              for level in (PAPER_LEVEL, STRICT_LEVEL)}

    def count(rows: np.ndarray, side: bool) -> int:
        return len(np.unique(groups[rows & (is_suspect == side)]))

    return DatasetInference(
        p_value=p_value, t_statistic=statistic, unit=unit,
        n_learn={"suspect": count(learn_rows, True), "validation": count(learn_rows, False)},
        n_test={"suspect": len(suspect), "validation": len(validation)},
        features=[str(name) for name, keep in zip(features.columns, kept, strict=True) if keep],
        weights=[float(w) for w in model.coef_[0]], p_value_by_size=by_size, minimum_needed=needed,
        decisions={f"p<{PAPER_LEVEL:g}": p_value < PAPER_LEVEL, f"p<{STRICT_LEVEL:g}": p_value < STRICT_LEVEL})


def members_against_nonmembers(samples: pd.DataFrame, attacks: list[AttackScores], unit: str,
                               seed: int = 0) -> DatasetInference:
    """Dataset inference with the audited members as the suspect set and the verdict's non-members (the first set;
    `samples`' rows of those roles, with `group_id` where they have one) as the validation set, from every attack's
    sample scores; where some samples have a group id and others not, those without are left out (`excluded`)."""
    features = attack_features(attacks)
    audited = samples[samples["role"].isin(AUDITED_ROLES)]
    names = nonmember_set_names(audited)
    if names:
        audited = audited[(audited["role"] == MEMBER) | (audited[NONMEMBER_SET] == names[0])]
    audited = audited.set_index("sample_id")
    audited = audited.loc[audited.index.intersection(features.index)]
    grouped = "group_id" in audited and audited["group_id"].notna().any()
    excluded = int(audited["group_id"].isna().sum()) if grouped else 0
    if grouped:  # module docstring: a sample of an unknown patient could carry its patient across the halves
        audited = audited[audited["group_id"].notna()]
    groups = audited["group_id"].to_numpy() if grouped else None
    result = dataset_inference(features.loc[audited.index], (audited["role"] == MEMBER).to_numpy(), groups,
                               unit if grouped else "sample", seed)
    return replace(result, excluded=excluded)


def dataset_inference_section(samples: pd.DataFrame, attacks: list[AttackScores], unit: str, seed: int) -> dict:
    """report.json's `dataset_inference` numbers: the members, as a set, against the verdict's non-members
    (`members_against_nonmembers`), or why the test could not run (`unavailable`)."""
    try:
        return asdict(members_against_nonmembers(samples, attacks, unit, seed))
    except InputError as error:
        return {"unavailable": str(error)}
