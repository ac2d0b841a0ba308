"""The canary report: canary_report.json's document, its page, and the lines the terminal prints, with what the bounds
mean in plain words (and, when they prove nothing, that this is not a proof of privacy)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from pydantic import BaseModel

from lmaudit.canaries.make import CanarySet
from lmaudit.config import AuditConfig
from lmaudit.metrics.privacy import accountant_epsilon, group_privacy
from lmaudit.report.canary_sections import AccountantSection, FdpSection, GroupSection, OneRunSection, ValiditySection
from lmaudit.report.documents import headed
from lmaudit.report.privacy_words import verdict_against, white_box_line

if TYPE_CHECKING:
    from lmaudit.metrics.canary_validity import RankCheck
    from lmaudit.metrics.fdp_one_run import GaussianBound
    from lmaudit.metrics.memorisation_curve import MemorisationCurve
    from lmaudit.metrics.one_run import OneRunBound
    from lmaudit.report.document import CanaryReportDocument

REPORT_FILE, SCORES_FILE, PAGE_FILE = "canary_report.json", "canary_scores.parquet", "canary_report.html"
EXPLANATION = (
    "What the bounds mean: if the training that produced this model were (epsilon, delta)-differentially private "
    "with an epsilon below Steinke et al.'s bound, guesses this good about which canaries it saw would happen less "
    "than {risk:.0%} of the time; the f-DP bound (Mahloujifar et al.) asks the same of the Gaussian trade-off curve "
    "that DP-SGD follows, which usually proves more from the same guesses, and its epsilon is that curve's at the "
    "delta. So the training is not that private, with {confidence:.0%} confidence. What they do not mean: each is a "
    "lower bound, not an estimate of the true epsilon, which may be far larger. They come from one training run and "
    "one attack, and are themselves random (docs/canaries.md measures their spread over training seeds): a stronger "
    "attack, more canaries, or canaries that stand out more tend to raise them. "
    "They speak of the canaries' privacy; real samples, which are less unusual, typically leak less."
)
NOTHING_PROVED = (
    "Nothing was proved: {correct} of {guesses} guesses right is what chance gives often enough. This does NOT say "
    "the training is private: these canaries did not stand out to this attack (too few, too ordinary, or scored on "
    "text the model predicts anyway). Canaries designed to be found (--design new_token, scored on the secret alone) "
    "catch a model trained without DP; see docs/canaries.md."
)

INVALID = (
    "INVALID audit: the planted canaries score below the unplanted ones (rank AUC {auc:.3f}, where 0.5 is chance). A "
    "model that holds nothing of the canaries scores both alike; scores this far below chance happen with probability "
    "{p:.2g} then (one-sided Mann-Whitney test of planted below unplanted; invalid below {level:g}). They are "
    "anti-correlated with the key: a bug in planting, saving or scoring, such as the canary tokens' trained output "
    "embedding rows lost when the model was saved (PEFT's modules_to_save with tied embeddings, docs/canaries.md), "
    "scores negated, or the key of other canaries. The bounds prove nothing here, not even that the canaries were "
    "missed: fix the pipeline and audit again."
)
CEILING = (
    "With {canaries} canaries no audit can prove more than epsilon {epsilon:.2f} (Steinke et al.) or mu {mu:.3f} (f-DP) "
    "at delta {delta:g}, however much the model memorised: the bounds with every guess right.{at_ceiling}"
)
AT_CEILING = " This bound is at that ceiling: it is the canaries' limit, not the model's; plant more canaries to prove more."
NOT_DP = (" The run records no DP-SGD: a bound at the ceiling shows only that it is not DP, not how much it memorises a rare "
          "record, which canaries planted at several counts measure (`canaries make --design secret --repeat 1,4,16`).")

GROUP = (
    "The most-planted canaries were planted {repeats} times each, so both bounds are for a group of {repeats} records, "
    "not one: a "
    "training that is (epsilon, delta)-DP per record is (r epsilon, r e^((r-1) epsilon) delta)-DP for a group of r "
    "(Dwork and Roth), which is the accountant's figure compared here{claimed}. Under DP-SGD's Gaussian curve, mu-GDP per "
    "record is r mu-GDP per group, so per record mu >= {mu:.3f}{epsilon}."
)


def compared_epsilon(dp: dict | None, repeats: int) -> tuple[float, float] | None:
    """The accountant's (epsilon, delta) a canary bound is compared with: the run's, or for canaries planted r times
    the group's (r epsilon, r e^((r-1) epsilon) delta; Dwork and Roth); None without a DP-SGD record, or where the
    group's delta is 1 or more (vacuous: nothing to contradict)."""
    if dp is None:
        return None
    epsilon, delta = group_privacy(accountant_epsilon(dp)[1], dp["delta"], repeats)
    return (epsilon, delta) if delta < 1 else None


