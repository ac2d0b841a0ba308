"""The verdict: per level, the strongest evidence of leakage in report.json's results, and a plain-language risk
statement from a stated rule (guidance for a release decision, not a guarantee)."""

from __future__ import annotations

from lmaudit.attacks.base import ACCESS_LEVELS, LEVELS

VERDICT_ALPHA = "0.01"  # the false-positive rate the verdict reads TPR at
# The rule, in the order it is applied; its numbers are the constants below.
HIGH_TPR_LOW = 0.05  # lower 95% bound of TPR at 1% FPR: five times what guessing gives
HIGH_EPSILON = 1.0  # empirical epsilon lower bound (nats)
MODERATE_AUC_LOW = 0.6  # lower 95% bound of the AUC
# A blind AUC this high (the texts alone, no model) makes a level inconclusive whatever the attacks reach: Das et al.'s
# shifted benchmarks sit at 0.72-0.99, and an attack's lead over such a baseline may be more of the same shift.
BLIND_DECISIVE_AUC = 0.7
# Highest risk first; inconclusive ranks above low, because an unmeasured level may hide leakage.
RISKS = ("high", "moderate", "inconclusive", "low")
RISK_RULE = (
    f"First, where the audit has the texts: a level is inconclusive (shift) when a blind classifier that sees only the "
    f"texts separates its members from the non-members (the lower 95% bound of its AUC above 0.5) and either its "
    f"AUC's interval reaches the strongest attack's (its upper bound at or above the attack's lower bound) or its AUC "
    f"is at least {BLIND_DECISIVE_AUC}: the attacks' numbers then measure how the data was collected as much as the "
    f"model, whichever way. Otherwise: "
    f"high: some attack exposes members at a low false-positive rate (the lower 95% bound of its TPR at 1% FPR is at "
    f"least {HIGH_TPR_LOW:.0%}, five times what guessing gives, with at least 100 non-member units so that 1% FPR is "
    f"resolved) or its counts prove epsilon >= {HIGH_EPSILON:g}. "
    f"moderate: otherwise, some attack beats chance at a resolved 1% FPR (lower bound of TPR above 1%), proves any "
    f"epsilon > 0, or has an AUC whose lower 95% bound is at least {MODERATE_AUC_LOW}. "
    "low: none of these, with at least 100 non-member units, so a 1% false-positive rate can be resolved. "
    "inconclusive: none of these, but too few non-member units to resolve a 1% false-positive rate. "
    "Each level is judged on its best attack among all those run (all data, no slice); the overall risk is the "
    "highest level's. Guidance for a release decision, not a guarantee: a stronger attack, or more data, can show "
    "more leakage than this audit; and the best of many attacks is slightly optimistic, since each bound holds at 95% "
    "on its own."
)


def _tpr_row(result: dict) -> dict | None:
    point = result["tpr_at_fpr"].get(VERDICT_ALPHA)
    if point is None:
        return None
    return {"attack": result["attack"], "signal": result["signal"], "tpr": point["tpr"], "tpr_ci": point["tpr_ci"],
            "tp": point["tp"], "fp": point["fp"], "n_members": result["n_members"],
            "n_nonmembers": result["n_nonmembers"], "resolution_limited": point["resolution_limited"]}


def _epsilon_row(results: list[dict]) -> dict | None:
    best = None
    for result in results:
        for threshold in result["thresholds"]:
            bound = threshold.get("epsilon_lower_bound")
            if bound is not None and (best is None or bound > best["epsilon_lower_bound"]):
                best = {"attack": result["attack"], "signal": result["signal"], "rule": threshold["rule"],
                        "alpha": threshold["alpha"], "epsilon_lower_bound": bound}
    return best


