"""Tamper evidence (docs/gate.md): a document's canonical self-hash, the SHA-256 of every file an audit read, and the
check that rehashes them all.

A sealed document (report.json, an audit plan) carries `integrity: {<key>: hex, canonical: CANONICAL}`: the SHA-256 of
its JSON with sorted keys, no whitespace and the `integrity` field left out. Its file must also be byte for byte the
indented form lmaudit writes, so that no single byte of it (a space, an escape) can change unseen. Files are rehashed
here, never read from the fingerprint cache: a file changed in place may keep its size and modification time.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models.fingerprints import adapter_file_names, model_file_names
from lmaudit.models.folders import resolve_model_folder

INTEGRITY = "integrity"
CANONICAL = "json, sorted keys, no whitespace, hash field excluded"
REPORT_KEY = "report_sha256"


def canonical_sha256(document: dict) -> str:
    """SHA-256 (hex) of `document` without its integrity field, as JSON with sorted keys and no whitespace."""
    content = {key: value for key, value in document.items() if key != INTEGRITY}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sealed(document: dict, key: str) -> dict:
    """`document` with its integrity field (`key`: its canonical SHA-256, and how it was computed) last."""
    content = {name: value for name, value in document.items() if name != INTEGRITY}
    return {**content, INTEGRITY: {key: canonical_sha256(content), "canonical": CANONICAL}}


def written_form(document: dict) -> str:
    """The text of a sealed document as lmaudit writes it: indented JSON and a final newline."""
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read now; InputError naming the file when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as error:
        raise InputError(f"{path}: cannot be read to hash it ({error.__class__.__name__}); check the path") from None
    return digest.hexdigest()


def file_hashes(folder: Path, names: list[str]) -> dict[str, str]:
    """Each named file of `folder` with its SHA-256 (hex)."""
    return {name: file_sha256(folder / name) for name in names}


def model_hashes(folder: str, adapter: str | None) -> dict:
    """The files of a model folder (weights, config, tokenizer, code) and of its adapter, each with its SHA-256."""
    resolved = resolve_model_folder(folder)
    record = {"files": file_hashes(resolved, model_file_names(resolved))}
    if adapter is not None:
        record["adapter_files"] = file_hashes(Path(adapter), adapter_file_names(Path(adapter)))
    return record


def data_hashes(paths: list[str]) -> dict[str, str]:
    """Each data file, by its path as given, with its SHA-256 (InputError naming a file that cannot be read)."""
    return {str(path): file_sha256(path) for path in paths}


def read_sealed(path: Path) -> tuple[dict, str]:
    """A sealed document and its text; InputError naming the file when it is missing, not UTF-8 or not a JSON object."""
    try:
        text = path.read_bytes().decode("utf-8")
        document = json.loads(text)
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.__class__.__name__}); check the path") from None
    except ValueError:  # UnicodeDecodeError and JSONDecodeError alike: not the JSON lmaudit wrote
        raise InputError(f"{path}: not readable JSON; it is damaged or not written by lmaudit") from None
    if not isinstance(document, dict):
        raise InputError(f"{path}: not a JSON object; it is damaged or not written by lmaudit")
    return document, text


def seal_mismatches(path: Path, document: dict, text: str, key: str) -> list[str]:
    """What differs between a sealed document and its seal, one line each (none: intact)."""
    recorded = document.get(INTEGRITY)
    if not isinstance(recorded, dict) or set(recorded) != {key, "canonical"} or recorded["canonical"] != CANONICAL:
        return [f"{path}: integrity: missing or altered (expected {key} and canonical: '{CANONICAL}')"]
    lines = []
    actual = canonical_sha256(document)
    if recorded[key] != actual:
        lines.append(f"{path}: integrity.{key}: recorded {recorded[key]}, the content hashes to {actual}")
    if text != written_form(document):
        lines.append(f"{path}: its bytes are not those lmaudit wrote (whitespace or escapes changed)")
    return lines


def model_mismatches(name: str, record: dict) -> list[str]:
    """What differs between a model's files (and its adapter's) and the SHA-256 the report recorded, one line each."""
    folder = resolve_model_folder(record["folder"])
    if not folder.is_dir():
        raise InputError(f"{folder}: the report's model folder ({name}) is missing; run verify where the audit ran")
    lines = _files_mismatches(folder, model_file_names(folder), record.get("files"), name)
    if record.get("adapter") is not None:
        adapter = Path(record["adapter"])
        if not adapter.is_dir():
            raise InputError(f"{adapter}: the report's adapter folder ({name}) is missing; run verify where the audit ran")
        lines += _files_mismatches(adapter, adapter_file_names(adapter), record.get("adapter_files"), f"{name}'s adapter")
    return lines


def _files_mismatches(folder: Path, names: list[str], recorded: dict | None, name: str) -> list[str]:
    if not isinstance(recorded, dict):
        return [f"{folder}: the report records no file hashes of the {name} model"]
    lines = [f"{folder / file}: not in the report's files of {name} (added)" for file in names if file not in recorded]
    lines += [f"{folder / file}: in the report's files of {name}, gone from the folder" for file in recorded
              if file not in names]
    lines += [f"{folder / file}: SHA-256 {actual} differs from the report's {recorded[file]} ({name})"
              for file, actual in file_hashes(folder, [f for f in names if f in recorded]).items()
              if actual != recorded[file]]
    return lines


def data_mismatches(recorded: dict[str, str]) -> list[str]:
    """What differs between the data files and the SHA-256 the report recorded, one line each."""
    return [f"{path}: SHA-256 {actual} differs from the recorded {recorded[path]}"
            for path, actual in data_hashes(list(recorded)).items() if actual != recorded[path]]


def sealed_provenance(document, name: str) -> list[dict]:
    """The files the sealed `document` (named `name`: report.json, erasure.json, canary_report.json) says the audit
    read (a canary report records none), and the document itself, with their SHA-256 (`lmaudit verify` checks each)."""
    data = (getattr(document, "provenance", None) or {}).get("data") or {}
    rows = [{"name": Path(path).name, "sha256": digest} for path, digest in data.items()]
    if document.integrity is not None:
        rows.append({"name": f"{name} (canonical)", "sha256": document.integrity.report_sha256})
    return rows
