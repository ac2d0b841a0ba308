"""`lmaudit demo`: generated data split into roles, tiny models trained on the spot (or reused), and one audit.

suite "mlm": BERT masked LMs and the MLM energy; "causal": GPT-2 causal LMs and the mean next-token loss (Jagannatha's
black-box setting); "classifier": topic classifiers of user posts, with a shadow classifier (Shejwalkar et al.). The
fine-tuning suite is `studies/finetune_suite.py`; what the demos set up like the studies is `studies/setup.py`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from lmaudit.audit.run import run_audit
from lmaudit.config import AuditConfig
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.locks import output_lock
from lmaudit.studies.setup import (
    CLASSIFIER_DEMO_SIZES,
    DEMO_SIZES,
    NONMEMBER_SET_NAMES,
    REFERENCE_TRAIN,
    classifier_audit_config,
    classifier_recipe,
    demo_recipe,
    train_classifier_pair,
    train_language_model_unless_done,
    write_classifier_roles,
    write_note_roles,
    write_other_hospital_nonmembers,
)

log = logging.getLogger(__name__)

# Each language-model suite: the model kind trained, the signal audited, and the per-token signal the token-level
# attacks read (the causal suite's audited signal is one).
LANGUAGE_MODEL_SUITES = {"mlm": ("mlm", "mlm_energy", "mlm_tokens"), "causal": ("clm", "clm_tokens", None)}


def default_out(suite: str) -> str:
    """Where a demo writes unless told: runs/demo for the MLM suite, runs/demo-<suite> for the others."""
    return "runs/demo" if suite == "mlm" else f"runs/demo-{suite}"


def run_demo(out: str | Path, size: str = "quick", seed: int = 0, progress: bool = False, suite: str = "mlm",
             architecture: str = "bert") -> dict:
    """Generate the suite's data, split it into roles, train its models unless done, audit, report."""
    with output_lock(out):
        if suite == "classifier":
            return classifier_demo(Path(out), size, seed, progress, architecture)
        return language_model_demo(Path(out), size, seed, progress, suite)


def language_model_demo(out: Path, size: str, seed: int, progress: bool, suite: str) -> dict:
    """Notes of generated patients; the target, and references trained alike on other patients (each with its own
    seed: offline, never on an audited member); audited with white-box. The causal suite also trains a masked LM on
    the references' patients to propose neighbours."""
    demo = DEMO_SIZES[size]
    log.info("demo (%s suite, %s size): generating the notes of %d patients", suite, size, demo.patients)
    notes, files = write_note_roles(size, seed, out / "data")
    log.info("demo: %d notes split into roles by patient, written to %s", len(notes), out / "data")
    other_hospital = write_other_hospital_nonmembers(notes, seed, out / "data")
    models = out / "models"
    reference_texts = notes.loc[notes["role"] == REFERENCE_TRAIN, "text"].tolist()
    target_texts = notes.loc[notes["role"].isin([MEMBER, CALIBRATION_MEMBER]), "text"].tolist()
    kind, signal, token_signal = LANGUAGE_MODEL_SUITES[suite]
    recipe = demo_recipe(demo.epochs)
    references = [models / "reference"] + [models / f"reference-{i + 1}" for i in range(1, demo.references)]
    log.info("demo: training %d models unless already trained (%d references, the target%s), %d epochs each",
             len(references) + 1 + (kind == "clm"), len(references), ", a masked LM for neighbours" if kind == "clm" else "",
             demo.epochs)
    for number, folder in enumerate(references):
        train_language_model_unless_done(kind, reference_texts, folder, replace(
            recipe, seed=seed + 1 + number, tokenizer_dir=None if number == 0 else references[0]), folder.name, progress)
    train_language_model_unless_done(kind, target_texts, models / "target",
                                     replace(recipe, seed=seed, tokenizer_dir=references[0]), "target", progress)
    neighbours = {}
    if kind == "clm":
        train_language_model_unless_done("mlm", reference_texts, models / "neighbour-mlm", replace(recipe, seed=seed + 1),
                                         "neighbour-mlm", progress)
        neighbours = {"neighbours": demo.neighbours, "neighbour_model": str(models / "neighbour-mlm")}
    config = AuditConfig(
        target=str(models / "target"), reference=[str(folder) for folder in references],
        members=str(files[MEMBER]), nonmembers=dict(zip(NONMEMBER_SET_NAMES, map(str, (files[NONMEMBER], other_hospital)),
                                                        strict=True)),
        population=str(files[POPULATION]), calibration_members=str(files[CALIBRATION_MEMBER]),
        out=str(out), signal={"signal": signal, "k": demo.k, "seed": seed}, evaluation={"bootstrap": demo.bootstrap, "seed": seed},
        whitebox=True, token_signal=token_signal, **neighbours,
        # the notes are short (median 23 tokens): extraction reads 4- and 8-token prefixes and 8-token suffixes
        extraction={"prefix_tokens": (4, 8), "suffix_tokens": 8} if kind == "clm" else None, camia=kind == "clm",
    )
    log.info("demo: auditing the target (%s, with white-box attacks)", signal)
    return run_audit(config, progress=progress, overwrite=True)  # the demo's own folder: a rerun replaces its report


def classifier_demo(out: Path, size: str, seed: int, progress: bool, architecture: str) -> dict:
    """User posts; target and shadow classifiers trained alike on disjoint users; audited with white-box."""
    demo = CLASSIFIER_DEMO_SIZES[size]
    posts, files = write_classifier_roles(size, seed, out / "data")
    log.info("demo: %d posts split into roles by user, written to %s; training the target and the shadow %s "
             "classifiers unless already trained", len(posts), out / "data", architecture)
    target, shadow = train_classifier_pair(posts, out / "models", classifier_recipe(size, architecture, seed=seed), progress)
    log.info("demo: auditing the target classifier (shadow-calibrated and white-box attacks)")
    return run_audit(classifier_audit_config(target, shadow, files, out, demo.bootstrap, seed), progress=progress,
                     overwrite=True)
