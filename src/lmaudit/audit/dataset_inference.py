"""`lmaudit dataset-inference`: was a suspect set, as a whole, used to train the model? The suspect samples take the
members' place and the validation samples (drawn like them, known unseen) the non-members', the signals are computed
or read from the store as in an audit, every attack that needs no audited label scores them, and Maini et al.'s test
(metrics/dataset_inference.py) decides; the blind baseline says whether the two sets were drawn alike as far as the
texts can tell. Writes dataset_inference.json (no text) into the output folder.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.audit.records import resolve
from lmaudit.audit.run import signals_and_attacks
from lmaudit.config import AuditConfig
from lmaudit.data.roles import MEMBER, NONMEMBER
from lmaudit.errors import row_location
from lmaudit.locks import output_lock
from lmaudit.metrics.dataset_inference import members_against_nonmembers
from lmaudit.metrics.validity import blind_validity
from lmaudit.report.build import environment_info
from lmaudit.report.documents import refuse_another_run, write_document
from lmaudit.report.verdict import DATASET_INFERENCE_RULE, dataset_inference_statement
from lmaudit.strict_json import json_ready

RESULT_FILE = "dataset_inference.json"


def shared_text_warnings(corpus: pd.DataFrame) -> list[str]:
    """A warning where validation samples have the very text of a suspect sample (templated notes can): were the
    suspect set trained on, those texts were too, so they look like members; that lowers the test's power and leaves
    its false-positive rate as it is, so they are kept."""
    suspect_texts = set(corpus.loc[corpus["role"] == MEMBER, "text"])
    validation = corpus[corpus["role"] == NONMEMBER]
    shared = validation[validation["text"].isin(suspect_texts)]
    if not len(shared):
        return []
    return [f"{len(shared)} of {len(validation)} validation samples have the very text of a suspect sample (the first: "
            f"{row_location(shared.iloc[0])}); were the suspect set trained on, so were they: the test loses power, "
            "never its false-positive rate"]


def infer_dataset(config: AuditConfig, progress: bool = False, overwrite: bool = False) -> dict:
    """Run dataset inference for `config` (members = the suspect file, nonmembers = the validation file), write
    dataset_inference.json into its output folder (one holding another run's results only with `overwrite`) and return
    its document."""
    corpus = load_audit_corpus(config.role_files(), names=config.columns)
    with output_lock(config.out):
        resolved = resolve(config, progress)
        refuse_another_run(resolved.out, resolved.given, overwrite, RESULT_FILE)
        scored, attacks, _ = signals_and_attacks(resolved, corpus)
        unit = resolved.level_names.get("group", "group")
        result = members_against_nonmembers(scored.samples, attacks, unit, resolved.evaluation.seed)
        blind = blind_validity(scored.samples, corpus.set_index("sample_id")["text"], resolved.evaluation.bootstrap,
                               resolved.evaluation.seed, resolved.include_text)
        shifted = any(level["texts_separate"] for entry in blind["sets"].values()
                      for level in entry.get("levels", {}).values())
        section = {"suspect": "the suspect set", "validation": "the validation set", **asdict(result),
                   "rule": DATASET_INFERENCE_RULE}
        document = json_ready({
            **section, "statement": dataset_inference_statement(section, shifted), "texts_separate": shifted,
            "warnings": shared_text_warnings(corpus),
            "blind_baseline": blind, "config": resolved.given, "environment": environment_info(resolved.placement.device),
        })
        return write_document(resolved.out, RESULT_FILE, document)
