"""What every attack shares: its input (stored signals, never a model), its output (membership scores, higher =
more likely a member), its registry spec, and the mean aggregation of sample scores over admissions and patients."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from lmaudit.attacks.settings import AttackSettings
from lmaudit.data.roles import EVALUATED_ROLES, SHADOW_ROLES, TARGET_ROLES

LEVELS = ("sample", "subgroup", "group")
UNIT_LEVELS = LEVELS[1:]  # the units a sample-level score is averaged over: admissions (subgroups), patients (groups)
# The id column that defines each level above the sample.
LEVEL_COLUMNS = {"subgroup": "subgroup_id", "group": "group_id"}
# What each level's unit is called in the report: a language-model audit of clinical notes has admissions and
# patients, a classifier audit users; precomputed scores say no more than subgroup and group.
LANGUAGE_MODEL_LEVEL_NAMES = {"sample": "sample", "subgroup": "admission", "group": "patient"}
CLASSIFIER_LEVEL_NAMES = {"sample": "sample", "subgroup": "subgroup", "group": "user"}
GENERIC_LEVEL_NAMES = {"sample": "sample", "subgroup": "subgroup", "group": "group"}

# What an attack can read from an AttackInput's `values`, each aligned with its `samples` rows. Per-token values are
# (n, T) arrays padded with NaN to the longest sample; token t of a causal LM is the t-th token predicted (the second
# token of the text onwards), of a masked LM the t-th content token.
TARGET_LOSS = "target_loss"  # (n,) the target's signal, in its unit; lower = likelier under the target
REFERENCE_LOSSES = "reference_losses"  # (n, R) each reference model's signal on the same samples, same unit
FEATURE_VECTORS = "feature_vectors"  # (n, d) white-box features of the model that scored each row
GRADIENT_NORMS = "gradient_norms"  # (n, P) L2 norm of the gradient of the sample's loss, one per parameter tensor
CLASSIFIER_FEATURE = "classifier_feature"  # (n,) a feature of a classifier's output, oriented so higher = member
CLASSIFIER_RAW_FEATURE = "classifier_raw_feature"  # (n,) the same feature in its own unit, as the paper defines it
LABEL_RANKS = "label_ranks"  # (n,) rank of the true label among the classifier's labels (1 = its top prediction)
TOKEN_LOG_PROBS = "token_log_probs"  # (n, T) log p(x_t | context) under the target (nats)
TOKEN_MEANS = "token_means"  # (n, T) E_z log p(z | context) under the target's predictive distribution at t (nats)
TOKEN_STDS = "token_stds"  # (n, T) standard deviation of log p(z | context) under that distribution (nats)
TOKEN_IDS = "token_ids"  # (n, T) the id of each scored token (floats; NaN padding)
TOKEN_TOP1_IDS = "token_top1_ids"  # (n, T) the id of the target's most likely token at each position (greedy decoding)
TOKEN_IS_TOP1 = "token_is_top1"  # (n, T) 1.0 where the token is the target's most likely token at its position, else 0
REFERENCE_TOKEN_LOG_PROBS = "reference_token_log_probs"  # (n, T) log p(x_t | context) under the first reference, at
# the target's tokens (the same tokenizer; nats)
REFERENCE_KL = "reference_kl"  # (n, T) KL(p_first reference(. | context) || p_target(. | context)) over the vocabulary
# at each of those positions (nats; >= 0)
TOP1_SIMILARITY = "top1_similarity"  # (n, T) cosine similarity of the target's first choice at each position and the
# true token, in the first reference's input-embedding space (1 where they are the same token)
REFERENCE_TOP1_SIMILARITY = "reference_top1_similarity"  # (n, T) the same for the first reference's first choice
TOKEN_FREQUENCIES = "token_frequencies"  # (n, T) each token's Laplace-smoothed frequency in non-audited text
COMPRESSED_BYTES = "compressed_bytes"  # (n,) length in bytes of zlib.compress(text.encode("utf-8"))
LOWERCASE_LOSS = "lowercase_loss"  # (n,) the target's mean NLL of the lowercased text (nats per token)
PREFIXED_LOG_PROBS = "prefixed_log_probs"  # (n, T) log p(x_t | non-member prefix, context); NaN rows: not scored
MEMBER_PREFIXED_LOG_PROBS = "member_prefixed_log_probs"  # (n, T) log p(x_t | prefix of calibration members, context)
REPEATED_LOG_PROBS = "repeated_log_probs"  # (n, T') log p of each token of the text repeated 6 times (CAMIA)
SAMPLED_OVERLAPS = "sampled_overlaps"  # (n, d) ROUGE-1 recall of d sampled continuations of each text's first half
NEIGHBOUR_LOSSES = "neighbour_losses"  # (n, m) the target's mean NLL of m neighbours of each text (nats per token)
SELF_PROMPT_LOSS = "self_prompt_loss"  # (n,) SPV-MIA's self-prompt reference's mean NLL of each text (nats per token)
SELF_PROMPT_NEIGHBOUR_LOSSES = "self_prompt_neighbour_losses"  # (n, m) its mean NLL of the same m neighbours
# ... and how a reason for not running an attack names each one.
TOKEN_SIGNAL_ADVICE = "audit with a per-token signal: --signal clm_tokens, or --token-signal mlm_tokens"
VALUES = {
    TARGET_LOSS: "target-model signal",
    REFERENCE_LOSSES: "reference-model signal (give --reference)",
    FEATURE_VECTORS: "white-box features (give --whitebox)",
    GRADIENT_NORMS: "gradient norms (give --whitebox)",
    CLASSIFIER_FEATURE: "classifier output features (give --signal classifier)",
    CLASSIFIER_RAW_FEATURE: "classifier output features (give --signal classifier)",
    LABEL_RANKS: "ranks of the true labels (give --signal classifier)",
    TOKEN_LOG_PROBS: "per-token log-probabilities (" + TOKEN_SIGNAL_ADVICE + ")",
    TOKEN_MEANS: "per-token predictive means (" + TOKEN_SIGNAL_ADVICE + ")",
    TOKEN_STDS: "per-token predictive standard deviations (" + TOKEN_SIGNAL_ADVICE + ")",
    TOKEN_IDS: "per-token ids (" + TOKEN_SIGNAL_ADVICE + ")",
    TOKEN_TOP1_IDS: "the target's first choice per position (" + TOKEN_SIGNAL_ADVICE + ")",
    TOKEN_IS_TOP1: "whether each token is the target's first choice (" + TOKEN_SIGNAL_ADVICE + ")",
    REFERENCE_TOKEN_LOG_PROBS: "a reference's per-token log-probabilities (give --reference, with the target's "
                               "tokenizer, and audit with a per-token signal: --signal clm_tokens)",
    REFERENCE_KL: "the first reference's KL divergence from the target's next-token distributions (audit a causal LM "
                  "with --signal clm_tokens, --reference with the target's tokenizer and vocabulary, and --reference-kl)",
    TOP1_SIMILARITY: "the target's first choices, compared with the true tokens in a reference's embedding space (give "
                     "--reference, with the target's tokenizer, and audit a causal LM with --signal clm_tokens)",
    REFERENCE_TOP1_SIMILARITY: "a reference's first choices, compared with the true tokens (give --reference, with the "
                               "target's tokenizer, and audit a causal LM with --signal clm_tokens)",
    TOKEN_FREQUENCIES: "token frequencies of non-audited text (" + TOKEN_SIGNAL_ADVICE + ", and a population)",
    COMPRESSED_BYTES: "compressed text lengths (" + TOKEN_SIGNAL_ADVICE + ")",
    LOWERCASE_LOSS: "loss of the lowercased texts (" + TOKEN_SIGNAL_ADVICE + ", and --lowercase)",
    PREFIXED_LOG_PROBS: "log-probabilities after a non-member prefix (audit with --signal clm_tokens, a population "
                        "and --recall-prefix N)",
    MEMBER_PREFIXED_LOG_PROBS: "log-probabilities after a prefix of calibration members (audit with --signal "
                               "clm_tokens, a population, --calibration-members and --recall-prefix N)",
    REPEATED_LOG_PROBS: "log-probabilities of the repeated texts (audit a causal LM with --signal clm_tokens and --camia)",
    SAMPLED_OVERLAPS: "sampled continuations of each text's first half (audit a causal LM with --samia N)",
    NEIGHBOUR_LOSSES: "losses of neighbour texts (audit with --signal clm_tokens and --neighbours N)",
    SELF_PROMPT_LOSS: "a self-prompt reference's losses (audit a causal LM with --signal clm_tokens, "
                      "--self-prompt-reference and --neighbours N)",
    SELF_PROMPT_NEIGHBOUR_LOSSES: "a self-prompt reference's losses of the neighbour texts (audit a causal LM with "
                                  "--signal clm_tokens, --self-prompt-reference and --neighbours N)",
}


@dataclass(frozen=True)
class AttackInput:
    """The stored signals an attack reads, under one reported signal name: one row per scored sample in `samples`
    (sample_id, role, group_id, and when known subgroup_id, length, label, model), and `values` aligned with it.
    `seed` seeds whatever an attack draws or fits; `scored_roles` are the roles this audit computes signals for (an
    attack fitted on any other role does not apply); `settings` holds the attacks' own parameters; `missing` says
    why a value is absent, where the audit knows better than VALUES' generic advice."""

    signal: str
    samples: pd.DataFrame
    values: Mapping[str, np.ndarray]
    seed: int = 0
    scored_roles: tuple[str, ...] = TARGET_ROLES
    settings: AttackSettings = AttackSettings()
    missing: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """ValueError for an input no attack can read rightly: a missing column, a repeated sample id, or a value not
        aligned with the samples (a bug upstream, never the user's input, which is checked where it is read)."""
        absent = [column for column in ("sample_id", "role", "group_id") if column not in self.samples.columns]
        if absent:
            raise ValueError(f"AttackInput of {self.signal}: the samples have no {', '.join(absent)} column")
        if self.samples["sample_id"].duplicated().any():
            raise ValueError(f"AttackInput of {self.signal}: a sample id repeats")
        misaligned = [name for name, value in self.values.items() if len(value) != len(self.samples)]
        if misaligned:
            raise ValueError(f"AttackInput of {self.signal}: {', '.join(misaligned)} not aligned with the "
                             f"{len(self.samples)} samples")


