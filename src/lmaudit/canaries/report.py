"""The canary report: canary_report.json's document, its page, and the lines the terminal prints, with what the bounds
mean in plain words (and, when they prove nothing, that this is not a proof of privacy)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from lmaudit import __version__
from lmaudit.atomic import staged
from lmaudit.canaries.make import CanarySet
from lmaudit.config import AuditConfig
from lmaudit.metrics.privacy import accountant_epsilon, verdict_against

if TYPE_CHECKING:
    from lmaudit.metrics.fdp_one_run import GaussianBound
    from lmaudit.metrics.one_run import OneRunBound

REPORT_FILE, SCORES_FILE, PAGE_FILE = "canary_report.json", "canary_scores.parquet", "canary_report.html"
EXPLANATION = (
    "What the bounds mean: if the training that produced this model were (epsilon, delta)-differentially private "
    "with an epsilon below Steinke et al.'s bound, guesses this good about which canaries it saw would happen less "
    "than {risk:.0%} of the time; the f-DP bound (Mahloujifar et al.) asks the same of the Gaussian trade-off curve "
    "that DP-SGD follows, which proves more from the same guesses, and its epsilon is that curve's at the delta. So the "
    "training is not that private, with {confidence:.0%} confidence. What they do not mean: each is a lower bound, "
    "not an estimate of the true epsilon, which may be far larger. They come from one training run and one attack, "
    "and are themselves random: a stronger attack, more canaries, or canaries that stand out more tend to raise them. "
    "They speak of the canaries' privacy; real samples, which are less unusual, typically leak less."
)
NOTHING_PROVED = (
    "Nothing was proved: {correct} of {guesses} guesses right is what chance gives often enough. This does NOT say "
    "the training is private: these canaries did not stand out to this attack (too few, too ordinary, or scored on "
    "text the model predicts anyway). Canaries designed to be found (--design new_token, scored on the secret alone) "
    "catch a model trained without DP; see docs/canaries.md."
)


def canary_report(config: AuditConfig, canary_set: CanarySet, attack: str, bound: OneRunBound,
                  gaussian: GaussianBound, exposure: dict | None, dp: dict | None) -> dict:
    """canary_report.json's document: what was audited, both bounds with their guesses, the exposure, the accountant's
    epsilon beside the bounds, and the plain-words explanation."""
    guesses = bound.guesses
    verdict = None
    if dp is not None and dp["delta"] == bound.delta:
        # Steinke et al.'s bound only: the f-DP epsilon is that of the rejected Gaussian curve, and a correct DP-SGD,
        # whose curve is not exactly Gaussian, can reject a mu whose epsilon exceeds the accountant's.
        verdict = verdict_against(bound.epsilon_lower_bound, accountant_epsilon(dp)[1])
    return {
        "schema_version": 1, "kind": "canary_audit", "lmaudit_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "target": config.target, "reference": list(config.reference), "attack": attack, "signal": config.signal.signal,
        # Never the seed: it rebuilds the key.
        "canaries": {key: value for key, value in asdict(canary_set).items() if key not in ("seed", "secret_format")}
        | {"space_bits": canary_set.space_bits},
        "one_run": {"canaries": guesses.canaries, "guesses": guesses.guesses,
                    "positive_guesses": guesses.positive_guesses, "negative_guesses": guesses.negative_guesses,
                    "correct": guesses.correct, "accuracy": guesses.correct / guesses.guesses if guesses.guesses else None,
                    "epsilon_lower_bound": bound.epsilon_lower_bound, "delta": bound.delta,
                    "confidence": bound.confidence, "choices_of_k": bound.choices},
        "f_dp": {"mu_lower_bound": gaussian.mu_lower_bound, "epsilon_lower_bound": gaussian.epsilon_lower_bound,
                 "delta": gaussian.delta, "confidence": gaussian.confidence,
                 "positive_guesses": gaussian.guesses.positive_guesses,
                 "negative_guesses": gaussian.guesses.negative_guesses, "correct": gaussian.guesses.correct,
                 "guesses": gaussian.guesses.guesses},
        "accountant": dp, "verdict": verdict, "exposure": exposure,
        "explanation": (EXPLANATION.format(risk=1 - bound.confidence, confidence=bound.confidence)
                        if bound.epsilon_lower_bound > 0 or gaussian.mu_lower_bound > 0 else
                        NOTHING_PROVED.format(correct=guesses.correct, guesses=guesses.guesses)),
        "settings": {"signal": config.signal.model_dump(), "seed": config.evaluation.seed,
                     "include_text": config.include_text},
    }


def write_canary_audit(out: Path, report: dict, scores: pd.DataFrame) -> None:
    """The scores table, the report and its page, all or none."""
    from lmaudit.report.build import json_text
    from lmaudit.report.html import render_template

    out.mkdir(parents=True, exist_ok=True)
    page = render_template("canaries.html.j2", report=report)
    with staged(out / SCORES_FILE, out / REPORT_FILE, out / PAGE_FILE) as (scores_file, report_file, page_file):
        scores.to_parquet(scores_file, index=False)
        report_file.write_text(json_text(report), encoding="utf-8")
        page_file.write_text(page, encoding="utf-8")


def _bits(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def fdp_line(fdp: dict) -> str:
    """The f-DP bound as one line: mu, and the epsilon it implies at the delta where there is one."""
    epsilon = ("no epsilon at delta 0" if fdp["epsilon_lower_bound"] is None else
               f"epsilon lower bound {fdp['epsilon_lower_bound']:.3f} at delta {fdp['delta']:g}")
    return (f"f-DP bound (Mahloujifar et al. 2025, same guess counts): mu >= {fdp['mu_lower_bound']:.3f}, {epsilon} "
            f"({fdp['correct']} of {fdp['guesses']} right)")


def canary_lines(report: dict) -> list[str]:
    """The canary report for a terminal: the bound and its guesses, the accountant's epsilon, the exposure, and what
    the bound means."""
    one_run = report["one_run"]
    lines = [f"{report['canaries']['count']} {report['canaries']['kind']} canaries scored by {report['attack']} "
             f"({report['signal']}); guessed {one_run['positive_guesses']} planted and {one_run['negative_guesses']} "
             f"not planted, {one_run['correct']} of {one_run['guesses']} right",
             f"epsilon lower bound: {one_run['epsilon_lower_bound']:.3f} at delta {one_run['delta']:g}, "
             f"{one_run['confidence']:.0%} confidence (best of {one_run['choices_of_k']} guess counts, "
             f"Bonferroni-corrected; Steinke et al. 2023)", fdp_line(report["f_dp"])]
    if report["accountant"]:
        accountant, epsilon = accountant_epsilon(report["accountant"])
        lines.append(f"the accountant's epsilon: {epsilon:.3g} ({accountant}) at delta {report['accountant']['delta']:g}"
                     + (f"; {report['verdict']}" if report["verdict"] else ""))
    if report["exposure"]:
        exposure = report["exposure"]
        lines.append(f"exposure (bits; {exposure['space_bits']:.1f} possible, {exposure['candidates']} random secrets "
                     f"scored): planted median {_bits(exposure['planted']['extrapolated_median'])}, largest "
                     f"{_bits(exposure['planted']['extrapolated_max'])}; never planted median "
                     f"{_bits(exposure['not_planted']['extrapolated_median'])} (extrapolated)")
    return lines + [report["explanation"]]
