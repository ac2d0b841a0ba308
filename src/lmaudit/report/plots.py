"""Figures of the HTML report, returned as base64 PNG so the page stays self-contained."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lmaudit.attacks.base import AttackScores  # noqa: E402
from lmaudit.attacks.registry import attack_spec  # noqa: E402
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER  # noqa: E402
from lmaudit.metrics import privacy  # noqa: E402
from lmaudit.metrics.roc import roc_points  # noqa: E402
from lmaudit.report.tables import shown_summary  # noqa: E402


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def roc_figure(curves: list[tuple[str, AttackScores]], title: str) -> str:
    """ROC curves of the given (legend label, attack) pairs on linear and logarithmic axes side by side (`title`: e.g.
    "sample level"). The log axes start at the smallest rate the data resolves: 1 / non-members (FPR) and 1 / members
    (TPR)."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    smallest_fpr = smallest_tpr = 1.0
    for label, attack in curves:
        audited = attack.frame[attack.frame["role"].isin(AUDITED_ROLES)]
        labels = (audited["role"] == MEMBER).to_numpy()
        smallest_fpr = min(smallest_fpr, 1 / max(1, int((~labels).sum())))
        smallest_tpr = min(smallest_tpr, 1 / max(1, int(labels.sum())))
        fpr, tpr, _ = roc_points(labels, audited["score"].to_numpy())
        for axis in axes:
            axis.plot(fpr, tpr, label=label, drawstyle="steps-post")
    for axis, scale in zip(axes, ("linear", "log"), strict=True):
        low = min(smallest_fpr, smallest_tpr) if scale == "log" else 0.0
        axis.plot([max(low, 1e-6), 1], [max(low, 1e-6), 1], "--", color="grey", linewidth=1, label="chance")
        axis.set_xscale(scale)
        axis.set_yscale(scale)
        axis.set_xlabel("false-positive rate")
        axis.set_ylabel("true-positive rate")
        axis.set_title(f"{title}, {scale} axes", fontsize=10)
        if scale == "log":  # with a single unit on a side, still a decade to draw in
            axis.set_xlim(min(smallest_fpr, 0.1), 1)
            axis.set_ylim(min(smallest_tpr, 0.1), 1)
    axes[1].legend(loc="lower right", fontsize=7)
    return _png(figure)


OUTLIER_FENCE = 3.0  # interquartile ranges beyond the quartiles at which a histogram's axis stops (Tukey's far fence)


def overflow_scale(values: np.ndarray) -> float:
    """1, or for finite values beyond 1e150 in size the power of two that brings the largest to [1, 2): differences
    and axes of values near the largest floats overflow, divided by it they do not."""
    largest = float(np.abs(values).max()) if len(values) else 0.0
    return 2.0 ** np.floor(np.log2(largest)) if largest > 1e150 else 1.0


