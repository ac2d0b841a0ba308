"""The records an audit's stages pass on: the audit resolved once from its configuration (which model plays which part,
where signals are computed and stored, each stage's settings), and what the signals stage hands to the attacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lmaudit.attacks.base import CLASSIFIER_LEVEL_NAMES, LANGUAGE_MODEL_LEVEL_NAMES, AttackInput, Skipped
from lmaudit.attacks.settings import AttackSettings
from lmaudit.backends.choose import signal_backend
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.source import ModelSource, Placement
from lmaudit.serving.settings import DEFAULT_TOLERANCE
from lmaudit.signals.compute import Scoring
from lmaudit.signals.registry import DEFAULT_SIGNALS, signal_spec
from lmaudit.signals.sampling import ExtractionSettings
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.store import default_cache_dir


@dataclass(frozen=True, kw_only=True)
class TokenPasses:
    """What the token-level attacks ask of the target besides its audited signal: a per-token signal beside it, and the
    extra passes (lowercased texts, ReCaLL's prefix of population samples, `neighbours` neighbour texts per sample of
    `neighbour_words` words proposed by `neighbour_model` (a masked or causal LM, of `neighbour_family`), `samia` sampled continuations per
    text, CAMIA's repeated texts, the texts and their neighbours under SPV-MIA's `self_prompt_reference`, the first
    reference's KL from the target at every token with `reference_kl`) and the non-audited corpus DC-PDD counts
    tokens in."""

    token_signal: str | None = None
    lowercase: bool = True
    recall_prefix: int = 0
    neighbours: int = 0
    neighbour_words: int = 1
    neighbour_model: str | ModelSource | None = None
    neighbour_family: str | None = None
    frequency_data: str | None = None
    samia: int = 0
    camia: bool = False
    reference_kl: bool = False
    self_prompt_reference: ModelSource | None = None


@dataclass(frozen=True, kw_only=True)
class ResolvedAudit:
    """An audit resolved once, before any model runs: the target, the references by their name in the report and the
    shadow model, and each one's family by that name (`families`: 'mlm', 'clm' or 'classifier' from its config.json;
    None for an architecture of no family lmaudit knows, which its loader refuses); how and where signals are computed
    and stored (`scoring`); the settings of each stage; and the configuration as given, which the report echoes. The
    stages take this record, never the configuration."""

    out: Path
    target: ModelSource
    references: dict[str, ModelSource]
    shadow: ModelSource | None
    families: dict[str, str | None]
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
    serving_tolerance: float = DEFAULT_TOLERANCE

    @property
    def classifier(self) -> bool:
        """Whether a classifier is audited (its signal is the label log-probabilities), not a language model."""
        return signal_spec(self.signal.signal).output == "log_probabilities"

    @property
    def level_names(self) -> dict[str, str]:
        """What each level's unit is called in the report."""
        return CLASSIFIER_LEVEL_NAMES if self.classifier else LANGUAGE_MODEL_LEVEL_NAMES

    @property
    def models(self) -> dict[str, ModelSource]:
        """Each audited model by its name in the report: the target, the references, the shadow model if any."""
        return {"target": self.target, **self.references, **({"shadow": self.shadow} if self.shadow else {})}

    @property
    def target_family(self) -> str | None:
        """The target's family ('mlm', 'clm' or 'classifier'; None for an architecture lmaudit knows no family of)."""
        return self.families["target"]

    @property
    def placement(self) -> Placement:
        """How every model of the audit is loaded and where it runs."""
        return self.scoring.placement


@dataclass
class ScoredSamples:
    """The signals stage's output: one row per scored sample (ids, role, length, each model's signal), the attack
    inputs made from those signals, what could not be computed, what is known of the models, and the caveats the
    verdict must carry about the audit itself; for each served model, what serves it and its conformance check."""

    samples: pd.DataFrame
    inputs: list[AttackInput]
    skipped: list[Skipped] = field(default_factory=list)
    models: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    serving: dict = field(default_factory=dict)


def reference_names(count: int) -> list[str]:
    """How the report names `count` reference models: 'reference', or 'reference_1', 'reference_2', ... for several."""
    return ["reference"] if count == 1 else [f"reference_{i + 1}" for i in range(count)]


def placement_of(config: AuditConfig) -> Placement:
    """Where and how `config`'s models load: its placement settings, the device resolved ('auto': cuda when available)."""
    from lmaudit.models.load import resolve_device  # models/load.py reads torch's view of the GPUs

    chosen = config.placement
    return Placement(device=resolve_device(chosen.device), dtype=chosen.dtype, device_map=chosen.device_map,
                     quantization=chosen.quantization, trust_remote_code=chosen.trust_remote_code)


