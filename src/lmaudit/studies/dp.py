"""Leakage against DP-SGD noise for every model family (Jagannatha et al. 2021, Section 5.2, Tables 2-3, Figures 4-21):
a masked LM, a causal LM and a topic classifier, each trained from scratch and fine-tuned from a model pretrained
without DP on other text, once per noise multiplier of the grid and once without DP-SGD, and audited after epochs spaced
on a log scale up to the last (the paper reports the maximum over epochs).

DP-SGD as the paper runs it: clipping norm 1, delta 1e-6, at most 50 samples per patient or user, Poisson batches;
sigma 1e-20 is DP-SGD's clipping without meaningful noise, "non-DP" the demos' own training (AdamW, no per-sample
clipping). A checkpoint's epsilon is the accountant's for the steps taken up to its epoch. The group epsilon of one
patient's k samples is Dwork and Roth's (k eps, k e^((k-1) eps) delta) on the RDP accountant's epsilon (the paper's),
k the largest number of one patient's (user's) samples in training.

Language models train on the demo's notes; the references are the study's, pretrained without DP on the reference
patients, and a fine-tuned target starts from the reference of its kind, which the likelihood-ratio attack then uses
(an attacker holds the public base model). Utility: the mean loss per token on the population's (held-out) notes, and
for the masked LMs the test accuracy on a note-inference task after fine-tuning (`studies/note_inference.py`, the
paper's MedNLI, Tables 4-5). The grid (DP_GRIDS) is the size's, or the paper's whole grid (the dp-paper study): at full
size the dp study runs in about an hour on 2 CPU cores, with the paper's own setting (pretrained start, DP-SGD for 3
epochs) at four noise levels.
Every language-model target also trains with the study's canaries planted (new-token canaries, each a coin flip;
`studies/canary_epsilon.py`), and each DP-SGD target with gradient canaries in every step (`lmaudit train --audit-dp`):
each checkpoint's canary epsilon (Steinke et al.'s one-run lower bound, and the f-DP one) and white-box epsilon stand
beside the accountant's.
Classifiers: the classifier demo's users; the target and its shadow train alike (same start, same noise), and a
fine-tuned pair starts from a masked LM pretrained on the posts of other users, in no role. Utility: test accuracy.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

from lmaudit.data.roles import MEMBER, POPULATION
from lmaudit.metrics.privacy import group_privacy
from lmaudit.report.tables import shown_summary
from lmaudit.signals.store import default_cache_dir
from lmaudit.studies.canary_epsilon import (
    CANARY_COUNTS,
    canary_measurement,
    record_canaries,
    study_canaries,
    white_box_measurement,
    with_canaries,
)
from lmaudit.studies.epochs import checkpoint_epochs
from lmaudit.studies.note_inference import INFERENCE_EPOCHS, inference_accuracy, inference_task
from lmaudit.studies.notes import TARGET_ROLES, NotesStudy, held_out_loss, notes_study
from lmaudit.studies.runner import Cell, StudyPlan
from lmaudit.studies.setup import CLASSIFIER_DEMO_SIZES, REFERENCE_TRAIN

if TYPE_CHECKING:
    from lmaudit.models.training_file import TrainingRecord

PAPER_NOISES = (2.0, 1.0, 0.1, 0.01, 0.001, 1e-4, 1e-20)  # Section 5.2; 1e-20 ablates the noise
PAPER_DELTA = 1e-6  # Appendix B
PAPER_CAP = 50  # samples per patient (Section 5.2)
CLIPPING_NORM = 1.0
NON_DP = "non-DP"
FAMILIES = ("mlm", "clm", "classifier")
STARTS = ("scratch", "fine-tuned")
SIGNAL_OF = {"mlm": "mlm_energy", "clm": "clm_loss"}
# What the analysis and the figure read: the paper's S-BBA (loss at the mean-training-loss threshold), P-BBA (loss per
# patient), a white-box attack (S-AWBA/S-GWBA: a logistic regression on attention or gradient features), and the
# likelihood ratio; for classifiers Shejwalkar et al.'s sample and user thresholds.
ATTACKS = {"mlm": (("loss", "sample"), ("likelihood_ratio", "sample"), ("loss", "group"), ("logistic_split", "sample")),
           "classifier": (("sample_threshold", "sample"), ("user_threshold_avg", "group"), ("logistic_split", "sample"))}
ATTACKS["clm"] = ATTACKS["mlm"]


@dataclass(frozen=True)
class DPGrid:
    """What a grid of the study trains: noise multipliers (the last entry None: without DP-SGD), the language models'
    starts, how many checkpoints of each model are audited, and a fine-tuned language model's epochs (None: the size's,
    as from scratch)."""

    noises: tuple[float | None, ...]
    checkpoints: int
    starts: tuple[str, ...] = STARTS
    fine_tune_epochs: int | None = None


DP_GRIDS = {"smoke": DPGrid(noises=(1.0, 0.001, None), checkpoints=2),
            # About an hour at full size on 2 CPU cores: the paper's own setting (every model starts from a pretrained
            # one; the language models train 3 epochs, each audited; the classifiers their size's epochs) at noise
            # levels on both sides of its finding (sigma >= 0.01 negligible, <= 1e-3 more than 1%).
            "hour": DPGrid(noises=(1.0, 0.01, 0.001, None), checkpoints=3, starts=("fine-tuned",), fine_tune_epochs=3),
            "paper": DPGrid(noises=(*PAPER_NOISES, None), checkpoints=3)}
GRID_OF_SIZE = {"smoke": "smoke", "full": "hour"}  # the dp study's grid; the dp-paper study runs the paper's at any size


def noise_label(noise: float | None) -> str:
    """How the study names a noise multiplier: %g, or non-DP."""
    return NON_DP if noise is None else f"{noise:g}"


def noise_column(label: str) -> str:
    """A noise label as the analysis names its row: sigma 0.1, or non-DP."""
    return label if label == NON_DP else f"sigma {label}"


def dp_measurements(training: TrainingRecord, group_size: int) -> dict:
    """A checkpoint's privacy from its training summary: the accountant's epsilon (PRV, RDP; None without DP-SGD or
    where PRV was not computed) and the group epsilon and delta of `group_size` samples of one patient (RDP)."""
    dp = training.dp
    if dp is None:
        return {"epsilon_prv": None, "epsilon_rdp": None, "group_size": group_size, "group_epsilon": None,
                "group_delta": None}
    group_epsilon, group_delta = group_privacy(dp.epsilon_rdp, dp.delta, group_size)
    return {"epsilon_prv": dp.epsilon_prv, "epsilon_rdp": dp.epsilon_rdp, "group_size": group_size,
            "group_epsilon": group_epsilon, "group_delta": group_delta if group_delta < 1 else ">= 1 (vacuous)"}


def maximum_over_epochs(records: list[dict]) -> dict:
    """Per model family: one row per (start, noise) with the last checkpoint's epsilon, group epsilon and utility, and
    per attack of the family the largest AUC, population-threshold advantage (LMs; None where the population calibrates
    no threshold) and (loss) mean-training-loss advantage over the audited epochs."""
    by_model: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for record in records:
        family, start = record["settings"]["model"].split(", ")
        by_model[(family, start, str(record["settings"]["noise"]))].append(record)
    tables: dict[str, dict] = {}
    for (family, start, noise), cells in by_model.items():
        last = max(cells, key=lambda cell: cell["settings"]["epochs"])["measured"]
        row = {"epsilon": last["epsilon_rdp"], f"group epsilon (k={last['group_size']})": last["group_epsilon"],
               "group delta": last["group_delta"]}
        if "canary_epsilon" in last:  # the language models' planted canaries, the last checkpoint's (as the epsilon)
            row["canary epsilon"] = last["canary_epsilon"]
            row["canary f-DP epsilon"] = last["canary_f_dp_epsilon"]
        if "white_box_epsilon" in last:
            row["white-box epsilon"] = last["white_box_epsilon"]
        row |= {key: last[key] for key in ("held_out_loss", "test_accuracy") if key in last}
        if "nli_accuracy" in last:  # the masked LMs' downstream utility, and that of the model they started from
            row |= {"NLI accuracy": last["nli_accuracy"], "NLI accuracy of the start": last["start_nli_accuracy"],
                    "NLI accuracy from random initialisation": last["random_init_nli_accuracy"]}
        for attack, level in ATTACKS[family]:
            summaries = [s for cell in cells if (s := shown_summary(cell, attack, level)) is not None]
            row[f"{attack} {level}: max AUC"] = max((s["auc"] for s in summaries), default=None)
            if family != "classifier":  # a classifier audit calibrates on its shadow: it has no population threshold
                row[f"{attack} {level}: max adv."] = max(
                    (s["population_advantage"] for s in summaries if s["population_advantage"] is not None),
                    default=None)
            if attack == "loss":
                row[f"{attack} {level}: max adv. at mean train loss"] = max(
                    (s["mean_member_loss_advantage"] for s in summaries if s["mean_member_loss_advantage"] is not None),
                    default=None)
        tables.setdefault(f"maximum over epochs: {family}", {})[f"{start}, {noise_column(noise)}"] = row
    return tables


def group_sizes(rows, cap: int) -> int:
    """The largest number of one group's samples among `rows` (a frame with group_id), at most `cap`."""
    return int(min(cap, rows.groupby("group_id").size().max()))


