"""Every attack lmaudit runs, in one list, and the function that runs them on stored signals.

Adding an attack is one module with a `build` function and an AttackSpec, plus its entry here: the
pipeline, the report, the plots, the sweep and the score-direction test read this list.
"""

from __future__ import annotations

from collections.abc import Sequence

from lmaudit.attacks import (
    camia,
    con_recall,
    dc_pdd,
    ez_mia,
    gradnorm,
    informia,
    learned,
    likelihood_ratio,
    lira,
    loss,
    lowercase,
    min_k,
    min_k_plus_plus,
    neighbourhood,
    petal,
    rank_histogram,
    recall,
    rmia,
    samia,
    shadow,
    spv_mia,
    user_inference,
    wbc,
    zlib,
)
from lmaudit.attacks.base import (
    LEVEL_COLUMNS,
    LEVELS,
    VALUES,
    AttackInput,
    AttackScores,
    AttackSpec,
    NotRun,
    Skipped,
    aggregated_attack,
)
from lmaudit.data.roles import AUDITED_ROLES

ATTACKS: tuple[AttackSpec, ...] = (
    loss.SPEC, likelihood_ratio.SPEC, rmia.SPEC, lira.SPEC,
    zlib.SPEC, lowercase.SPEC, min_k.SPEC, min_k_plus_plus.SPEC, dc_pdd.SPEC, recall.SPEC, con_recall.SPEC,
    neighbourhood.SPEC, ez_mia.SPEC, wbc.SPEC, *informia.SPECS, user_inference.SPEC, camia.SPEC, samia.SPEC, petal.SPEC,
    spv_mia.SPEC, gradnorm.SPEC, *learned.SPECS,
    *shadow.SPECS, rank_histogram.SPEC,
)
_BY_NAME = {spec.name: spec for spec in ATTACKS}


def attack_spec(name: str) -> AttackSpec:
    """The registered attack of that name (KeyError for an unknown one: attack names come from this registry)."""
    return _BY_NAME[name]


def applies(spec: AttackSpec, data: AttackInput) -> bool:
    """Whether the attack is meant for this input: it holds the attack's first read, and the audit scores every role
    the attack is fitted on (a shadow-trained attack applies to audits with a shadow model, and only to those)."""
    return spec.reads[0] in data.values and set(spec.fitted_on) <= set(data.scored_roles)


def attacks_reading(value: str) -> list[AttackSpec]:
    """The attacks that apply to inputs holding `value` (their first read), in registry order."""
    return [spec for spec in ATTACKS if spec.reads[0] == value]


def unavailable_levels(data: AttackInput) -> dict[str, str]:
    """Levels above the sample that the input cannot support, with the reason: some audited sample has no id there."""
    audited = data.samples[data.samples["role"].isin(AUDITED_ROLES)]
    return {level: f"audited samples without {column}" for level, column in LEVEL_COLUMNS.items()
            if column not in audited or audited[column].isna().any()}


def _run_one(spec: AttackSpec, data: AttackInput, unavailable: dict[str, str]) -> tuple[list[AttackScores], list[Skipped]]:
    missing = [value for value in spec.reads if value not in data.values]
    if missing:
        reason = data.missing.get(missing[0], f"no {VALUES[missing[0]]}")
        return [], [Skipped(spec.name, spec.level, reason, data.signal)]
    if spec.level in unavailable:
        return [], [Skipped("*", spec.level, unavailable[spec.level])]
    built = spec.build(data)
    if isinstance(built, NotRun):
        return [], [Skipped(spec.name, spec.level, built.reason, data.signal)]
    scores = [AttackScores(built.frame, built.fixed_thresholds, built.calibration, attack=spec.name, signal=data.signal,
                           level=spec.level)]
    skipped = []
    for level in spec.aggregated_to:
        if level in unavailable:
            skipped.append(Skipped("*", level, unavailable[level]))
        else:
            scores.append(aggregated_attack(scores[0], level))
    return scores, skipped


def run_attacks(inputs: Sequence[AttackInput], specs: Sequence[AttackSpec] = ATTACKS) -> tuple[list[AttackScores], list[Skipped]]:
    """Every attack that applies to each input, and what could not run (each reason once).

    Scores come grouped by input (in the order given), then by level (sample, subgroup, group), then in
    registry order: the order of the report's results. An attack that ran on some input is not listed as
    not run on the others (a token-level attack runs on the per-token signal, not on the MLM energy).
    """
    scored: list[tuple[tuple[int, int, int], AttackScores]] = []
    skipped: list[Skipped] = []
    for input_index, data in enumerate(inputs):
        unavailable = unavailable_levels(data)
        for spec_index, spec in enumerate(specs):
            if not applies(spec, data):
                continue
            scores, not_run = _run_one(spec, data, unavailable)
            scored += [((input_index, LEVELS.index(s.level), spec_index), s) for s in scores]
            skipped += [s for s in not_run if s not in skipped]
    ran = {s.attack for _, s in scored}
    return [s for _, s in sorted(scored, key=lambda item: item[0])], [s for s in skipped if s.attack not in ran]