def _risk(strongest: dict, at_low_fpr: dict | None, epsilon: dict | None) -> str:
    bound = epsilon["epsilon_lower_bound"] if epsilon else 0.0
    # A TPR "at 1% FPR" read off fewer than 100 non-members is at FPR 0 of a few: no evidence about 1%.
    resolved = at_low_fpr is not None and not at_low_fpr["resolution_limited"] and at_low_fpr["tpr_ci"][0] is not None
    tpr_low = at_low_fpr["tpr_ci"][0] if resolved else 0.0
    if tpr_low >= HIGH_TPR_LOW or bound >= HIGH_EPSILON:
        return "high"
    auc_low = strongest["auc_ci"][0] if strongest["auc_ci"][0] is not None else 0.0
    if tpr_low > float(VERDICT_ALPHA) or bound > 0 or auc_low >= MODERATE_AUC_LOW:
        return "moderate"
    return "inconclusive" if strongest["n_nonmembers"] < 1 / float(VERDICT_ALPHA) else "low"


def _named(row: dict) -> str:
    """An attack as the statements name it: `likelihood_ratio on mlm_energy`."""
    return f"{row['attack']} on {row['signal']}"


def shift_decides(blind: dict | None, strongest: dict) -> bool:
    """Whether the texts alone make a level inconclusive (the rule's first clause): the blind AUC's interval leaves 0.5
    and reaches the strongest attack's, or the blind AUC is at least BLIND_DECISIVE_AUC."""
    if not blind or not blind.get("texts_separate"):
        return False
    attack_low = strongest["auc_ci"][0] if strongest["auc_ci"][0] is not None else 0.0
    return blind["auc_ci"][1] >= attack_low or blind["auc"] >= BLIND_DECISIVE_AUC


def _shift_opening(level_name: str, blind: dict, strongest: dict, risk_from_attacks: str) -> str:
    return (f"Inconclusive at {level_name} level: the texts alone separate members from non-members. A blind classifier "
            f"that never sees the model reaches AUC {blind['auc']:.3f} [{blind['auc_ci'][0]:.3f}, "
            f"{blind['auc_ci'][1]:.3f}] against {strongest['auc']:.3f} for the strongest attack, so the attacks measure "
            f"how the data was collected as much as the model (from the attacks alone this level would read "
            f"{risk_from_attacks}); audit against non-members drawn like the members.")


def _statement(level_name: str, risk: str, strongest: dict, at_low_fpr: dict | None, epsilon: dict | None,
               delta: float, opening: str | None = None) -> str:
    units = f"{level_name}s"
    auc = f"AUC {strongest['auc']:.3f} [{strongest['auc_ci'][0]:.3f}, {strongest['auc_ci'][1]:.3f}]"
    parts = []
    if at_low_fpr is not None:
        exposed = (f"at a 1% false-positive rate, {_named(at_low_fpr)} exposes {at_low_fpr['tpr']:.1%} of member "
                   f"{units} ({at_low_fpr['tp']} of {at_low_fpr['n_members']}, {at_low_fpr['fp']} of "
                   f"{at_low_fpr['n_nonmembers']} non-members wrongly accused)")
        if at_low_fpr["resolution_limited"]:
            exposed += f"; with {at_low_fpr['n_nonmembers']} non-members, 1% false positives cannot be resolved"
        parts.append(exposed)
    if epsilon and epsilon["epsilon_lower_bound"] > 0:
        bound = epsilon["epsilon_lower_bound"]
        shown = f"{bound:.2f}" if bound >= 0.01 else f"{bound:.1g}"  # a small bound is not 0.00
        parts.append(f"no training with epsilon below {shown} (at delta {delta:g}) "
                     f"could allow the counts of {_named(epsilon)}, with 95% confidence")
    else:
        parts.append("no attack's counts rule out any epsilon")
    evidence = "; ".join(parts)
    few_exposed = (at_low_fpr is not None and not at_low_fpr["resolution_limited"]
                   and (at_low_fpr["tpr_ci"][0] or 0.0) < HIGH_TPR_LOW)
    opening = opening or {
        "high": f"High risk at {level_name} level: an attacker can tell member {units} from non-members.",
        "moderate": f"Moderate risk at {level_name} level: the attacks do better than chance"
                    + (", but expose few members at a low false-positive rate." if few_exposed else "."),
        "low": f"Low risk at {level_name} level: no attack showed leakage distinguishable from chance.",
        "inconclusive": f"Inconclusive at {level_name} level: no leakage was shown, but there are too few non-member "
                        f"{units} to measure a 1% false-positive rate.",
    }[risk]
    return f"{opening} Strongest attack: {_named(strongest)}, {auc}; {evidence}."


