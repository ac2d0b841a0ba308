"""What makes a text classifier leak its users (Shejwalkar et al. 2021, Appendix C, Figures 2-5): one study per
learning parameter (samples per user, users, classes, tokenizer, maximum length, architecture), each a grid over the
classifier demo's generated users in which the target and its shadow train alike and are audited with the paper's
attacks and the rank-histogram baseline. Every value is run three times, as in the paper: each run generates, splits
and trains anew from its own seed, and the values of one run share its users, so that a value's effect is measured on
the same people. The analysis gives each value's mean and spread over the runs and, for a numeric setting, the
direction of the effect against the paper's.

Every cell also measures what the target's tokenizer alone gives away: a tokenizer fitted on the members' text keeps
their words whole and cuts (WordPiece) or drops ([UNK], word-level) the words only non-members use, so the share of a
text's words kept whole tells members apart before any model is trained ("tokenizer alone").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.data.roles import MEMBER, NONMEMBER
from lmaudit.metrics.roc import auc
from lmaudit.report.tables import shown_summary
from lmaudit.studies.runner import Cell, StudyPlan
from lmaudit.studies.setup import CLASSIFIER_DEMO_SIZES

RUNS = 3  # the paper averages three runs
RUN_SEED_STEP = 101  # run r is seeded with seed + r * RUN_SEED_STEP
# What the table, the figure and the direction of effect read: Algorithms 1, 2 (Average), 4 and the baseline, on the
# loss feature (each attack's first signal).
SHOWN = (("sample_threshold", "sample"), ("user_threshold_avg", "group"), ("sample_to_user", "group"),
         ("rank_histogram", "group"))
TOKENIZER_ALONE = "tokenizer alone: user AUC"


@dataclass(frozen=True)
class Variant:
    """One value of a studied setting: its label in the table, how it changes the generated posts
    (generate_user_posts' arguments) and the training (classifier_recipe's; `pretrained`: fine-tune the masked LM
    pretrained on other users' posts)."""

    label: str | int
    generation: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    pretrained: bool = False

    @property
    def slug(self) -> str:
        """The label as a folder name."""
        return re.sub(r"[^a-z0-9]+", "-", str(self.label).lower()).strip("-")


@dataclass(frozen=True)
class Ablation:
    """A study: the setting it varies (the table's column), its values per size, what it shows, what the paper found,
    and the direction the paper finds for each shown attack ("rises" or "falls" with the setting)."""

    setting: str
    variants: dict[str, tuple[Variant, ...]]
    description: str
    paper: str
    paper_direction: dict[tuple[str, str], str] = field(default_factory=dict)


def _posts(low: int, high: int) -> Variant:
    return Variant((low + high) // 2, generation={"posts_per_user": (low, high)})


def _tokenizer(tokenization: str, vocab_size: int) -> Variant:
    return Variant(f"{tokenization} {vocab_size}", training={"tokenization": tokenization, "vocab_size": vocab_size,
                                                             "architecture": "lstm"})


SAMPLE, USER = ("sample_threshold", "sample"), ("sample_to_user", "group")
ABLATIONS = {
    "samples-per-user": Ablation(
        "samples per user",
        {"smoke": (_posts(2, 4), _posts(8, 16), _posts(24, 32)),
         "full": (_posts(2, 4), _posts(8, 16), _posts(24, 32), _posts(48, 64))},
        "users write on average this many posts (uniform between the bounds)",
        "more samples per user raise the test accuracy and shrink the gap, so the sample-level attacks weaken; the "
        "user-level attacks first strengthen (more queries per user), then weaken past about 475 samples per user "
        "(Figure 2a)", {SAMPLE: "falls"}),
    "users": Ablation(
        "users",
        {"smoke": (Variant(40, {"n_users": 40}), Variant(80, {"n_users": 80}), Variant(160, {"n_users": 160})),
         "full": tuple(Variant(n, {"n_users": n}) for n in (200, 400, 800))},
        "users generated, 21% of them the target's members (as many the shadow's)",
        "more member users raise the test accuracy and shrink the gap: both sample- and user-level attacks weaken "
        "(Figure 2b)", {SAMPLE: "falls", USER: "falls"}),
    "classes": Ablation(
        "classes",
        {"smoke": tuple(Variant(n, {"n_topics": n}) for n in (2, 4, 8)),
         "full": tuple(Variant(n, {"n_topics": n}) for n in (2, 4, 8))},
        "topics the users post on (the labels)",
        "more classes make the task harder, lower the test accuracy and widen the gap: both sample- and user-level "
        "attacks strengthen (Figure 2c)", {SAMPLE: "rises", USER: "rises"}),
    "tokenizer": Ablation(
        "tokenizer",
        {size: tuple(_tokenizer(kind, vocabulary) for kind in ("wordpiece", "word") for vocabulary in (100, 4000))
         for size in ("smoke", "full")},
        "LSTM classifiers (as the paper's Figure 4) with a tokenizer fitted on their training users' posts: WordPiece "
        "or word-level, of at most this many tokens",
        "a larger vocabulary leaves fewer words out of it and strengthens the attacks; word-level tokenization leaks "
        "more than WordPiece, which splits rare words into less specific pieces (Figure 4)"),
    "max-length": Ablation(
        "max length",
        {size: tuple(Variant(n, training={"max_length": n}) for n in (6, 10, 32)) for size in ("smoke", "full")},
        "tokens per post the classifiers read, at most (posts are 6 to 19 words; longer ones are cut)",
        "longer inputs make the models more accurate and more exposed to both kinds of attack (Figure 5)",
        {SAMPLE: "rises", USER: "rises"}),
    "architecture": Ablation(
        "architecture",
        {size: (Variant("lstm", training={"architecture": "lstm"}), Variant("bert", training={"architecture": "bert"}),
                Variant("bert, pretrained", pretrained=True)) for size in ("smoke", "full")},
        "a 2-layer LSTM and a tiny BERT trained from scratch, and a tiny BERT fine-tuned from a masked LM pretrained "
        "on the posts of other users (in no role; a stand-in for a public checkpoint, which cannot be downloaded here)",
        "capacity alone does not decide: BERT leaks more than DistilBERT, but RoBERTa, the largest, generalises best "
        "and leaks least; pretraining matters (Figure 3)"),
}


def whole_word_shares(tokenizer, texts: Sequence[str]) -> np.ndarray:
    """Per text, the share of its words (as the tokenizer pre-tokenizes them) that the tokenizer keeps whole: one
    token that is not [UNK]. A fraction; 0 for a text without words."""
    backend = tokenizer.backend_tokenizer
    shares = np.zeros(len(texts))
    for index, text in enumerate(texts):
        normalized = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
        words = [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
        pieces = [backend.model.tokenize(word) for word in words]
        whole = sum(len(p) == 1 and p[0].value != tokenizer.unk_token for p in pieces)
        shares[index] = whole / len(words) if words else 0.0
    return shares


def tokenizer_alone_auc(tokenizer, posts, level: str) -> float:
    """AUC of the whole-word share (higher = member) on the audited posts (member against non-member users), per post
    (level "sample") or per user, averaged over the user's posts (level "group")."""
    audited = posts[posts["role"].isin([MEMBER, NONMEMBER])].assign(
        share=lambda rows: whole_word_shares(tokenizer, rows["text"].tolist()))
    if level == "group":
        audited = audited.groupby("group_id").agg(share=("share", "mean"), role=("role", "first"))
    return auc(audited["role"].to_numpy() == MEMBER, audited["share"].to_numpy())


def mean_over_runs(records: list[dict], setting: str) -> dict[str, dict]:
    """Per value of `setting` (in the cells' order): the number of runs, and the mean and standard deviation (ddof 1;
    None for a single run) over them of the target's test accuracy and gap, each shown attack's AUC and the
    tokenizer-alone AUCs."""
    by_value: dict[str, list[dict]] = {}
    for record in records:
        by_value.setdefault(str(record["settings"][setting]), []).append(record)
    table = {}
    for value, cells in by_value.items():
        columns: dict[str, list[float]] = {}
        for cell in cells:
            for key, measured in cell["measured"].items():
                columns.setdefault(key, []).append(measured)
            for attack, level in SHOWN:
                summary = shown_summary(cell, attack, level)
                if summary is not None:
                    columns.setdefault(f"{attack} {level} AUC", []).append(summary["auc"])
        row: dict[str, float | int | None] = {"runs": len(cells)}
        for key, values in columns.items():
            row[key] = float(np.mean(values))
            row[f"{key} sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else None
        table[value] = row
    return table


def direction_of_effect(means: dict[str, dict], paper_direction: dict[tuple[str, str], str]) -> dict[str, dict]:
    """Per shown attack, how its mean AUC moves from the smallest to the largest value of a numeric setting: the two
    means, Spearman's rank correlation over the values (None with fewer than 3), "rises" or "falls" by the sign of the
    difference, and whether that agrees with the paper (n/a where the paper states no direction)."""
    values = sorted(means, key=float)
    rows = {}
    for attack, level in SHOWN:
        key = f"{attack} {level} AUC"
        points = [(float(value), means[value][key]) for value in values if means[value].get(key) is not None]
        if len(points) < 2:
            continue
        first, last = points[0][1], points[-1][1]
        seen = "rises" if last > first else "falls"
        xs, ys = zip(*points, strict=True)
        rho = float(pd.Series(xs).corr(pd.Series(ys), method="spearman")) if len(points) >= 3 else None
        expected = paper_direction.get((attack, level))
        rows[f"{attack} {level}"] = {
            "AUC at the smallest": first, "AUC at the largest": last, "Spearman rho": rho, "lmaudit": seen,
            "the paper": expected or "n/a", "agrees": "n/a" if expected is None else ("yes" if seen == expected else "no")}
    return rows


def analyse(records: list[dict], ablation: Ablation) -> dict:
    """The study's analysis: the mean and spread over runs per value and, for a numeric setting, the direction of
    effect."""
    means = mean_over_runs(records, ablation.setting)
    analysis = {"mean and spread over runs": means}
    if all(re.fullmatch(r"-?[0-9.]+", value) for value in means):
        analysis["direction of effect"] = direction_of_effect(means, ablation.paper_direction)
    return analysis


def plan(out: Path, size: str, seed: int, progress: bool = False, ablation: str = "classes") -> StudyPlan:
    """One cell per (value of the ablation's setting, run)."""
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.models.training_file import read_training_summary
    from lmaudit.report.plots import ablation_figure
    from lmaudit.studies.setup import (
        classifier_audit_config,
        classifier_recipe,
        train_classifier_pair,
        train_posts_mlm,
        write_classifier_roles,
    )

    study = ABLATIONS[ablation]
    demo = CLASSIFIER_DEMO_SIZES[size]
    variants = study.variants[size]

    def cell(variant: Variant, run: int) -> Cell:
        run_seed = seed + run * RUN_SEED_STEP
        data = out / "data" / f"{variant.slug if variant.generation else 'base'}-run-{run}"
        models = out / "models" / f"{variant.slug}-run-{run}"
        @cache  # written once, read by prepare and measure
        def posts():
            return write_classifier_roles(size, run_seed, data, **variant.generation)

        def prepare(folder: Path):
            rows, files = posts()
            pretrained = train_posts_mlm(out / "models" / "pretrained-mlm", size, seed, progress) if variant.pretrained else None
            recipe = classifier_recipe(size, **variant.training, seed=run_seed, init_from=pretrained)
            target, shadow = train_classifier_pair(rows, models, recipe, progress)
            return classifier_audit_config(target, shadow, files, folder, demo.bootstrap, run_seed, whitebox=False)

        def measure() -> dict:
            rows, _ = posts()
            training = read_training_summary(models / "target")
            tokenizer = load_tokenizer(models / "target")
            return {"test accuracy": training.test_accuracy, "gap": training.generalization_gap,
                    "tokenizer alone: sample AUC": tokenizer_alone_auc(tokenizer, rows, "sample"),
                    TOKENIZER_ALONE: tokenizer_alone_auc(tokenizer, rows, "group")}

        return Cell(f"{variant.slug}-run-{run}", {study.setting: variant.label, "run": run}, prepare, measure)

    labels = ", ".join(str(variant.label) for variant in variants)
    return StudyPlan(
        study=ablation,
        description=f"Topic classifiers of generated user posts (the classifier demo's users, {demo.users} unless the "
                    f"study varies them) with {study.setting} in {labels}: {study.description}. The target and its "
                    f"shadow train alike (early stopping, at most {demo.max_epochs} epochs), each value {RUNS} times "
                    "with other users, and are audited with the paper's attacks and the rank-histogram baseline.",
        paper=study.paper,
        cells=[cell(variant, run) for run in range(RUNS) for variant in variants], x=study.setting, shown=SHOWN,
        analyse=lambda records: analyse(records, study), analysis_figure=ablation_figure, grid_figure=False,
        setup={"users": demo.users, "epochs, at most": demo.max_epochs, "runs": RUNS, "seed": seed,
               "run seeds": ", ".join(str(seed + run * RUN_SEED_STEP) for run in range(RUNS)),
               "AUC": "of each attack on the loss feature; the mean and the sample standard deviation over the runs",
               "tokenizer alone": "AUC of the share of a post's words the target's tokenizer keeps whole (higher = "
                                  "member), per post and averaged per user; no model involved"},
    )
