"""One level's verdict in words: a plain opening sentence that says the risk and why, then the evidence in short
sentences (the permutation test, the strongest attack's AUC, the members exposed at the 1% threshold, the epsilon
bound). report/verdict.py decides; this module only words what it decided."""

from __future__ import annotations

from lmaudit.metrics.power import LevelPower
from lmaudit.metrics.risk_rule import HIGH_LEVEL, HIGH_RATIO, MODERATE_LEVEL, MOST_EXPOSED
from lmaudit.report.document import BlindHeadline, EpsilonHeadline, Named, Strongest, TprHeadline
from lmaudit.report.formatting import finite_or_none, with_interval


def named(row: Named) -> str:
    """An attack as the statements name it: `likelihood_ratio on mlm_energy`."""
    return f"{row.attack} on {row.signal}"


def fpr_upper(row: TprHeadline | None) -> float | None:
    """The upper 95% bound of a TPR row's FPR at its threshold; None where there is no row or no bound."""
    return None if row is None or row.fpr_ci is None else finite_or_none(row.fpr_ci[1])


def shown_p(p_value: float) -> str:
    """A p-value to two significant digits, or as many more as keep it on its side of the decision levels (0.0499 is
    not 0.05)."""
    for digits in range(2, 8):
        shown = f"{p_value:.{digits}g}"
        if all((p_value < level) == (float(shown) < level) for level in (HIGH_LEVEL, MODERATE_LEVEL)):
            return shown
    return repr(p_value)


def p_floor(power: LevelPower | None) -> float | None:
    """The smallest family-wise p-value a level's relabellings can give (its families over permutations + 1)."""
    return power.counts.families / (power.counts.permutations + 1) if power else None


def p_words(p_value: float | None, power: LevelPower | None) -> str:
    """'family-wise p = 0.31', or at the smallest value the relabellings can give, '< 0.002 (the smallest 1,000
    relabellings can show)'."""
    if p_value is None:
        return "no permutation test could run"
    floor = p_floor(power)
    if floor is not None and p_value <= floor * (1 + 1e-9):
        return f"family-wise p < {shown_p(floor)} (the smallest {power.counts.permutations:,} relabellings can show)"
    return f"family-wise p = {shown_p(p_value)}"


def p_cell(p_value: float | None, power: LevelPower | None) -> str:
    """A level's family-wise p-value for a table: '< 0.002' at the smallest value its relabellings can give, else the
    value ('n/a' where no test ran)."""
    if p_value is None:
        return "n/a"
    floor = p_floor(power)
    return f"< {shown_p(floor)}" if floor is not None and p_value <= floor * (1 + 1e-9) else shown_p(p_value)


def opening(risk: str, heading: str, units: str, at_low_fpr: TprHeadline | None, power: LevelPower,
            group_name: str = "group") -> str:
    """The level's first sentence: its risk and, in plain words, why (`power`: what its counts could show; the groups
    its units come from are `group_name`s)."""
    counts = power.counts
    given = f"{counts.nonmembers:,} non-member {units}"
    if risk == "high":
        return f"High risk at {heading}: an attacker can tell member {units} from non-members at a low false-positive rate."
    if risk == "low":
        return (f"Low risk at {heading}: no attack told member {units} from non-members better than chance, and "
                f"{given} were enough to show it at a 1% false-positive rate.")
    if risk == "inconclusive":
        if not power.can_read_low:
            had = (f"{counts.nonmembers:,} given" if counts.nonmember_groups >= counts.nonmembers else
                   f"these {counts.nonmembers:,} come from {counts.nonmember_groups:,} {group_name}s")
            return (f"Inconclusive at {heading}: too few non-member {units} to rule out leakage (about "
                    f"{power.nonmembers_for_low:,} independent ones needed, {had}); no attack beat chance.")
        fpr_high = fpr_upper(at_low_fpr)
        could_be = f" (at the 1% threshold it could be as high as {fpr_high:.1%})" if fpr_high is not None else ""
        return (f"Inconclusive at {heading}: no attack beat chance, but {given} did not resolve a 1% false-positive "
                f"rate{could_be}, so leakage there cannot be ruled out.")
    first = f"Moderate risk at {heading}: the attacks tell member {units} from non-members better than chance"
    most = at_low_fpr is not None and at_low_fpr.tpr > MOST_EXPOSED
    exposed = f", and {named(at_low_fpr)} exposes most of them ({at_low_fpr.tpr:.1%})" if most else ""
    if not power.can_read_high:
        return f"{first}{exposed}; whether at a low false-positive rate, {given} are too few to show."
    if most:
        return f"{first}{exposed}, though not surely at a low false-positive rate."
    return f"{first}, but none exposes members at {HIGH_RATIO:g} times the rate it accuses non-members."