def verdict(results: list[dict], ranking: dict[str, list[dict]], level_names: dict[str, str], delta: float,
            blind: dict[str, dict] | None = None) -> dict:
    """report.json's `summary`: per level (in LEVELS order) the strongest attack by AUC, the best TPR at 1% FPR with
    its counts, the largest epsilon lower bound, the risk and its statement; the overall risk; the rule; the delta of
    the epsilon bounds. `blind`: the blind baseline's result per level on the verdict's non-member set
    (metrics/validity.py), which can make a level inconclusive; None where the audit had no texts."""
    levels = {}
    for level in LEVELS:
        ranked = ranking.get(level)
        if not ranked:
            continue
        at_level = [r for r in results if r["level"] == level and r["slice"] == "all"]
        tpr_rows = [row for row in (_tpr_row(r) for r in at_level) if row is not None]
        at_low_fpr = max(tpr_rows, key=lambda row: (row["tpr_ci"][0] or 0.0, row["tpr"]), default=None)
        epsilon = _epsilon_row(at_level)
        strongest = ranked[0]
        risk = _risk(strongest, at_low_fpr, epsilon)
        name = level_names.get(level, level)
        shifted = (blind or {}).get(level)
        opening = None
        entry = {"name": name, "risk": risk}
        if shift_decides(shifted, strongest):
            opening = _shift_opening(name, shifted, strongest, risk)
            entry = {"name": name, "risk": "inconclusive", "shift": True, "risk_from_attacks": risk}
        if shifted:
            entry["blind"] = {key: shifted[key] for key in ("auc", "auc_ci", "texts_separate")}
        levels[level] = {
            **entry,
            "strongest": {key: strongest[key] for key in ("attack", "signal", "auc", "auc_ci", "n_members", "n_nonmembers")},
            "tpr_at_1pct_fpr": at_low_fpr, "epsilon_lower_bound": epsilon,
            "statement": _statement(name, entry["risk"], strongest, at_low_fpr, epsilon, delta, opening),
        }
    overall = min((entry["risk"] for entry in levels.values()), key=RISKS.index, default="inconclusive")
    return {"risk": overall, "levels": levels, "rule": RISK_RULE, "delta": delta, "blind_baseline_ran": blind is not None,
            "threat_models": threat_models(ranking)}


def threat_models(ranking: dict[str, list[dict]]) -> dict:
    """Which attacker access levels (attacks/base.py:ACCESS_LEVELS) the audit tried, each with its attacks, which it did
    not, and the sentence the verdict ends with: a verdict says only what attackers of the tried kinds can do."""
    tried: dict[str, list[str]] = {}
    for rows in ranking.values():
        for row in rows:
            names = tried.setdefault(row["access"], [])
            if row["attack"] not in names:
                names.append(row["attack"])
    ordered = {access: tried[access] for access in ACCESS_LEVELS if access in tried}
    not_tried = [access for access in ACCESS_LEVELS if access not in tried]
    statement = "Threat models tried: " + "; ".join(f"{access} ({len(names)} attack{'s' * (len(names) != 1)})"
                                                    for access, names in ordered.items())
    statement += f"; not tried: {', '.join(not_tried)}." if not_tried else "."
    return {"tried": ordered, "not_tried": not_tried, "statement": statement}


