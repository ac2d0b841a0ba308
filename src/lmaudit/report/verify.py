"""`lmaudit verify`: everything an audit's folder holds, checked against what was recorded when it was written: the
report's seal, the SHA-256 of every model, adapter and data file it read, of its page and table (`outputs`), and of the
files made from it afterwards (derived.json: the PDF, the model card's section, privacy_evaluation.json); and the seal
of every other result kept beside it."""

from __future__ import annotations

from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.report.derived import PDF_NAMES, derived_mismatches
from lmaudit.report.integrity import (
    REPORT_KEY,
    data_mismatches,
    file_sha256,
    model_mismatches,
    read_sealed,
    seal_mismatches,
)


def output_mismatches(path: Path, document: dict) -> list[str]:
    """What differs between a sealed document's page and table (its `outputs`, beside it) and their recorded SHA-256."""
    lines = []
    for name, recorded in (document.get("outputs") or {}).items():
        file = path.parent / name
        if not file.is_file():
            lines.append(f"{file}: recorded in {path.name}'s outputs, gone")
        elif (found := file_sha256(file)) != recorded:
            lines.append(f"{file}: SHA-256 {found} differs from the {recorded} {path.name} recorded")
    return lines


def report_path(given: str | Path) -> Path:
    """report.json of an audit's output folder (or the file itself); InputError naming it when it is missing."""
    path = Path(given)
    path = path / "report.json" if path.is_dir() else path
    if not path.is_file():
        raise InputError(f"{path}: no such report; give an audit's output folder or its report.json")
    return path


def verify_report(given: str | Path) -> tuple[dict, list[str]]:
    """An audit's report and everything that differs from what it recorded, one line each: its own seal, the models'
    and adapters' files, the data files (InputError for a report or file that cannot be read)."""
    path = report_path(given)
    report, text = read_sealed(path)
    lines = seal_mismatches(path, report, text, REPORT_KEY)
    if lines:  # a report altered after it was written cannot be trusted to name the files to rehash
        return report, lines
    provenance = report.get("provenance")
    if not isinstance(provenance, dict) or not isinstance(provenance.get("data"), dict):
        return report, [f"{path}: provenance: missing; the report records no data hashes"]
    for name, record in (report.get("model_files") or {}).items():
        lines += model_mismatches(name, record)
    lines += output_mismatches(path, report) + derived_mismatches(path.parent, report["integrity"][REPORT_KEY])
    return report, lines + data_mismatches(provenance["data"])


def verify_bundle(out: str | Path, sealed_names: tuple[str, ...]) -> list[str]:
    """Everything that differs from what was recorded in the folder `out` and its subfolders, one line each: its
    report.json in full (`verify_report`), and the seal of every other sealed document (`sealed_names`: an extraction,
    a reconstruction, a dataset inference, a canary audit of the same model kept beside it). InputError for a folder
    that holds none, naming its missing report.json."""
    out = Path(out)
    if out.is_file():
        return verify_report(out)[1]
    found = sorted(path for name in sealed_names for path in out.rglob(name) if path.is_file())
    if not found:
        report_path(out)  # says which report is missing
    lines = []
    for path in found:
        if path.name == "report.json":
            lines += verify_report(path)[1]
        else:
            document, text = read_sealed(path)
            sealed_lines = seal_mismatches(path, document, text, REPORT_KEY)
            derived = (derived_mismatches(path.parent, document["integrity"][REPORT_KEY], path.name)
                       if path.name in PDF_NAMES and not sealed_lines else [])
            lines += sealed_lines or output_mismatches(path, document) + derived
    return lines
