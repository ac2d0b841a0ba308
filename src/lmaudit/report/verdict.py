"""The verdict: per level, whether the attacks beat chance (the permutation tests of metrics/permutation_tests.py, corrected
over the whole family), how strongly, and a plain-language risk statement from a stated rule (guidance for a release
decision, not a guarantee)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmaudit.attacks.base import ACCESS_LEVELS, LEVELS
from lmaudit.metrics.dataset_inference import PAPER_LEVEL, STRICT_LEVEL
from lmaudit.metrics.power import LevelCounts, level_power
from lmaudit.metrics.risk_rule import (
    HIGH_EPSILON,
    HIGH_LEVEL,
    HIGH_RATIO,
    MODERATE_LEVEL,
    ONE_PERCENT,
    RESOLUTION_FACTOR,
    exposure_ratio,
    resolves_one_percent,
)
from lmaudit.report.document import (
    BlindHeadline,
    EpsilonHeadline,
    LevelVerdict,
    RankedAttack,
    ReportDocument,
    Strongest,
    Summary,
    ThreatModels,
    TprHeadline,
)
from lmaudit.report.formatting import counted, finite_or_none
from lmaudit.report.level_words import fpr_upper, opening, p_words, shift_opening, statement

if TYPE_CHECKING:  # read as records only: the permutation tests' module loads scipy
    from lmaudit.metrics.permutation_tests import LeakageTests
    from lmaudit.metrics.results import AttackResult

VERDICT_ALPHA = f"{ONE_PERCENT:g}"  # the key of the TPR records the verdict reads ('0.01')
# A blind AUC this high (the texts alone, no model) makes a level inconclusive whatever the attacks reach: Das et al.'s
# shifted benchmarks sit at 0.72-0.99, and an attack's lead over such a baseline may be more of the same shift.
BLIND_DECISIVE_AUC = 0.7
# Highest risk first; inconclusive ranks above low, because an unmeasured level may hide leakage.
RISKS = ("high", "moderate", "inconclusive", "low")
RISK_RULE = (
    f"Each level is judged on the members against the verdict's non-member set. The test: every attack's AUC, and "
    f"where a level has at least 100 non-member units its true-positive rate at the threshold that accuses at most 1% "
    f"of them, is compared with its values when whole patients (users; a unit without a group alone) are relabelled at "
    f"random, and the whole family (every attack, statistic and level) is corrected by the same relabellings "
    f"(Westfall-Young max-T for the AUCs, min-P for the TPRs, each at half the level): when the model leaked nothing, "
    f"some level reads moderate or high in at most {MODERATE_LEVEL:.0%} of audits, high in at most {HIGH_LEVEL:.0%}. "
    f"First, where the audit has the texts: a level is inconclusive (shift) when a blind classifier that sees only the "
    f"texts separates its members from the non-members (the lower 95% bound of its AUC above 0.5) and either its "
    f"AUC's interval reaches the strongest attack's (its upper bound at or above the attack's lower bound) or its AUC "
    f"is at least {BLIND_DECISIVE_AUC}: the attacks' numbers then measure how the data was collected as much as the "
    f"model, whichever way. Otherwise: "
    f"high: the test rejects at family-wise level {HIGH_LEVEL:g} and some attack exposes members at a low "
    f"false-positive rate (at its 1% threshold, the lower 95% bound of its TPR is at least {HIGH_RATIO:g} times the "
    f"larger of 1% and the upper 95% bound of its FPR there) or its counts prove epsilon >= {HIGH_EPSILON:g}. "
    f"moderate: the test rejects at family-wise level {MODERATE_LEVEL:g}: the attacks do better than chance. "
    f"low: the test does not reject, and the non-members resolve a 1% false-positive rate (at the 1% threshold, the "
    f"FPR's upper 95% bound is at most {RESOLUTION_FACTOR * ONE_PERCENT:.0%}). "
    "inconclusive: the test does not reject, but the non-members cannot resolve a 1% false-positive rate. "
    "The overall risk is the highest level's. Where units come in groups, every interval counts them so (whole groups "
    "resampled; rates on effective counts). The true-positive rate a level names is the one that exposes most members "
    "at the 1% threshold, with its own attack. Guidance for a release decision, not a guarantee: a stronger attack, or "
    "more data, can show more leakage than this audit."
)


def _tpr_row(result: AttackResult, tests: LeakageTests | None) -> TprHeadline | None:
    """A result's TPR record at 1% FPR as the verdict names it, with the family-wise p-value of its own test."""
    point = result.tpr_at_fpr.get(VERDICT_ALPHA)
    if point is None:
        return None
    return TprHeadline(attack=result.attack, signal=result.signal, tpr=point.tpr, tpr_ci=point.tpr_ci,
                       fpr_ci=point.fpr_ci, tp=point.tp, fp=point.fp, n_members=result.n_members,
                       n_nonmembers=result.n_nonmembers, resolution_limited=point.resolution_limited,
                       p_value=tpr_test_p_value(tests, result))