def group_reading(canary_set: CanarySet, gaussian: GaussianBound, claimed: tuple[float, float] | None,
                  record_delta: float) -> GroupSection | None:
    """For canaries planted up to r > 1 times: the group's accountant epsilon and delta (None where vacuous), and the
    per-record mu (and its epsilon at `record_delta`) that the group's f-DP bound implies; None for r = 1."""
    from lmaudit.metrics.fdp_one_run import gdp_epsilon

    if canary_set.group_size == 1:
        return None
    mu = gaussian.mu_lower_bound / canary_set.group_size
    return GroupSection(repeats=canary_set.group_size, accountant_epsilon=claimed[0] if claimed else None,
                        accountant_delta=claimed[1] if claimed else None, record_mu_lower_bound=mu,
                        record_epsilon_lower_bound=gdp_epsilon(mu, record_delta), record_delta=record_delta)


def validity_section(check: RankCheck) -> ValiditySection:
    """canary_report.json's `validity`: the rank test of planted against unplanted scores and whether the audit is
    valid (an audit whose planted canaries score below chance is not: `metrics/canary_validity.py`)."""
    return ValiditySection(test="one-sided Mann-Whitney U, planted below unplanted", planted=check.planted,
                           unplanted=check.unplanted, rank_auc=check.auc, p_below=check.p_below, level=check.level,
                           valid=not check.invalid)


def ceilings(canaries: int, delta: float, confidence: float) -> dict:
    """What any audit of `canaries` canaries can prove at most (every guess right), for both bounds."""
    from lmaudit.metrics.fdp_one_run import gaussian_ceiling
    from lmaudit.metrics.one_run import provable_ceiling

    mu, epsilon = gaussian_ceiling(canaries, delta, confidence)
    return {"epsilon": provable_ceiling(canaries, delta, confidence), "mu": mu, "f_dp_epsilon": epsilon}


def explained(bound: OneRunBound, gaussian: GaussianBound, check: RankCheck, group: GroupSection | None) -> str:
    """The report's plain words: INVALID where the scores run against the key, else what the bounds mean, or that
    nothing was proved (never "chance" for a result far below it)."""
    if check.invalid:
        text = INVALID.format(auc=check.auc, p=check.p_below, level=check.level)
    elif bound.epsilon_lower_bound > 0 or gaussian.mu_lower_bound > 0:
        text = EXPLANATION.format(risk=1 - bound.confidence, confidence=bound.confidence)
    else:
        text = NOTHING_PROVED.format(correct=bound.guesses.correct, guesses=bound.guesses.guesses)
    return text + (" " + group_sentence(group) if group else "")


