"""report.pdf: the verdict, the coverage of the attack families, the limits and the key figures of an audit on a few
pages, for a data-protection officer to attach. Laid out by Typst (the `typst` wheel: a typesetting engine that
installs from the package registry with its fonts and needs no system library, unlike HTML-to-PDF engines that need
Pango or a browser) from a view of the same ReportDocument the page is rendered from, every number written by
`report/formatting.py` as the page writes it. An optional extra: `pip install 'lmaudit[pdf]'`."""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files
from pathlib import Path

from lmaudit.atomic import staged
from lmaudit.errors import InputError
from lmaudit.report.coverage import LIMITS
from lmaudit.report.derived import DERIVED_FILE, PDF_NAMES, derived_json, entry
from lmaudit.report.document import ReportDocument, load_document, load_report
from lmaudit.report.formatting import MISSING, with_interval
from lmaudit.report.integrity import sealed_provenance
from lmaudit.report.model_card import level_cells

TEMPLATE = "report.typ"
STATEMENTS_TEMPLATE = "statements.typ"  # an audit told in statements and tables: erasure's, canaries'
ERASURE_FILE = "erasure.json"
STRONGEST_SHOWN = 5  # attacks per level in the key figures: the ranking's first, the ones the verdict rests on


def rate(record, alpha: str) -> str:
    """A ranked attack's TPR at FPR `alpha` ('0.01', '0.001') with its interval, or MISSING."""
    tpr = record.tpr_at_fpr.get(alpha)
    return with_interval(tpr.tpr, tpr.tpr_ci) if tpr is not None else MISSING


def view(report: ReportDocument) -> dict:
    """What the template lays out, every number already a string."""
    summary = report.summary
    named = report.level_names  # sample, subgroup, group: what the audit calls them (admission, patient, user)
    levels = [{"name": named.get(name, name), **level_cells(level), "statement": level.statement}
              for name, level in summary.levels.items()]
    ranking = [{"name": named.get(level, level), "rows": [{"attack": f"{r.attack} ({r.signal})", "auc": with_interval(r.auc, r.auc_ci),
                                         "tpr1": rate(r, "0.01"), "tpr01": rate(r, "0.001")}
                                        for r in ranked[:STRONGEST_SHOWN]]}
               for level, ranked in report.ranking.items()]
    coverage = report.coverage
    return {"title": "Membership-inference audit", "created": report.created[:10], "version": report.lmaudit_version,
            "target": str(report.config.get("target") or MISSING), "risk": summary.risk, "rule": summary.rule,
            "levels": levels, "ranking": ranking, "threat_models": summary.threat_models.statement,
            "caveats": [*(summary.caveats or []), *(summary.shift or [])],
            "limits": coverage.limits if coverage is not None else LIMITS,
            "coverage": coverage.model_dump() if coverage is not None else None, "provenance": sealed_provenance(report, "report.json")}


def compiled(template_name: str, laid_out: dict) -> bytes:
    """The PDF Typst lays out from the template `template_name` and the view `laid_out` (InputError where the optional
    `typst` engine is not installed)."""
    try:
        import typst
    except ImportError:
        raise InputError("the PDF needs the optional Typst engine: pip install 'lmaudit[pdf]'") from None
    template = files("lmaudit.report").joinpath("templates", template_name).read_bytes()
    return typst.compile(template, format="pdf", sys_inputs={"view": json.dumps(laid_out)})


def pdf_bytes(report: ReportDocument) -> bytes:
    """The PDF of `report`."""
    return compiled(TEMPLATE, view(report))


def write_pdf(out: str | Path) -> Path:
    """Write report.pdf beside the report.json of the audit folder `out` (erasure.pdf beside an erasure audit's
    erasure.json), and its SHA-256 into derived.json (both whole or not at all); its path. A canary audit's PDF is
    `canaries/report.py:write_canary_pdf`'s."""
    out = Path(out)
    if not (out / "report.json").is_file() and (out / ERASURE_FILE).is_file():
        return write_sealed_pdf(out, ERASURE_FILE, erasure_pdf_bytes(load_document(out / ERASURE_FILE)))
    return write_sealed_pdf(out, "report.json", pdf_bytes(load_report(out)))


def write_sealed_pdf(out: Path, document: str, content: bytes) -> Path:
    """Write the PDF of the sealed `document` in `out` and record its SHA-256 in derived.json; its path."""
    path = out / PDF_NAMES[document]
    derived = derived_json(out, [entry(out, path, hashlib.sha256(content).hexdigest())], document)
    with staged(path, out / DERIVED_FILE) as (staging, derived_staging):
        staging.write_bytes(content)
        derived_staging.write_text(derived, encoding="utf-8")
    return path


def erasure_pdf_bytes(document) -> bytes:
    """The PDF of an erasure audit's ErasureDocument (report/erasure_words.py:erasure_page's tables)."""
    from lmaudit.report.erasure_words import erasure_pdf_view

    return compiled(STATEMENTS_TEMPLATE, erasure_pdf_view(document))
