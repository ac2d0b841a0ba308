"""What the demos and the studies set up alike: the sizes, the generated notes and user posts split into roles and
written, the training recipes, and the tiny language models and classifiers trained unless already trained the same
way (reruns reuse them); the classifier audit's configuration."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pandas as pd

from lmaudit.config import AuditConfig
from lmaudit.data.corpus import write_table
from lmaudit.data.roles import (
    CALIBRATION_MEMBER,
    MEMBER,
    NONMEMBER,
    POPULATION,
    SHADOW_MEMBER,
    SHADOW_NONMEMBER,
    split_groups,
)
from lmaudit.models.recipe import TrainingRecipe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoSize:
    """How big a language-model demo is: patients generated, training epochs, masks, bootstrap resamples, reference
    models, and neighbours per sample (causal suite)."""

    patients: int
    epochs: int
    k: int
    bootstrap: int
    references: int
    neighbours: int


# Both models train long enough to memorise (train loss ~0.5 nats at 100 epochs)
# with the same recipe: a reference trained like the target on other patients is what makes the
# ratio cancel sample difficulty (tried: a weaker, 30-epoch reference made the ratio no better than the loss).
DEMO_SIZES = {
    "smoke": DemoSize(patients=60, epochs=30, k=4, bootstrap=200, references=2, neighbours=4),
    "quick": DemoSize(patients=100, epochs=100, k=6, bootstrap=500, references=2, neighbours=4),
    "full": DemoSize(patients=300, epochs=100, k=10, bootstrap=1000, references=4, neighbours=10),
}
DEMO_LEARNING_RATE = 3e-3
# Patients per role. The reference trains on its own patients: training it on the population
# that calibrates the thresholds would lower the population's scores and break the FPR guarantee.
# It gets the largest share: a reference that has seen less of the distribution than the target
# finds text the target saw in other patients (rare diagnoses, drugs) alien, which makes
# non-members look like members (measured: non-member energy 6.4 +- 7.1 nats under a reference
# trained on 30% of patients, against 4.5 +- 4.2 under the target trained on 40%).
REFERENCE_TRAIN = "reference_train"  # not a role of the target: the reference model's training patients
DEMO_SPLIT = {MEMBER: 0.24, CALIBRATION_MEMBER: 0.06, NONMEMBER: 0.12, POPULATION: 0.12, REFERENCE_TRAIN: 0.46}
# The language-model demos' second non-member set (Mireshghallah et al. audit against MIMIC and i2b2 non-members): as
# many patients as the first set, of another hospital, which keeps nursing and radiology notes only.
OTHER_HOSPITAL_SECTIONS = ("nursing", "radiology")
OTHER_HOSPITAL_SEED = 104729  # added to the demo's seed: patients independent of the first hospital's
NONMEMBER_SET_NAMES = ("same-hospital", "other-hospital")
@dataclass(frozen=True)
class ClassifierDemoSize:
    """How big the classifier demo is: users generated, the epoch limit, bootstrap resamples."""

    users: int
    max_epochs: int
    bootstrap: int


CLASSIFIER_DEMO_SIZES = {
    "smoke": ClassifierDemoSize(users=80, max_epochs=12, bootstrap=200),
    "quick": ClassifierDemoSize(users=200, max_epochs=20, bootstrap=500),
    "full": ClassifierDemoSize(users=400, max_epochs=40, bootstrap=1000),
}
# Users per role, as in the paper: four equal sets (target members and non-members, shadow members
# and non-members) and two small sets for early stopping (validation) and the test accuracy.
VALIDATION, TEST = "validation", "test"  # not roles of the target: held out for training the classifiers
CLASSIFIER_DEMO_SPLIT = {MEMBER: 0.21, NONMEMBER: 0.21, SHADOW_MEMBER: 0.21, SHADOW_NONMEMBER: 0.21, VALIDATION: 0.08, TEST: 0.08}
CLASSIFIER_DEMO_LEARNING_RATE = {"bert": 2e-3, "lstm": 5e-3}
PUBLIC_POSTS_SEED = 7919  # added to the seed: the pretraining users of fine-tuned classifiers, apart from the audited


def demo_recipe(epochs: int) -> TrainingRecipe:
    """How every language model of the demos and studies trains (each with its own seed): `epochs` epochs, dropout 0.1
    and DEMO_LEARNING_RATE."""
    return TrainingRecipe(epochs=epochs, dropout=0.1, learning_rate=DEMO_LEARNING_RATE)


def split_and_write_roles(corpus: pd.DataFrame, split: dict[str, float], seed: int, data_dir: Path) -> dict[str, Path]:
    """Give whole groups a role in the `split` proportions (seeded; sets corpus["role"]) and write one Parquet file per role."""
    corpus["role"] = corpus["group_id"].map(split_groups(corpus["group_id"].tolist(), split, seed))
    data_dir.mkdir(parents=True, exist_ok=True)
    files = {role: data_dir / f"{role}.parquet" for role in split}
    for role, path in files.items():
        write_table(corpus[corpus["role"] == role].drop(columns="role"), path)
    return files


def write_note_roles(size: str, seed: int, data_dir: Path) -> tuple[pd.DataFrame, dict[str, Path]]:
    """The size's generated notes (seeded), split into DEMO_SPLIT's roles by patient and written to `data_dir`."""
    from lmaudit.data.synth import generate_notes

    notes = generate_notes(DEMO_SIZES[size].patients, seed)
    return notes, split_and_write_roles(notes, DEMO_SPLIT, seed, data_dir)


def write_other_hospital_nonmembers(notes: pd.DataFrame, seed: int, data_dir: Path) -> Path:
    """data_dir/nonmember-other-hospital.parquet: the notes of as many patients as `notes` has non-member patients, from
    another hospital (other patients, nursing and radiology notes only): non-members distributed unlike the members."""
    from lmaudit.data.synth import generate_notes

    patients = notes.loc[notes["role"] == NONMEMBER, "group_id"].nunique()
    other = generate_notes(patients, seed + OTHER_HOSPITAL_SEED, sections=OTHER_HOSPITAL_SECTIONS, id_prefix="H2-")
    path = data_dir / "nonmember-other-hospital.parquet"
    write_table(other, path)
    return path


def train_language_model_unless_done(kind: str, texts: list[str], folder: Path, recipe: TrainingRecipe, label: str,
                                     progress: bool = False, groups: list | None = None) -> None:
    """Train an LM of `kind` (mlm, clm) with `recipe` unless `folder` holds one trained so on as many texts, with every
    checkpoint the recipe asks for beside it (`models.trained.train_unless_done`)."""
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import train_unless_done

    train_unless_done(folder, kind, recipe, len(texts),
                      partial(train_language_model, kind, texts, folder, recipe, groups, progress, label))


def write_classifier_roles(size: str, seed: int, data_dir: Path, **generation) -> tuple[pd.DataFrame, dict[str, Path]]:
    """The classifier demo's user posts, split into roles by user (seeded) and written to `data_dir`; `generation`
    changes how they are generated (generate_user_posts' n_users, posts_per_user, n_topics)."""
    from lmaudit.data.users import generate_user_posts

    generation = {"n_users": CLASSIFIER_DEMO_SIZES[size].users, **generation}
    log.info("generating the posts of %d users", generation["n_users"])
    posts = generate_user_posts(seed=seed, **generation)
    return posts, split_and_write_roles(posts, CLASSIFIER_DEMO_SPLIT, seed, data_dir)


def train_posts_mlm(folder: Path, size: str, seed: int, progress: bool) -> Path:
    """A masked LM pretrained (without DP, unless already trained so) on the posts of as many users as the classifier
    demo has, generated apart from them (in no role): the start of fine-tuned classifiers."""
    from lmaudit.data.users import generate_user_posts

    public = generate_user_posts(CLASSIFIER_DEMO_SIZES[size].users, seed + PUBLIC_POSTS_SEED)["text"].tolist()
    train_language_model_unless_done("mlm", public, folder, replace(demo_recipe(DEMO_SIZES[size].epochs), seed=seed + 2),
                                     "pretrained mlm (posts)", progress)
    return folder


def classifier_recipe(size: str, architecture: str = "bert", **changes) -> TrainingRecipe:
    """The classifier demo's recipe: its epoch limit and its learning rate for the architecture, patience 10; `changes`
    (TrainingRecipe fields) override it."""
    return replace(TrainingRecipe(architecture=architecture, epochs=CLASSIFIER_DEMO_SIZES[size].max_epochs, patience=10,
                                  learning_rate=CLASSIFIER_DEMO_LEARNING_RATE[architecture]), **changes)


def train_classifier_pair(posts: pd.DataFrame, models: Path, recipe: TrainingRecipe, progress: bool) -> tuple[Path, Path]:
    """models/target and models/shadow: classifiers trained alike with `recipe` (the target with its seed, the shadow with
    the next) on the member and the shadow member users, unless already trained so. Both predict every label of `posts`,
    also one that only held-out users write (few posts per user)."""
    from lmaudit.models.classifier import ClassifierData, train_classifier
    from lmaudit.models.trained import train_unless_done

    def rows_of(role: str) -> pd.DataFrame:
        return posts[posts["role"] == role]

    def texts_and_labels(role: str) -> tuple[list[str], list[str]]:
        return rows_of(role)["text"].tolist(), rows_of(role)["label"].tolist()

    folders = []
    for name, role, model_recipe in (("target", MEMBER, recipe), ("shadow", SHADOW_MEMBER, replace(recipe, seed=recipe.seed + 1))):
        folder = models / name
        data = ClassifierData(*texts_and_labels(role), texts_and_labels(VALIDATION), texts_and_labels(TEST),
                              rows_of(role)["group_id"].tolist(), sorted(posts["label"].unique()))
        train_unless_done(folder, "classifier", model_recipe, len(data.texts),
                          partial(train_classifier, data, folder, model_recipe, progress, name))
        folders.append(folder)
    return folders[0], folders[1]


def classifier_audit_config(target: Path, shadow: Path, files: dict[str, Path], out: Path, bootstrap: int,
                            seed: int, whitebox: bool = True) -> AuditConfig:
    """The audit of a target classifier with its shadow, on the classifier roles' `files`."""
    return AuditConfig(
        target=str(target), shadow=str(shadow), members=str(files[MEMBER]), nonmembers=str(files[NONMEMBER]),
        shadow_members=str(files[SHADOW_MEMBER]), shadow_nonmembers=str(files[SHADOW_NONMEMBER]), out=str(out),
        signal={"signal": "classifier"}, evaluation={"bootstrap": bootstrap, "seed": seed}, whitebox=whitebox,
    )