@dataclass(frozen=True)
class Threshold:
    """A calibrated threshold in membership-score units, and the rule that chose it."""

    rule: str
    value: float
    alpha: float | None = None


@dataclass
class Scored:
    """What an attack computes: `frame` has one row per unit of its level (columns id, role, score, and at sample level
    group_id, subgroup_id, length), thresholds fixed by the attack itself, and what it fitted on calibration or shadow
    data (class thresholds, a regression's coefficients), for the report."""

    frame: pd.DataFrame
    fixed_thresholds: list[Threshold] = field(default_factory=list)
    calibration: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NotRun:
    """Why an attack could not run on this input."""

    reason: str


@dataclass(kw_only=True)
class AttackScores(Scored):
    """What one attack computed, on one signal, at one level."""

    attack: str
    signal: str
    level: str


@dataclass(frozen=True)
class Skipped:
    """An attack, level or slice that was not run, and why."""

    attack: str
    level: str
    reason: str
    signal: str | None = None
    slice: str = "all"


# The values an attacker gets from the target's generated text alone: sampled continuations, and the greedy next token
# after each prefix (one generated token per call).
GENERATED_ONLY = (SAMPLED_OVERLAPS, TOKEN_TOP1_IDS, TOP1_SIMILARITY)
REFERENCE_READS = (REFERENCE_LOSSES, REFERENCE_TOKEN_LOG_PROBS, REFERENCE_KL, REFERENCE_TOP1_SIMILARITY,
                   SELF_PROMPT_LOSS, SELF_PROMPT_NEIGHBOUR_LOSSES)  # a reference model's values
