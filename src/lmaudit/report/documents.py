"""The documents lmaudit writes (report.json, extraction.json, reconstruction.json, dataset_inference.json,
canary_report.json, erasure.json, study.json, sweep.json, finetune.json): one header, one strict JSON form, one staged writer, and
the rule that an output folder holds one run's result.

Every document opens with the same header (`schema_version`, `kind`, `lmaudit_version`, `created`) and is written by
`write_document`, with its page and its table when it has them, all or none; the JSON is renamed into place last, so a
folder never holds a document without the files it describes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from lmaudit import __version__
from lmaudit.atomic import staged
from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.report.document import typed_document
from lmaudit.report.integrity import REPORT_KEY, file_sha256, sealed, written_form
from lmaudit.strict_json import json_ready, json_text

if TYPE_CHECKING:  # only a document's table needs pandas
    import pandas as pd

SCHEMA_VERSION = 1
# Each document's file and kind, and how an error names it: one folder holds one run's result.
DOCUMENTS = {"report.json": ("audit", "an audit's report"),
             "extraction.json": ("extraction", "an extraction's result"),
             "reconstruction.json": ("reconstruction", "a reconstruction's result"),
             "dataset_inference.json": ("dataset_inference", "a dataset inference's result"),
             "canary_report.json": ("canary_audit", "a canary audit's report"),
             "erasure.json": ("erasure", "an erasure audit's result"),
             "study.json": ("study", "a study's table"),
             "sweep.json": ("dp_sweep", "a DP sweep's table"),
             "finetune.json": ("finetune_comparison", "a fine-tuning comparison")}
# The documents of which a folder holds one: an audit's, extraction's, ... results never share a folder (a study's or a
# fine-tuning comparison's table sits beside the reports it tabulates).
EXCLUSIVE = ("report.json", "extraction.json", "reconstruction.json", "dataset_inference.json", "canary_report.json",
             "erasure.json")
# The documents that carry their own canonical SHA-256 (report/integrity.py): every result of an audit of one model,
# so that a folder holding several (a bundle) is verified whole.
SEALED = dict.fromkeys(EXCLUSIVE, REPORT_KEY)
PRESENTATION = ("figures", "release")  # settings of how a report is drawn or worded, not of what it found: a rerun may change them


def headed(name: str, document: dict) -> dict:
    """`document` (the contents of the file `name`) after the header every document opens with: its schema version,
    its kind, the lmaudit version that wrote it and when (UTC); a header already there is kept."""
    header = {"schema_version": SCHEMA_VERSION, "kind": DOCUMENTS[name][0], "lmaudit_version": __version__,
              "created": datetime.now(UTC).isoformat(timespec="seconds")}
    return {**header, **document}


def write_document(folder: str | Path, name: str, document: dict, page: tuple[str, str] | None = None,
                   table: tuple[str, pd.DataFrame] | None = None) -> dict:
    """Write the document `name` (with its header) into `folder`, with its `page` (file name, HTML) and its `table`
    (file name, DataFrame, as parquet) when given: all or none, the JSON last, and only once it matches its schema
    (report/document.py). A sealed document records its page's and table's SHA-256 (`outputs`) under its seal, so that
    `lmaudit verify` finds an edited page as it finds an edited report. Returns the document as written."""
    typed_document(name, json_ready(headed(name, document)))  # a writer's bug is refused before anything is on disk
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    others = [item for item in (table, page) if item is not None]
    with staged(*(folder / item[0] for item in others), folder / name) as paths:
        for (_, content), path in zip(others, paths, strict=False):
            if isinstance(content, str):
                path.write_text(content, encoding="utf-8")
            else:
                content.to_parquet(path, index=False)
        if name in SEALED and others:
            document = {**document, "outputs": {item[0]: file_sha256(path) for item, path in zip(others, paths,
                                                                                               strict=False)}}
        text = json_text(typed_document(name, json_ready(headed(name, document))))
        if name in SEALED:  # hashed over the very JSON written: the text parsed back, its seal added last
            document = sealed(json.loads(text), SEALED[name])
            typed_document(name, document)
            text = written_form(document)
        paths[-1].write_text(text, encoding="utf-8")
    return json.loads(text)


def another_result(out: Path, documents: Iterable[str]) -> str | None:
    """What in the folder `out` is another run's result, as an error names it: a model, or the first of `documents`
    (file names of DOCUMENTS) it holds ('a canary audit's report (canary_report.json)'); None where there is neither."""
    if (out / SUMMARY_FILE).is_file() or (out / "config.json").is_file():
        return "a model"
    other = next((name for name in documents if (out / name).is_file()), None)
    return None if other is None else f"{DOCUMENTS[other][1]} ({other})"


def refuse_another_run(out: str | Path, config: dict, overwrite: bool = False, result_file: str = "report.json") -> None:
    """Refuse to write `result_file` into a folder that holds another run's results: a model, another command's
    document, or this command's run configured otherwise (InputError naming the first setting that differs), unless
    `overwrite`. A rerun of the same configuration goes on, reusing its stored signals."""
    out = Path(out)
    if overwrite or not out.is_dir():
        return
    said = DOCUMENTS[result_file][1]
    other = another_result(out, (name for name in EXCLUSIVE if name != result_file))
    if other == "a model":
        raise InputError(f"{out}: holds a model, not {said}; choose another --out")
    if other is not None:
        raise InputError(f"{out}: holds {other}; choose another --out, or give --overwrite to write beside it")
    result = out / result_file
    if not result.is_file():
        return
    try:
        previous = json.loads(result.read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{result}: not a result of lmaudit's that can be read; choose another --out, or give "
                         "--overwrite to replace it") from None
    current = json.loads(json_text(config))
    differing = [key for key in dict.fromkeys([*current, *previous])
                 if key not in PRESENTATION and current.get(key) != previous.get(key)]
    if differing:
        raise InputError(f"{out}: holds {said} configured otherwise (its {differing[0]} differs); choose another --out, "
                         "or give --overwrite to replace it")