def row_exposure_ratio(row: TprHeadline) -> float:
    """A TPR row's exposure ratio (metrics/risk_rule.py) from its two intervals."""
    return exposure_ratio(finite_or_none(row.tpr_ci[0]), fpr_upper(row))


def most_exposing(rows: list[TprHeadline]) -> TprHeadline | None:
    """The headline TPR record: the row that exposes most members at the 1% threshold (ties: the higher lower bound,
    then the smaller p-value of its own test); page, PDF, model card and gate all read this one."""
    def key(row: TprHeadline) -> tuple:
        tpr, low, p_value = finite_or_none(row.tpr), finite_or_none(row.tpr_ci[0]), finite_or_none(row.p_value)
        return (tpr if tpr is not None else -1.0, low if low is not None else -1.0,
                -(p_value if p_value is not None else 1.0))

    return max(rows, key=key, default=None)


def _epsilon_row(results: list[AttackResult]) -> EpsilonHeadline | None:
    """The largest epsilon lower bound of the level's thresholds (not a number: not counted), with how many there are."""
    best, count = None, 0
    for result in results:
        for threshold in result.thresholds:
            bound = finite_or_none(threshold.epsilon_lower_bound)
            count += bound is not None
            if bound is not None and (best is None or bound > best.epsilon_lower_bound):
                best = EpsilonHeadline(attack=result.attack, signal=result.signal, rule=threshold.rule,
                                       alpha=threshold.alpha, epsilon_lower_bound=bound, bounds=0)
    return None if best is None else best.model_copy(update={"bounds": count})


def tpr_test_p_value(tests: LeakageTests | None, result: AttackResult) -> float | None:
    """The family-wise p-value of a result's own TPR permutation test (None where the level's non-members were too few
    for one, or no test ran)."""
    return next((finite_or_none(test.family_p_value) for test in (tests.tests if tests else [])
                 if (test.attack, test.signal, test.level, test.statistic)
                 == (result.attack, result.signal, result.level, "tpr_at_1pct_fpr")), None)


def _risk(p_value: float | None, tpr_rows: list[TprHeadline], epsilon: EpsilonHeadline | None,
          at_low_fpr: TprHeadline | None) -> str:
    bound = epsilon.epsilon_lower_bound if epsilon else 0.0
    strong = any(row_exposure_ratio(row) >= HIGH_RATIO for row in tpr_rows) or bound >= HIGH_EPSILON
    if p_value is not None and p_value < HIGH_LEVEL and strong:
        return "high"
    if p_value is not None and p_value < MODERATE_LEVEL:
        return "moderate"
    return "low" if resolves_one_percent(fpr_upper(at_low_fpr)) else "inconclusive"