def canary_report(config: AuditConfig, canary_set: CanarySet, attack: str, bound: OneRunBound,
                  gaussian: GaussianBound, exposure: dict | None, dp: dict | None, white_box: dict | None = None,
                  check: RankCheck | None = None, curve: MemorisationCurve | None = None) -> dict:
    """canary_report.json's document: what was audited, both bounds with their guesses and the most m canaries can
    prove, whether the audit is valid (`check`, the rank test of planted against unplanted scores; without one, none
    is claimed invalid), the exposure, the accountant's epsilon beside the bounds (a group's for repeated canaries) and
    beside the training's white-box audit of DP-SGD where it made one (`metrics/dp_audit.py:white_box_audit`), and the
    plain-words explanation; and the memorisation curve where the canaries were planted at several repetition
    counts."""
    from lmaudit.metrics.canary_validity import BELOW_CHANCE_LEVEL, RankCheck

    check = check or RankCheck(0, 0, None, None, BELOW_CHANCE_LEVEL)
    guesses = bound.guesses
    verdict = None
    claimed = compared_epsilon(dp, canary_set.group_size)
    if claimed is not None and claimed[1] == bound.delta:
        # Steinke et al.'s bound only: the f-DP epsilon is that of the rejected Gaussian curve, and a correct DP-SGD,
        # whose curve is not exactly Gaussian, can reject a mu whose epsilon exceeds the accountant's.
        verdict = ("INVALID audit: no verdict against the accountant's epsilon" if check.invalid else
                   verdict_against(bound.epsilon_lower_bound, claimed[0]))
    group = group_reading(canary_set, gaussian, claimed, dp["delta"] if dp else bound.delta)
    explanation = explained(bound, gaussian, check, group)
    ceiling = ceilings(guesses.canaries, bound.delta, bound.confidence)
    sections = {
        "target": config.target, "reference": list(config.reference), "attack": attack, "signal": config.signal.signal,
        # Never the seed: it rebuilds the key.
        "canaries": {key: value for key, value in asdict(canary_set).items() if key not in ("seed", "secret_format")}
        | {"space_bits": canary_set.space_bits},
        "one_run": OneRunSection(
            canaries=guesses.canaries, guesses=guesses.guesses, positive_guesses=guesses.positive_guesses,
            negative_guesses=guesses.negative_guesses, correct=guesses.correct,
            accuracy=guesses.correct / guesses.guesses if guesses.guesses else None,
            epsilon_lower_bound=bound.epsilon_lower_bound, delta=bound.delta, confidence=bound.confidence,
            choices_of_k=bound.choices, ceiling=ceiling["epsilon"],
            at_ceiling=bound.epsilon_lower_bound >= ceiling["epsilon"] - 1e-9),
        "f_dp": FdpSection(
            mu_lower_bound=gaussian.mu_lower_bound, epsilon_lower_bound=gaussian.epsilon_lower_bound,
            delta=gaussian.delta, confidence=gaussian.confidence, positive_guesses=gaussian.guesses.positive_guesses,
            negative_guesses=gaussian.guesses.negative_guesses, correct=gaussian.guesses.correct,
            guesses=gaussian.guesses.guesses, mu_ceiling=ceiling["mu"], epsilon_ceiling=ceiling["f_dp_epsilon"]),
        "validity": validity_section(check), "accountant": dp and AccountantSection(**dp), "verdict": verdict,
        "exposure": exposure, "group": group, "white_box": white_box, "memorisation": curve and asdict(curve),
        "explanation": explanation,
        "settings": {"signal": config.signal.model_dump(), "seed": config.evaluation.seed,
                     "include_text": config.include_text},
    }
    # As Python values (an infinite epsilon stays infinite until the file is written, where it is null).
    return headed(REPORT_FILE, {key: value.model_dump() if isinstance(value, BaseModel) else value
                                for key, value in sections.items()})


def write_canary_audit(out: Path, report: dict, scores: pd.DataFrame, curve: MemorisationCurve | None = None) -> None:
    """The scores table, the report and its page (with the memorisation curve's table where there is one), all or
    none."""
    from lmaudit.report.curve_words import curve_answer, curve_rows
    from lmaudit.report.derived import stale_files
    from lmaudit.report.documents import write_document
    from lmaudit.report.html import render_template
    from lmaudit.report.plots import canary_figure

    page = render_template("canaries.html.j2", report=report, figure=canary_figure(report),
                           curve=curve and {"rows": curve_rows(curve), "answer": curve_answer(curve)})
    for stale in stale_files(Path(out), REPORT_FILE):  # the PDF of the canary_report.json this one replaces
        stale.unlink()
    write_document(out, REPORT_FILE, report, page=(PAGE_FILE, page), table=(SCORES_FILE, scores))


