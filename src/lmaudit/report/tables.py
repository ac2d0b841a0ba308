"""Tables read from report.json's results: the terminal summary, feature x attack (classifiers), attack x level (LMs).

They read the typed report (report/document.py: a ReportDocument, its results AttackResults), so a saved report.json
renders as a fresh one does. Which attacks go in which table comes from the attack registry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lmaudit.attacks.base import CLASSIFIER_FEATURE, LABEL_RANKS, LEVELS
from lmaudit.attacks.registry import ATTACKS, attack_spec, attacks_reading
from lmaudit.attacks.shadow import PAPER_STATISTIC
from lmaudit.metrics.results import AttackResult, ThresholdResult
from lmaudit.metrics.slices import NONMEMBER_SLICE
from lmaudit.report.coverage import coverage_lines
from lmaudit.report.document import RankedAttack, ReportDocument
from lmaudit.report.formatting import finite_or_none, number, percent, with_interval
from lmaudit.report.verdict import verdict_lines

# Shejwalkar et al.'s attacks (Algorithms 1-4 and the other user statistics) and their baseline (Song and Shmatikov's
# rank histograms, on the rank feature only), in registry order.
CLASSIFIER_ATTACKS = tuple(spec.name for spec in (*attacks_reading(CLASSIFIER_FEATURE), *attacks_reading(LABEL_RANKS)))
# Each one's column in the paper (Table 1 names the algorithms, Table 2 the statistics of Algorithm 2).
PAPER_COLUMNS = {"sample_threshold": "Alg. 1", "user_logistic": "Alg. 3", "sample_to_user": "Alg. 4",
                 "rank_histogram": "Song & Shmatikov",
                 **{f"user_threshold_{statistic}": f"Alg. 2 {name}" for statistic, name in PAPER_STATISTIC.items()}}
# Attacks scored at several levels (sample, and the mean over admissions and patients).
MULTI_LEVEL_ATTACKS = tuple(spec.name for spec in ATTACKS if spec.aggregated_to)


def population_threshold_at(result: AttackResult, alpha: float = 0.1) -> ThresholdResult | None:
    """The result's population threshold at `alpha`, if calibrated."""
    return next((t for t in result.thresholds if t.rule == "population" and t.alpha == alpha), None)


def result_of(results: Sequence[AttackResult], attack: str, level: str, signal: str | None = None,
              slice_name: str = "all") -> AttackResult | None:
    """The result of one attack at one level (and signal, when given) on one slice, if `results` hold it."""
    return next((r for r in results if r.attack == attack and r.level == level and r.slice == slice_name
                 and (signal is None or r.signal == signal)), None)


def largest_bound(result: AttackResult) -> float | None:
    """The largest epsilon lower bound over a result's calibrated thresholds (None where none was calibrated)."""
    return max((t.epsilon_lower_bound for t in result.thresholds if not math.isnan(t.epsilon_lower_bound)), default=None)


RANKED_ALPHAS = ("0.01", "0.001")  # the FPRs a ranking shows TPR at


def ranking(results: list[AttackResult]) -> dict[str, list[RankedAttack]]:
    """Per level, every attack (and signal) on all data, strongest first: AUC with its interval, TPR at 1% and 0.1% FPR
    with the counts behind it, and the attack's description and paper. Ordered by AUC, then TPR at 1% FPR."""
    ranked: dict[str, list[RankedAttack]] = {}
    for result in results:
        if result.slice != "all":
            continue
        spec = attack_spec(result.attack)
        ranked.setdefault(result.level, []).append(RankedAttack(
            attack=result.attack, signal=result.signal, auc=result.auc, auc_ci=result.auc_ci,
            tpr_at_fpr={alpha: result.tpr_at_fpr[alpha] for alpha in RANKED_ALPHAS if alpha in result.tpr_at_fpr},
            n_members=result.n_members, n_nonmembers=result.n_nonmembers,
            description=spec.description, paper=spec.paper, access=spec.access,
        ))

    def strength(row: RankedAttack) -> tuple[float, float]:
        auc, at_one_percent = finite_or_none(row.auc), row.tpr_at_fpr.get("0.01")
        tpr = finite_or_none(at_one_percent.tpr) if at_one_percent is not None else None
        return (-(auc if auc is not None else -1.0), -(tpr or 0.0))

    return {level: sorted(rows, key=strength) for level, rows in ranked.items()}