def level_counts(level: str, strongest: Strongest, at_level: list[AttackResult], tests: LeakageTests | None
                 ) -> LevelCounts:
    """What the level compared, for its power: its units (the most any attack read: one fitted on part of them reads
    fewer), the groups the verdict's test relabelled (a group-level unit is its own group), whether some threshold was
    calibrated without the audited labels, and the test's relabellings and families."""
    members = max([r.n_members for r in at_level] + [strongest.n_members])
    nonmembers = max([r.n_nonmembers for r in at_level] + [strongest.n_nonmembers])
    relabelled = (tests.member_groups, tests.nonmember_groups) if tests else (members, nonmembers)
    groups = (members, nonmembers) if level == "group" else (min(members, relabelled[0]), min(nonmembers, relabelled[1]))
    families = 2 if any(test.statistic == "tpr_at_1pct_fpr" for test in (tests.tests if tests else [])) else 1
    calibrated = any(finite_or_none(threshold.epsilon_lower_bound) is not None
                     for r in at_level for threshold in r.thresholds)
    return LevelCounts(members=members, nonmembers=nonmembers, member_groups=groups[0], nonmember_groups=groups[1],
                       calibrated=calibrated, relabelled_members=relabelled[0], relabelled_nonmembers=relabelled[1],
                       permutations=tests.permutations if tests else 1000, families=families)


def _fewer_groups(counts: LevelCounts, group_name: str) -> str | None:
    """'12 patients' where a level's non-members come from fewer groups than they are, else None."""
    if counts.nonmember_groups >= counts.nonmembers:
        return None
    return f"{counts.nonmember_groups:,} {group_name}{'s' * (counts.nonmember_groups != 1)}"


def shift_decides(blind: BlindHeadline | None, strongest: Strongest) -> bool:
    """Whether the texts alone make a level inconclusive (the rule's first clause): the blind AUC's interval leaves 0.5
    and reaches the strongest attack's, or the blind AUC is at least BLIND_DECISIVE_AUC."""
    if blind is None or not blind.texts_separate:
        return False
    attack_low = finite_or_none(strongest.auc_ci[0]) or 0.0
    return blind.auc_ci[1] >= attack_low or blind.auc >= BLIND_DECISIVE_AUC


def _level_entry(level: str, names: dict[str, str], at_level: list[AttackResult], ranked: RankedAttack,
                 tests: LeakageTests | None, delta: float, blind: dict | None, against: str) -> LevelVerdict:
    """One level's verdict: its risk, the evidence behind it, what its counts could show, and its statement."""
    strongest = Strongest(attack=ranked.attack, signal=ranked.signal, auc=ranked.auc, auc_ci=ranked.auc_ci,
                          n_members=ranked.n_members, n_nonmembers=ranked.n_nonmembers)
    blind_headline = BlindHeadline(**{key: blind[key] for key in ("auc", "auc_ci", "texts_separate")}) if blind else None
    tpr_rows = [row for row in (_tpr_row(r, tests) for r in at_level) if row is not None]
    at_low_fpr = most_exposing(tpr_rows)
    epsilon = _epsilon_row(at_level)
    p_value = finite_or_none(tests.level_p_value(level)) if tests else None
    risk = _risk(p_value, tpr_rows, epsilon, at_low_fpr)
    counts = level_counts(level, strongest, at_level, tests)
    power = level_power(counts, delta)
    name = names.get(level, level)
    heading = f"{name} level{against}"
    first = opening(risk, heading, f"{name}s", at_low_fpr, power, names.get("group", "group"))
    shifted = shift_decides(blind_headline, strongest)
    judged = {"risk": risk}
    if shifted:
        first = shift_opening(heading, blind_headline, strongest, risk)
        judged = {"risk": "inconclusive", "shift": True, "risk_from_attacks": risk}
    return LevelVerdict(
        name=name, p_value=p_value, **judged, **({"blind": blind_headline} if blind_headline else {}),
        strongest=strongest, tpr_at_1pct_fpr=at_low_fpr, epsilon_lower_bound=epsilon, power=power,
        statement=statement(first, name, p_words(p_value, power), strongest, at_low_fpr, epsilon, delta, shifted,
                            _fewer_groups(counts, names.get("group", "group"))),
    )


