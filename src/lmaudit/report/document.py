"""The typed form of every document lmaudit writes: report.json field by field, and the other documents' sections.

`write_document` validates a document against its model before anything is written, so a file on disk always matches
its schema (docs/schema/*.json, generated from these models); `load_document` and `load_report` read one back as the
model, whose attributes the API and other tools read. Numbers that are not numbers (NaN, infinities) are null in the
file and NaN in the model; a field the file leaves out stays out when the model is written again (the round trip is
exact).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lmaudit.attacks.base import Skipped
from lmaudit.config import RELEASES
from lmaudit.errors import InputError
from lmaudit.metrics.erasure import Change, Equivalence, ErasureFinding, PrivLeak, Separation
from lmaudit.metrics.erasure_extraction import ErasureExtraction
from lmaudit.metrics.memorisation_curve import MemorisationCurve
from lmaudit.metrics.permutation_tests import LeakageTests
from lmaudit.metrics.power import LevelPower
from lmaudit.metrics.results import AttackResult, Interval, Number, TprRecord
from lmaudit.report.canary_sections import AccountantSection, FdpSection, GroupSection, OneRunSection, ValiditySection
from lmaudit.report.cell_record import CellRecord

Section = dict[str, Any]  # a section whose shape its own module documents (validity, extraction, per_class, ...)


class Record(BaseModel):
    """A part of a document: its fields are exactly those listed (a misspelt or unknown key is refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Header(Record):
    """What every document opens with: the schema version, the kind of document, the lmaudit that wrote it and when."""

    schema_version: Literal[1]
    kind: str
    lmaudit_version: str
    created: str
    outputs: dict[str, str] | None = None  # a sealed document's page and table, each with its SHA-256


class Named(Record):
    """An attack on a signal, as the verdict names it."""

    attack: str
    signal: str


class Strongest(Named):
    """A level's strongest attack by AUC, with its interval and counts."""

    auc: Number
    auc_ci: Interval
    n_members: int
    n_nonmembers: int


class TprHeadline(Named):
    """The TPR at 1% FPR the verdict names at a level, with its counts, intervals and test's family-wise p-value."""

    tpr: Number
    tpr_ci: Interval
    fpr_ci: Interval | None = None
    tp: int
    fp: int
    n_members: int
    n_nonmembers: int
    resolution_limited: bool
    p_value: Number | None = None


class EpsilonHeadline(Named):
    """A level's largest empirical epsilon lower bound, at which threshold, and of how many bounds."""

    rule: str
    alpha: float | None
    epsilon_lower_bound: Number
    bounds: int


class BlindHeadline(Record):
    """The blind baseline (the texts alone) at a level: its AUC and whether the texts separate."""

    auc: Number
    auc_ci: Interval
    texts_separate: bool


class LevelVerdict(Record):
    """One level's verdict: its risk, the family-wise p-value, the evidence behind it and its statement."""

    name: str
    risk: Literal["high", "moderate", "low", "inconclusive"]
    p_value: Number | None
    shift: bool | None = None
    risk_from_attacks: str | None = None
    blind: BlindHeadline | None = None
    strongest: Strongest
    tpr_at_1pct_fpr: TprHeadline | None
    epsilon_lower_bound: EpsilonHeadline | None
    power: LevelPower | None = None  # what the level's counts can show at best (metrics/power.py)
    statement: str

    def headline(self) -> dict[str, float | None]:
        """The numbers a reader outside the report takes from this level: the strongest attack's AUC and its 95%
        interval, the TPR at 1% FPR of the attack that exposes most and its interval, and the epsilon lower bound; None
        where not measured (or not finite)."""
        tpr, epsilon = self.tpr_at_1pct_fpr, self.epsilon_lower_bound
        values = {"auc": self.strongest.auc, "auc_low": self.strongest.auc_ci[0], "auc_high": self.strongest.auc_ci[1],
                  "tpr_at_1pct_fpr": tpr.tpr if tpr is not None else None,
                  "tpr_low": tpr.tpr_ci[0] if tpr is not None else None,
                  "tpr_high": tpr.tpr_ci[1] if tpr is not None else None,
                  "epsilon_lower_bound": epsilon.epsilon_lower_bound if epsilon is not None else None}
        return {key: None if value is None or not math.isfinite(value) else float(value) for key, value in values.items()}


class ThreatModels(Record):
    """The attacker access levels tried (each with its attacks) and not tried, and the sentence that says so."""

    tried: dict[str, list[str]]
    not_tried: list[str]
    statement: str


class Summary(Record):
    """report.json's `summary`: the verdict, per level and overall, and what it rests on."""

    risk: Literal["high", "moderate", "low", "inconclusive"]
    levels: dict[str, LevelVerdict]
    rule: str
    delta: float
    blind_baseline_ran: bool
    nonmember_set: str | None
    threat_models: ThreatModels
    caveats: list[str] | None = None
    shift: list[str] | None = None
    shift_elsewhere: list[str] | None = None


class RankedAttack(Named):
    """A row of a level's ranking: the attack's AUC, its TPR at the ranked FPRs, its counts, and what it is."""

    auc: Number
    auc_ci: Interval
    tpr_at_fpr: dict[str, TprRecord]
    n_members: int
    n_nonmembers: int
    description: str
    paper: str
    access: str
    lift_over_blind: Number | None = None


class Environment(Record):
    """The versions and the device that computed the numbers."""

    lmaudit: str
    lmaudit_git: str | None
    python: str
    platform: str
    device: str
    torch: str | None
    transformers: str | None
    numpy: str | None
    scikit_learn: str | None = Field(default=None, alias="scikit-learn")


class DataSummary(Record):
    """The audited samples: counts and groups per role, truncated texts, ungrouped samples, each non-member set's size."""

    counts: dict[str, int]
    groups: dict[str, int]
    truncated: int
    ungrouped: int | None = None
    nonmember_sets: dict[str, int] | None = None


class FamilyCoverage(Record):
    """One attack family of the EDPB's Opinion 28/2024: whether this report tested it, what ran, how lmaudit would."""

    family: str
    status: Literal["tested", "not tested", "not applicable"]
    what_ran: str
    how_to_test: str


class Coverage(Record):
    """report.json's `coverage` (report/coverage.py): the declared release and its context line, one entry per
    attack family, and the limits of the evidence."""

    release: Literal[RELEASES] | None
    context: str
    families: list[FamilyCoverage]
    limits: str


class Integrity(Record):
    """A sealed document's canonical self-hash (report/integrity.py): SHA-256 of its JSON, sorted keys, no whitespace,
    this field excluded (`report_sha256` in every sealed document, a report of its kind)."""

    report_sha256: str
    canonical: str


class ReportDocument(Header):
    """report.json: the verdict first, then the configuration, the data, every result, the ranking and the checks."""

    summary: Summary
    config: Section
    environment: Environment
    data: DataSummary
    results: list[AttackResult]
    skipped: list[Skipped]
    warnings: list[str]
    models: Section | None = None
    model_files: dict[str, Section] | None = None
    per_class: Section | None = None
    level_names: dict[str, str]
    leakage_tests: LeakageTests | None = None
    dataset_inference: Section | None = None
    extraction: Section | None = None
    localisation: Section | None = None
    ranking: dict[str, list[RankedAttack]]
    validity: Section | None = None
    coverage: Coverage | None = None
    provenance: Section | None = None
    integrity: Integrity | None = None


class ExtractionDocument(Header):
    """extraction.json: the extraction section of an audit (audit/extraction.py) for one target."""

    model_config = ConfigDict(extra="allow", frozen=True)
    target: str
    config: Section
    environment: Environment


class ReconstructionDocument(Header):
    """reconstruction.json: per declared field, the candidates and how often the model ranks a member's value first."""

    target: str
    model_family: str
    fields: dict[str, Section]
    rules: str
    config: Section
    environment: Environment
    integrity: Integrity | None = None


class DatasetInferenceDocument(Header):
    """dataset_inference.json: Maini et al.'s test of the suspect set against the validation set, and its statement."""

    model_config = ConfigDict(extra="allow", frozen=True)
    suspect: str
    validation: str
    p_value: Number | None
    rule: str
    statement: str
    texts_separate: bool
    warnings: list[str]
    blind_baseline: Section
    config: Section
    environment: Environment


class CanaryReportDocument(Header):
    """canary_report.json: the one-run and f-DP lower bounds from planted canaries, the accountant's claim, the verdict."""

    target: str
    reference: list[str]
    attack: str
    signal: str
    canaries: Section
    one_run: OneRunSection
    f_dp: FdpSection
    accountant: AccountantSection | None
    verdict: str | None
    exposure: Section | None
    group: GroupSection | None
    white_box: Section | None
    explanation: str
    settings: Section
    config: Section
    validity: ValiditySection | None = None  # the rank test of planted against unplanted scores (absent before it existed)
    memorisation: MemorisationCurve | None = None  # canaries planted at several repetition counts
    integrity: Integrity | None = None


class ErasureDocument(Header):
    """erasure.json: the erased subjects' texts against never-trained ones under each model, the verdict per subject and
    for all, PrivLeak and the equivalence test, the retained subjects' exposure, the utility (audit/erasure.py)."""

    attack: str
    level: float
    subjects: list[str]
    counts: dict[str, dict[str, int]]
    probes: list[Separation]
    before: Separation
    change: Separation
    findings: list[ErasureFinding]
    equivalence: Equivalence
    utility: Change
    privleak: PrivLeak | None = None
    retain_exposure: Change | None = None
    extraction: ErasureExtraction | None = None
    statements: list[str]
    warnings: list[str] = []
    models: dict[str, Section]
    provenance: Section
    config: Section
    environment: Environment
    integrity: Integrity | None = None


class StudyDocument(Header):
    """study.json: a study's cells (settings, measurements, each attack's summary) and its analysis."""

    model_config = ConfigDict(extra="allow", frozen=True)
    cells: list[CellRecord]
    shown: list[list[str]]


class SweepDocument(Header):
    """sweep.json: one row per noise multiplier of a DP-SGD sweep."""

    model_config = ConfigDict(extra="allow", frozen=True)
    rows: list[Section]


class FinetuneDocument(Header):
    """finetune.json: per fine-tuning recipe (full, LoRA) its training record and the strongest attack at a low FPR."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, Section]


DOCUMENT_MODELS: dict[str, type[Header]] = {
    "report.json": ReportDocument, "extraction.json": ExtractionDocument,
    "reconstruction.json": ReconstructionDocument, "dataset_inference.json": DatasetInferenceDocument,
    "canary_report.json": CanaryReportDocument, "erasure.json": ErasureDocument, "study.json": StudyDocument, "sweep.json": SweepDocument,
    "finetune.json": FinetuneDocument}


def typed_document(name: str, document: dict) -> Header:
    """`document` (the contents of the file `name`, header included) as its model; ValueError naming the first field
    that does not match its schema (a writer's bug, never the user's input)."""
    try:
        return DOCUMENT_MODELS[name].model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{name} does not match its schema at {where}: {first['msg']}") from None


def typed_report(report: dict) -> ReportDocument:
    """report.json's document (as `build_report` returns it, or as read from the file) as its model; ValueError naming
    the first field that does not match the schema."""
    return typed_document("report.json", report)


def load_document(path: str | Path) -> Header:
    """The document at `path` (report.json, extraction.json, ...) as its model; InputError naming the file when it
    cannot be read or is not a document of lmaudit's of this schema version."""
    path = Path(path)
    if path.name not in DOCUMENT_MODELS:
        raise InputError(f"{path}: not a document lmaudit writes (one of {', '.join(DOCUMENT_MODELS)})")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return typed_document(path.name, document)
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot be read ({error.__class__.__name__}); check the path") from None
    except ValueError as error:
        raise InputError(f"{path}: not a {path.name} of this lmaudit's schema ({error}); rerun the command that wrote "
                         "it") from None


def load_report(folder: str | Path) -> ReportDocument:
    """The report.json of an audit's output folder (or the file itself) as a ReportDocument."""
    path = Path(folder)
    return load_document(path / "report.json" if path.is_dir() else path)


def schemas() -> dict[str, dict]:
    """Each document's JSON Schema, by file name (docs/schema/ holds them, generated by scripts/schema_docs.py)."""
    return {name: model.model_json_schema(by_alias=True) for name, model in DOCUMENT_MODELS.items()}