def histogram_bins(values: np.ndarray, max_bins: int = 50) -> tuple[np.ndarray, int, int]:
    """Bin edges from the smallest to the largest finite value within Tukey's far fences (3 interquartile ranges beyond
    the quartiles), Freedman-Diaconis width with 10 to `max_bins` bins; and how many values lie below and above them
    (non-finite ones included). Values that (nearly all) tie, or differ only in their last digits, get one bin around
    the tie."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return np.array([-0.5, 0.5]), int(np.sum(values == -np.inf)), int(np.sum(values == np.inf))
    # Scores near the largest floats (a losses file of +-1e308) overflow the differences below: bin them divided by a
    # power of two, which divides and multiplies back exactly (`unit`: 1 in the scores' own unit).
    scale = overflow_scale(finite)
    edges = _edges(finite / scale, max_bins, unit=1.0 / scale) * scale
    return edges, int(np.sum(values < edges[0])), int(np.sum(values > edges[-1]))


def _edges(finite: np.ndarray, max_bins: int, unit: float) -> np.ndarray:
    """histogram_bins' edges of finite values whose differences do not overflow; `unit` is 1 in the scores' own unit."""
    first, third = np.quantile(finite, [0.25, 0.75])
    spread = third - first
    inside = finite[(finite >= first - OUTLIER_FENCE * spread) & (finite <= third + OUTLIER_FENCE * spread)]
    low, high = float(inside.min()), float(inside.max())
    if not high - low > 1e-9 * max(unit, abs(low), abs(high)):  # a spread below float precision: bins would coincide
        return np.array([first - 0.5 * unit, first + 0.5 * unit])
    width = 2 * spread / len(finite) ** (1 / 3)
    count = int(np.clip(np.ceil((high - low) / width) if width > 0 else max_bins, 10, max_bins))
    return np.linspace(low, high, count + 1)


def histogram_figure(attack: AttackScores, threshold: float | None, threshold_label: str) -> str:
    """Member and non-member histograms of one attack's score, a calibrated threshold marked; outliers (beyond Tukey's
    far fences) are counted in the outermost bins and the legend says how many."""
    figure, axis = plt.subplots(figsize=(4.6, 3.2))
    frame = attack.frame
    audited = frame["role"].isin(AUDITED_ROLES)
    edges, below, above = histogram_bins(frame.loc[audited, "score"].to_numpy(dtype=float))
    scale = overflow_scale(edges)  # the axis of scores near the largest floats is drawn divided by a power of two
    for role, color in ((MEMBER, "tab:blue"), (NONMEMBER, "tab:orange")):
        values = np.clip(frame.loc[frame["role"] == role, "score"].to_numpy(dtype=float), edges[0], edges[-1])
        values = values[~np.isnan(values)]
        if len(values):  # one filled outline per role: a patch per bin looks the same and draws slower
            axis.hist(values / scale, bins=edges / scale, alpha=0.55, color=color, label=role, density=True,
                      histtype="stepfilled")
    if threshold is not None and np.isfinite(threshold):
        shown = float(np.clip(threshold, edges[0], edges[-1]))
        clipped = " (beyond the axis)" if shown != threshold else ""
        axis.axvline(shown / scale, color="red", linewidth=1.5, label=threshold_label + clipped)
    if below or above:
        axis.plot([], [], " ", label=f"clipped into the end bins: {below} below, {above} above")
    divided = f" (divided by 2^{np.log2(scale):.0f})" if scale != 1.0 else ""
    axis.set_xlabel(attack_spec(attack.attack).score_label + divided, fontsize=8)
    axis.set_ylabel("density", fontsize=8)
    axis.tick_params(labelsize=7)
    axis.legend(fontsize=6)
    return _png(figure)


def accountant_epsilon(row: dict) -> float:
    """A sweep row's epsilon from the accountant: PRV, else RDP; +inf without noise (or when neither was computed)."""
    value = privacy.accountant_epsilon(row)[1]
    return float("inf") if value is None else float(value)


def largest_bound(row: dict, level: str) -> float:
    """A sweep row's largest empirical epsilon lower bound among its attacks at `level` (0 where none has one): a
    record's epsilon at sample level, a patient's at group level."""
    return max((c["epsilon_lower_bound"] for name, c in row["attacks"].items()
                if name.endswith(f" {level}") and c["epsilon_lower_bound"] is not None), default=0.0)


def sweep_figure(sweep: dict) -> str:
    """Against the accountant's epsilon (log axis; no noise, epsilon infinite, at the right): each attack's AUC with its
    95% interval; the largest empirical epsilon lower bound per sample with the canaries' and the white-box one beside
    the line of the accountant's (a record's) epsilon, and per patient beside group privacy's line (the cap of samples
    per patient times it); and the held-out loss."""
    rows = sorted(sweep["rows"], key=accountant_epsilon)
    epsilons = [accountant_epsilon(r) for r in rows]
    finite = [e for e in epsilons if np.isfinite(e)]
    no_noise_at = max(finite) * 10 if finite else 1.0
    x = np.array([e if np.isfinite(e) else no_noise_at for e in epsilons])
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 3.8))
    for name in sweep["attacks"]:
        cells = [r["attacks"].get(name) for r in rows]
        auc = np.array([c["auc"] if c else np.nan for c in cells])
        low = np.array([c["auc_ci"][0] if c else np.nan for c in cells])
        high = np.array([c["auc_ci"][1] if c else np.nan for c in cells])
        left.errorbar(x, auc, yerr=[auc - low, high - auc], marker="o", capsize=3, label=name)
    left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("attack AUC (95% interval)")
    middle.plot(x, [largest_bound(r, "sample") for r in rows], marker="o", color="black",
                label="largest attack lower bound, per sample")
    # A patient-level attack bounds a patient's epsilon, which group privacy puts at up to k times a record's.
    middle.plot(x, [largest_bound(r, "group") for r in rows], marker="D", color="tab:green", linestyle=":",
                label="largest attack lower bound, per patient")
    middle.plot(x, [r["canary_epsilon"] for r in rows], marker="s", color="tab:red", label="new-token canaries (one run)")
    if any(r.get("white_box_epsilon") is not None for r in rows):
        middle.plot(x, [np.nan if r.get("white_box_epsilon") is None else r["white_box_epsilon"] for r in rows],
                    marker="^", color="tab:blue", label="gradient canaries (white-box)")
    if finite:
        middle.plot(finite, finite, "--", color="grey", linewidth=1, label="the accountant's epsilon (a record's)")
        cap = sweep["dp"].get("max_samples_per_group")
        if cap:
            middle.plot(finite, [cap * e for e in finite], ":", color="tab:green", linewidth=1,
                        label=f"a patient's by group privacy ({cap} x)")
    middle.set_yscale("symlog", linthresh=0.1)
    middle.set_ylabel("epsilon")
    right.plot(x, [r["held_out_loss"] for r in rows], marker="o", color="black")
    right.set_ylabel("held-out masked-token loss (nats)")
    for axis in (left, middle, right):
        axis.set_xscale("log")
        axis.set_xlabel(f"accountant's epsilon (no noise plotted at {no_noise_at:g})", fontsize=8)
    left.legend(fontsize=6)
    middle.legend(fontsize=7)
    return _png(figure)