def dataset_inference_statement(section: dict | None, shifted: bool = False) -> str | None:
    """report.json's `dataset_inference` in one sentence: the p-value, the units behind it and what it decides;
    `shifted`: the texts alone separate the two sets, which the sentence then says; None where there is no section."""
    if not section:
        return None
    if "unavailable" in section:
        return f"Dataset inference: n/a: {section['unavailable']}."
    units = f"{section['unit']}s"
    counts = f"{section['n_test']['suspect']} suspect and {section['n_test']['validation']} validation {units} held out"
    opening = (f"Dataset inference (Maini et al. 2024), {section['suspect']} as a set against {section['validation']}: "
               f"p = {section['p_value']:.2g} (one-sided t-test over {counts})")
    if section["decisions"]["p<0.01"]:
        reading = ("below 0.01: evidence that the model was trained on them (a set it was not trained on gives p < 0.01 "
                   "at most 1% of the time)")
    elif section["decisions"]["p<0.1"]:
        reading = "below Maini et al.'s 0.1, not below 0.01: some evidence that the model was trained on them"
    else:
        reading = "not below 0.1: no evidence that the model was trained on them as a set"
    needed = section["minimum_needed"]["p<0.01"]
    more = f"; {needed} {units} a side suffice for p < 0.01 (median of draws)" if needed else ""
    caveat = ("; but the texts alone separate the two sets, so the p-value measures how they were collected as much "
              "as the training") if shifted else ", provided the two sets were drawn alike"
    return f"{opening}: {reading}{caveat}{more}."


def dataset_inference_line(report: dict) -> str | None:
    """The report's dataset-inference sentence, with the shift caveat where the texts alone separate the verdict's
    sets at some level."""
    shifted = any(entry.get("blind", {}).get("texts_separate") for entry in report["summary"]["levels"].values())
    return dataset_inference_statement(report.get("dataset_inference"), shifted)


EXTRACTION_RULE = (
    "The model gives training text back when, against the verdict's non-member set and at some prefix length, the "
    "members' greedy exact extraction rate has a 95% Clopper-Pearson interval wholly above the non-members' (a "
    "conservative test: two disjoint 95% intervals). A suffix the non-members' texts give back as often is predictable "
    "from the text's regularity (boilerplate, templates), which is not memorisation."
)


def _counted(entry: dict, whose: str) -> str:
    low, high = entry["interval"]
    return f"{entry['exposed']} of {entry['units']} {whose} ({entry['rate']:.3f} [{low:.3f}, {high:.3f}])"


def extraction_statement(section: dict | None) -> str | None:
    """report.json's `extraction` in one sentence by EXTRACTION_RULE: the prefix length where the members' greedy exact
    rate leads the verdict's non-members' most (lower bound over upper bound), or why nothing could be read; None
    where the audit ran no extraction."""
    if not section:
        return None
    measured = []
    for prefix, entry in section["prefix_lengths"].items():
        if entry.get("sets"):
            name, result = next(iter(entry["sets"].items()))
            exact = result["greedy"]["sample"]["exact"]
            measured.append((exact["member"]["interval"][0] - exact["nonmember"]["interval"][1], prefix, name, exact))
    if not measured:
        return (f"Extraction: n/a: no audited text is long enough for the prefix lengths asked and a "
                f"{section['suffix_tokens']}-token suffix.")
    lead, prefix, name, exact = max(measured, key=lambda item: item[0])
    opening = (f"Extraction: from each text's first {prefix} tokens, greedy decoding gives the next "
               f"{section['suffix_tokens']} back word for word for {_counted(exact['member'], 'members')}, against "
               f"{_counted(exact['nonmember'], name)}")
    if lead > 0:
        return f"{opening}: the model gives training text back beyond what the texts' regularity explains."
    return f"{opening}: no more than for non-members (intervals overlap), no evidence that it gives training text back."


def verdict_lines(report: dict) -> list[str]:
    """The verdict as text for the terminal: any shift the blind baseline found, the overall risk, then one statement
    per level and the caveats."""
    summary = report.get("summary")
    if not summary:
        return []
    # A shift between members and non-members comes first: it changes how every number below reads.
    lines = [f"SHIFT: {shift}" for shift in summary.get("shift", [])]
    lines.append(f"VERDICT: {summary['risk'].upper()} membership-inference risk (rule: see report.html or the README)")
    lines += [f"  {entry['statement']}" for entry in summary["levels"].values()]
    threats = summary.get("threat_models", {}).get("statement")
    lines += [f"  {line}" for line in (dataset_inference_line(report), extraction_statement(report.get("extraction")),
                                       threats) if line]
    return lines + [f"  Caveat: {caveat}" for caveat in summary.get("caveats", [])]
