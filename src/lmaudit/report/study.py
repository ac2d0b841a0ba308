"""A study's outputs: a text table for the terminal, study.json and a self-contained study.html, written all or nothing."""

from __future__ import annotations

from pathlib import Path

from lmaudit.report.documents import write_document
from lmaudit.report.formatting import number, percent
from lmaudit.report.html import render_template
from lmaudit.report.plots import study_figure
from lmaudit.report.tables import shown_summary


def setting(value) -> str:
    """A setting or a measured value as the table shows it: floats in %.4g (0.0003, not 0.00030000000000000003), None
    (a value that does not apply, or infinite in JSON) as a dash."""
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def columns(study: dict) -> list[str]:
    """The table's first columns: the cells' settings, then what they measured besides their audits (first-seen order)."""
    return list(dict.fromkeys(key for cell in study["cells"] for part in ("settings", "measured")
                              for key in cell.get(part, {})))


def column_value(cell: dict, key: str):
    """A cell's value in one of the first columns (a setting or a measurement; "" when it has none)."""
    return {**cell["settings"], **cell.get("measured", {})}.get(key, "")


def study_lines(study: dict) -> list[str]:
    """The study as text: one line per cell, its settings and measurements, then AUC and recall at the population
    threshold of each shown attack."""
    keys = columns(study)
    shown = [tuple(pair) for pair in study["shown"]]
    widths = [max(len(key), *(len(setting(column_value(c, key))) for c in study["cells"])) for key in keys]
    header = "  ".join(f"{key:<{w}}" for key, w in zip(keys, widths, strict=True)) + "".join(
        f"  {f'{a} {lv}':>34}" for a, lv in shown)
    lines = [header, " " * sum(w + 2 for w in widths) + "".join(f"  {'AUC / recall at pop. 10% FPR':>34}" for _ in shown)]
    for cell in study["cells"]:
        text = "  ".join(f"{setting(column_value(cell, key)):<{w}}" for key, w in zip(keys, widths, strict=True))
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
    shown = [tuple(pair) for pair in study["shown"]]
    grid_figure = len(study["cells"]) > 1 and study.get("grid_figure", True)
    html = render_template("study.html.j2", study=study, keys=columns(study), value=column_value, shown=shown,
                           summary=shown_summary, setting=setting, figure=study_figure(study) if grid_figure else None,
                           analysis_figure=analysis_figure)
    write_document(out, "study.json", study, page=("study.html", html))
