"""The erasure audit's verdict in a data-protection officer's words: per subject and for all erased subjects, what
the tests found, what each finding rests on, and how much a "not detected" is worth (docs/erasure.md)."""

from __future__ import annotations

import math

from lmaudit.metrics.erasure import (
    CANNOT_DECIDE,
    MIN_EQUIVALENCE_SUBJECTS,
    NOT_DETECTED,
    STILL_DETECTABLE,
    UNLEARNING_DETECTABLE,
    Change,
    Equivalence,
    ErasureFinding,
    PrivLeak,
    Separation,
)
from lmaudit.metrics.erasure_extraction import ErasureExtraction
from lmaudit.metrics.extraction import ExtractionRate
from lmaudit.report.document import ErasureDocument
from lmaudit.report.formatting import with_interval

PROBE_WORDS = {"after": "as saved", "after_rtn8": "rounded to 8 bits", "after_rtn4": "rounded to 4 bits",
               "after_8bit": "in bitsandbytes' 8 bits", "after_4bit": "in bitsandbytes' 4 bits",
               "after_relearned": "relearnt on half of every subject's texts, tested on the other half",
               "after_relearned_public": "relearnt on the related public text"}
NEVER_PROOF = ("Not detected never means erased: a provider can keep data that these tests do not find (Zhang et al., "
               "ICML 2024).")


def p_text(value: float) -> str:
    """A p-value as the statements write it."""
    return f"p = {value:.3g}"


def finding_sentence(finding: ErasureFinding, after: Separation, level: float) -> str:
    """One finding in words, opening with who it is about and the finding, then what it rests on."""
    if finding.subject is None:
        who, auc_text = f"All {after.forget_subjects} erased subjects", with_interval(after.auc, after.auc_ci)
    else:
        own = next(subject for subject in after.subjects if subject.subject == finding.subject)
        who, auc_text = f"Subject '{finding.subject}' ({own.texts} texts)", f"{own.auc:.3f}"
    tested = f"level {level:.3g}, family-wise over {len(finding.family_p_values)} tests"
    if finding.finding == STILL_DETECTABLE:
        probes = ", ".join(PROBE_WORDS.get(name, name) for name in finding.rests_on)
        p_value = min(finding.family_p_values[name] for name in finding.rests_on)
        return (f"{who}: still detectable. The model after erasure ({probes}) tells their texts from never-trained "
                f"ones (AUC {auc_text}, {p_text(p_value)}; {tested}).")
    if finding.finding == UNLEARNING_DETECTABLE:
        return (f"{who}: the unlearning itself is detectable. Their texts now score below never-trained ones (AUC "
                f"{auc_text}, {p_text(finding.family_p_values[finding.rests_on[0]])}; {tested}): no unseen text is "
                "treated so, which singles them out.")
    if finding.finding == CANNOT_DECIDE:
        return (f"{who}: cannot decide. With {after.holdout_subjects} holdout subjects the smallest p-value these tests "
                f"can give is {finding.smallest_p:.3g}, above the level {level:.3g}; give more holdout subjects.")
    power = (f"The same test found them in the model before erasure ({p_text(finding.before_p_value)}), so it could "
             "have." if finding.found_before else
             f"The same test did not find them in the model before erasure either ({p_text(finding.before_p_value)}): "
             "this says little about the model after it.")
    return (f"{who}: {NOT_DETECTED} (AUC {auc_text}, smallest {p_text(min(finding.family_p_values.values()))}; "
            f"{tested}). {power}")


def change_sentence(change: Separation, level: float) -> str:
    """Whether the change from the model before erasure to the model after it singles out the erased subjects."""
    if change.p_higher <= level:
        return (f"The change between the two models singles out the erased subjects (AUC {change.auc:.3f}, "
                f"{p_text(change.p_higher)}; level {level:.3g}): anyone who holds both models can tell whom the "
                "erasure concerned. Any erasure does this, retraining included; it matters where the model before "
                "erasure was released.")
    return (f"The change between the two models does not single out the erased subjects (AUC {change.auc:.3f}, "
            f"{p_text(change.p_higher)}; level {level:.3g}).")


def equivalence_sentence(equivalence: Equivalence) -> str:
    """Whether the after model was shown as unseen as the reference (two one-sided tests), and the power seen."""
    if math.isnan(equivalence.difference_ci[0]):
        return (f"Equivalence to {equivalence.reference} not tested: with fewer than {MIN_EQUIVALENCE_SUBJECTS} erased "
                "subjects a bootstrap of subjects cannot see how much they differ.")
    interval = f"[{equivalence.difference_ci[0]:+.3f}, {equivalence.difference_ci[1]:+.3f}]"
    said = (f"Shown as unseen as {equivalence.reference}: the AUC differs by {equivalence.difference:+.3f}, its "
            f"{1 - 2 * equivalence.level:.0%} interval {interval} inside the margin of {equivalence.margin:g}"
            if equivalence.equivalent else
            f"Not shown as unseen as {equivalence.reference} within {equivalence.margin:g}: the AUC differs by "
            f"{equivalence.difference:+.3f}, its {1 - 2 * equivalence.level:.0%} interval {interval}")
    if equivalence.before_equivalent:
        return f"{said}; the model before erasure passes the same test, so it shows nothing."
    return f"{said}."


