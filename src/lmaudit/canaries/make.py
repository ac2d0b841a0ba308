"""Making canaries: m texts, each to be planted in training independently with probability 1/2, and the private key.

Three designs (`--design`, the folder's `kind`):
- `new_token` (Panda et al., ICLR 2025, "new"): the sentence's secret is a word made for the canary that occurs in no
  other text, added to the model's vocabulary for every canary, planted or not (`lmaudit train --canaries` does it);
  whatever the model learnt of a planted one is membership, so the design is found best: use it to test DP training;
- `words` (any recipe, as it is): random whole words of the model's own vocabulary (`--vocabulary`) in the sentence, a
  high-perplexity secret of its own from its first word (`canaries/words.py`), for the memorisation curve of a run
  without DP;
- `secret`: a random number in a note-like sentence (`--format`, default DEFAULT_FORMAT), Carlini et al.'s canary,
  whose exposure can be measured against every number it could have been;
- `sample`: real held-out samples of the team's own data (a labelled file makes classifier canaries), the closest
  canaries to what the model sees, and the least detectable;
- `mislabelled` (classifiers; Aerni et al., CCS 2024): held-out labelled samples, each with its label replaced by another
  of the source's labels (seeded): a classifier learns a wrong label only by memorising the sample, so its loss at that
  label gives a planted canary away, where a correctly labelled sample's would not.
The two secret designs are scored on the secret alone (`canaries/span.py`), not on the sentence every canary shares.

A canary folder holds:
- canaries.jsonl: every canary (sample_id, text, its secret where it has one, and label where it has one), what the
  audit scores;
- insert.jsonl: the canaries to plant, for the team's own training job or `lmaudit train --canaries`;
- key.parquet: which canaries were planted (sample_id, included), read by the audit's last step only (before
  scoring, only its fingerprint is compared with the one training recorded);
- canaries.json: how they were made (kind, count, seed, format, the secret's space).
The folder is private: insert.jsonl and key.parquet tell which canaries the model saw, and the seed rebuilds both, so
no report repeats it; without --seed it is drawn from the operating system's entropy, never a fixed default.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.atomic import staged
from lmaudit.canaries.settings import (
    DEFAULT_FORMAT,
    DEFAULT_NEW_TOKENS,
    DEFAULT_SECRET_DIGITS,
    DEFAULT_SECRET_WORDS,
    KINDS,
    NEW_TOKEN_PREFIX,
    SECRET_DESIGNS,
    SECRET_SLOT,
    SOURCE_DESIGNS,
    SecretShape,
)
from lmaudit.data.corpus import load_corpus, read_table, write_table
from lmaudit.errors import InputError, row_location
from lmaudit.models.training_file import PlantedCanaries, read_training_summary, update_training_summary

DEFAULT_SHAPE = SecretShape()
INCLUSION_PROBABILITY = 0.5  # Steinke et al.: each canary in or out by a fair coin, independently
CANARIES_FILE, INSERT_FILE, KEY_FILE, MANIFEST_FILE = "canaries.jsonl", "insert.jsonl", "key.parquet", "canaries.json"


@dataclass(frozen=True)
class CanarySet:
    """How a canary folder was made. `secret_format` and `secret_digits` describe secrets (None for samples);
    `space_bits` is log2 of the number of secrets the format allows; each planted canary is planted as many times as
    its tier says: canary i (in id order) is of tier i mod len(repeats), so that a curve by repetition has every
    count (one count: every canary alike)."""

    kind: str
    count: int
    seed: int
    inclusion_probability: float = INCLUSION_PROBABILITY
    secret_format: str | None = None
    secret_digits: int | None = None
    source: str | None = None
    secret_tokens: int | None = None
    repeats: tuple[int, ...] = (1,)
    secret_words: int | None = None

    def __post_init__(self) -> None:
        # a manifest written before tiers holds one count, and JSON gives a list
        counts = (self.repeats,) if isinstance(self.repeats, int) else tuple(int(count) for count in self.repeats)
        object.__setattr__(self, "repeats", counts)

    @property
    def group_size(self) -> int:
        """The most copies of one canary planted: the group a DP bound on the canaries is for."""
        return max(self.repeats)

    @property
    def is_curve(self) -> bool:
        """Whether the canaries are planted at several repetition counts (a memorisation curve)."""
        return len(self.repeats) > 1

    def repetition_counts(self) -> np.ndarray:
        """(count,) how many copies of each canary (in id order) are planted if its coin says so."""
        return np.asarray(self.repeats)[np.arange(self.count) % len(self.repeats)]

    @property
    def space_bits(self) -> float | None:
        """log2 |R|: the bits of randomness in one secret."""
        return None if self.secret_digits is None else self.secret_digits * math.log2(10)

    @property
    def has_secret(self) -> bool:
        """Whether each canary holds a secret the audit scores alone (the secret designs)."""
        return self.kind in SECRET_DESIGNS


def secret_text(secret_format: str, digits: np.ndarray) -> str:
    """The format with its slot filled by the digits, space-separated (one token each under most tokenizers)."""
    return secret_format.replace(SECRET_SLOT, " ".join(str(int(d)) for d in digits))


def random_secrets(secret_format: str, digits: int, count: int, rng: np.random.Generator) -> list[str]:
    """`count` texts of the format, each with a uniformly random number of `digits` digits."""
    return [secret_text(secret_format, row) for row in rng.integers(0, 10, size=(count, digits))]


def distinct_secrets(secret_format: str, digits: int, count: int, rng: np.random.Generator,
                     taken: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """`count` distinct random texts of the format, none of them in `taken` (drawn again until there are enough; the
    callers make sure the space holds at least twice as many)."""
    texts: list[str] = []
    while len(texts) < count:
        fresh = random_secrets(secret_format, digits, count - len(texts), rng)
        texts = list(dict.fromkeys(texts + [text for text in fresh if text not in taken]))
    return texts


def check_format(secret_format: str, digits: int) -> None:
    """InputError unless the format has exactly one {secret} slot and the number at least one digit."""
    if secret_format.count(SECRET_SLOT) != 1:
        raise InputError(f"--format '{secret_format}': put exactly one {SECRET_SLOT} where the secret goes")
    if digits < 1:
        raise InputError("--secret-digits: a secret has at least one digit")


def make_secret_canaries(count: int, seed: int, secret_format: str = DEFAULT_FORMAT,
                         digits: int = DEFAULT_SECRET_DIGITS) -> pd.DataFrame:
    """`count` distinct random secrets (sample_id canary-0001, ...), seeded."""
    check_format(secret_format, digits)
    if count > 10 ** digits // 2:
        raise InputError(f"--n {count}: {digits} digits allow too few distinct secrets; give more --secret-digits")
    return secret_rows(canary_ids(count), secret_format,
                       distinct_secrets(SECRET_SLOT, digits, count, np.random.default_rng(seed)))


def secret_rows(sample_ids: list[str], secret_format: str, secrets: list[str]) -> pd.DataFrame:
    """sample_id, text (the format with each secret in its slot) and secret, one row per secret."""
    return pd.DataFrame({"sample_id": sample_ids, "text": [secret_format.replace(SECRET_SLOT, secret)
                                                           for secret in secrets], "secret": secrets})


def make_new_token_canaries(count: int, seed: int, secret_format: str = DEFAULT_FORMAT,
                            tokens: int = DEFAULT_NEW_TOKENS) -> pd.DataFrame:
    """`count` canaries whose secrets are `tokens` new words each (NEW_TOKEN_PREFIX and 10 random hex digits, all
    distinct), seeded."""
    check_format(secret_format, 1)
    if tokens < 1:
        raise InputError("--secret-tokens: a new-token secret has at least one token")
    rng = np.random.default_rng(seed)
    words: list[str] = []
    while len(words) < count * tokens:
        fresh = [f"{NEW_TOKEN_PREFIX}{value:010x}" for value in rng.integers(0, 16 ** 10, size=count * tokens)]
        words = list(dict.fromkeys(words + fresh))[: count * tokens]
    return secret_rows(canary_ids(count), secret_format,
                       [" ".join(words[i * tokens:(i + 1) * tokens]) for i in range(count)])


def make_word_canaries(count: int, seed: int, vocabulary: str | Path | None, secret_format: str = DEFAULT_FORMAT,
                       words: int = DEFAULT_SECRET_WORDS) -> pd.DataFrame:
    """`count` canaries whose secrets are `words` random whole words of `vocabulary`'s tokenizer each, seeded."""
    from lmaudit.canaries.words import random_word_secrets, vocabulary_words

    check_format(secret_format, 1)
    if vocabulary is None:
        raise InputError("--design words draws its secrets from the words of the model's tokenizer: give --vocabulary "
                         "MODEL_DIR (the model to be trained, or its tokenizer)")
    if words < 1:
        raise InputError("--secret-words: a words secret has at least one word")
    return secret_rows(canary_ids(count), secret_format, random_word_secrets(vocabulary_words(vocabulary), words,
                                                                             count, np.random.default_rng(seed)))


