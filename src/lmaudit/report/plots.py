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
from lmaudit.metrics.roc import roc_points  # noqa: E402


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def roc_figure(attacks: list[AttackScores], title: str) -> str:
    """ROC curves of the given attacks, on linear and logarithmic FPR axes side by side (`title`: e.g. "sample level")."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for attack in attacks:
        audited = attack.frame[attack.frame["role"].isin(AUDITED_ROLES)]
        fpr, tpr, _ = roc_points((audited["role"] == MEMBER).to_numpy(), audited["score"].to_numpy())
        for axis in axes:
            axis.plot(fpr, tpr, label=attack.attack, drawstyle="steps-post")
    for axis, scale in zip(axes, ("linear", "log"), strict=True):
        axis.plot([1e-4, 1], [1e-4, 1], "--", color="grey", linewidth=1, label="chance")
        axis.set_xscale(scale)
        axis.set_yscale(scale)
        axis.set_xlabel("false-positive rate")
        axis.set_ylabel("true-positive rate")
        axis.set_title(f"{title}, {scale} axes")
        if scale == "log":
            axis.set_xlim(1e-3, 1)
            axis.set_ylim(1e-3, 1)
        axis.legend(loc="lower right")
    return _png(figure)


def histogram_figure(attack: AttackScores, threshold: float | None, threshold_label: str) -> str:
    """Member and non-member histograms of one attack's score, a calibrated threshold marked."""
    figure, axis = plt.subplots(figsize=(5.6, 3.6))
    frame = attack.frame
    values = frame.loc[frame["role"].isin(AUDITED_ROLES), "score"].to_numpy(dtype=float)
    bins = np.histogram_bin_edges(values, bins=40)
    for role, color in ((MEMBER, "tab:blue"), (NONMEMBER, "tab:orange")):
        axis.hist(frame.loc[frame["role"] == role, "score"], bins=bins, alpha=0.55, color=color, label=role, density=True)
    if threshold is not None:
        axis.axvline(threshold, color="red", linewidth=1.5, label=threshold_label)
    axis.set_xlabel(attack_spec(attack.attack).score_label)
    axis.set_ylabel("density")
    axis.set_title(f"{attack.attack} ({attack.signal}), {attack.level} level: right of the line = called member", fontsize=9)
    axis.legend(fontsize=8)
    return _png(figure)


def sweep_figure(sweep: dict) -> str:
    """AUC of each attack, and the held-out loss, against the noise multiplier (log axis; no noise at the left)."""
    rows = sweep["rows"]
    noises = [r["noise_multiplier"] for r in rows]
    positive = [n for n in noises if n > 0]
    floor = min(positive) / 10 if positive else 1e-4
    x = [n if n > 0 else floor for n in noises]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name in sweep["attacks"]:
        left.plot(x, [r["attacks"].get(name, {}).get("auc", np.nan) for r in rows], marker="o", label=name)
    left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("attack AUC")
    right.plot(x, [r["held_out_loss"] for r in rows], marker="o", color="black")
    right.set_ylabel("held-out masked-token loss (nats)")
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_xlabel(f"noise multiplier (no noise plotted at {floor:g})")
    left.legend(fontsize=8)
    return _png(figure)