def language_model_cells(study: NotesStudy, grid: DPGrid, canaries: Path) -> list[Cell]:
    """One cell per (kind, start, noise, checkpoint epoch) of the masked and the causal LM, each trained with the
    `canaries` planted and measured by their one-run audit too; a masked LM's cells also measure its utility on the
    note-inference task, beside that of the model it started from."""
    from lmaudit.models.recipe import DEFAULT_GRADIENT_CANARIES, DPSettings
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.models.training_file import read_training_summary

    target_rows = study.notes[study.notes["role"].isin(TARGET_ROLES)]
    population = study.notes[study.notes["role"] == POPULATION]
    k = group_sizes(target_rows, PAPER_CAP)
    task = cache(partial(inference_task, study.size.patients, study.seed))

    def run_epochs(start: str) -> int:
        return (grid.fine_tune_epochs or study.size.epochs) if start == "fine-tuned" else study.size.epochs

    def reference(kind: str) -> Path:
        return study.reference() if kind == "mlm" else study.train(kind, "reference-clm", study.texts(REFERENCE_TRAIN),
                                                                   seed=study.seed + 1)

    def utility_downstream(name: str, checkpoint: Path, start: str) -> dict:
        folders = study.out / "models" / "note-inference"
        tuned = inference_accuracy(checkpoint, task(), folders / name, study.tokenizer_source)
        # The floor: the task learnt from a random initialisation (what a model from scratch starts from).
        floor = inference_accuracy(None, task(), folders / "start-scratch", study.tokenizer_source)
        began = floor if start == "scratch" else inference_accuracy(reference("mlm"), task(), folders / f"start-{start}",
                                                                    study.tokenizer_source)
        return {"nli_accuracy": tuned["accuracy"], "nli_accuracy_interval": tuned["interval"],
                "nli_test_pairs": tuned["test_pairs"], "start_nli_accuracy": began["accuracy"],
                "random_init_nli_accuracy": floor["accuracy"]}

    def cell(kind: str, start: str, noise: float | None, epoch: int) -> Cell:
        name = f"{kind}-{start}-{'non-dp' if noise is None else f'sigma-{noise:g}'}"
        model = study.out / "models" / name
        epochs = run_epochs(start)
        checkpoint = model if epoch == epochs else checkpoint_folder(model, epoch)

        def prepare(folder: Path):
            texts, groups = with_canaries(target_rows, canaries)
            dp = (None if noise is None else
                  DPSettings(noise, CLIPPING_NORM, PAPER_DELTA, PAPER_CAP, DEFAULT_GRADIENT_CANARIES))
            saved = checkpoint_epochs(epochs, grid.checkpoints)
            study.train(kind, name, texts, groups=groups, checkpoints=tuple(saved), dp=dp, epochs=epochs,
                        init_from=reference(kind) if start == "fine-tuned" else None)
            record_canaries([model, *(checkpoint_folder(model, e) for e in saved if e < epochs)], canaries)
            audit = study.audit(folder, checkpoint, [reference(kind)], SIGNAL_OF[kind])
            return audit.model_copy(update={"whitebox": True,
                                            "evaluation": audit.evaluation.model_copy(update={"delta": PAPER_DELTA})})

        def measure() -> dict:
            utility = held_out_loss(checkpoint, SIGNAL_OF[kind], population["sample_id"].tolist(),
                                    population["text"].tolist(), study.size.k, study.seed, default_cache_dir(study.out))
            planted = canary_measurement(checkpoint, reference(kind) if start == "fine-tuned" else None, canaries,
                                         study.out / "canary-audits" / f"{name}-epoch-{epoch}",
                                         default_cache_dir(study.out), PAPER_DELTA, study.seed)
            training = read_training_summary(checkpoint)
            downstream = utility_downstream(f"{name}-epoch-{epoch}", checkpoint, start) if kind == "mlm" else {}
            return (dp_measurements(training, k) | {"held_out_loss": utility} | downstream | planted
                    | white_box_measurement(training))

        return Cell(f"{name}-epoch-{epoch}", {"model": f"{kind}, {start}", "noise": noise_label(noise), "epochs": epoch},
                    prepare, measure)

    return [cell(kind, start, noise, epoch) for kind in SIGNAL_OF for start in grid.starts for noise in grid.noises
            for epoch in checkpoint_epochs(run_epochs(start), grid.checkpoints)]