def canary_figure(report: dict) -> str:
    """A canary report's epsilons side by side (symlog axis): Steinke et al.'s lower bound and the f-DP bound's Gaussian
    curve's epsilon from the canaries,
    the white-box bound where the training audited DP-SGD, and the accountant's upper bound (a group's for repeated
    canaries) where the model was trained with DP-SGD."""
    bars = [("canaries: Steinke et al. (lower)", report["one_run"]["epsilon_lower_bound"], "tab:red"),
            ("canaries: f-DP (its Gaussian curve's)", report["f_dp"]["epsilon_lower_bound"] or 0.0, "tab:orange")]
    if report.get("white_box"):
        white_box = report["white_box"]
        at = "" if white_box["delta"] == report["one_run"]["delta"] else f", delta {white_box['delta']:g}"
        bars.append((f"DP-SGD steps: white-box (lower{at})", white_box["epsilon_lower_bound"], "tab:blue"))
    if report["accountant"]:
        group = report.get("group")
        name, epsilon = privacy.accountant_epsilon(report["accountant"])
        if group:
            name, epsilon = f"{name}, group of {group['repeats']}", group["accountant_epsilon"]
        if epsilon is not None:
            bars.append((f"accountant, {name} (upper)", epsilon, "grey"))
    right_end = max((value for _, value, _ in bars if np.isfinite(value)), default=0.0) * 3 + 1
    figure, axis = plt.subplots(figsize=(7, 0.5 + 0.45 * len(bars)))
    # An infinite epsilon (clipping without noise) runs to the right end, marked as such.
    axis.barh([name for name, _, _ in bars], [min(value, right_end) for _, value, _ in bars],
              color=[c for _, _, c in bars])
    for position, (_, value, _) in enumerate(bars):
        axis.text(min(value, right_end), position, f" {value:.3g}" if np.isfinite(value) else " infinite",
                  va="center", fontsize=8)
    axis.set_xscale("symlog", linthresh=1.0)
    axis.set_xlim(0, right_end)
    axis.invert_yaxis()
    axis.set_xlabel(f"epsilon at delta {report['one_run']['delta']:.3g}", fontsize=8)
    axis.tick_params(labelsize=8)
    return _png(figure)


def study_figure(study: dict) -> str:
    """Against the studied setting (study["x"]; categories in the cells' order when not all numbers): AUC with its 95%
    interval and recall at the population threshold of each shown attack and level, one line per value of
    study["series"] when it has one."""
    cells = study["cells"]
    values = [cell["settings"][study["x"]] for cell in cells]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    categories = list(dict.fromkeys(map(str, values)))
    position = [float(v) if numeric else categories.index(str(v)) for v in values]
    series = study.get("series")
    groups = list(dict.fromkeys(str(cell["settings"][series]) for cell in cells)) if series else [None]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.9))
    for attack, level in study["shown"]:
        for group in groups:
            points = sorted(((position[i], summary) for i, cell in enumerate(cells)
                             if group is None or str(cell["settings"][series]) == group
                             if (summary := shown_summary(cell, attack, level)) is not None), key=lambda point: point[0])
            if not points:
                continue
            x = np.array([p for p, _ in points])
            auc = np.array([s["auc"] for _, s in points])
            low, high = np.array([s["auc_ci"][0] for _, s in points]), np.array([s["auc_ci"][1] for _, s in points])
            label = f"{attack} {level}" + (f", {series} {group}" if group is not None else "")
            left.errorbar(x, auc, yerr=[auc - low, high - auc], marker="o", capsize=3, label=label)
            recall = [np.nan if s["population_recall"] is None else s["population_recall"] for _, s in points]
            right.plot(x, recall, marker="o", label=label)
    left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("attack AUC (95% interval)")
    right.set_ylabel("recall at the population's 10% FPR threshold")
    # Settings spread over decades (log-spaced epochs, learning rates) read better on a log axis.
    logarithmic = numeric and min(position) > 0 and max(position) >= 10 * min(position)
    for axis in (left, right):
        axis.set_xlabel(study["x"])
        if logarithmic:
            axis.set_xscale("log")
        if not numeric:
            axis.set_xticks(range(len(categories)), categories)
    for axis in (left, right):  # each panel its own legend: the right one is read on its own too
        axis.legend(fontsize=6)
    return _png(figure)


