"""A model card's "Privacy evaluation" section and the Hub's machine-readable results from an audit's report.json: the
verdict per level with its strongest attack's AUC, TPR at 1% FPR and epsilon bound (each with its interval), the threat
models tried, the caveats and the limits of the evidence; written beside the model with `huggingface_hub`'s model-card
tools (README.md's text and its `model-index` metadata) and as privacy_evaluation.json, locally, with no network."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from lmaudit.atomic import staged
from lmaudit.errors import InputError
from lmaudit.report.coverage import LIMITS
from lmaudit.report.derived import DERIVED_FILE, derived_json, entry, section_text, text_sha256
from lmaudit.report.document import LevelVerdict, ReportDocument, load_report
from lmaudit.report.formatting import MISSING, number, with_interval
from lmaudit.strict_json import json_text

HEADING = "## Privacy evaluation"
CARD_FILE, EVALUATION_FILE = "README.md", "privacy_evaluation.json"
TASK = "membership-inference"  # the model-index task the Hub shows these results under


def level_cells(level: LevelVerdict) -> dict[str, str]:
    """One level's headline as the page writes it: risk, strongest attack (by AUC) and its AUC with its interval, the
    TPR at 1% FPR of the attack that exposes most with its interval and its own attack's name, the epsilon lower bound
    (the model card's row and the PDF's)."""
    strongest, tpr, epsilon = level.strongest, level.tpr_at_1pct_fpr, level.epsilon_lower_bound
    return {"risk": level.risk, "attack": strongest.attack, "auc": with_interval(strongest.auc, strongest.auc_ci),
            "tpr": f"{with_interval(tpr.tpr, tpr.tpr_ci)} ({tpr.attack})" if tpr is not None else MISSING,
            "epsilon": number(epsilon.epsilon_lower_bound) if epsilon is not None else MISSING}


def level_row(name: str, level: LevelVerdict) -> str:
    """One level's markdown row: risk, strongest attack, AUC, TPR at 1% FPR and the epsilon lower bound."""
    return "| " + " | ".join([name, *level_cells(level).values()]) + " |"


def privacy_section(report: ReportDocument) -> str:
    """The section's markdown, from its heading to its last line."""
    summary = report.summary
    rows = [level_row(name, level) for name, level in summary.levels.items()]
    caveats = [f"- {caveat}" for caveat in summary.caveats or []]
    return "\n".join([
        HEADING, "",
        f"Audited with lmaudit {report.lmaudit_version} on {report.created[:10]}: membership-inference risk "
        f"**{summary.risk}** ({summary.rule}).", "",
        f"From report.json with SHA-256 `{report.integrity.report_sha256 if report.integrity else MISSING}` "
        "(`lmaudit verify` checks this section against it).", "",
        "| level | risk | strongest attack | AUC [95% CI] | TPR at 1% FPR [95% CI] (attack) | epsilon lower bound |",
        "|---|---|---|---|---|---|", *rows, "",
        summary.threat_models.statement, *([""] + caveats if caveats else []), "", LIMITS, ""])


class EvaluatedLevel(BaseModel):
    """One level of privacy_evaluation.json: its risk, the strongest attack's AUC and 95% interval, the TPR at 1% FPR
    of the attack that exposes most and its interval, and the epsilon lower bound (None where not measured)."""

    model_config = ConfigDict(extra="forbid")
    risk: Literal["high", "moderate", "low", "inconclusive"]
    attack: str
    auc: float | None
    auc_ci: tuple[float | None, float | None]
    tpr_at_1pct_fpr: float | None
    tpr_at_1pct_fpr_ci: tuple[float | None, float | None]
    tpr_attack: str | None
    epsilon_lower_bound: float | None


class PrivacyEvaluation(BaseModel):
    """privacy_evaluation.json: the report's headline numbers by level for programs, with the report's SHA-256."""

    model_config = ConfigDict(extra="forbid")
    tool: Literal["lmaudit"]
    lmaudit_version: str
    created: str
    report_sha256: str | None
    risk: Literal["high", "moderate", "low", "inconclusive"]
    levels: dict[str, EvaluatedLevel]
    limits: str


