"""The erasure audit's verdict in a data-protection officer's words: per subject and for all erased subjects, what
the tests found, what each finding rests on, and how much a "not detected" is worth (docs/erasure.md)."""

from __future__ import annotations

from lmaudit.metrics.erasure import (
    CANNOT_DECIDE,
    NOT_DETECTED,
    STILL_DETECTABLE,
    UNLEARNING_DETECTABLE,
    ErasureFinding,
    Separation,
)
from lmaudit.report.formatting import with_interval

PROBE_WORDS = {"after": "the model after erasure"}
NEVER_PROOF = ("Not detected never means erased: a provider can keep data that these tests do not find (Zhang et al., "
               "ICML 2024).")


def p_text(value: float) -> str:
    """A p-value as the statements write it."""
    return f"p = {value:.3g}"


def finding_sentence(finding: ErasureFinding, after: Separation, before: Separation) -> str:
    """One finding in words, opening with who it is about and the finding, then what it rests on."""
    if finding.subject is None:
        who, auc, interval = f"All {after.forget_subjects} erased subjects", after.auc, after.auc_ci
        own, earlier = after, before
    else:
        index = [subject.subject for subject in after.subjects].index(finding.subject)
        own, earlier = after.subjects[index], before.subjects[index]
        who, auc, interval = f"Subject '{finding.subject}' ({own.texts} texts)", own.auc, None
    auc_text = with_interval(auc, interval) if interval is not None else f"{auc:.3f}"
    level = f"each test at level {finding.test_level:.3g}"
    if finding.finding == STILL_DETECTABLE:
        probes = " and ".join(PROBE_WORDS.get(name, name) for name in finding.rests_on)
        return (f"{who}: still detectable. {probes[0].upper() + probes[1:]} tells their texts from never-trained ones "
                f"(AUC {auc_text}, {p_text(own.p_higher)}; {level}).")
    if finding.finding == UNLEARNING_DETECTABLE:
        return (f"{who}: the unlearning itself is detectable. Their texts now score below never-trained ones (AUC "
                f"{auc_text}, {p_text(own.p_lower)}; {level}): no unseen text is treated so, which singles them out.")
    if finding.finding == CANNOT_DECIDE:
        return (f"{who}: cannot decide. With {after.holdout_subjects} holdout subjects the smallest p-value these tests "
                f"can give is {finding.smallest_p:.3g}, above their level {finding.test_level:.3g}; give more holdout "
                "subjects.")
    power = (f"The same tests found them in the model before erasure ({p_text(earlier.p_higher)}), so they could have."
             if finding.found_before else
             f"The same tests did not find them in the model before erasure either ({p_text(earlier.p_higher)}): this "
             "says little about the model after it.")
    return f"{who}: {NOT_DETECTED} (AUC {auc_text}, {p_text(own.p_higher)}; {level}). {power}"


def change_sentence(change: Separation, level: float) -> str:
    """Whether the change from the model before erasure to the model after it singles out the erased subjects."""
    if change.p_higher <= level:
        return (f"The change between the two models singles out the erased subjects (AUC {change.auc:.3f}, "
                f"{p_text(change.p_higher)}; level {level:.3g}): anyone who holds both models can tell whom the "
                "erasure concerned. Any erasure does this, retraining included; it matters where the model before "
                "erasure was released.")
    return (f"The change between the two models does not single out the erased subjects (AUC {change.auc:.3f}, "
            f"{p_text(change.p_higher)}; level {level:.3g}).")


def erasure_statements(findings: list[ErasureFinding], probes: list[Separation], before: Separation,
                       change: Separation, level: float) -> list[str]:
    """The verdict's sentences: all erased subjects, each subject, the change between the models, and the caveat that
    no test proves erasure (after a "not detected")."""
    after = probes[0]
    lines = [finding_sentence(finding, after, before) for finding in findings]
    lines.append(change_sentence(change, level))
    if any(finding.finding == NOT_DETECTED for finding in findings):
        lines.append(NEVER_PROOF)
    return lines