def resolve(config: AuditConfig, progress: bool = False) -> ResolvedAudit:
    """The audit of `config`: every model folder checked (an error names the model at fault) and each audited model's
    family read, the signal chosen from the target's family when none is given, device 'auto' resolved, the backend
    started, the store's folder chosen (`<out>.signals/` beside the output unless given), and the model that proposes
    neighbours found when the token-level attacks need one."""
    from lmaudit.models.folders import checked_source

    references = dict(zip(reference_names(len(config.reference)), config.reference_sources(), strict=True))
    shadow = ModelSource(config.shadow) if config.shadow else None
    models = {"target": config.target_source(), **references, **({"shadow": shadow} if shadow else {})}
    self_prompt = config.token_passes.self_prompt_reference
    for source in (*models.values(), *([ModelSource(self_prompt)] if self_prompt else [])):
        checked_source(source)
    families = {name: known_family(source) for name, source in models.items()}
    config = with_signal(config, families["target"])
    chosen = config.placement
    placement = placement_of(config)
    refuse_unserved_passes(config, models)
    scoring = Scoring(cache_dir=Path(config.cache_dir) if config.cache_dir else default_cache_dir(config.out),
                      placement=placement, progress=progress, order_seed=config.evaluation.seed,
                      backend=signal_backend(chosen.backend, chosen.ray_address, chosen.ray_workers, placement.device))
    return ResolvedAudit(
        out=Path(config.out), target=models["target"], references=references, shadow=shadow, families=families,
        scoring=scoring, signal=config.signal, evaluation=config.evaluation, attacks=config.attacks,
        tokens=token_passes(config, references, families), whitebox=config.whitebox, include_text=config.include_text,
        allow_tokenizer_mismatch=config.allow_tokenizer_mismatch, given=config.model_dump(), extraction=config.extraction,
        serving_tolerance=config.serving.tolerance)


def refuse_unserved_passes(config: AuditConfig, models: dict[str, ModelSource]) -> None:
    """A served model gives its tokens' log-probabilities only: refuse, before anything runs, the signals and passes
    that need more of it (the whole next-token distribution, generations, gradients), naming the option."""
    from lmaudit.signals.served import SERVED_SIGNALS

    served = [name for name, source in models.items() if source.served is not None]
    if not served:
        return
    where = f"{served[0]} is served ({models[served[0]].served})"
    passes = config.token_passes
    needs = [("--signal " + config.signal.signal, config.signal.signal not in SERVED_SIGNALS),
             ("--whitebox", config.whitebox), ("--extraction", config.extraction is not None),
             ("--samia", passes.samia > 0), ("--reference-kl", passes.reference_kl),
             ("--backend ray", config.placement.backend == "ray" and config.serving.engine == "vllm")]
    refused = [option for option, asked in needs if asked]
    if refused:
        raise InputError(f"{refused[0]}: {where}, which gives a causal LM's token log-probabilities only (signals "
                         f"{', '.join(SERVED_SIGNALS)}); drop {refused[0]}, or audit the weights in process")


def known_family(source: ModelSource) -> str | None:
    """The model's family from its config.json ('mlm', 'clm' or 'classifier'), or None for an architecture of no family
    lmaudit knows (not refused here: its loader says what is wrong with it)."""
    from lmaudit.models.config_json import model_family

    try:
        return model_family(source)
    except InputError:
        return None


def token_passes(config: AuditConfig, references: dict[str, ModelSource], families: dict[str, str | None]) -> TokenPasses:
    """The token-level attacks' passes of `config`; the neighbours' proposer only where token-level attacks run (a
    per-token audited signal, or a per-token signal beside a loss)."""
    passes = config.token_passes
    output = signal_spec(config.signal.signal).output
    token_level = output == "tokens" or (passes.token_signal is not None and output == "loss")
    proposer, family = neighbour_proposer(config, references, families) if token_level else (None, None)
    return TokenPasses(
        token_signal=passes.token_signal, lowercase=passes.lowercase, recall_prefix=passes.recall_prefix,
        neighbours=passes.neighbours, neighbour_words=passes.neighbour_words, neighbour_model=proposer,
        neighbour_family=family, frequency_data=passes.frequency_data, samia=passes.samia, camia=passes.camia,
        reference_kl=passes.reference_kl,
        self_prompt_reference=ModelSource(passes.self_prompt_reference) if passes.self_prompt_reference else None)


def with_signal(config: AuditConfig, family: str | None) -> AuditConfig:
    """The configuration, with the signal of the target's `family` (DEFAULT_SIGNALS) when it names none: a causal LM is
    audited on clm_tokens, a masked LM on mlm_energy, a classifier on its label probabilities. A family lmaudit does not
    know (None) keeps the default, for the loader to refuse."""
    if "signal" in config.signal.model_fields_set or family is None:
        return config
    signal = config.signal.model_copy(update={"signal": DEFAULT_SIGNALS[family]})
    return config.model_copy(update={"signal": signal})


def neighbour_proposer(config: AuditConfig, references: dict[str, ModelSource],
                       families: dict[str, str | None]) -> tuple[str | ModelSource | None, str | None]:
    """The language model that proposes neighbours and its family: --neighbour-model, else the first reference (a
    masked or causal LM, by its family in `families`); (None, None) when no neighbours are asked for. InputError when
    they are and there is none."""
    from lmaudit.models.config_json import model_family

    passes = config.token_passes
    if not passes.neighbours:
        return None, None
    first = next(iter(references), None)
    if passes.neighbour_model:  # a folder of no audited model: its family is read here, the one time it is needed
        proposer, family = passes.neighbour_model, model_family(passes.neighbour_model)
    else:
        proposer, family = (references[first], families[first]) if first else (None, None)
    if proposer is not None and family in ("mlm", "clm"):
        return proposer, family
    raise InputError(f"--neighbours {passes.neighbours} needs a language model to propose the neighbours' words: give "
                     "--neighbour-model FOLDER (a masked or causal LM never trained on the audited members, such as the "
                     "fine-tune's public base)")
