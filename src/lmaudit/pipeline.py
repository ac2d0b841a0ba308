"""The one place where an audit's stages are wired together: corpus -> signals -> attacks -> metrics -> report.

A language-model audit runs the target (and its reference) on every sample it audits or calibrates
with, paired; a classifier audit runs the target on the audited samples and the shadow model on its
own members and non-members. Both hand their stored signals to every registered attack that can
read them, evaluate the scores and write one output folder. `run_attack` starts from losses that
were computed elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.attacks.base import (
    CLASSIFIER_FEATURE,
    CLASSIFIER_RAW_FEATURE,
    COMPRESSED_BYTES,
    FEATURE_VECTORS,
    GRADIENT_NORMS,
    LABEL_RANKS,
    LOWERCASE_LOSS,
    NEIGHBOUR_LOSSES,
    PREFIXED_LOG_PROBS,
    REFERENCE_LOSSES,
    TARGET_LOSS,
    TOKEN_FREQUENCIES,
    TOKEN_IDS,
    TOKEN_LOG_PROBS,
    TOKEN_MEANS,
    TOKEN_STDS,
    AttackInput,
    AttackScores,
    Skipped,
)
from lmaudit.attacks.registry import run_attacks
from lmaudit.config import ROLE_FILE_FIELDS, AuditConfig, RoleFile
from lmaudit.data.corpus import check_labels, combine_corpora, generated_id_prefixes, load_corpus
from lmaudit.data.roles import (
    AUDITED_ROLES,
    NONMEMBER,
    NONMEMBER_SET,
    POPULATION,
    ROLES,
    SHADOW_ROLES,
    TARGET_ROLES,
    check_disjoint_groups,
    check_no_single_sample_groups,
    check_role_sizes,
)
from lmaudit.data.scores import REFERENCE_MODEL, load_scores
from lmaudit.errors import InputError, row_location
from lmaudit.locks import output_lock
from lmaudit.metrics.evaluate import evaluate_attacks, population_mismatch_warnings
from lmaudit.metrics.per_class import correct_decisions, per_class_report
from lmaudit.metrics.results import AttackResult
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.slices import nonmember_sets, sample_slices
from lmaudit.models.source import ModelSource, Placement
from lmaudit.report.build import (
    build_report,
    data_summary,
    environment_info,
    write_report,
)
from lmaudit.signals.base import SignalSettings, unpack_token_values
from lmaudit.signals.registry import SIGNALS, signal_spec
from lmaudit.signals.store import Backend, default_cache_dir

# The roles a classifier audit scores: the target's audited samples and the shadow model's own.
CLASSIFIER_ROLES = AUDITED_ROLES + SHADOW_ROLES
# The attack input a per-token signal's fields become (signals.base.TOKEN_FIELDS).
TOKEN_VALUES = {"log_prob": TOKEN_LOG_PROBS, "mean": TOKEN_MEANS, "std": TOKEN_STDS, "token_id": TOKEN_IDS}
# What each level's unit is called in the report: a language-model audit of clinical notes has admissions and
# patients, a classifier audit users; precomputed scores say no more than subgroup and group.
LANGUAGE_MODEL_LEVEL_NAMES = {"sample": "sample", "subgroup": "admission", "group": "patient"}
CLASSIFIER_LEVEL_NAMES = {"sample": "sample", "subgroup": "subgroup", "group": "user"}
GENERIC_LEVEL_NAMES = {"sample": "sample", "subgroup": "subgroup", "group": "group"}
# What a classifier audit reports about each model, from its training summary.
TRAINING_FIELDS = ("architecture", "size", "n_samples", "epochs_run", "best_epoch", "train_accuracy", "validation_accuracy",
                   "test_accuracy", "generalization_gap", "gap_measured_on")


@dataclass
class ScoredSamples:
    """The signals stage's output: one row per scored sample (ids, role, length, each model's signal), the attack
    inputs made from those signals, what could not be computed, and what is known of the models."""

    samples: pd.DataFrame
    inputs: list[AttackInput]
    skipped: list[Skipped] = field(default_factory=list)
    models: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Scorer:
    """A model that computes signals for some of the scored rows: its name in the report, the model, which rows."""

    name: str
    model: str | ModelSource
    rows: np.ndarray


@dataclass(frozen=True)
class ScoringPlan:
    """Who scores what: the corpus rows behind the samples table (with their texts), the model that scores each row,
    the roles the audit scores, and each row's label index (classifiers: their gradient depends on it)."""

    rows: pd.DataFrame
    scorers: list[Scorer]
    scored_roles: tuple[str, ...]
    label_ids: np.ndarray | None = None


