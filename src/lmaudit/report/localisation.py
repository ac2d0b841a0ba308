"""The page's words for report.json's `localisation` section (metrics/localisation.py computes it): what each token
statistic is, the rule that makes a class stand out, one table row per class, and, with --include-text only, each
member text with its top spans marked."""

from __future__ import annotations

from markupsafe import Markup, escape

from lmaudit.report.formatting import number, percent

STATISTIC_WORDS = {
    "informia": ("InfoRMIA's token score, lp_target - lp_reference + KL(p_reference || p_target) against the first "
                 "reference", "nats"),
    "gain": ("the target's log-likelihood gain over the first reference, lp_target - lp_reference", "nats"),
    "calibrated": ("Min-K%++'s calibrated token score, (lp_target - mu) / sigma under the target's predictive "
                   "distribution", "standard deviations"),
}
TEST_WORDS = ("a one-sided permutation test of Welch's t on each patient's mean token score in the class (whole patients "
              "relabelled), Bonferroni over the classes tested")


def statistic_line(section: dict) -> str:
    """What the token scores are and in which unit."""
    words, unit = STATISTIC_WORDS[section["statistic"]]
    return f"Token score: {words} ({unit}; higher = more member-like), from the {section['signal']} signal."


def rule_line(section: dict) -> str:
    """The rule that makes a class stand out, with its family-wise level."""
    return (f"A class stands out when the members' mean token score exceeds the {section['compared_with']} texts' by "
            f"{TEST_WORDS}: family-wise level {section['level']:g} over {section['classes_tested']} classes (each "
            f"at {section['per_class_level']:.3g}; {section['permutations']} relabellings), so when no class "
            f"differs, one is named in at most {percent(section['level'])} of audits.")


def class_rows(section: dict) -> list[dict]:
    """One row per class: tokens, means, difference with its interval, enrichment, p-value and whether it stands out."""
    rows = []
    for entry in section["classes"]:
        interval = entry.get("difference_ci")
        rows.append({
            "name": entry["name"], "tokens": f"{entry['member_tokens']:,} / {entry['comparison_tokens']:,}",
            "patients": f"{entry['member_patients']} / {entry['comparison_patients']}",
            "means": (f"{number(entry['member_mean'])} / {number(entry['comparison_mean'])}"
                      if entry.get("difference") is not None else "n/a"),
            "difference": (f"{entry['difference']:+.3f}" + (f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "")
                           if entry.get("difference") is not None else "n/a"),
            "enrichment": (f"{percent(entry['top_share'])} of top tokens, {percent(entry['token_share'])} of tokens"
                           + (f" (x{entry['enrichment']:.2f})" if entry.get("enrichment") is not None else "")),
            "p_value": f"{entry['p_value']:.2g}" if entry.get("p_value") is not None else "n/a: under 2 patients a side",
            "stands_out": entry["stands_out"]})
    return rows


def patients_line(section: dict) -> str:
    """How many member patients have each class as the one most above the comparison's mean."""
    counts = [f"{name}: {count}" for name, count in section["patients_by_class"].items() if count]
    return ("Member patients by the class whose mean token score most exceeds the comparison's mean: "
            + (", ".join(counts) if counts else "none") + " (report.json lists each patient's id).")


def marked_text(text: str, spans: list) -> Markup:
    """The text, HTML-escaped, with each (start, end, score) span in a <mark> titled by its highest token score."""
    pieces, position = [], 0
    for start, end, score in sorted(spans):
        start = max(start, position)
        if end <= start:  # within a span already marked
            continue
        pieces.append(escape(text[position:start]))
        pieces.append(Markup('<mark title="highest token score {}">{}</mark>').format(number(score), text[start:end]))
        position = end
    pieces.append(escape(text[position:]))
    return Markup("").join(pieces)


def highlighted_rows(highlighted: list[dict] | None) -> list[dict]:
    """Each member text with its top spans marked (given with --include-text only)."""
    return [{"sample_id": entry["sample_id"], "text": marked_text(entry["text"], entry["spans"])}
            for entry in highlighted or []]