def ranking_lines(report: ReportDocument, level: str = "sample") -> list[str]:
    """One level's ranking as text: rank, attack, signal, AUC [CI], TPR at 1% and 0.1% FPR (TP/FP), and precision,
    recall and advantage at the population 10% threshold ('n/a' where it could not be calibrated; the report says why)."""
    rows = report.ranking.get(level, [])
    attack_width = max([22, *(len(row.attack) + 2 for row in rows)])
    signal_width = max([12, *(len(row.signal) + 2 for row in rows)])
    header = (f"{'#':>2}  {'attack':<{attack_width}}{'signal':<{signal_width}}{'AUC [95% CI]':<24}{'TPR@1% (TP/FP)':<20}"
              f"{'TPR@0.1% (TP/FP)':<20}{'prec@10%':>9}{'rec@10%':>9}{'adv':>7}")
    lines = [header, "-" * len(header)]
    for rank, row in enumerate(rows, 1):
        cells = []
        for alpha in RANKED_ALPHAS:
            point = row.tpr_at_fpr.get(alpha)
            cells.append(f"{point.tpr:.3f} ({point.tp}/{point.fp})" if point else "")
        result = result_of(report.results, row.attack, level, row.signal)
        threshold = population_threshold_at(result) if result else None
        population = ([percent(threshold.precision) or "n/a", percent(threshold.recall), number(threshold.advantage)]
                      if threshold else ["n/a"] * 3)
        lines.append(f"{rank:>2}  {row.attack:<{attack_width}}{row.signal:<{signal_width}}"
                     f"{with_interval(row.auc, row.auc_ci)}    {cells[0]:<20}{cells[1]:<20}"
                     f"{population[0]:>9}{population[1]:>9}{population[2]:>7}")
    return lines


def feature_attack_table(results: Sequence[AttackResult]) -> list[dict]:
    """Rows of feature x attack (the paper's Table 1): per feature, AUC and accuracy at the shadow threshold per attack."""
    rows: dict[str, dict] = {}
    for result in results:
        if result.attack in CLASSIFIER_ATTACKS and result.slice == "all":
            accuracy = finite_or_none(result.thresholds[0].accuracy) if result.thresholds else None
            rows.setdefault(result.signal, {})[result.attack] = {"auc": result.auc, "accuracy": accuracy}
    return [{"feature": feature, "attacks": attacks} for feature, attacks in rows.items()]


def level_table(results: Sequence[AttackResult]) -> list[dict]:
    """Per attack and signal, AUC and the advantage at the mean-member-loss threshold at each level, on all data
    (Jagannatha et al.'s sample / admission / patient comparison); empty when only one level was run."""
    rows: dict[tuple[str, str], dict] = {}
    for result in results:
        if result.slice != "all" or result.attack not in MULTI_LEVEL_ATTACKS:
            continue
        mu = next((t for t in result.thresholds if t.rule == "mean_member_loss"), None)
        rows.setdefault((result.attack, result.signal), {})[result.level] = {
            "auc": result.auc, "advantage": finite_or_none(mu.advantage) if mu else None}
    if len({level for cells in rows.values() for level in cells}) < 2:
        return []
    return [{"attack": attack, "signal": signal, "levels": cells} for (attack, signal), cells in rows.items()]