def load_audit_corpus(role_files: list[RoleFile], columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Load every role file into one validated corpus (unique ids, roles and non-member sets disjoint by group), with
    the extra `columns` and each non-member's set (NONMEMBER_SET)."""
    prefixes = generated_id_prefixes(f.path for f in role_files)
    parts = []
    for role_file in role_files:
        part = load_corpus(role_file.path, role_file.role, columns, prefixes[str(role_file.path)])
        set_name = role_file.nonmember_set or Path(role_file.path).stem
        part[NONMEMBER_SET] = np.where(part["role"] == NONMEMBER, set_name, None)
        parts.append(part)
    return checked_audit_corpus(combine_corpora(parts))


def checked_audit_corpus(corpus: pd.DataFrame) -> pd.DataFrame:
    """The corpus, once its roles are checked: enough members and non-members, every other role non-empty, roles (and
    non-member sets) disjoint by group (InputError naming the first problem)."""
    check_role_sizes(corpus, AUDITED_ROLES)
    present = set(corpus["role"])
    check_role_sizes(corpus, [r for r in ROLES if r in present and r not in AUDITED_ROLES])
    check_disjoint_groups(corpus)
    if NONMEMBER_SET in corpus:
        check_disjoint_groups(corpus, NONMEMBER_SET, "non-member sets")
    return corpus


@dataclass(frozen=True)
class AuditOutcome:
    """What an audit wrote and found: report.json's document, the typed results it was built from, what was not run,
    and scores.parquet's table."""

    report: dict
    results: list[AttackResult]
    skipped: list[Skipped]
    scores: pd.DataFrame


def audited_set_column(corpus: pd.DataFrame) -> list[str]:
    """[NONMEMBER_SET] when the corpus's non-members come in two or more sets (so that results are reported per set),
    else []."""
    return [NONMEMBER_SET] if NONMEMBER_SET in corpus and corpus[NONMEMBER_SET].nunique() > 1 else []


def run_audit(config: AuditConfig, progress: bool = False) -> dict:
    """Audit from models (`audit`) and return report.json's document."""
    return audit(config, progress).report


def audit(config: AuditConfig, progress: bool = False, corpus: pd.DataFrame | None = None) -> AuditOutcome:
    """Audit from models: compute (or reuse) the signals, run every attack they allow, write the output folder.
    `corpus`: the samples, already validated (`corpus_from_table`), instead of the configuration's role files."""
    if corpus is None:
        corpus = load_audit_corpus(config.role_files(), config.evaluation.slice_by)
    else:
        corpus = checked_audit_corpus(combine_corpora([corpus]))
    with output_lock(config.out):
        placement = config.placement()
        backend = config.signal_backend()
        classifier = signal_spec(config.signal.signal).output == "log_probabilities"
        scored = (classifier_signals if classifier else language_model_signals)(config, corpus, placement, backend, progress)
        attacks, not_run = run_attacks(scored.inputs)
        texts = corpus.set_index("sample_id").loc[scored.samples["sample_id"], "text"] if config.include_text else None
        return finish_audit(config.out, config.model_dump(), scored.samples, attacks, scored.skipped + not_run,
                            config.evaluation, texts, placement.device, scored.models, model_files(config),
                            scored.warnings,
                            corpus.set_index("sample_id")[list(config.evaluation.slice_by)],
                            CLASSIFIER_LEVEL_NAMES if classifier else LANGUAGE_MODEL_LEVEL_NAMES)


def model_files(config: AuditConfig) -> dict[str, dict]:
    """Each audited model by role: its folder and fingerprint, and its adapter's folder and fingerprint when it has one."""
    from lmaudit.models.fingerprints import adapter_fingerprint, model_fingerprint

    sources = {"target": config.target_source(), **dict(zip(reference_names(config.reference), config.reference_sources(),
                                                            strict=True))}
    if config.shadow:
        sources["shadow"] = ModelSource(config.shadow)
    return {name: {"folder": source.folder, "fingerprint": model_fingerprint(source.folder), "adapter": source.adapter,
                   "adapter_fingerprint": adapter_fingerprint(source.adapter) if source.adapter else None}
            for name, source in sources.items()}


def reference_names(references: list[str]) -> list[str]:
    """How the report names the reference models: 'reference', or 'reference_1', 'reference_2', ... for several."""
    return ["reference"] if len(references) == 1 else [f"reference_{i + 1}" for i in range(len(references))]


def losses_of(values: pd.Series, output: str) -> np.ndarray:
    """Each sample's loss (the signal's unit) from stored values: the value itself, or the mean NLL of its tokens."""
    if output == "tokens":
        return -np.nanmean(unpack_token_values(values.to_numpy())["log_prob"], axis=1)
    return values.to_numpy(dtype=float)


def language_model_signals(config: AuditConfig, corpus: pd.DataFrame, placement: Placement, backend: Backend | None,
                           progress: bool) -> ScoredSamples:
    """The target's and the references' signal on every sample of the target's roles (paired), what the token-level
    attacks read from the target (from the audited signal, or from --token-signal besides it), and white-box features."""
    from lmaudit.signals.compute import model_signals

    rows = corpus[corpus["role"].isin(TARGET_ROLES)].reset_index(drop=True)
    ids, texts = rows["sample_id"].tolist(), rows["text"].tolist()
    spec = signal_spec(config.signal.signal)
    names = reference_names(config.reference)
    models = {"target": config.target_source(), **dict(zip(names, config.reference_sources(), strict=True))}
    if spec.output == "tokens" or config.token_signal:
        neighbour_model(config)  # refuse a missing masked LM before the long passes
    caveats = tokenizer_caveats(config)
    per_model = model_signals(models, ids, texts, config.signal, _cache(config), progress, placement, backend)
    losses = {name: losses_of(frame["value"], spec.output) for name, frame in per_model.items()}
    samples = rows[["sample_id", "role", "group_id", "subgroup_id", *audited_set_column(rows)]].copy()
    for name, loss in losses.items():
        samples[f"{name}_{config.signal.signal}"] = loss
    samples["length"] = per_model["target"]["n_tokens"].to_numpy()
    samples["truncated"] = per_model["target"]["truncated"].to_numpy()
    values = {TARGET_LOSS: losses["target"]}
    if names:
        values[REFERENCE_LOSSES] = np.column_stack([losses[name] for name in names])
    missing: dict[str, str] = {}
    if spec.output == "tokens":
        token_values, missing = token_level_values(config, config.signal, rows, per_model["target"]["value"], placement,
                                                   backend, progress)
        values |= token_values
    inputs = [AttackInput(config.signal.signal, samples, values, config.evaluation.seed, settings=config.attacks,
                          missing=missing)]
    if config.token_signal and spec.output != "tokens":
        inputs.append(token_signal_input(config, rows, samples, placement, backend, progress))
    if not config.whitebox:
        return ScoredSamples(samples, inputs, warnings=caveats)
    plan = ScoringPlan(rows, [Scorer("target", config.target_source(), np.ones(len(rows), bool))], TARGET_ROLES)
    whitebox, skipped = whitebox_inputs(config, plan, samples, placement, backend, progress)
    return ScoredSamples(samples, inputs + whitebox, skipped, warnings=caveats)


def tokenizer_caveats(config: AuditConfig) -> list[str]:
    """Refuse references whose tokenizer differs from the target's (their masks would not be paired with the
    target's), unless allow_tokenizer_mismatch; then one warning per such reference, for the report and its verdict."""
    from lmaudit.models.tokenizer import tokenizer_difference

    caveats = []
    for name, source in zip(reference_names(config.reference), config.reference_sources(), strict=True):
        difference = tokenizer_difference(config.target_source(), source, config.trust_remote_code)
        if difference is None:
            continue
        if not config.allow_tokenizer_mismatch:
            raise InputError(f"{source.folder}: its tokenizer differs from the target's ({difference}), so the masks "
                             "of target and reference cannot be paired; give a reference with the target's tokenizer, "
                             "or --allow-tokenizer-mismatch to audit anyway")
        caveats.append(f"{name}'s tokenizer differs from the target's ({difference}): each model's masks are drawn over "
                       "its own tokens, not paired, so the reference-based attacks compare different masked positions "
                       "(audited with --allow-tokenizer-mismatch)")
    return caveats


def token_signal_input(config: AuditConfig, rows: pd.DataFrame, samples: pd.DataFrame, placement: Placement,
                       backend: Backend | None, progress: bool) -> AttackInput:
    """The token-level attacks' input from --token-signal, computed for the target only (the references keep the
    audited signal); its mean NLL becomes the samples table's target_<token signal> column."""
    from lmaudit.signals.compute import model_signal

    settings = config.signal.model_copy(update={"signal": config.token_signal, "normalize": None})
    stored = model_signal(config.target_source(), rows["sample_id"].tolist(), rows["text"].tolist(), settings,
                          _cache(config), progress, placement, f"target {config.token_signal}", backend=backend)["value"]
    values, missing = token_level_values(config, settings, rows, stored, placement, backend, progress)
    samples[f"target_{config.token_signal}"] = values[TARGET_LOSS] = losses_of(stored, "tokens")
    missing[REFERENCE_LOSSES] = f"the references are scored with the audited signal ({config.signal.signal}) only"
    return AttackInput(config.token_signal, samples, values, config.evaluation.seed, settings=config.attacks,
                       missing=missing)


def neighbour_model(config: AuditConfig) -> str | ModelSource | None:
    """The masked LM that proposes neighbours: --neighbour-model, else the first reference if it is a masked LM; None
    when no neighbours are asked for. InputError when they are and there is none."""
    from lmaudit.models.config_json import model_family

    if not config.neighbours:
        return None
    if config.neighbour_model:
        return config.neighbour_model
    if config.reference and model_family(config.reference[0]) == "mlm":
        return config.reference_sources()[0]
    raise InputError(f"--neighbours {config.neighbours} needs a masked LM to propose the neighbours' words: give "
                     "--neighbour-model FOLDER (a masked LM never trained on the audited members)")


def token_level_values(config: AuditConfig, settings: SignalSettings, rows: pd.DataFrame, stored: pd.Series, placement: Placement,
                       backend: Backend | None, progress: bool) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """What the token-level attacks read besides the target's loss: its per-token values, the texts' compressed
    lengths, token frequencies of non-audited text, and the target's losses of lowercased, prefixed and neighbour
    texts (each an extra pass, as configured); and why any of these is missing."""
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.variants import (
        compressed_bytes,
        corpus_counts,
        prefix_samples,
        prefix_text,
        smoothed_frequencies,
        token_ids_of,
    )

    ids, texts = rows["sample_id"].tolist(), rows["text"].tolist()
    tokens = unpack_token_values(stored.to_numpy())
    values = {TOKEN_VALUES[field]: table for field, table in tokens.items()}
    values[COMPRESSED_BYTES] = compressed_bytes(texts)
    population = np.flatnonzero(rows["role"].to_numpy() == POPULATION)
    spec = signal_spec(settings.signal)
    loss_settings = settings.model_copy(update={"signal": spec.loss_signal, "normalize": None})

    def target_losses(variant_ids: list[str], variant_texts: list[str], label: str) -> np.ndarray:
        frame = model_signal(config.target_source(), variant_ids, variant_texts, loss_settings, _cache(config), progress,
                             placement, label, backend=backend)
        return frame["value"].to_numpy(dtype=float)

    tokenizer = load_tokenizer(config.target, config.trust_remote_code)
    extra_texts = load_corpus(config.frequency_data)["text"].tolist() if config.frequency_data else []
    missing = {
        TOKEN_FREQUENCIES: "no non-audited text to count token frequencies in: give --population or --frequency-data",
        LOWERCASE_LOSS: "not asked for (--no-lowercase)",
        PREFIXED_LOG_PROBS: ("conditions a causal LM on a prefix; a masked LM has no such form" if spec.model_kind != "clm"
                             else f"needs more than --recall-prefix {config.recall_prefix} population samples"
                             if config.recall_prefix else "not asked for (--recall-prefix 0)"),
        NEIGHBOUR_LOSSES: "not asked for: give --neighbours N (N more passes of the target)",
    }
    if len(population) or extra_texts:
        population_ids = token_ids_of(tokenizer, [texts[i] for i in population])
        counts = corpus_counts(population_ids + token_ids_of(tokenizer, extra_texts), len(tokenizer))
        own: list[np.ndarray | None] = [None] * len(rows)
        for position, token_ids in zip(population, population_ids, strict=True):
            own[position] = token_ids
        values[TOKEN_FREQUENCIES] = smoothed_frequencies(counts, tokens["token_id"], own)
    if config.lowercase:
        lowered = [text.lower() for text in texts]
        if all(np.array_equal(a, b) for a, b in zip(token_ids_of(tokenizer, lowered), token_ids_of(tokenizer, texts),
                                                    strict=True)):
            missing[LOWERCASE_LOSS] = "the target's tokenizer lowercases every text, so lowercasing changes nothing"
        else:
            values[LOWERCASE_LOSS] = target_losses(ids, lowered, "target, lowercased")
    if spec.model_kind == "clm" and config.recall_prefix and len(population) > config.recall_prefix:
        in_prefix = population[prefix_samples(population.tolist(), config.recall_prefix, config.evaluation.seed)]
        prefix = prefix_text([texts[i] for i in in_prefix])
        prefixed = model_signal(config.target_source(), ids, texts, settings, _cache(config), progress, placement,
                                "target, after a non-member prefix", prefix=prefix, backend=backend)
        log_probs = unpack_token_values(prefixed["value"].to_numpy())["log_prob"]
        log_probs[in_prefix] = np.nan  # a prefix sample scored after itself says nothing
        values[PREFIXED_LOG_PROBS] = log_probs
    proposer = neighbour_model(config)
    if proposer:
        from lmaudit.models.load import load_masked_lm
        from lmaudit.signals.neighbours import neighbour_texts

        masked_lm = load_masked_lm(proposer, placement)
        neighbours = neighbour_texts(masked_lm.model, masked_lm.tokenizer, texts, ids, config.neighbours,
                                     config.neighbour_words, config.signal.seed, progress=progress)
        flat = [text for per_sample in neighbours for text in per_sample]
        losses = target_losses([i for i in ids for _ in range(config.neighbours)], flat, "target, neighbours")
        values[NEIGHBOUR_LOSSES] = losses.reshape(len(ids), config.neighbours)
    return values, {value: reason for value, reason in missing.items() if value not in values}


def classifier_signals(config: AuditConfig, corpus: pd.DataFrame, placement: Placement, backend: Backend | None,
                       progress: bool) -> ScoredSamples:
    """Shejwalkar et al.'s setting: the features of the target on the audited samples and of the shadow model on its
    own samples (which calibrate every threshold), and white-box features of the same."""
    from lmaudit.models.config_json import classifier_labels
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.features import FEATURE_DIRECTIONS, classifier_features

    check_shadow_setup(config, corpus)
    rows = corpus[corpus["role"].isin(CLASSIFIER_ROLES)].reset_index(drop=True)
    check_labels(rows)
    check_no_single_sample_groups(rows)
    # The target's rows first, then the shadow model's: the order of the samples table.
    rows = pd.concat([rows[rows["role"].isin(AUDITED_ROLES)], rows[rows["role"].isin(SHADOW_ROLES)]], ignore_index=True)
    scorers = [Scorer("target", config.target_source(), rows["role"].isin(AUDITED_ROLES).to_numpy()),
               Scorer("shadow", config.shadow, rows["role"].isin(SHADOW_ROLES).to_numpy())]
    label_ids = np.zeros(len(rows), dtype=np.int64)
    parts = []
    for scorer in scorers:
        part = rows[scorer.rows]
        label_ids[scorer.rows] = label_indices(part, classifier_labels(scorer.model), scorer.model)
        values = model_signal(scorer.model, part["sample_id"].tolist(), part["text"].tolist(), config.signal, _cache(config),
                              progress, placement, scorer.name, backend=backend)
        features = classifier_features(np.stack(values["value"].to_numpy()), label_ids[scorer.rows])
        parts.append(pd.DataFrame({
            "sample_id": part["sample_id"].to_numpy(), "role": part["role"].to_numpy(), "group_id": part["group_id"].to_numpy(),
            **{column: part[column].to_numpy() for column in audited_set_column(rows)},
            "label": part["label"].astype(str).str.strip().to_numpy(), "model": scorer.name,
            "length": values["n_tokens"].to_numpy(), "truncated": values["truncated"].to_numpy(), **features,
        }))
    samples = pd.concat(parts, ignore_index=True)
    inputs = [AttackInput(feature, samples, feature_values(samples, feature, direction), config.evaluation.seed,
                          CLASSIFIER_ROLES)
              for feature, direction in FEATURE_DIRECTIONS.items()]
    models = {name: summary for name, summary in (("target", training_summary(config.target)),
                                                  ("shadow", training_summary(config.shadow))) if summary}
    if not config.whitebox:
        return ScoredSamples(samples, inputs, models=models)
    plan = ScoringPlan(rows, scorers, CLASSIFIER_ROLES, label_ids)
    whitebox, skipped = whitebox_inputs(config, plan, samples, placement, backend, progress)
    return ScoredSamples(samples, inputs + whitebox, skipped, models)


def feature_values(samples: pd.DataFrame, feature: str, direction: float) -> dict[str, np.ndarray]:
    """What the classifier attacks read of one feature: the feature oriented (higher = member) and raw, and with the
    rank feature the ranks themselves, which the rank-histogram attack reads (once, not once per feature)."""
    raw = samples[feature].to_numpy(dtype=float)
    return {CLASSIFIER_FEATURE: direction * raw, CLASSIFIER_RAW_FEATURE: raw} | ({LABEL_RANKS: raw} if feature == "rank" else {})


def whitebox_inputs(config: AuditConfig, plan: ScoringPlan, samples: pd.DataFrame, placement: Placement,
                    backend: Backend | None, progress: bool) -> tuple[list[AttackInput], list[Skipped]]:
    """One attack input per white-box signal: each row's features under the model that scores it. A signal the
    target cannot give (attention, for an LSTM) is skipped with the reason."""
    from lmaudit.models.config_json import architecture_difference, has_attention
    from lmaudit.signals.compute import model_signal

    for scorer in plan.scorers[1:]:  # a regression fitted on one architecture's features means nothing on another's
        difference = architecture_difference(config.target, scorer.model)
        if difference:
            raise InputError(f"{scorer.model}: the {scorer.name} model's architecture differs from the target's "
                             f"({difference}); the white-box attacks need a {scorer.name} trained with the target's architecture")
    inputs, skipped = [], []
    for spec in (s for s in SIGNALS if s.output == "features"):
        if spec.needs_attention and not has_attention(config.target):
            skipped.append(Skipped("*", "*", "the model has no attention layers", spec.name))
            continue
        # The gradient is of the signal's own loss: for an MLM, the sample's first mask (k = 1, mean).
        settings = SignalSettings(signal=spec.name, seed=config.signal.seed, max_length=config.signal.max_length,
                                  mask_fraction=config.signal.mask_fraction, batch_tokens=config.signal.batch_tokens)
        matrix = None
        for scorer in plan.scorers:
            part = plan.rows[scorer.rows]
            labels = plan.label_ids[scorer.rows].tolist() if plan.label_ids is not None and spec.label_dependent else None
            values = model_signal(scorer.model, part["sample_id"].tolist(), part["text"].tolist(), settings, _cache(config),
                                  progress, placement, f"{scorer.name} {spec.name}", class_labels=labels, backend=backend)
            features = np.stack(values["value"].to_numpy())
            matrix = np.zeros((len(samples), features.shape[1])) if matrix is None else matrix
            matrix[scorer.rows] = features
        # A squared norm computed without forming the gradient can come out a rounding error below zero.
        norms = {GRADIENT_NORMS: np.sqrt(np.maximum(matrix, 0.0))} if spec.squared_gradient_norms else {}
        values = {FEATURE_VECTORS: matrix} | norms
        inputs.append(AttackInput(spec.name, samples, values, config.evaluation.seed, plan.scored_roles, config.attacks))
    return inputs, skipped


def check_shadow_setup(config: AuditConfig, corpus: pd.DataFrame) -> None:
    """Refuse a classifier audit without a shadow model or without shadow data of both kinds."""
    if config.shadow is None:
        raise InputError("the classifier attacks are calibrated on a shadow model: pass --shadow MODEL, a classifier "
                         "trained like the target (`lmaudit train classifier`) on the shadow_member data")
    for role in SHADOW_ROLES:
        if not (corpus["role"] == role).any():
            option = "--" + ROLE_FILE_FIELDS[role].replace("_", "-")
            raise InputError(f"no {role} samples: pass {option} FILE (or rows with role {role}); the shadow thresholds "
                             "are fitted on the shadow model's members and non-members")


def label_indices(rows: pd.DataFrame, model_labels: list[str], model_dir: str) -> np.ndarray:
    """Each row's label as the model's output index; integers also match default LABEL_<i> names."""
    position = {name: index for index, name in enumerate(model_labels)}
    if all(name == f"LABEL_{i}" for i, name in enumerate(model_labels)):
        position.update({str(i): i for i in range(len(model_labels))})
    names = rows["label"].astype(str).str.strip()
    unknown = rows[~names.isin(list(position))]
    if not unknown.empty:
        shown = ", ".join(model_labels[:10]) + (", ..." if len(model_labels) > 10 else "")
        raise InputError(f"{row_location(unknown.iloc[0])}: label '{names[unknown.index[0]]}' is not a label of the model "
                         f"{model_dir} ({shown}); fix the label or audit with the model trained on these labels")
    return names.map(position).to_numpy(dtype=np.int64)


def training_summary(model_dir: str) -> dict | None:
    """What the report shows of a classifier trained by lmaudit (accuracies, generalisation gap); None otherwise."""
    from lmaudit.models.folders import read_training_summary

    summary = read_training_summary(model_dir)
    return {key: summary.get(key) for key in TRAINING_FIELDS} if summary and summary.get("kind") == "classifier" else None


def _cache(config: AuditConfig) -> Path:
    return Path(config.cache_dir) if config.cache_dir else default_cache_dir(config.out)


def scores_table(samples: pd.DataFrame, attacks: list[AttackScores], texts: pd.Series | None) -> pd.DataFrame:
    """One row per sample: ids, role, length, every signal and sample-level attack score; text only if asked.

    Attack columns are score_<attack>, or score_<attack>_<signal> when the attack runs on several signals."""
    table = samples.copy()
    sample_attacks = [a for a in attacks if a.level == "sample"]
    uses = pd.Series([a.attack for a in sample_attacks]).value_counts()
    for attack in sample_attacks:
        name = f"score_{attack.attack}_{attack.signal}" if uses[attack.attack] > 1 else f"score_{attack.attack}"
        table = table.merge(attack.frame[["id", "score"]].rename(columns={"id": "sample_id", "score": name}),
                            on="sample_id", how="left")
    if texts is not None:
        table["text"] = texts.to_numpy()
    return table


def finish_audit(out: str | Path, config: dict, samples: pd.DataFrame, attacks: list[AttackScores], skipped: list[Skipped],
                 evaluation: EvaluationSettings, texts: pd.Series | None, device: str = "cpu", models: dict | None = None,
                 files: dict | None = None, caveats: list[str] | None = None, slice_columns: pd.DataFrame | None = None,
                 level_names: dict[str, str] = GENERIC_LEVEL_NAMES) -> AuditOutcome:
    """Evaluate the attacks on all data and on each slice and write the output folder (report.json, scores.parquet,
    report.html); `files`: the audited models' folders and fingerprints (`model_files`); `caveats`: what the verdict
    must carry about the audit itself (warnings); `slice_columns`: the values of the slice_by columns (index
    sample_id); `level_names`: what each level's unit is called."""
    slices = sample_slices(samples, evaluation, slice_columns)
    units = {level: f"{name}s" for level, name in level_names.items()}
    results, not_evaluated = evaluate_attacks(attacks, evaluation, slices, units, nonmember_sets(samples))
    skipped = skipped + not_evaluated
    if not results:
        raise InputError("no attack could be evaluated: " + "; ".join(s.reason for s in skipped))
    report = build_report(config, data_summary(samples), results, skipped, environment_info(device),
                          population_mismatch_warnings(results), models, files, level_names, caveats,
                          per_class=classifier_per_class(samples, attacks))
    scores = scores_table(samples, attacks, texts)
    write_report(out, report, scores, attacks)
    return AuditOutcome(report, results, skipped, scores)


# The attacks whose decisions the per-class analyses read (Shejwalkar et al.'s Figures 7 and 6): Algorithm 1 per sample,
# Algorithm 4 per user.
PER_CLASS_ATTACKS = {"sample": "sample_threshold", "group": "sample_to_user"}


def classifier_per_class(samples: pd.DataFrame, attacks: list[AttackScores]) -> dict | None:
    """report.json's `per_class` (metrics/per_class.py) for a classifier audit, from each feature's Algorithm 1 and 4
    decisions at their own fixed threshold; None for any other audit (no labels, or Algorithm 1 did not run)."""
    decisions = {level: {a.signal: correct_decisions(a.frame, a.fixed_thresholds[0].value) for a in attacks
                         if a.attack == name and a.level == level and a.fixed_thresholds}
                 for level, name in PER_CLASS_ATTACKS.items()}
    if "label" not in samples or not decisions["sample"]:
        return None
    return per_class_report(samples, decisions["sample"], decisions["group"])


def run_attack(scores_path: str | Path, out: str | Path, evaluation: EvaluationSettings, signal: str = "loss") -> dict:
    """Audit from a file of precomputed losses (`attack_losses`) and return report.json's document."""
    return attack_losses(load_scores(scores_path, evaluation.slice_by), out, evaluation, signal, str(scores_path)).report


def attack_losses(signals: pd.DataFrame, out: str | Path, evaluation: EvaluationSettings, signal: str = "loss",
                  source: str = "DataFrame") -> AuditOutcome:
    """Audit from precomputed losses (`load_scores`' or `scores_from_table`'s layout): the same attacks, metrics and
    report, without any model; `source` names where the losses came from in the report's configuration."""
    config = {"scores": source, "out": str(out), "signal": signal, "evaluation": evaluation.model_dump()}
    values = {TARGET_LOSS: signals["target"].to_numpy(dtype=float)}
    references = [column for column in signals.columns if REFERENCE_MODEL.match(column)]
    if references:
        values[REFERENCE_LOSSES] = signals[references].to_numpy(dtype=float)
    attacks, skipped = run_attacks([AttackInput(signal, signals, values, evaluation.seed)])
    samples = signals.rename(columns={name: f"{name}_{signal}" for name in ("target", *references)})
    with output_lock(out):
        return finish_audit(out, config, samples, attacks, skipped, evaluation, texts=None,
                            slice_columns=signals.set_index("sample_id")[list(evaluation.slice_by)])