def write_canary_pdf(out: str | Path) -> Path:
    """Write canary_report.pdf beside the canary_report.json of the canary audit folder `out`, and its SHA-256 into
    derived.json (both whole or not at all); its path."""
    from lmaudit.report.document import load_document
    from lmaudit.report.pdf import STATEMENTS_TEMPLATE, compiled, write_sealed_pdf

    out = Path(out)
    return write_sealed_pdf(out, REPORT_FILE, compiled(STATEMENTS_TEMPLATE, canary_pdf_view(load_document(
        out / REPORT_FILE))))


def canary_pdf_view(report: CanaryReportDocument) -> dict:
    """What canary_report.pdf lays out (templates/statements.typ), every number already a string: the terminal's
    statements, the bounds against what the canaries can prove at most, the memorisation curve where there is one, and
    the files read with their SHA-256 and canary_report.json's own."""
    from lmaudit.report.curve_words import curve_rows
    from lmaudit.report.integrity import sealed_provenance

    one_run, fdp, white_box = report.one_run, report.f_dp, report.white_box
    bounds = [{"bound": "Steinke et al. 2023 (canaries' guesses)", "epsilon": f"{one_run.epsilon_lower_bound:.3f}",
               "most these canaries can prove": f"{one_run.ceiling:.2f}"},
              {"bound": "f-DP, Mahloujifar et al. 2025 (same guesses)",
               "epsilon": "n/a" if fdp.epsilon_lower_bound is None else f"{fdp.epsilon_lower_bound:.3f}",
               "most these canaries can prove": f"mu {fdp.mu_ceiling:.3f}"}]
    if white_box:
        bounds.append({"bound": f"white-box DP-SGD, Steinke et al. ({white_box['gradient_canaries']} gradient canaries)",
                       "epsilon": f"{white_box['epsilon_lower_bound']:.3f}", "most these canaries can prove": "-"})
        if white_box.get("gaussian_pair_epsilon_lower_bound") is not None:
            bounds.append({"bound": "white-box, from the scores' Gaussian limit (assumes it)",
                           "epsilon": f"{white_box['gaussian_pair_epsilon_lower_bound']:.3f}",
                           "most these canaries can prove": "no ceiling"})
    tables = [{"title": f"Epsilon lower bounds at delta {one_run.delta:g}, {one_run.confidence:.0%} confidence",
               "rows": bounds}]
    if report.memorisation:
        tables.append({"title": "The memorisation curve, by copies planted", "rows": curve_rows(report.memorisation)})
    return {"title": "Canary audit", "created": report.created[:10], "version": report.lmaudit_version,
            "intro": f"Target {Path(report.target).name}; canaries scored by {report.attack} ({report.signal}).",
            "statements": canary_lines(report), "tables": tables,
            "limits": "A lower bound shows how much the training leaks at least, never that it leaks no more. This "
                      "document names the canaries by their counts and holds neither their secrets nor any text.",
            "provenance": sealed_provenance(report, REPORT_FILE)}


def group_sentence(group: GroupSection) -> str:
    """What a bound for canaries planted r times says of one record, in words."""
    claimed = ("" if group.accountant_epsilon is None else
               f" (epsilon {group.accountant_epsilon:.3g} at delta {group.accountant_delta:.3g})")
    epsilon = (f", epsilon >= {group.record_epsilon_lower_bound:.3f} at delta {group.record_delta:g}"
               if group.record_mu_lower_bound > 0 else "")
    return GROUP.format(repeats=group.repeats, claimed=claimed, mu=group.record_mu_lower_bound, epsilon=epsilon)


