"""A model card's "Privacy evaluation" section and the Hub's machine-readable results from an audit's report.json: the
verdict per level with its strongest attack's AUC, TPR at 1% FPR and epsilon bound (each with its interval), the threat
models tried, the caveats and the limits of the evidence; written beside the model with `huggingface_hub`'s model-card
tools (README.md's text and its `model-index` metadata) and as privacy_evaluation.json, locally, with no network."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lmaudit.atomic import staged
from lmaudit.errors import InputError
from lmaudit.report.coverage import LIMITS
from lmaudit.report.document import LevelVerdict, ReportDocument, load_report
from lmaudit.report.formatting import MISSING, number, with_interval

HEADING = "## Privacy evaluation"
CARD_FILE, EVALUATION_FILE = "README.md", "privacy_evaluation.json"
TASK = "membership-inference"  # the model-index task the Hub shows these results under


def level_cells(level: LevelVerdict) -> dict[str, str]:
    """One level's headline as the page writes it: risk, strongest attack, AUC and TPR at 1% FPR with their intervals,
    the epsilon lower bound (the model card's row and the PDF's)."""
    strongest, tpr, epsilon = level.strongest, level.tpr_at_1pct_fpr, level.epsilon_lower_bound
    return {"risk": level.risk, "attack": strongest.attack, "auc": with_interval(strongest.auc, strongest.auc_ci),
            "tpr": with_interval(tpr.tpr, tpr.tpr_ci) if tpr is not None else MISSING,
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
        "| level | risk | strongest attack | AUC [95% CI] | TPR at 1% FPR [95% CI] | epsilon lower bound |",
        "|---|---|---|---|---|---|", *rows, "",
        summary.threat_models.statement, *([""] + caveats if caveats else []), "", LIMITS, ""])


def evaluation(report: ReportDocument) -> dict:
    """privacy_evaluation.json: the headline numbers by level, for programs (NaN as null)."""
    levels = {}
    for name, level in report.summary.levels.items():
        numbers = level.headline()
        levels[name] = {"risk": level.risk, "attack": level.strongest.attack, "auc": numbers["auc"],
                        "auc_ci": [numbers["auc_low"], numbers["auc_high"]],
                        "tpr_at_1pct_fpr": numbers["tpr_at_1pct_fpr"],
                        "epsilon_lower_bound": numbers["epsilon_lower_bound"]}
    return {"tool": "lmaudit", "lmaudit_version": report.lmaudit_version, "created": report.created,
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
        if level.tpr_at_1pct_fpr is not None and not math.isnan(level.tpr_at_1pct_fpr.tpr):
            results.append(EvalResult(**common, metric_type="tpr_at_1pct_fpr", metric_name="TPR at 1% FPR",
                                      metric_value=round(float(level.tpr_at_1pct_fpr.tpr), 4)))
    return results


def without_section(text: str) -> str:
    """A card's text with its privacy section (from HEADING to the next second-level heading) taken out."""
    start = text.index(HEADING)
    following = text.find("\n## ", start + len(HEADING))
    return text[:start].rstrip("\n") + ("\n\n" + text[following + 1:] if following >= 0 else "\n")


def write_model_card(model: str | Path, report_path: str | Path, overwrite: bool = False) -> Path:
    """Add the privacy section and results of `report_path` (report.json or its folder) to `model`'s model card
    (README.md, created if absent) and write privacy_evaluation.json beside it; a card that already has the section is
    refused unless `overwrite`, which replaces it. Both files are written whole or not at all; the card's path."""
    from huggingface_hub import ModelCard, ModelCardData

    model = Path(model)
    if not model.is_dir():
        raise InputError(f"--model {model}: not a folder; give the model folder whose card to write")
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
    with staged(card_path, model / EVALUATION_FILE) as (card_staging, evaluation_staging):
        card_staging.write_text(str(card), encoding="utf-8")
        evaluation_staging.write_text(json.dumps(evaluation(report), indent=2), encoding="utf-8")
    return card_path
