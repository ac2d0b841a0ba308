"""A study's outputs: a text table for the terminal, study.json and a self-contained study.html, written all or nothing."""

from __future__ import annotations

from pathlib import Path

from lmaudit.atomic import staged
from lmaudit.report.build import json_text
from lmaudit.report.html import render_template
from lmaudit.report.plots import study_figure
from lmaudit.report.tables import number, percent, shown_summary


def setting(value) -> str:
    """A setting as the table shows it: floats in %g (0.0003, not 0.00030000000000000003)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def study_lines(study: dict) -> list[str]:
    """The study as text: one line per cell, its settings, then AUC and recall at the population threshold of each
    shown attack."""
    keys = list(dict.fromkeys(key for cell in study["cells"] for key in cell["settings"]))
    shown = [tuple(pair) for pair in study["shown"]]
    widths = [max(len(key), *(len(setting(c["settings"].get(key, ""))) for c in study["cells"])) for key in keys]
    header = "  ".join(f"{key:<{w}}" for key, w in zip(keys, widths, strict=True)) + "".join(
        f"  {f'{a} {lv}':>34}" for a, lv in shown)
    lines = [header, " " * sum(w + 2 for w in widths) + "".join(f"  {'AUC / recall at pop. 10% FPR':>34}" for _ in shown)]
    for cell in study["cells"]:
        text = "  ".join(f"{setting(cell['settings'].get(key, '')):<{w}}" for key, w in zip(keys, widths, strict=True))
        for attack, level in shown:
            summary = shown_summary(cell, attack, level)
            recall = percent(summary["population_recall"]) or "n/a" if summary else ""
            text += f"  {(number(summary['auc']) + ' / ' + recall) if summary else 'not run':>34}"
        lines.append(text)
    return lines


def write_study(out: str | Path, study: dict, analysis_figure: str | None = None) -> None:
    """study.json and study.html (the table, the plot against the studied setting when there are several cells, and the
    analysis's figure, a base64 PNG) in `out`, both or neither."""
    out = Path(out)
    keys = list(dict.fromkeys(key for cell in study["cells"] for key in cell["settings"]))
    shown = [tuple(pair) for pair in study["shown"]]
    html = render_template("study.html.j2", study=study, keys=keys, shown=shown, summary=shown_summary, setting=setting,
                           figure=study_figure(study) if len(study["cells"]) > 1 else None,
                           analysis_figure=analysis_figure)
    with staged(out / "study.html", out / "study.json") as (html_file, json_file):
        html_file.write_text(html, encoding="utf-8")
        json_file.write_text(json_text(study), encoding="utf-8")