def reserved_tokens(folder: str | Path) -> tuple[str, ...]:
    """The new tokens of every canary of a new-token folder (planted or not), for the model's vocabulary; () for the
    other designs."""
    if read_canary_set(folder).kind != "new_token":
        return ()
    return tuple(word for secret in read_table(Path(folder) / CANARIES_FILE)["secret"] for word in secret.split())


def mislabelled(canaries: pd.DataFrame, labels: list[str], seed: int) -> pd.DataFrame:
    """The canaries with each label replaced by another of `labels` (the source's), uniformly (a generator of its own);
    InputError where they have no label or there is no other label."""
    if "label" not in canaries or len(labels) < 2:
        raise InputError("--design mislabelled: needs a --source with a 'label' column of at least two labels")
    rng = np.random.default_rng([seed, 2])
    wrong = [rng.choice([label for label in labels if label != own]) for own in canaries["label"]]
    return canaries.assign(label=wrong)


def make_sample_canaries(source: str | Path, count: int, seed: int, exclude: tuple[str | Path, ...] = ()) -> pd.DataFrame:
    """`count` rows drawn (seeded, without replacement) from a file of held-out samples, with their labels where the
    file has them; one canary per group, so that no two canaries are one person's, and none with a text of the
    `exclude` files (the training data)."""
    corpus = load_corpus(source)
    corpus = corpus[~corpus["text"].duplicated(keep=False)]  # a repeated text is boilerplate, and could be both in and out
    for path in exclude:
        corpus = corpus[~corpus["text"].isin(set(load_corpus(path)["text"]))]
    if corpus["group_id"].notna().any():
        corpus = corpus.groupby(corpus["group_id"].fillna(corpus["sample_id"]), sort=False).head(1)
    if len(corpus) < count:
        raise InputError(f"{source}: {len(corpus)} usable samples (one per group_id, texts not repeated nor in "
                         f"--exclude), fewer than --n {count}; give a larger file or a smaller --n")
    rows = corpus.iloc[np.sort(np.random.default_rng(seed).choice(len(corpus), size=count, replace=False))]
    canaries = pd.DataFrame({"sample_id": canary_ids(count), "text": rows["text"].to_numpy()})
    if rows["label"].notna().all():
        canaries["label"] = rows["label"].astype(str).str.strip().to_numpy()
    return canaries


