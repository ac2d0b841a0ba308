"""The memorisation curve in words: per repetition count, how many of the canaries planted that often the run gives
away at 1% FPR, and the smallest count at which it memorises (`metrics/memorisation_curve.py`)."""

from __future__ import annotations

from lmaudit.metrics.memorisation_curve import MemorisationCurve, RepetitionTier, controls_needed
from lmaudit.report.formatting import with_interval


def tier_tpr(tier: RepetitionTier, fpr: float) -> str:
    """'0.31 [0.20, 0.44]', or why there is no TPR at this FPR."""
    if tier.tpr is None:
        return f"n/a ({tier.controls} controls; {controls_needed(fpr)} needed)"
    return with_interval(tier.tpr, tier.tpr_ci)


def curve_answer(curve: MemorisationCurve) -> str:
    """The curve's claim, or its absence, in one sentence."""
    counts = [tier.repeats for tier in curve.tiers]
    if curve.smallest_memorised is None:
        return (f"Memorisation by repetition: not shown at any count tested ({', '.join(map(str, counts))} copies), "
                f"at family-wise level {curve.level:g}; that is no proof the run memorises nothing.")
    return (f"Memorisation by repetition: the run memorises canaries planted {curve.smallest_memorised} times or more "
            f"(the smallest count whose canaries score above the never-planted ones, Holm-corrected over the "
            f"{len(counts)} counts at family-wise level {curve.level:g}).")


def curve_lines(curve: MemorisationCurve) -> list[str]:
    """The terminal's lines: one per tier, then the answer."""
    lines = [f"planted {tier.repeats}x: {tier.planted} canaries against {tier.controls} never planted, TPR at "
             f"{curve.fpr:.0%} FPR {tier_tpr(tier, curve.fpr)}, AUC {with_interval(tier.auc, tier.auc_ci)}, "
             f"p {tier.p_value:.2g} (Holm {tier.adjusted_p_value:.2g})"
             + ("" if tier.exposure_median is None else f", median exposure {tier.exposure_median:.1f} bits")
             + ("" if tier.given_back is None else f", {tier.given_back} given back by greedy decoding")
             for tier in curve.tiers]
    if curve.controls_given_back is not None:
        lines.append(f"never-planted secrets given back by greedy decoding: {curve.controls_given_back} (a control: "
                     "chance alone gives 0)")
    return lines + [curve_answer(curve)]


def curve_rows(curve: MemorisationCurve) -> list[dict[str, str]]:
    """The page's table: one row per tier."""
    return [{"copies": str(tier.repeats), "planted": str(tier.planted), "controls": str(tier.controls),
             f"TPR at {curve.fpr:.0%} FPR [95%]": tier_tpr(tier, curve.fpr),
             "AUC [95%]": with_interval(tier.auc, tier.auc_ci), "p (Holm)": f"{tier.adjusted_p_value:.2g}",
             "memorised": "yes" if tier.memorised else "not shown",
             "median exposure (bits)": "n/a" if tier.exposure_median is None else f"{tier.exposure_median:.1f}",
             "given back (greedy)": "n/a" if tier.given_back is None else f"{tier.given_back} of {tier.planted}"}
            for tier in curve.tiers]