def classifier_cells(out: Path, size: str, seed: int, grid: DPGrid, progress: bool) -> list[Cell]:
    """One cell per (start, noise, checkpoint epoch) of the classifier demo's target, audited with its shadow's
    checkpoint of the same epoch."""
    from lmaudit.models.recipe import DPSettings
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.models.training_file import read_training_summary
    from lmaudit.studies.setup import (
        classifier_audit_config,
        classifier_recipe,
        train_classifier_pair,
        train_posts_mlm,
        write_classifier_roles,
    )

    demo = CLASSIFIER_DEMO_SIZES[size]
    epochs = checkpoint_epochs(demo.max_epochs, grid.checkpoints)
    posts, files = write_classifier_roles(size, seed, out / "data-classifier")
    k = group_sizes(posts[posts["role"] == MEMBER], PAPER_CAP)  # the target's users (its shadow's are others)
    pretrained = out / "models" / "classifier-pretrained-mlm"

    def cell(start: str, noise: float | None, epoch: int) -> Cell:
        name = f"classifier-{start}-{'non-dp' if noise is None else f'sigma-{noise:g}'}"
        target = checkpoint_folder(out / "models" / name / "target", epoch)

        def prepare(folder: Path):
            dp = None if noise is None else DPSettings(noise, CLIPPING_NORM, PAPER_DELTA, PAPER_CAP)
            # Patience as long as the run: every checkpoint is reached, none is cut by early stopping.
            init_from = train_posts_mlm(pretrained, size, seed, progress) if start == "fine-tuned" else None
            recipe = classifier_recipe(size, seed=seed, checkpoints=tuple(epochs), patience=demo.max_epochs, dp=dp,
                                       init_from=init_from)
            trained, shadow = train_classifier_pair(posts, out / "models" / name, recipe, progress)
            audit = classifier_audit_config(checkpoint_folder(trained, epoch), checkpoint_folder(shadow, epoch), files,
                                            folder, demo.bootstrap, seed)
            return audit.model_copy(update={"evaluation": audit.evaluation.model_copy(update={"delta": PAPER_DELTA})})

        def measure() -> dict:
            training = read_training_summary(target)
            return dp_measurements(training, k) | {"test_accuracy": training.test_accuracy}

        return Cell(f"{name}-epoch-{epoch}", {"model": f"classifier, {start}", "noise": noise_label(noise),
                                              "epochs": epoch}, prepare, measure)

    return [cell(start, noise, epoch) for start in grid.starts for noise in grid.noises for epoch in epochs]


