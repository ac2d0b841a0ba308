"""The files a person reads that are made from a sealed report after its audit: report.pdf, the model card's privacy
section and privacy_evaluation.json. Each is recorded with its SHA-256 in derived.json beside report.json, itself
sealed and tied to the report's own hash, so that `lmaudit verify` finds an edited PDF or card as it finds an edited
report. A section of a markdown file is hashed alone (from its heading to the next heading of its level), so that the
rest of a model card stays the user's to edit."""

from __future__ import annotations

import hashlib
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from lmaudit import __version__
from lmaudit.errors import InputError
from lmaudit.report.integrity import file_sha256, read_sealed, seal_mismatches, sealed, written_form

DERIVED_FILE = "derived.json"
DERIVED_KIND = "derived_files"
DERIVED_KEY = "derived_sha256"
PDF_NAME = "report.pdf"  # the derived file a report folder itself holds: verify wants it recorded
# each sealed document a PDF is made of, and its PDF
PDF_NAMES = {"report.json": PDF_NAME, "erasure.json": "erasure.pdf", "canary_report.json": "canary_report.pdf"}


def section_text(text: str, heading: str) -> str | None:
    """The markdown section of `text` that starts at the line `heading` ('## Privacy evaluation') and ends before the
    next heading of the same or a higher level (None where there is no such line)."""
    lines = text.split("\n")
    if heading not in lines:
        return None
    start = lines.index(heading)
    same_or_higher = re.compile(rf"#{{1,{len(heading) - len(heading.lstrip('#'))}}} ")
    end = next((i for i in range(start + 1, len(lines)) if same_or_higher.match(lines[i])), len(lines))
    return "\n".join(lines[start:end]).rstrip("\n")


def text_sha256(text: str) -> str:
    """SHA-256 (hex) of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry(folder: Path, path: Path, sha256: str, section: str | None = None) -> dict:
    """A derived file's record: its path relative to the report's folder, the section hashed (None: the whole file)
    and the SHA-256."""
    return {"path": os.path.relpath(path, folder), **({"section": section} if section else {}), "sha256": sha256}


def derived_document(folder: Path, report_sha256: str, entries: list[dict]) -> str:
    """derived.json's text for the report of `folder` (its hash `report_sha256`) with `entries` added to those already
    recorded for that report (an entry of the same path and section replaced); sealed."""
    kept = []
    path = folder / DERIVED_FILE
    if path.is_file():
        previous, _ = read_sealed(path)
        if previous.get("report_sha256") == report_sha256:  # another report's records do not describe this one
            kept = [old for old in previous.get("files", []) if (old["path"], old.get("section")) not in
                    {(new["path"], new.get("section")) for new in entries}]
    document = {"schema_version": 1, "kind": DERIVED_KIND, "lmaudit_version": __version__,
                "created": datetime.now(UTC).isoformat(timespec="seconds"), "report_sha256": report_sha256,
                "files": kept + entries}
    return written_form(sealed(document, DERIVED_KEY))


def _current(folder: Path, record: dict) -> str | None:
    path = folder / record["path"]
    if not path.is_file():
        return None
    if "section" not in record:
        return file_sha256(path)
    try:
        found = section_text(path.read_text(encoding="utf-8"), record["section"])
    except (OSError, UnicodeDecodeError):
        return None
    return None if found is None else text_sha256(found)


def derived_mismatches(folder: Path, report_sha256: str, document: str = "report.json") -> list[str]:
    """What differs between the derived files of the sealed `document` in `folder` (report.json, erasure.json) and what
    derived.json recorded, one line each: derived.json's own seal, its document, each file's (or section's) SHA-256,
    and a PDF it does not record."""
    path = folder / DERIVED_FILE
    pdf = folder / PDF_NAMES[document]
    if not path.is_file():
        return [f"{pdf}: not sealed (no {DERIVED_FILE} records it); make it again with `lmaudit pdf`"] if pdf.is_file() \
            else []
    document, text = read_sealed(path)
    lines = seal_mismatches(path, document, text, DERIVED_KEY)
    if lines:
        return lines
    if document.get("report_sha256") != report_sha256:
        return [f"{path}: records the files of another report ({document.get('report_sha256')}), not of this one"]
    files = document.get("files") or []
    for record in files:
        where = Path(os.path.normpath(folder / record["path"]))
        shown = f"{where} ({record['section']})" if "section" in record else str(where)
        found = _current(folder, record)
        if found is None:
            lines.append(f"{shown}: recorded in {path}, gone")
        elif found != record["sha256"]:
            lines.append(f"{shown}: SHA-256 {found} differs from the recorded {record['sha256']}")
    if pdf.is_file() and not any(record["path"] == pdf.name for record in files):
        lines.append(f"{pdf}: not sealed ({path} does not record it); make it again with `lmaudit pdf`")
    return lines


def stale_files(folder: Path, document: str = "report.json") -> list[Path]:
    """The derived files of `folder` (derived.json, the document's PDF): a new `document` there makes them another
    document's."""
    return [path for path in (folder / DERIVED_FILE, folder / PDF_NAMES[document]) if path.is_file()]


def report_sha256_of(folder: Path, document: str = "report.json") -> str:
    """The canonical hash the sealed `document` in `folder` records of itself; InputError where it has none."""
    report, _ = read_sealed(folder / document)
    recorded = (report.get("integrity") or {}).get("report_sha256")
    if not isinstance(recorded, str):
        raise InputError(f"{folder / document}: not sealed; audit again with lmaudit")
    return recorded


def derived_json(folder: Path, records: list[dict], document: str = "report.json") -> str:
    """derived.json's text with `records` added for the sealed `document` in `folder` (json-ready)."""
    return derived_document(folder, report_sha256_of(folder, document), records)
