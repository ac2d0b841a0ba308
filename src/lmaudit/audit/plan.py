"""Planning an audit before it runs (`lmaudit plan`): the configuration resolved as the audit will resolve it (models
checked, the signal chosen from the target's kind), the data loaded and checked as the audit will load it, and what
each level's counts can show, into the sealed plan of report/plan.py."""

from __future__ import annotations

from pathlib import Path

from lmaudit.attacks.base import CLASSIFIER_LEVEL_NAMES, LANGUAGE_MODEL_LEVEL_NAMES
from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.audit.records import known_family, with_signal
from lmaudit.config import AuditConfig, RoleFile
from lmaudit.data.plan import PLAN_FILES
from lmaudit.metrics.power import corpus_counts, level_power
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.folders import checked_source
from lmaudit.report.level_words import power_words
from lmaudit.report.plan import PlannedThreshold, plan_document
from lmaudit.signals.registry import signal_spec


def plan_audit(config: AuditConfig, thresholds: list[PlannedThreshold], accept_undecidable: bool = False) -> dict:
    """The sealed plan of the audit `config` against `thresholds` (report/plan.py:plan_document), its models and data
    checked now, so that a plan the audit would refuse is refused when it is written."""
    for source in (config.target_source(), *config.reference_sources()):
        checked_source(source)
    config = with_signal(config, known_family(config.target_source()))
    corpus = load_audit_corpus(config.role_files(), config.evaluation.slice_by, config.columns)
    counts = corpus_counts(corpus, config.evaluation.permutations, config.calibration_members is not None)
    classifier = signal_spec(config.signal.signal).output == "log_probabilities"
    names = CLASSIFIER_LEVEL_NAMES if classifier else LANGUAGE_MODEL_LEVEL_NAMES
    return plan_document(config, thresholds, counts, names, accept_undecidable)


def split_power(folder: str | Path) -> list[str]:
    """What the split in `folder` (`lmaudit split`'s files) can show at each level, a line each, as an audit of a
    language model with the default relabellings and no calibration members would read it."""
    folder = Path(folder)
    corpus = load_audit_corpus([RoleFile(role, str(folder / name)) for role, name in PLAN_FILES.items()])
    counts = corpus_counts(corpus, EvaluationSettings().permutations)
    names = LANGUAGE_MODEL_LEVEL_NAMES
    return [power_words(names[level], level_power(count), names["group"])
            for level, count in counts.items()]
