"""The DP sweep's outputs: a text table, sweep.json and a self-contained sweep.html, written all or nothing."""

from __future__ import annotations

from pathlib import Path

from lmaudit.report.documents import write_document
from lmaudit.report.html import render_template
from lmaudit.report.plots import accountant_epsilon, sweep_figure


def _epsilon(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def sweep_table(sweep: dict) -> str:
    """The sweep as text: per noise level, epsilon, utility, the canary epsilons (Steinke's, f-DP's; correct guesses /
    guesses), the white-box epsilon, and each attack's AUC, advantage and empirical epsilon."""
    names = sweep["attacks"]
    width = 26
    header = (f"{'sigma':>7}{'eps PRV':>9}{'eps RDP':>9}{'loss':>7}{'canaries':>22}{'white-box':>11}"
              + "".join(f"{n:>{width}}" for n in names))
    lines = [header, f"{'':>32}{'eps >= / f-DP (right)':>22}{'eps >=':>11}"
             + "".join(f"{'AUC / adv / eps >=':>{width}}" for _ in names), "-" * len(header)]
    for row in sweep["rows"]:
        eps = ["-" if row[key] is None else f"{row[key]:.3g}" for key in ("epsilon_prv", "epsilon_rdp")]
        cells = []
        for name in names:
            cell = row["attacks"].get(name)
            advantage = "" if not cell or cell["advantage"] is None else f"{cell['advantage']:.3f}"
            bound = "n/a" if not cell or cell["epsilon_lower_bound"] is None else f"{cell['epsilon_lower_bound']:.2f}"
            cells.append(f"{cell['auc']:.3f} / {advantage} / {bound}" if cell else "")
        canaries = (f"{row['canary_epsilon']:.2f} / {_epsilon(row['canary_f_dp_epsilon'])} "
                    f"({row['canary_correct']}/{row['canary_guesses']})")
        lines.append(f"{row['noise_multiplier']:>7g}{eps[0]:>9}{eps[1]:>9}{row['held_out_loss']:>7.2f}{canaries:>22}"
                     f"{_epsilon(row['white_box_epsilon']):>11}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def write_sweep(out: str | Path, sweep: dict) -> None:
    """sweep.json and sweep.html (table and plot) in `out`, both or neither."""
    out = Path(out)
    rows = sorted(sweep["rows"], key=accountant_epsilon)
    html = render_template("sweep.html.j2", sweep=sweep, rows=rows, figure=sweep_figure(sweep))
    write_document(out, "sweep.json", sweep, page=("sweep.html", html))