# What only the weights give, never a serving API (which returns the log-probabilities of the prompt's tokens and of a
# few top tokens): the whole next-token distribution (its moments, a KL over the vocabulary), features and gradients.
WEIGHTS_ONLY = (TOKEN_MEANS, TOKEN_STDS, REFERENCE_KL, FEATURE_VECTORS, GRADIENT_NORMS)
# The threat models, weakest attacker first: text the target generates (a model behind an API); that and a public
# reference model with its probabilities (PETAL's surrogate); the target's output probabilities (log-probabilities of a
# language model, label probabilities of a classifier); those and a reference model of the same kind (a fine-tune's
# public base); those and a shadow model trained like the target; the target's weights and gradients.
ACCESS_LEVELS = ("generated text only", "generated text + a reference model", "output probabilities",
                 "output probabilities + a reference model", "output probabilities + a shadow model",
                 "white-box (weights and gradients)")


@dataclass(frozen=True)
class AttackSpec:
    """A registered attack. `name` is the `attack` field of report.json and the score_<name> column of scores.parquet.

    reads: the values it needs (VALUES); the first says which inputs it applies to, a missing other one
    skips it. level: the level `build` scores; aggregated_to: the levels scored by the mean of each unit's
    sample scores (by default every unit above a sample-level attack's samples, none above a group-level one's).
    fitted_on: the roles its scores or own thresholds are fitted on (population thresholds
    are added to every attack); it applies only to audits that score those roles. build: the attack
    itself, reading only the input. paper: where the attack comes from, for the report.
    """

    name: str
    description: str
    reads: tuple[str, ...]
    build: Callable[[AttackInput], Scored | NotRun]
    level: str = "sample"
    aggregated_to: tuple[str, ...] | None = None
    fitted_on: tuple[str, ...] = ()
    score_label: str = "membership score"
    paper: str = ""

    def __post_init__(self) -> None:
        if self.aggregated_to is None:  # the default: a sample's score, averaged over each admission and patient
            object.__setattr__(self, "aggregated_to", UNIT_LEVELS if self.level == "sample" else ())

    @property
    def levels(self) -> tuple[str, ...]:
        """Every level the attack reports."""
        return (self.level, *self.aggregated_to)

    @property
    def access(self) -> str:
        """The threat model: what an attacker needs besides the texts (one of ACCESS_LEVELS), from what it reads."""
        reads = set(self.reads)
        if {FEATURE_VECTORS, GRADIENT_NORMS} & reads:
            return ACCESS_LEVELS[5]
        if reads <= set(GENERATED_ONLY):
            return ACCESS_LEVELS[0]
        if reads <= set(GENERATED_ONLY) | set(REFERENCE_READS):
            return ACCESS_LEVELS[1]
        if set(REFERENCE_READS) & reads:
            return ACCESS_LEVELS[3]
        return ACCESS_LEVELS[4] if set(SHADOW_ROLES) & set(self.fitted_on) else ACCESS_LEVELS[2]


