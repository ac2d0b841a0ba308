"""The classifier audit wired end to end: checks, features of target and shadow, attacks, report, demo.

Shejwalkar et al.'s setting: the target classifier is audited on its members and non-members;
a shadow classifier, trained the same way on shadow members, calibrates every threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.attacks.shadow import AUDITED_ROLES, SHADOW_ROLES, build_feature_attacks
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.signals.features import FEATURE_DIRECTIONS, classifier_features

TRAINING_FIELDS = ("architecture", "size", "n_samples", "epochs_run", "best_epoch", "train_accuracy", "validation_accuracy",
                   "test_accuracy", "generalization_gap", "gap_measured_on")


def _first_row(rows: pd.DataFrame) -> str:
    row = rows.iloc[0]
    return f"{row['source']}, row {row['row']}"


def check_shadow_setup(config: AuditConfig, corpus: pd.DataFrame) -> None:
    """Refuse a classifier audit without a shadow model or without shadow data of both kinds."""
    if config.shadow is None:
        raise InputError("the classifier attacks are calibrated on a shadow model: pass --shadow MODEL, a classifier "
                         "trained like the target (`lmaudit train classifier`) on the shadow_member data")
    for role in SHADOW_ROLES:
        if not (corpus["role"] == role).any():
            option = "--" + role.replace("_", "-") + "s"
            raise InputError(f"no {role} samples: pass {option} FILE (or rows with role {role}); the shadow thresholds "
                             "are fitted on the shadow model's members and non-members")


def check_labels(corpus: pd.DataFrame) -> None:
    """Refuse audited or shadow samples without a true label: every classifier feature needs it."""
    for source, rows in corpus.groupby("source", sort=False):
        labels = rows["label"]
        if labels.isna().all():
            raise InputError(f"{source}: no 'label' column; the classifier attacks need each sample's true label")
        empty = rows[labels.isna() | (labels.astype(str).str.strip() == "")]
        if not empty.empty:
            raise InputError(f"{_first_row(empty)}: empty label; give every sample its true label or remove the row")


def check_users(corpus: pd.DataFrame) -> None:
    """Refuse a user (group) with a single sample: user-level statistics (variance, majority) need two."""
    grouped = corpus.dropna(subset=["group_id"])
    sizes = grouped.groupby("group_id", sort=False)["sample_id"].transform("size")
    single = grouped[sizes.to_numpy() == 1]
    if not single.empty:
        raise InputError(f"{_first_row(single)}: user '{single.iloc[0]['group_id']}' has only this sample; user-level attacks "
                         "need at least 2 samples per user: add the user's other samples or remove the row")


def label_indices(rows: pd.DataFrame, model_labels: list[str], model_dir: str) -> np.ndarray:
    """Each row's label as the model's output index; integers also match default LABEL_<i> names."""
    position = {name: index for index, name in enumerate(model_labels)}
    if all(name == f"LABEL_{i}" for i, name in enumerate(model_labels)):
        position.update({str(i): i for i in range(len(model_labels))})
    names = rows["label"].astype(str).str.strip()
    unknown = rows[~names.isin(list(position))]
    if not unknown.empty:
        shown = ", ".join(model_labels[:10]) + (", ..." if len(model_labels) > 10 else "")
        raise InputError(f"{_first_row(unknown)}: label '{names[unknown.index[0]]}' is not a label of the model {model_dir} "
                         f"({shown}); fix the label or audit with the model trained on these labels")
    return names.map(position).to_numpy(dtype=np.int64)


def _training_summary(model_dir: str) -> dict | None:
    from lmaudit.models.train import read_training_summary

    summary = read_training_summary(model_dir)
    return {key: summary.get(key) for key in TRAINING_FIELDS} if summary and summary.get("kind") == "classifier" else None


def classifier_feature_table(config: AuditConfig, corpus: pd.DataFrame, progress: bool, device: str) -> pd.DataFrame:
    """One row per audited and shadow sample: ids, role, label, length, scoring model and every feature."""
    from lmaudit.models.load import classifier_labels
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.mlm import SignalSettings

    settings = SignalSettings(**config.signal.model_dump(exclude={"batch_tokens"}))
    cache = config.cache_dir or str(Path(config.out) / "cache")
    parts = []
    for model_name, model_dir, roles in (("target", config.target, AUDITED_ROLES), ("shadow", config.shadow, SHADOW_ROLES)):
        rows = corpus[corpus["role"].isin(roles)]
        indices = label_indices(rows, classifier_labels(model_dir), model_dir)
        values = model_signal(model_dir, rows["sample_id"].tolist(), rows["text"].tolist(), settings, cache,
                              config.signal.batch_tokens, progress, config.trust_remote_code, model_name, device=device)
        features = classifier_features(np.stack(values["value"].to_numpy()), indices)
        parts.append(pd.DataFrame({
            "sample_id": rows["sample_id"].to_numpy(), "role": rows["role"].to_numpy(), "group_id": rows["group_id"].to_numpy(),
            "label": rows["label"].astype(str).str.strip().to_numpy(), "model": model_name,
            "length": values["n_tokens"].to_numpy(), "truncated": values["truncated"].to_numpy(), **features,
        }))
    return pd.concat(parts, ignore_index=True)


def classifier_whitebox_attacks(config: AuditConfig, corpus: pd.DataFrame, table: pd.DataFrame, progress: bool,
                                device: str) -> tuple[list, list[dict]]:
    """Logistic regression on attention and gradient (cross-entropy) features: target features for the
    audited samples, shadow features for the shadow samples (split and shadow-trained variants)."""
    from lmaudit.attacks.learned import build_learned_attacks
    from lmaudit.models.load import architecture_difference, classifier_labels
    from lmaudit.pipeline import whitebox_signals
    from lmaudit.signals.compute import model_signal

    difference = architecture_difference(config.target, config.shadow)
    if difference:  # a regression fitted on one architecture's features means nothing on another's
        raise InputError(f"{config.shadow}: the shadow model's architecture differs from the target's ({difference}); "
                         "the white-box attacks need a shadow trained with the target's architecture")
    rows = corpus.set_index("sample_id").loc[table["sample_id"]].reset_index()
    features_to_compute, skipped = whitebox_signals(config)
    attacks = []
    for name, settings in features_to_compute:
        parts = []
        for model_dir, scored_by in ((config.target, "target"), (config.shadow, "shadow")):
            part = rows[(table["model"] == scored_by).to_numpy()]
            labels = label_indices(part, classifier_labels(model_dir), model_dir).tolist() if name == "gradient_norms" else None
            values = model_signal(model_dir, part["sample_id"].tolist(), part["text"].tolist(), settings,
                                  config.cache_dir or str(Path(config.out) / "cache"), config.signal.batch_tokens, progress,
                                  config.trust_remote_code, f"{scored_by} {name}", device=device, class_labels=labels)
            parts.append(np.stack(values["value"].to_numpy()))
        features = np.zeros((len(table), parts[0].shape[1]))
        features[(table["model"] == "target").to_numpy()] = parts[0]
        features[(table["model"] == "shadow").to_numpy()] = parts[1]
        found, missing = build_learned_attacks(table.assign(subgroup_id=None), features, name, seed=config.evaluation.seed)
        attacks += found
        skipped += missing
    return attacks, skipped


def run_classifier_audit(config: AuditConfig, progress: bool = False) -> dict:
    """Audit a classifier: features under target and shadow, Algorithms 1-4 for every feature, the report."""
    from lmaudit.models.load import resolve_device
    from lmaudit.pipeline import finish_report, load_audit_corpus

    corpus = load_audit_corpus(config.role_files())
    check_shadow_setup(config, corpus)
    used = corpus[corpus["role"].isin(AUDITED_ROLES + SHADOW_ROLES)].reset_index(drop=True)
    check_labels(used)
    check_users(used)
    device = resolve_device(config.device)
    table = classifier_feature_table(config, used, progress, device)
    attacks, skipped = [], []
    for feature, direction in FEATURE_DIRECTIONS.items():
        feature_attacks, feature_skipped = build_feature_attacks(table, feature, direction, config.evaluation.seed)
        attacks += feature_attacks
        skipped += feature_skipped
    if config.whitebox:
        whitebox_attacks, whitebox_skipped = classifier_whitebox_attacks(config, used, table, progress, device)
        attacks += whitebox_attacks
        skipped += whitebox_skipped
    models = {name: summary for name, summary in (("target", _training_summary(config.target)),
                                                  ("shadow", _training_summary(config.shadow))) if summary}
    texts = used.set_index("sample_id").loc[table["sample_id"], "text"] if config.include_text else None
    return finish_report(config.out, config.model_dump(), table, attacks, skipped, config.evaluation, texts, device, models)


@dataclass(frozen=True)
class ClassifierDemoSize:
    """How big the classifier demo is: users generated, the epoch limit, bootstrap resamples."""

    users: int
    max_epochs: int
    bootstrap: int


CLASSIFIER_DEMO_SIZES = {
    "smoke": ClassifierDemoSize(users=80, max_epochs=12, bootstrap=200),
    "default": ClassifierDemoSize(users=400, max_epochs=40, bootstrap=1000),
}
# Users per role, as in the paper: four equal sets (target members and non-members, shadow members
# and non-members) and two small sets for early stopping (validation) and the test accuracy.
CLASSIFIER_DEMO_SPLIT = {"member": 0.21, "nonmember": 0.21, "shadow_member": 0.21, "shadow_nonmember": 0.21,
                         "validation": 0.08, "test": 0.08}
CLASSIFIER_DEMO_LEARNING_RATE = {"bert": 2e-3, "lstm": 5e-3}


def run_classifier_demo(out: str | Path, size: str = "default", seed: int = 0, progress: bool = False,
                        architecture: str = "bert") -> dict:
    """Generate user posts, split users into roles, train target and shadow classifiers, audit, report."""
    from lmaudit.data.users import generate_user_posts
    from lmaudit.models.classifier import train_classifier
    from lmaudit.models.train import read_training_summary
    from lmaudit.pipeline import split_and_write_roles

    demo = CLASSIFIER_DEMO_SIZES[size]
    out = Path(out)
    posts = generate_user_posts(demo.users, seed)
    files = split_and_write_roles(posts, CLASSIFIER_DEMO_SPLIT, seed, out / "data")

    def texts_and_labels(role: str) -> tuple[list[str], list[str]]:
        rows = posts[posts["role"] == role]
        return rows["text"].tolist(), rows["label"].tolist()

    recipe = {"architecture": architecture, "max_epochs": demo.max_epochs, "patience": 10,
              "learning_rate": CLASSIFIER_DEMO_LEARNING_RATE[architecture], "progress": progress}
    for name, role, model_seed in (("target", "member", seed), ("shadow", "shadow_member", seed + 1)):
        folder = out / "models" / name
        texts, labels = texts_and_labels(role)
        done = read_training_summary(folder)
        wanted = {key: recipe[key] for key in ("architecture", "max_epochs", "patience", "learning_rate")}
        wanted |= {"seed": model_seed, "n_samples": len(texts)}
        if done is None or any(done.get(key) != value for key, value in wanted.items()):
            train_classifier(texts, labels, folder, texts_and_labels("validation"), texts_and_labels("test"),
                             seed=model_seed, label=name, **recipe)
    config = AuditConfig(
        target=str(out / "models" / "target"), shadow=str(out / "models" / "shadow"),
        members=str(files["member"]), nonmembers=str(files["nonmember"]),
        shadow_members=str(files["shadow_member"]), shadow_nonmembers=str(files["shadow_nonmember"]),
        out=str(out), signal={"signal": "classifier"}, evaluation={"bootstrap": demo.bootstrap, "seed": seed}, whitebox=True,
    )
    return run_classifier_audit(config, progress)

