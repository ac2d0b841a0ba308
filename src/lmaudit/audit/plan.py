"""Planning an audit before it runs (`lmaudit plan`): the configuration resolved as the audit will resolve it (models
checked, the signal chosen from the target's kind), the data loaded and checked as the audit will load it, and what
each level's counts can show, into the sealed plan of report/plan.py."""

from __future__ import annotations

from lmaudit.attacks.base import CLASSIFIER_LEVEL_NAMES, LANGUAGE_MODEL_LEVEL_NAMES
from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.audit.records import known_family, with_signal
from lmaudit.config import AuditConfig
from lmaudit.metrics.power import corpus_counts
from lmaudit.models.folders import checked_source
from lmaudit.report.plan import plan_document
from lmaudit.signals.registry import signal_spec


def plan_audit(config: AuditConfig, thresholds: list[dict], accept_undecidable: bool = False) -> dict:
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