def evaluation(report: ReportDocument) -> dict:
    """privacy_evaluation.json: the headline numbers by level, for programs (NaN as null)."""
    levels = {}
    for name, level in report.summary.levels.items():
        numbers = level.headline()
        tpr = level.tpr_at_1pct_fpr
        levels[name] = {"risk": level.risk, "attack": level.strongest.attack, "auc": numbers["auc"],
                        "auc_ci": [numbers["auc_low"], numbers["auc_high"]],
                        "tpr_at_1pct_fpr": numbers["tpr_at_1pct_fpr"],
                        "tpr_at_1pct_fpr_ci": [numbers["tpr_low"], numbers["tpr_high"]],
                        "tpr_attack": tpr.attack if tpr is not None else None,
                        "epsilon_lower_bound": numbers["epsilon_lower_bound"]}
    return {"tool": "lmaudit", "lmaudit_version": report.lmaudit_version, "created": report.created,
            "report_sha256": report.integrity.report_sha256 if report.integrity else None,
            "risk": report.summary.risk, "levels": levels, "limits": LIMITS}


def eval_results(report: ReportDocument) -> list:
    """The Hub's model-index results: per level, the strongest attack's AUC and its TPR at 1% FPR (where measured)."""
    from huggingface_hub import EvalResult

    results = []
    for name, level in report.summary.levels.items():
        common = {"task_type": TASK, "task_name": "Membership inference (lmaudit)", "dataset_type": "private",
                  "dataset_name": f"audited {name}s"}
        results.append(EvalResult(**common, metric_type="roc_auc", metric_name=f"AUC, {level.strongest.attack}",
                                  metric_value=round(float(level.strongest.auc), 4)))
        tpr = level.tpr_at_1pct_fpr
        if tpr is not None and not math.isnan(tpr.tpr):
            results.append(EvalResult(**common, metric_type="tpr_at_1pct_fpr", metric_name=f"TPR at 1% FPR, {tpr.attack}",
                                      metric_value=round(float(tpr.tpr), 4)))
    return results


def without_section(text: str) -> str:
    """A card's text with its privacy section (from HEADING to the next second-level heading) taken out."""
    start = text.index(HEADING)
    following = text.find("\n## ", start + len(HEADING))
    return text[:start].rstrip("\n") + ("\n\n" + text[following + 1:] if following >= 0 else "\n")


def write_model_card(model: str | Path, report_path: str | Path, overwrite: bool = False) -> Path:
    """Add the privacy section and results of `report_path` (report.json or its folder) to `model`'s model card
    (README.md, created if absent) and write privacy_evaluation.json beside it; a card that already has the section is
    refused unless `overwrite`, which replaces it. Both files are written whole or not at all, and recorded (the card's
section alone) in the report folder's derived.json, which `lmaudit verify` checks; the card's path."""
    from huggingface_hub import ModelCard, ModelCardData

    model = Path(model)
    if not model.is_dir():
        raise InputError(f"--target {model}: not a folder; give the model folder whose card to write")
    report = load_report(report_path)
    card_path = model / CARD_FILE
    card = ModelCard(card_path.read_text(encoding="utf-8")) if card_path.is_file() else \
        ModelCard.from_template(ModelCardData(model_name=model.name),
                                template_str="---\n{{ card_data }}\n---\n\n# {{ model_name }}\n")
    if HEADING in card.text:
        if not overwrite:
            raise InputError(f"{card_path}: already has a '{HEADING[3:]}' section; pass --overwrite to replace it")
        card.text = without_section(card.text)
    card.text = card.text.rstrip("\n") + "\n\n" + privacy_section(report)
    card.data.model_name = card.data.model_name or model.name
    kept = [result for result in card.data.eval_results or [] if result.task_type != TASK]
    card.data.eval_results = kept + eval_results(report)
    card_text, evaluation_text = str(card), json_text(evaluation(report))
    PrivacyEvaluation.model_validate_json(evaluation_text)  # a writer's bug is refused before anything is on disk
    folder = report_folder(report_path)
    records = [entry(folder, card_path, text_sha256(section_text(card_text, HEADING)), HEADING),
               entry(folder, model / EVALUATION_FILE, text_sha256(evaluation_text))]
    derived = derived_json(folder, records)
    with staged(card_path, model / EVALUATION_FILE, folder / DERIVED_FILE) as (card_staging, evaluation_staging,
                                                                              derived_staging):
        card_staging.write_text(card_text, encoding="utf-8")
        evaluation_staging.write_text(evaluation_text, encoding="utf-8")
        derived_staging.write_text(derived, encoding="utf-8")
    return card_path


def report_folder(report_path: str | Path) -> Path:
    """The audit folder of a report (report.json or its folder)."""
    path = Path(report_path)
    return path if path.is_dir() else path.parent