def estimate_sentences(utility: Change, privleak: PrivLeak | None, retain: Change | None) -> list[str]:
    """The estimates beside the tests: PrivLeak, the holdout loss (utility) and the retained subjects' exposure."""
    lines = []
    if privleak is not None:
        lines.append(f"PrivLeak against the retrained model: {privleak.value:+.1f}% [{privleak.ci[0]:+.1f}%, "
                     f"{privleak.ci[1]:+.1f}%] (0 as retrained, -100 never unlearnt, positive over-unlearnt).")
    lines.append(f"Utility: the holdout loss went from {utility.before:.3f} to {utility.after:.3f} nats per token "
                 f"({utility.change:+.3f} [{utility.change_ci[0]:+.3f}, {utility.change_ci[1]:+.3f}]).")
    if retain is not None:
        lines.append(f"The retained subjects' exposure (their AUC against holdout) went from {retain.before:.3f} to "
                     f"{retain.after:.3f} ({retain.change:+.3f} [{retain.change_ci[0]:+.3f}, "
                     f"{retain.change_ci[1]:+.3f}]).")
    return lines


def share_text(share: ExtractionRate) -> str:
    """'3 of 40 (7.5% [1.6%, 20.4%])': a share with its 95% interval."""
    low, high = share.interval
    return f"{share.exposed} of {share.units} ({share.rate:.1%} [{low:.1%}, {high:.1%}])"


def extraction_sentences(extraction: ErasureExtraction | None) -> list[str]:
    """The extraction estimate, before and after erasure, beside the verdict (not one of its tests)."""
    if extraction is None:
        return []
    shares = {model.model: model for model in extraction.models}
    before, after = shares["before"], shares["after"]
    return [f"Extraction (greedy, the next {extraction.tokens} tokens from the first {extraction.tokens}; an estimate, "
            f"not one of the verdict's tests): the model after erasure gives back {share_text(after.forget_texts)} "
            f"forget texts, of {after.forget_subjects.exposed} of {after.forget_subjects.units} erased subjects; before "
            f"erasure {share_text(before.forget_texts)}; never-trained texts after erasure: "
            f"{share_text(after.holdout_texts)}."]


def extraction_rows(extraction: ErasureExtraction | None) -> list[dict[str, str]]:
    """The page's extraction table: one row per model and set."""
    if extraction is None:
        return []
    return [{"model": {"before": "before erasure", "after": "after erasure"}[model.model], "set": side,
             "texts reproduced [95%]": share_text(getattr(model, f"{side}_texts")),
             "subjects with a text reproduced [95%]": share_text(getattr(model, f"{side}_subjects"))}
            for model in extraction.models for side in ("forget", "holdout")]


def erasure_statements(findings: list[ErasureFinding], after: Separation, change: Separation, level: float,
                       equivalence: Equivalence, estimates: list[str]) -> list[str]:
    """The verdict's sentences: all erased subjects, each subject, the change between the models, the equivalence
    test, the caveat that no test proves erasure (after a "not detected"), then the estimates."""
    lines = [finding_sentence(finding, after, level) for finding in findings]
    lines += [change_sentence(change, level), equivalence_sentence(equivalence)]
    if any(finding.finding == NOT_DETECTED for finding in findings):
        lines.append(NEVER_PROOF)
    return lines + estimates


def probe_row(name: str, separation: Separation) -> dict[str, str]:
    """One row of the page's probes table."""
    return {"model": PROBE_WORDS.get(name, name), "AUC [95%]": with_interval(separation.auc, separation.auc_ci),
            "p higher": f"{separation.p_higher:.3g}", "p lower": f"{separation.p_lower:.3g}",
            "subjects (forget / holdout)": f"{separation.forget_subjects} / {separation.holdout_subjects}"}


def erasure_page(document: ErasureDocument) -> dict:
    """What erasure.html lays out, worded: the counts, the findings per subject and the probes' separations."""
    counts = "; ".join(f"{name}: {count['texts']} texts of {count['subjects']} subjects"
                       for name, count in document.counts.items())
    findings = [{"subject": finding.subject or "all", "finding": finding.finding,
                 "rests on": ", ".join(PROBE_WORDS.get(name, name) for name in finding.rests_on) or "-",
                 "smallest family-wise p": f"{min(finding.family_p_values.values()):.3g}",
                 "before erasure, p": f"{finding.before_p_value:.3g}"} for finding in document.findings]
    probes = [probe_row(probe.score, probe) for probe in document.probes]
    probes += [probe_row("the model before erasure", document.before),
               probe_row("the change, before minus after", document.change)]
    return {"counts": f"{counts}.", "findings": findings, "probes": probes,
            "extraction": extraction_rows(document.extraction)}


def erasure_pdf_view(document: ErasureDocument) -> dict:
    """What erasure.pdf lays out (templates/statements.typ), every number already a string: the page's tables, the
    statements, and the files the audit read with their SHA-256 and erasure.json's own."""
    from lmaudit.report.integrity import sealed_provenance

    page = erasure_page(document)
    return {"title": "Erasure audit", "created": document.created[:10], "version": document.lmaudit_version,
            "intro": f"{page['counts']} Membership scored by {document.attack}; every verdict at family-wise level "
                     f"{document.level:g}.",
            "statements": document.statements, "tables": [
                {"title": "The verdict, per subject", "rows": page["findings"]},
                {"title": "The probes: the erased subjects' texts against never-trained ones", "rows": page["probes"]},
                *([{"title": "Extraction: does the model give the texts back?", "rows": page["extraction"]}]
                  if page["extraction"] else [])],
            "limits": f"{NEVER_PROOF} This document names the subjects by their ids and holds no text.",
            "provenance": sealed_provenance(document, "erasure.json")}