def verdict(results: list[AttackResult], ranking: dict[str, list[RankedAttack]], level_names: dict[str, str],
            delta: float, blind: dict[str, dict] | None = None, tests: LeakageTests | None = None,
            nonmember_set: str | None = None) -> Summary:
    """report.json's `summary`, as its model (report/document.py:Summary), from the report's records: per level (in
    LEVELS order) the risk by RISK_RULE with its family-wise p-value, the strongest attack by AUC, the TPR row at 1% FPR
    that exposes most, the largest epsilon lower bound, what the level's counts could show at best
    (metrics/power.py), and the statement; the overall risk; the rule; the delta of the epsilon bounds. `blind`: the
    blind baseline's result per level on the verdict's non-member set (metrics/validity.py), which can make a level
    inconclusive (None where the audit had no texts); `tests`: the permutation tests
    (metrics/permutation_tests.py); `nonmember_set`: the name of the verdict's set where there are several, which the
    statements then name."""
    against = f", members against the {nonmember_set} non-members" if nonmember_set else ""
    levels = {}
    for level in LEVELS:
        if ranking.get(level):
            at_level = [r for r in results if r.level == level and r.slice == "all"]
            levels[level] = _level_entry(level, level_names, at_level, ranking[level][0], tests, delta,
                                         (blind or {}).get(level), against)
    overall = min((entry.risk for entry in levels.values()), key=RISKS.index, default="inconclusive")
    return Summary(risk=overall, levels=levels, rule=RISK_RULE, delta=delta, blind_baseline_ran=blind is not None,
                   nonmember_set=nonmember_set, threat_models=threat_models(ranking))


def threat_models(ranking: dict[str, list[RankedAttack]]) -> ThreatModels:
    """Which attacker access levels (attacks/base.py:ACCESS_LEVELS) the audit tried, each with its attacks, which it did
    not, and the sentence the verdict ends with: a verdict says only what attackers of the tried kinds can do."""
    tried: dict[str, list[str]] = {}
    for rows in ranking.values():
        for row in rows:
            names = tried.setdefault(row.access, [])
            if row.attack not in names:
                names.append(row.attack)
    ordered = {access: tried[access] for access in ACCESS_LEVELS if access in tried}
    not_tried = [access for access in ACCESS_LEVELS if access not in tried]
    statement = "Threat models tried: " + "; ".join(f"{access} ({len(names)} attack{'s' * (len(names) != 1)})"
                                                    for access, names in ordered.items())
    statement += f"; not tried: {', '.join(not_tried)}." if not_tried else "."
    return ThreatModels(tried=ordered, not_tried=not_tried, statement=statement)


# report.json's and dataset_inference.json's `rule`: how the test of metrics/dataset_inference.py decides.
DATASET_INFERENCE_RULE = (
    f"Maini et al.'s decision: the suspect set was trained on where p < {PAPER_LEVEL:g}; lmaudit states beside it the "
    f"stricter p < {STRICT_LEVEL:g}. Either holds only if the suspect and validation units were drawn from one "
    "distribution (see the blind baseline); the p-value is of the units held out, half of each side.")