def canary_ids(count: int) -> list[str]:
    """canary-0001, canary-0002, ...: ids that sort in order."""
    width = max(4, len(str(count)))
    return [f"canary-{i:0{width}d}" for i in range(1, count + 1)]


def inclusion(count: int, seed: int, probability: float = INCLUSION_PROBABILITY) -> np.ndarray:
    """Which canaries to plant: a coin of `probability` each, from a generator of its own (so the secrets' draw never
    shifts it)."""
    return np.random.default_rng([seed, 1]).random(count) < probability


def copies(planted: pd.DataFrame, repeats: np.ndarray) -> pd.DataFrame:
    """The rows to plant: each canary as many times as `repeats` says (one count per row; copy ids canary-0001.2, ...),
    each copy its own group, so that a per-group cap (DP training) never drops one."""
    repeats = np.asarray(repeats)
    rows = pd.concat([planted[repeats >= copy].assign(
        sample_id=planted["sample_id"][repeats >= copy] + ("" if copy == 1 else f".{copy}"))
        for copy in range(1, int(repeats.max(initial=1)) + 1)], ignore_index=True)
    return rows.assign(group_id=rows["sample_id"])


def fresh_seed() -> int:
    """A seed from the operating system's entropy: a key nobody can rebuild from a guessable default (63 bits)."""
    return int(np.random.SeedSequence().entropy % 2 ** 63)