def _bits(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def fdp_line(fdp: FdpSection) -> str:
    """The f-DP bound as one line: mu, and the epsilon of the rejected Gaussian curve at the delta where there is one
    (a lower bound on epsilon only for a mechanism whose trade-off curve is Gaussian, as DP-SGD's nearly is)."""
    epsilon = ("no epsilon at delta 0" if fdp.epsilon_lower_bound is None else
               f"the rejected Gaussian curve's epsilon {fdp.epsilon_lower_bound:.3f} at delta {fdp.delta:g} (a "
               "lower bound on epsilon only where the training's trade-off curve is Gaussian, as DP-SGD's nearly is)")
    return (f"f-DP bound (Mahloujifar et al. 2025, same guess counts): mu >= {fdp.mu_lower_bound:.3f}, {epsilon} "
            f"({fdp.correct} of {fdp.guesses} right)")


def ceiling_line(report: CanaryReportDocument) -> str:
    """What m canaries can prove at most, and whether the bound is at it."""
    one_run, fdp = report.one_run, report.f_dp
    at_ceiling = (AT_CEILING + (NOT_DP if report.accountant is None else "")) if one_run.at_ceiling else ""
    return CEILING.format(canaries=one_run.canaries, epsilon=one_run.ceiling, mu=fdp.mu_ceiling,
                          delta=one_run.delta, at_ceiling=at_ceiling)


def validity_line(validity: ValiditySection) -> str:
    """The rank test of planted against unplanted scores as one line, INVALID first where it fails."""
    if validity.p_below is None:
        return "planted against unplanted scores: not tested (no canary on one side)"
    return (("INVALID AUDIT: the planted canaries score below the unplanted ones; " if not validity.valid else "")
            + f"planted against unplanted scores: rank AUC {validity.rank_auc:.3f} (0.5 is chance), probability "
            f"{validity.p_below:.2g} of scores this far below chance (one-sided Mann-Whitney; invalid below "
            f"{validity.level:g})")


def accountant_words(accountant: AccountantSection) -> tuple[str, str]:
    """The accountant a bound is compared with (PRV where computed, else RDP) and its epsilon in words: 'inf' where
    the run had no noise (null in the file)."""
    name, epsilon = accountant_epsilon(accountant.model_dump())
    return name, "inf" if epsilon is None else f"{epsilon:.3g}"


def canary_lines(report: CanaryReportDocument) -> list[str]:
    """The canary report for a terminal: the bound and its guesses, the accountant's epsilon, the exposure, and what
    the bound means."""
    one_run, canaries = report.one_run, report.canaries
    repeats = canaries.get("repeats", [1])
    repeats = [repeats] if isinstance(repeats, int) else list(repeats)  # an int: a report written before tiers
    planted = ("" if repeats == [1] else f" (each planted {repeats[0]} times)" if len(repeats) == 1 else
               f" (planted {', '.join(map(str, repeats[:-1]))} or {repeats[-1]} times, by tier)")
    lines = [f"{canaries['count']} {canaries['kind']} canaries" + planted + f" scored by {report.attack} "
             f"({report.signal}); guessed {one_run.positive_guesses} planted and {one_run.negative_guesses} "
             f"not planted, {one_run.correct} of {one_run.guesses} right",
             f"epsilon lower bound: {one_run.epsilon_lower_bound:.3f} at delta {one_run.delta:g}, "
             f"{one_run.confidence:.0%} confidence (best of {one_run.choices_of_k} guess counts, "
             f"Bonferroni-corrected; Steinke et al. 2023)", fdp_line(report.f_dp), ceiling_line(report)]
    validity = report.validity
    if validity:  # an invalid audit says so before any number
        lines.insert(0 if not validity.valid else len(lines), validity_line(validity))
    if report.accountant:
        accountant, epsilon = accountant_words(report.accountant)
        group = report.group
        for_group = ("" if not group or group.accountant_epsilon is None else
                     f"; for a group of {group.repeats}: {group.accountant_epsilon:.3g} at delta "
                     f"{group.accountant_delta:.3g}")
        lines.append(f"the accountant's epsilon: {epsilon} ({accountant}) at delta {report.accountant.delta:g}"
                     + for_group + (f"; {report.verdict}" if report.verdict else ""))
    if report.white_box:
        lines.append(white_box_line(report.white_box))
    if report.exposure:
        exposure = report.exposure
        lines.append(f"exposure (bits; {exposure['space_bits']:.1f} possible, {exposure['candidates']} random secrets "
                     f"scored): planted median {_bits(exposure['planted']['extrapolated_median'])}, largest "
                     f"{_bits(exposure['planted']['extrapolated_max'])}; never planted median "
                     f"{_bits(exposure['not_planted']['extrapolated_median'])} (extrapolated)")
    if report.memorisation:
        from lmaudit.report.curve_words import curve_lines

        lines += curve_lines(report.memorisation)
    return lines + [report.explanation]