def logistic_regression(seed: int, max_iter: int = 100):
    """A logistic regression on standardised features (scikit-learn), seeded: every learned attack's model."""
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, random_state=seed))


def score_frame(samples: pd.DataFrame, scores: np.ndarray, with_length: bool = True) -> pd.DataFrame:
    """Sample-level scores with the ids, role and (optionally) token length of each sample."""
    frame = pd.DataFrame({
        "id": samples["sample_id"].to_numpy(),
        "role": samples["role"].to_numpy(),
        "group_id": samples["group_id"].to_numpy() if "group_id" in samples else None,
        "subgroup_id": samples["subgroup_id"].to_numpy() if "subgroup_id" in samples else None,
    })
    if with_length:
        frame["length"] = samples["length"].to_numpy() if "length" in samples else np.nan
    frame["score"] = np.asarray(scores, dtype=float)
    return frame


def evaluated_rows(data: AttackInput) -> np.ndarray:
    """Mask of the rows an attack scores: the audited and population samples."""
    return data.samples["role"].isin(EVALUATED_ROLES).to_numpy()


def first_tokens(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each row's first `counts[i]` entries of a NaN-padded (n, T) array; NaN beyond them."""
    positions = np.arange(values.shape[1])[None, :]
    return np.where(positions < np.asarray(counts)[:, None], values, np.nan)


def mean_of_lowest(values: np.ndarray, fraction: float) -> np.ndarray:
    """Per row of a NaN-padded (n, T) array, the mean of its floor(fraction * count) smallest entries (at
    least one): the Min-K% statistic."""
    counts = np.sum(~np.isnan(values), axis=1)
    kept = np.maximum(1, np.floor(fraction * counts).astype(int))
    ordered = np.sort(values, axis=1)  # NaN padding sorts last
    return np.nanmean(first_tokens(ordered, kept), axis=1)


def aggregate_by_group(scores: np.ndarray, group_ids: np.ndarray) -> pd.Series:
    """One score per group, the mean of its samples' scores, indexed by group id (sorted)."""
    frame = pd.DataFrame({"group": group_ids, "score": np.asarray(scores, dtype=float)})
    return frame.groupby("group", sort=True)["score"].mean()


def user_frame(samples: pd.DataFrame, values: pd.Series) -> pd.DataFrame:
    """User-level scores: `values` (indexed by group id) with each group's role from `samples`, as an attack's frame
    (id, role, score)."""
    roles = samples.groupby("group_id", sort=True)["role"].first()
    return pd.DataFrame({"id": values.index, "role": roles.loc[values.index].to_numpy(), "score": values.to_numpy()})


def aggregated_attack(sample_attack: AttackScores, level: str) -> AttackScores:
    """Mean score per group or subgroup, with the same threshold rules (Jagannatha: the mu threshold applied to the
    group's mean loss)."""
    column = LEVEL_COLUMNS[level]
    frame = sample_attack.frame.dropna(subset=[column])
    grouped = aggregate_by_group(frame["score"].to_numpy(), frame[column].to_numpy())
    roles = frame.groupby(column, sort=True)["role"].first()
    group_frame = pd.DataFrame({"id": grouped.index, "role": roles.loc[grouped.index].to_numpy(), "score": grouped.to_numpy()})
    if level == "subgroup":  # keep the patient of each admission, for group-aware statistics
        group_frame["group_id"] = frame.groupby(column, sort=True)["group_id"].first().loc[grouped.index].to_numpy()
    return AttackScores(group_frame, sample_attack.fixed_thresholds, sample_attack.calibration,
                        attack=sample_attack.attack, signal=sample_attack.signal, level=level)
