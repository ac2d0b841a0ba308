"""The records an audit's stages pass on: the audit resolved once from its configuration (which model plays which part,
where signals are computed and stored, each stage's settings), and what the signals stage hands to the attacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lmaudit.attacks.base import AttackInput, Skipped
from lmaudit.attacks.settings import AttackSettings
from lmaudit.backends.choose import signal_backend
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.source import ModelSource, Placement
from lmaudit.signals.compute import Scoring
from lmaudit.signals.registry import DEFAULT_SIGNALS, signal_spec
from lmaudit.signals.sampling import ExtractionSettings
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.store import default_cache_dir

# What each level's unit is called in the report: a language-model audit of clinical notes has admissions and
# patients, a classifier audit users; precomputed scores say no more than subgroup and group.
LANGUAGE_MODEL_LEVEL_NAMES = {"sample": "sample", "subgroup": "admission", "group": "patient"}
CLASSIFIER_LEVEL_NAMES = {"sample": "sample", "subgroup": "subgroup", "group": "user"}
GENERIC_LEVEL_NAMES = {"sample": "sample", "subgroup": "subgroup", "group": "group"}


@dataclass(frozen=True)
class TokenPasses:
    """What the token-level attacks ask of the target besides its audited signal: a per-token signal beside it, and the
    extra passes (lowercased texts, ReCaLL's prefix of population samples, `neighbours` neighbour texts per sample of
    `neighbour_words` words proposed by `neighbour_model` (a masked or causal LM), `samia` sampled continuations per
    text, CAMIA's repeated texts, the texts and their neighbours under SPV-MIA's `self_prompt_reference`) and the
    non-audited corpus DC-PDD counts tokens in."""

    token_signal: str | None = None
    lowercase: bool = True
    recall_prefix: int = 0
    neighbours: int = 0
    neighbour_words: int = 1
    neighbour_model: str | ModelSource | None = None
    frequency_data: str | None = None
    samia: int = 0
    camia: bool = False
    self_prompt_reference: ModelSource | None = None


@dataclass(frozen=True)
class ResolvedAudit:
    """An audit resolved once, before any model runs: the target, the references by their name in the report and the
    shadow model; how and where signals are computed and stored (`scoring`); the settings of each stage; and the
    configuration as given, which the report echoes. The stages take this record, never the configuration."""

    out: Path
    target: ModelSource
    references: dict[str, ModelSource]
    shadow: ModelSource | None
    scoring: Scoring
    signal: SignalSettings
    evaluation: EvaluationSettings
    attacks: AttackSettings
    tokens: TokenPasses
    whitebox: bool = False
    include_text: bool = False
    allow_tokenizer_mismatch: bool = False
    given: dict = field(default_factory=dict)
    extraction: ExtractionSettings | None = None

    @property
    def classifier(self) -> bool:
        """Whether a classifier is audited (its signal is the label log-probabilities), not a language model."""
        return signal_spec(self.signal.signal).output == "log_probabilities"

    @property
    def level_names(self) -> dict[str, str]:
        """What each level's unit is called in the report."""
        return CLASSIFIER_LEVEL_NAMES if self.classifier else LANGUAGE_MODEL_LEVEL_NAMES

    @property
    def placement(self) -> Placement:
        """How every model of the audit is loaded and where it runs."""
        return self.scoring.placement


@dataclass
class ScoredSamples:
    """The signals stage's output: one row per scored sample (ids, role, length, each model's signal), the attack
    inputs made from those signals, what could not be computed, what is known of the models, and the caveats the
    verdict must carry about the audit itself."""

    samples: pd.DataFrame
    inputs: list[AttackInput]
    skipped: list[Skipped] = field(default_factory=list)
    models: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def reference_names(count: int) -> list[str]:
    """How the report names `count` reference models: 'reference', or 'reference_1', 'reference_2', ... for several."""
    return ["reference"] if count == 1 else [f"reference_{i + 1}" for i in range(count)]


def resolve(config: AuditConfig, progress: bool = False) -> ResolvedAudit:
    """The audit of `config`: every model folder checked (an error names the model at fault), the signal chosen from
    the target's kind when none is given, device 'auto' resolved, the backend started, the store's folder chosen
    (`<out>.signals/` beside the output unless given), and the masked LM that proposes neighbours found when the token-level
    attacks need one."""
    from lmaudit.models.folders import checked_source
    from lmaudit.models.load import resolve_device

    others = [ModelSource(path) for path in (config.shadow, config.self_prompt_reference) if path]
    for source in (config.target_source(), *config.reference_sources(), *others):
        checked_source(source)
    config = with_signal(config)
    placement = Placement(resolve_device(config.device), config.dtype, config.device_map, config.quantization,
                          config.trust_remote_code)
    scoring = Scoring(Path(config.cache_dir) if config.cache_dir else default_cache_dir(config.out), placement,
                      signal_backend(config.backend, config.ray_address, config.ray_workers, placement.device), progress)
    references = dict(zip(reference_names(len(config.reference)), config.reference_sources(), strict=True))
    spec = signal_spec(config.signal.signal)
    token_level = spec.output == "tokens" or (config.token_signal is not None and spec.output == "loss")
    tokens = TokenPasses(config.token_signal, config.lowercase, config.recall_prefix, config.neighbours,
                         config.neighbour_words, neighbour_proposer(config, references) if token_level else None,
                         config.frequency_data, config.samia, config.camia,
                         ModelSource(config.self_prompt_reference) if config.self_prompt_reference else None)
    return ResolvedAudit(Path(config.out), config.target_source(), references,
                         ModelSource(config.shadow) if config.shadow else None, scoring, config.signal, config.evaluation,
                         config.attacks, tokens, config.whitebox, config.include_text, config.allow_tokenizer_mismatch,
                         config.model_dump(), config.extraction)


def with_signal(config: AuditConfig) -> AuditConfig:
    """The configuration, with the signal of the target's kind (DEFAULT_SIGNALS) when it names none: a causal LM is
    audited on clm_tokens, a masked LM on mlm_energy, a classifier on its label probabilities."""
    from lmaudit.models.config_json import model_family

    if "signal" in config.signal.model_fields_set:
        return config
    try:
        family = model_family(config.target_source())
    except InputError:  # an architecture of no family lmaudit knows: the loader says what is wrong with it
        return config
    signal = config.signal.model_copy(update={"signal": DEFAULT_SIGNALS[family]})
    return config.model_copy(update={"signal": signal})


def neighbour_proposer(config: AuditConfig, references: dict[str, ModelSource]) -> str | ModelSource | None:
    """The language model that proposes neighbours: --neighbour-model, else the first reference (a masked or causal LM);
    None when no neighbours are asked for. InputError when they are and there is none."""
    from lmaudit.models.config_json import model_family

    if not config.neighbours:
        return None
    proposer = config.neighbour_model or next(iter(references.values()), None)
    if proposer is not None and model_family(proposer) in ("mlm", "clm"):
        return proposer
    raise InputError(f"--neighbours {config.neighbours} needs a language model to propose the neighbours' words: give "
                     "--neighbour-model FOLDER (a masked or causal LM never trained on the audited members, such as the "
                     "fine-tune's public base)")