def write_canaries(out: str | Path, canaries: pd.DataFrame, spec: CanarySet) -> Path:
    """Write a canary folder (all or nothing; an existing folder is refused, so a key is never overwritten)."""
    out = Path(out)
    if out.exists():
        raise InputError(f"{out}: already exists; a canary folder holds a key that a trained model depends on, so "
                         f"lmaudit never overwrites one; give a new --out")
    included = inclusion(len(canaries), spec.seed, spec.inclusion_probability)
    check_controls(spec, int((~included).sum()))
    with staged(out) as (folder,):
        folder.mkdir(parents=True)
        write_table(canaries, folder / CANARIES_FILE)
        write_table(copies(canaries[included], spec.repetition_counts()[included]), folder / INSERT_FILE)
        write_table(pd.DataFrame({"sample_id": canaries["sample_id"], "included": included}), folder / KEY_FILE)
        (folder / MANIFEST_FILE).write_text(json.dumps(asdict(spec), indent=2), encoding="utf-8")
    return out


def check_controls(spec: CanarySet, controls: int) -> None:
    """InputError where a curve by repetition gets fewer unplanted canaries (its controls) than a threshold at 1% FPR
    needs."""
    from lmaudit.metrics.memorisation_curve import controls_needed

    needed = controls_needed()
    if spec.is_curve and controls < needed:
        raise InputError(f"--n {spec.count}: the coins left {controls} canaries unplanted, and a curve's TPR at 1% FPR "
                         f"needs at least {needed} of them as controls; give --n {5 * needed // 2} or more (fewer than "
                         f"{needed} controls then in about 1 draw in 1,000)")


def make_canaries(out: str | Path, kind: str, count: int, seed: int | None = None, shape: SecretShape = DEFAULT_SHAPE,
                  source: str | Path | None = None, exclude: tuple[str | Path, ...] = (),
                  repeats: int | tuple[int, ...] = (1,)) -> CanarySet:
    """Make `count` canaries of design `kind` (secrets of `shape`), planted at the repetition counts `repeats` (one tier
    each, canaries dealt to them in turn), and write their folder (seed None: `fresh_seed`); the set's description."""
    seed = fresh_seed() if seed is None else seed
    repeats = (repeats,) if isinstance(repeats, int) else tuple(repeats)
    if count < 2:
        raise InputError("--n: a canary audit needs at least 2 canaries (hundreds for a useful bound)")
    if not repeats or min(repeats) < 1 or len(set(repeats)) < len(repeats):
        raise InputError(f"--repeat {','.join(map(str, repeats))}: give distinct repetition counts of at least 1 "
                         "(e.g. 1,4,16); a canary planted 0 times is a control, and every tier has them")
    if kind in SECRET_DESIGNS and source is not None:
        raise InputError(f"--source gives sample canaries: use it with --design {' or '.join(SOURCE_DESIGNS)}")
    if kind == "new_token":
        canaries = make_new_token_canaries(count, seed, shape.format, shape.tokens)
        spec = CanarySet(kind, count, seed, secret_format=shape.format, secret_tokens=shape.tokens)
    elif kind == "words":
        canaries = make_word_canaries(count, seed, shape.vocabulary, shape.format, shape.words)
        spec = CanarySet(kind, count, seed, secret_format=shape.format, secret_words=shape.words)
    elif kind == "secret":
        canaries = make_secret_canaries(count, seed, shape.format, shape.digits)
        spec = CanarySet(kind, count, seed, secret_format=shape.format, secret_digits=shape.digits)
    elif kind in SOURCE_DESIGNS:
        if source is None:
            raise InputError(f"--design {kind} draws held-out samples from --source FILE (never trained on); give it")
        canaries = make_sample_canaries(source, count, seed, exclude)
        if kind == "mislabelled":
            labels = load_corpus(source)["label"].dropna().astype(str).str.strip()
            canaries = mislabelled(canaries, sorted(labels.unique()), seed)
        spec = CanarySet(kind, count, seed, source=Path(source).name)
    else:
        raise InputError(f"--design {kind}: choose one of {', '.join(KINDS)}")
    spec = replace(spec, repeats=tuple(repeats))
    write_canaries(out, canaries, spec)
    return spec