def dataset_inference_statement(section: dict | None, shifted: bool = False) -> str | None:
    """report.json's `dataset_inference` in one sentence: the p-value, the units behind it and what it decides;
    `shifted`: the texts alone separate the two sets, which the sentence then says; None where there is no section."""
    if not section:
        return None
    if "unavailable" in section:
        return f"Dataset inference: n/a: {section['unavailable']}."
    units = f"{section['unit']}s"
    counts = f"{section['n_test']['suspect']} suspect and {section['n_test']['validation']} validation {units} held out"
    opening = (f"Dataset inference (Maini et al. 2024), {section['suspect']} as a set against {section['validation']}: "
               f"p = {section['p_value']:.2g} (one-sided t-test over {counts})")
    if section["decisions"]["p<0.01"]:
        reading = ("below 0.01: evidence that the model was trained on them (a set it was not trained on gives p < 0.01 "
                   "at most 1% of the time)")
    elif section["decisions"]["p<0.1"]:
        reading = "below Maini et al.'s 0.1, not below 0.01: some evidence that the model was trained on them"
    else:
        reading = "not below 0.1: no evidence that the model was trained on them as a set"
    needed = section["minimum_needed"]["p<0.01"]
    more = f"; {needed} {units} a side suffice for p < 0.01 (median of draws)" if needed else ""
    if section.get("excluded"):
        more += f"; {section['excluded']} samples without a group id left out"
    caveat = ("; but the texts alone separate the two sets, so the p-value measures how they were collected as much "
              "as the training") if shifted else ", provided the two sets were drawn alike"
    return f"{opening}: {reading}{caveat}{more}."


def dataset_inference_line(report: ReportDocument) -> str | None:
    """The report's dataset-inference sentence, with the shift caveat where the texts alone separate the verdict's
    sets at some level."""
    shifted = any(entry.blind is not None and entry.blind.texts_separate for entry in report.summary.levels.values())
    return dataset_inference_statement(report.dataset_inference, shifted)


EXTRACTION_RULE = (
    "The model gives training text back when, against the verdict's non-member set and at some prefix length, the "
    "members' greedy exact extraction rate has a 95% Clopper-Pearson interval wholly above the non-members' (a "
    "conservative test: two disjoint 95% intervals). A suffix the non-members' texts give back as often is predictable "
    "from the text's regularity (boilerplate, templates), which is not memorisation."
)


def _counted(entry: dict, whose: str) -> str:
    return counted(entry["exposed"], entry["units"], whose, entry["rate"], entry["interval"])


def extraction_statement(section: dict | None) -> str | None:
    """report.json's `extraction` in one sentence by EXTRACTION_RULE: the prefix length where the members' greedy exact
    rate leads the verdict's non-members' most (lower bound over upper bound), or why nothing could be read; None
    where the audit ran no extraction."""
    if not section:
        return None
    measured = []
    for prefix, entry in section["prefix_lengths"].items():
        if entry.get("sets"):
            name, result = next(iter(entry["sets"].items()))
            exact = result["greedy"]["sample"]["exact"]
            measured.append((exact["member"]["interval"][0] - exact["nonmember"]["interval"][1], prefix, name, exact))
    if not measured:
        return (f"Extraction: n/a: no audited text is long enough for the prefix lengths asked and a "
                f"{section['suffix_tokens']}-token suffix.")
    lead, prefix, name, exact = max(measured, key=lambda item: item[0])
    opening = (f"Extraction: from each text's first {prefix} tokens, greedy decoding gives the next "
               f"{section['suffix_tokens']} back word for word for {_counted(exact['member'], 'members')}, against "
               f"{_counted(exact['nonmember'], name)}")
    if lead > 0:
        return f"{opening}: the model gives training text back beyond what the texts' regularity explains."
    return f"{opening}: no more than for non-members (intervals overlap), no evidence that it gives training text back."


def verdict_lines(report: ReportDocument) -> list[str]:
    """The verdict as text for the terminal: any shift the blind baseline found, the overall risk, then one statement
    per level and the caveats."""
    summary = report.summary
    # A shift between members and non-members comes first: it changes how every number below reads.
    lines = [f"SHIFT: {shift}" for shift in summary.shift or []]
    lines.append(f"VERDICT: {summary.risk.upper()} membership-inference risk (rule: see report.html or the README)")
    lines += [f"  {entry.statement}" for entry in summary.levels.values()]
    lines += [f"  {line}" for line in (dataset_inference_line(report), extraction_statement(report.extraction),
                                       summary.threat_models.statement) if line]
    lines += [f"  Another non-member set: {shift}" for shift in summary.shift_elsewhere or []]
    return lines + [f"  Caveat: {caveat}" for caveat in summary.caveats or []]