def bucket_figure(buckets: dict[str, list[dict]]) -> str:
    """Leakage (TPR - FPR) of each bucket against its patients' mean log profile probability, one line per attack."""
    figure, axis = plt.subplots(figsize=(6.5, 3.8))
    for label, rows in buckets.items():
        points = [(row["mean log p"], row["leakage"]) for row in rows if row["leakage"] is not None]
        if points:
            axis.plot(*zip(*sorted(points), strict=True), marker="o", label=label)
    axis.axhline(0.0, color="grey", linestyle="--", linewidth=1)
    axis.set_xlabel("mean log probability of the bucket's disease profiles (rarer: left)")
    axis.set_ylabel("patient-level leakage (TPR - FPR)")
    axis.legend(fontsize=7)
    return _png(figure)


def dp_study_figure(study: dict) -> str:
    """The DP study against the noise multiplier (categories, most noise left, non-DP right), one line per model family
    and start: the largest sample-level and group-level AUC over the epochs (loss; the classifier's sample threshold
    and user threshold on the average), and the utility of the last epoch (LMs: held-out loss; classifiers: test
    accuracy). AUC, not advantage: small populations calibrate no group-level threshold."""
    headline = {"sample": ("loss sample", "sample_threshold sample"), "group": ("loss group", "user_threshold_avg group")}
    figure, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    noises: list[str] = []
    for name, rows in study["analysis"].items():
        family = name.rsplit(": ", 1)[1]
        # Rows are named "START, sigma S" or "START, non-DP"
        named = [(*key.split(", ", 1), row) for key, row in rows.items()]
        for start in dict.fromkeys(start for start, _, _ in named):
            points = [(noise.removeprefix("sigma "), row) for each_start, noise, row in named if each_start == start]
            noises += [noise for noise, _ in points if noise not in noises]
            x = [noises.index(noise) for noise, _ in points]
            label = f"{family}, {start}"
            for axis, level in ((axes[0], "sample"), (axes[1], "group")):
                attack = next(a for a in headline[level] if f"{a}: max AUC" in points[0][1])
                axis.plot(x, [np.nan if row[f"{attack}: max AUC"] is None else row[f"{attack}: max AUC"]
                              for _, row in points], marker="o", label=f"{label} ({attack.split(' ')[0]})")
            utility = "held_out_loss" if "held_out_loss" in points[0][1] else "test_accuracy"
            axes[2 if utility == "held_out_loss" else 3].plot(x, [row[utility] for _, row in points], marker="o",
                                                              label=label)
    for axis in axes[:2]:
        axis.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    for axis, title in zip(axes, ("max sample-level AUC over epochs", "max patient- or user-level AUC over epochs",
                                  "held-out loss per token (nats), last epoch", "test accuracy, last epoch"), strict=True):
        axis.set_title(title, fontsize=8)
        axis.set_xticks(range(len(noises)), noises, fontsize=7)
        axis.set_xlabel("noise multiplier sigma", fontsize=8)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=6)
    return _png(figure)


def ablation_figure(study: dict) -> str:
    """A classifier ablation against its setting (categories in the cells' order): each attack's mean AUC over the runs
    with its standard deviation, the tokenizer alone's user-level AUC (dashed), and the target's test accuracy and
    generalisation gap."""
    means = study["analysis"]["mean and spread over runs"]
    values = list(means)
    x = np.arange(len(values))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.9))
    keys = list(dict.fromkeys(key for row in means.values() for key in row))
    for key in (k for k in keys if k.endswith("AUC") and f"{k} sd" in keys):
        mean = np.array([np.nan if means[v].get(key) is None else means[v][key] for v in values])
        spread = np.array([means[v].get(f"{key} sd") or 0.0 for v in values])
        axis, style = (left, "--") if key.startswith("tokenizer") else (left, "-")
        axis.errorbar(x, mean, yerr=spread, marker="o", capsize=3, linestyle=style, label=key.removesuffix(" AUC"))
    for key in ("test accuracy", "gap"):
        mean = np.array([np.nan if means[v].get(key) is None else means[v][key] for v in values])
        spread = np.array([means[v].get(f"{key} sd") or 0.0 for v in values])
        right.errorbar(x, mean, yerr=spread, marker="o", capsize=3, label=f"target {key}")
    left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("AUC, mean and sd over runs")
    right.set_ylabel("fraction, mean and sd over runs")
    for axis in (left, right):
        axis.set_xticks(x, values)
        axis.set_xlabel(study["x"])
        axis.legend(fontsize=6)
    return _png(figure)