def shift_opening(heading: str, blind: BlindHeadline, strongest: Strongest, risk_from_attacks: str) -> str:
    """A level the texts alone decide: its first sentence and what the blind baseline measured."""
    return (f"Inconclusive at {heading}: the texts alone separate members from non-members, so the attacks measure how "
            f"the data was collected as much as the model. A blind classifier that never sees the model reaches AUC "
            f"{with_interval(blind.auc, blind.auc_ci)} against {strongest.auc:.3f} for the strongest attack; "
            f"from the attacks alone this level would read {risk_from_attacks}. Audit against non-members drawn like "
            f"the members.")


def exposed(row: TprHeadline, units: str, groups: str | None) -> str:
    """The members the headline TPR row exposes at the 1% threshold, and what its non-members can show of its FPR;
    `groups`: how many groups those non-members come from, where fewer than they are ('12 patients')."""
    fpr_high = fpr_upper(row)
    sentence = (f"At the threshold fitted to accuse at most 1% of the {row.n_nonmembers:,} non-member {units} (it "
                f"accused {row.fp:,}), {named(row)} exposes {row.tp:,} of {row.n_members:,} member {units} "
                f"({row.tpr:.1%})")
    p_value = finite_or_none(row.p_value)
    if p_value is not None:
        beyond = "beyond chance" if p_value < MODERATE_LEVEL else "no more than chance would"
        sentence += f", {beyond} (its own family-wise p = {shown_p(p_value)})"
    if fpr_high is not None:
        whose = f"{row.n_nonmembers:,} non-members" + (f" of {groups}" if groups else "")
        sentence += (f". From {whose}, the false-positive rate an attacker would meet at that threshold is known only "
                     f"to be below {fpr_high:.1%}")
    return sentence + "."


def epsilon_words(epsilon: EpsilonHeadline | None, level_name: str, delta: float) -> str:
    """The largest epsilon bound of the level as a sentence."""
    if epsilon is None or epsilon.epsilon_lower_bound <= 0:
        return "No attack's counts rule out any epsilon."
    bound = epsilon.epsilon_lower_bound
    shown = f"{bound:.2f}" if bound >= 0.01 else f"{bound:.1g}"  # a small bound is not 0.00
    of = "the only bound" if epsilon.bounds == 1 else f"the largest of {epsilon.bounds} bounds, each at 95%"
    return (f"If members and non-members were drawn alike, the counts of {named(epsilon)} rule out (epsilon, "
            f"{delta:g})-differential privacy per {level_name} for every epsilon below {shown}, with 95% confidence "
            f"({of}).")


def statement(first: str, level_name: str, test: str, strongest: Strongest, at_low_fpr: TprHeadline | None,
              epsilon: EpsilonHeadline | None, delta: float, shifted: bool, groups: str | None = None) -> str:
    """The level's verdict: `first` (its opening), then the evidence; `groups`: the non-members' groups, where fewer
    than their units ('12 patients')."""
    units = f"{level_name}s"
    parts = [first, f"Evidence: the permutation test gives {test}.",
             f"The strongest attack, {named(strongest)}, reaches AUC "
             f"{with_interval(strongest.auc, strongest.auc_ci)}."]
    if at_low_fpr is not None:
        parts.append(exposed(at_low_fpr, units, groups))
    if not shifted:  # where the sets differ, an epsilon would measure the difference: a DP reading does not stand
        parts.append(epsilon_words(epsilon, level_name, delta))
    return " ".join(parts)


def power_words(name: str, power: LevelPower, group_name: str = "group") -> str:
    """What one level's counts can show (`power`: metrics/power.py's LevelPower) in a line: its
    units and the `group_name`s they come from, the best 1% false-positive resolution, the risks it can read, and what
    'low' needs where it cannot."""
    units, counts = f"{name}s", power.counts
    groups = f" (from {counts.member_groups:,} and {counts.nonmember_groups:,} {group_name}s)" if (
        counts.member_groups < counts.members or counts.nonmember_groups < counts.nonmembers) else ""
    readable = [risk for risk in ("high", "moderate", "low") if getattr(power, f"can_read_{risk}")]
    line = (f"{name} level: {counts.members:,} member and {counts.nonmembers:,} non-member {units}{groups}; the 1% "
            f"threshold's false-positive rate is known at best to {power.fpr_bound:.1%}; can read "
            f"{', '.join(readable) + ' or inconclusive' if readable else 'only inconclusive'}")
    if not power.can_read_low:
        line += f"; 'low' needs about {power.nonmembers_for_low:,} independent non-member {units}"
    return line