def nonmember_set_table(report: ReportDocument) -> list[dict]:
    """Per level and attack (in the level's ranking order), the AUC with its interval and the population-threshold
    advantage against each non-member set (Mireshghallah et al.'s MIMIC and i2b2 columns); empty with one set."""
    if len(report.data.nonmember_sets or {}) < 2:
        return []
    cells: dict[tuple[str, str, str], dict] = {}
    for result in report.results:
        if result.slice.startswith(NONMEMBER_SLICE):
            population = population_threshold_at(result)
            cells.setdefault((result.level, result.attack, result.signal), {})[
                result.slice.removeprefix(NONMEMBER_SLICE)] = {
                "auc": result.auc, "auc_ci": result.auc_ci, "n_nonmembers": result.n_nonmembers,
                "advantage": finite_or_none(population.advantage) if population else None}
    return [{"level": level, "attack": row.attack, "signal": row.signal,
             "sets": cells.get((level, row.attack, row.signal), {})}
            for level, ranked in report.ranking.items() for row in ranked]


def shown_summary(cell: dict, attack: str, level: str) -> dict | None:
    """A study cell's summary of one attack at one level (its first signal), if it was evaluated."""
    return next((s for s in cell["results"] if s["attack"] == attack and s["level"] == level), None)


def _models_lines(report: ReportDocument) -> list[str]:
    return [
        f"{name}: {m['architecture']} {m['size']}, train accuracy {percent(m['train_accuracy'])}, "
        f"{m['gap_measured_on']} accuracy {percent(m['test_accuracy'] if m['gap_measured_on'] == 'test' else m['validation_accuracy'])}, "
        f"generalisation gap {100 * m['generalization_gap']:.1f} points"
        for name, m in (report.models or {}).items()
    ]


def feature_attack_lines(report: ReportDocument) -> list[str]:
    """The feature x attack table as text: AUC (accuracy %) per cell."""
    table = feature_attack_table(report.results)
    if not table:
        return []
    header = f"{'feature':<13}" + "".join(f"{name:>21}" for name in CLASSIFIER_ATTACKS)
    paper = f"{'(the paper)':<13}" + "".join(f"{PAPER_COLUMNS[name]:>21}" for name in CLASSIFIER_ATTACKS)
    lines = [header, paper, "-" * len(header)]
    for row in table:
        cells = []
        for name in CLASSIFIER_ATTACKS:
            cell = row["attacks"].get(name)
            cells.append(f"{cell['auc']:.3f} ({100 * cell['accuracy']:.1f})" if cell else "")
        lines.append(f"{row['feature']:<13}" + "".join(f"{c:>21}" for c in cells))
    return lines


def summary_table(report: ReportDocument) -> str:
    """The terminal summary: the verdict, the attack families covered, the classifier's feature x attack table when
    there is one, and each level's ranked attacks on all data (slices and thresholds are in report.html; the warnings
    are logged, on stderr)."""
    lines = verdict_lines(report) + coverage_lines(report)
    if feature_attack_table(report.results):
        lines += ["", *_models_lines(report), "AUC (accuracy % at the shadow-calibrated threshold):", *feature_attack_lines(report)]
    for level in LEVELS:
        if report.ranking.get(level):
            lines += ["", f"{report.level_names.get(level, level)} level:", *ranking_lines(report, level)]
    lines += nonmember_set_lines(report)
    return "\n".join(lines)


def nonmember_set_lines(report: ReportDocument) -> list[str]:
    """The per-set AUCs as text, one line per level and attack (nothing with one non-member set)."""
    table = nonmember_set_table(report)
    if not table:
        return []
    sets = list(report.data.nonmember_sets)
    names = report.level_names
    lines = ["", f"AUC per non-member set (the results above audit the first, {sets[0]}):",
             f"{'level':<10}{'attack':<22}{'signal':<25}" + "".join(f"{name[:14]:>15}" for name in sets)]
    for row in table:
        cells = "".join(f"{row['sets'][name]['auc']:>15.3f}" if name in row["sets"] else f"{'n/a':>15}" for name in sets)
        lines.append(f"{names.get(row['level'], row['level']):<10}{row['attack']:<22}{row['signal']:<25}{cells}")
    return lines