def read_canary_set(folder: str | Path) -> CanarySet:
    """A canary folder's description, or an InputError saying what is missing."""
    manifest = Path(folder) / MANIFEST_FILE
    if not manifest.is_file():
        raise InputError(f"{folder}: not a canary folder (no {MANIFEST_FILE}); make one with `lmaudit canaries make`")
    try:
        return CanarySet(**json.loads(manifest.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError) as error:
        raise InputError(f"{manifest}: unreadable ({error}); make the canaries again") from None


def planted_canaries(folder: str | Path) -> pd.DataFrame:
    """The canaries to plant (insert.jsonl: sample_id, text, group_id, and label where they have one); none when every
    coin came up 'out' (likely only for a handful of canaries)."""
    read_canary_set(folder)
    if not read_table(Path(folder) / KEY_FILE)["included"].any():
        return pd.DataFrame(columns=["sample_id", "text", "group_id", "label"])
    return load_corpus(Path(folder) / INSERT_FILE)


def folder_fingerprint(folder: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of canaries.jsonl: names a canary folder's canaries, never its key."""
    return hashlib.sha256((Path(folder) / CANARIES_FILE).read_bytes()).hexdigest()[:16]


def key_fingerprint(folder: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of canaries.jsonl and of key.parquet's content (its columns and rows, in
    order, as JSON): names which canaries were planted, the same however the Parquet bytes are written."""
    folder = Path(folder)
    content = json.dumps(read_table(folder / KEY_FILE).to_dict(orient="split", index=False), default=str)
    # Salted with the canaries: the model's summary, which travels with the model, records this fingerprint, and the
    # coins of a few canaries (ids canary-0001, ...) could be found again from a hash of the key alone.
    return hashlib.sha256((folder / CANARIES_FILE).read_bytes() + content.encode()).hexdigest()[:16]


def record_planted(model: str | Path, folder: str | Path, created: dict | None = None) -> None:
    """Add to the model's lmaudit_training.json what was planted from `folder`: the design, how many, and the folder's
    and the key's fingerprints, which `canaries audit` checks (a list, one entry per canary folder). A model without
    the file starts from `created` (a model trained by a user's script)."""
    fingerprint = folder_fingerprint(folder)
    summary = read_training_summary(model)
    earlier = summary.canaries if summary else []
    planted = PlantedCanaries(design=read_canary_set(folder).kind, planted=len(planted_canaries(folder)),
                              folder_fingerprint=fingerprint, key_fingerprint=key_fingerprint(folder))
    kept = [entry for entry in earlier if entry.folder_fingerprint != fingerprint]
    update_training_summary(model, {"canaries": [entry.model_dump() for entry in (*kept, planted)]}, created)


def check_held_out(folder: str | Path, training: pd.DataFrame) -> None:
    """InputError naming the training row if any canary's text (planted or not) is already in the training data: a
    canary the model would see either way says nothing about privacy, and an unplanted one would count as a wrong
    guess's evidence."""
    canaries = load_corpus(Path(folder) / CANARIES_FILE)
    seen = training[training["text"].isin(set(canaries["text"]))]
    if not seen.empty:
        where = row_location(seen.iloc[0]) if "source" in seen else f"training text {seen.index[0] + 1}"
        raise InputError(f"{where}: this text is one of the canaries of {folder}; canaries must be held out of the "
                         f"training data: remove it, or make canaries from other samples")


def plant(training: pd.DataFrame, folder: str | Path) -> pd.DataFrame:
    """The training rows with the planted canaries of `folder` appended (each its own group), after checking that the
    training data holds none of the canaries."""
    check_held_out(folder, training)
    return pd.concat([training, planted_canaries(folder)], ignore_index=True)