def plan(out: Path, size: str, seed: int, progress: bool = False, grid: str | None = None) -> StudyPlan:
    """One cell per (family, start, noise, checkpoint epoch) of the `grid` (DP_GRIDS; None: the size's)."""
    from lmaudit.canaries.make import reserved_tokens
    from lmaudit.models.recipe import DEFAULT_GRADIENT_CANARIES
    from lmaudit.report.plots import dp_study_figure

    grid = DP_GRIDS[grid or GRID_OF_SIZE[size]]
    canaries = study_canaries(Path(out), size, seed)
    study = notes_study(out, size, seed, progress, reserved_tokens(canaries))
    cells = (language_model_cells(study, grid, canaries)
             + classifier_cells(out, size, seed, grid, progress))
    noises = ", ".join(noise_label(noise) for noise in grid.noises)
    starts = " and ".join("from scratch" if start == "scratch" else "fine-tuned" for start in grid.starts)
    fine_tune_epochs = grid.fine_tune_epochs or study.size.epochs
    return StudyPlan(
        study="dp-paper" if grid is DP_GRIDS["paper"] else "dp",
        description=f"A masked LM, a causal LM and a topic classifier, each {starts}, trained with "
                    f"DP-SGD at noise multipliers {noises} (non-DP: without DP-SGD), clipping norm {CLIPPING_NORM:g}, "
                    f"delta {PAPER_DELTA:g}, at most {PAPER_CAP} samples per patient or user, and audited after "
                    f"{grid.checkpoints} epochs spaced on a log scale up to the last, white-box attacks included; the language "
                    f"models train with {CANARY_COUNTS[size]} new-token canaries planted (each with probability 1/2), whose "
                    f"one-run audit gives the canary epsilon, and their DP-SGD runs with gradient canaries, whose "
                    f"white-box audit gives the white-box epsilon. Each masked LM is also fine-tuned on a note-inference "
                    f"task (the analogue of MedNLI) for its utility, beside the model it started from.",
        paper="leakage falls with noise: sigma in {2, 1, 0.1, 0.01} leaves negligible leakage (under 1%) for every "
              "attack; sigma <= 1e-3 and 1e-20 leak more than 1% to the white-box and group attacks; the accountant's "
              "epsilon is a vast overestimate (sigma 1e-3 gives about 10^4); utility falls with noise but stays above "
              "the pretrained model's for sigma <= 0.01 (Tables 2-3, Section 5.2, Appendix B).",
        cells=cells, x="noise", series="model",
        # The table's attacks; the analysis has every attack of ATTACKS, group level and white-box included.
        shown=(("loss", "sample"), ("likelihood_ratio", "sample"), ("sample_threshold", "sample")),
        analyse=maximum_over_epochs, analysis_figure=dp_study_figure, grid_figure=False,
        setup={"patients": study.size.patients, "users": CLASSIFIER_DEMO_SIZES[size].users,
               "language-model epochs": (f"{study.size.epochs} from scratch, " if "scratch" in grid.starts else "")
                                        + f"{fine_tune_epochs} fine-tuned", "classifier epochs": CLASSIFIER_DEMO_SIZES[size].max_epochs,
               "noise multipliers": noises, "clipping norm": CLIPPING_NORM, "delta": PAPER_DELTA,
               "samples per patient or user, at most": PAPER_CAP, "seed": seed,
               "epsilon": "the RDP accountant's, as the paper's (the table has PRV too where computed); '-' and n/a: "
                          "without DP-SGD",
               "canary epsilon": f"language models: Steinke et al.'s one-run lower bound (95%, delta {PAPER_DELTA:g}; "
                                 f"the f-DP bound beside it) from {CANARY_COUNTS[size]} new-token canaries, each "
                                 f"planted with probability 1/2, scored on the secret alone (less the base model's, "
                                 f"fine-tuned); the last checkpoint's",
               "white-box epsilon": f"DP-SGD language models: Steinke et al.'s bound (95%, delta {PAPER_DELTA:g}) from "
                                    f"{DEFAULT_GRADIENT_CANARIES} gradient canaries in every step; the last "
                                    f"checkpoint's",
               "NLI accuracy": f"masked LMs: test accuracy (fraction) on the note-inference task of "
                               f"{study.size.patients} other patients' notes after {INFERENCE_EPOCHS} epochs of "
                               f"fine-tuning (the best validation epoch's; 'of the start': the model it started from, "
                               f"the reference or, from scratch, a random initialisation; 'from random initialisation': the "
                               f"task's floor, no language model at all); the last checkpoint's",
               "max adv.": "at the population's 10% FPR threshold; n/a where the population is too small to calibrate "
                           "it (the patient level at smoke size); classifiers calibrate on their shadow instead"},
    )

