"""The fine-tuning suite (`lmaudit demo --suite finetune`): what users audit most, a public base model fine-tuned on
their private notes. A causal base LM is trained on the notes of the patients the other demos train references on
(the "public" text, in no audited role); it is fine-tuned on the members' notes in full and with LoRA adapters; each
fine-tune is audited with the base as its one reference (an attacker has the public base too), so every
reference-based attack (the likelihood ratio, RMIA, EZ-MIA) reads it. The full fine-tune's report is the demo's
(`<out>/report.html`), the LoRA fine-tune's is in `<out>/lora/`, and `<out>/finetune.json` sets the two side by side:
utility (the population's mean NLL under each model and under the base) and the strongest attacks at low FPR. Every
attack built for fine-tunes runs: EZ-MIA, Con-ReCall, user inference, CAMIA (its repeated pass), SaMIA (10
generations per text), PETAL (the base as its surrogate) and SPV-MIA (a self-prompt reference per fine-tune: the base
fine-tuned on that fine-tune's continuations of public notes; 10 neighbours per text, words proposed by the base).
The finetune study (`studies/finetune.py`) makes and audits its fine-tunes with this module's recipes and audit.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path

from lmaudit.atomic import write_text
from lmaudit.audit.run import audit
from lmaudit.config import AuditConfig
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.locks import output_lock
from lmaudit.models.recipe import LoraSettings, TrainingRecipe
from lmaudit.models.self_prompt import SelfPromptSettings, self_prompt_recipe, self_prompt_texts
from lmaudit.models.source import ModelSource
from lmaudit.report.documents import write_document
from lmaudit.studies.setup import (
    DEMO_SIZES,
    NONMEMBER_SET_NAMES,
    REFERENCE_TRAIN,
    demo_recipe,
    train_language_model_unless_done,
    write_note_roles,
    write_other_hospital_nonmembers,
)

log = logging.getLogger(__name__)
SELF_PROMPT_SOURCE = "self_prompt_source.json"  # in a self-prompt reference: the target and prompts it was made from

# How each fine-tune trains from the base, for a fraction of the base's epochs: tiny models need far larger learning
# rates than the 5e-5 (full) and 2e-4 (LoRA) that suit pretrained checkpoints, and LoRA's low-rank update a larger one
# than full fine-tuning.
FINETUNE_EPOCH_SHARE = 0.5
FINETUNE_LEARNING_RATE = {"full": 1e-3, "lora": 5e-3}
LORA = LoraSettings(rank=8)
SAMIA_DRAWS = 10  # SaMIA's generations per text, as the paper: the suite tries the generated-text-only threat model too
# SPV-MIA's perturbations per text, as the paper (N = 10), each replacing this many words (a note has about 15; the
# paper masks 30% of the words in spans of 2 and refills them with T5)
PERTURBATIONS = 10
PERTURBED_WORDS = 4
RESULT_FILE = "finetune.json"


def finetune_recipes(epochs: int, base: Path, seed: int) -> dict[str, TrainingRecipe]:
    """The full and the LoRA fine-tune's recipes from `base`, each FINETUNE_EPOCH_SHARE of `epochs`."""
    start = replace(demo_recipe(max(1, round(epochs * FINETUNE_EPOCH_SHARE))), seed=seed, init_from=base)
    return {"full": replace(start, learning_rate=FINETUNE_LEARNING_RATE["full"]),
            "lora": replace(start, learning_rate=FINETUNE_LEARNING_RATE["lora"], lora=LORA)}


def target_of(name: str, base: Path, model: Path) -> ModelSource:
    """One fine-tune as a model to load: a full fine-tune is the model; a LoRA one is the base with its adapter."""
    return ModelSource(str(model)) if name == "full" else ModelSource(str(base), str(model))


def finetune_audit_config(name: str, base: Path, model: Path, files: dict, out: Path, seed: int, bootstrap: int) -> AuditConfig:
    """The audit of one fine-tune against its base, with its self-prompt reference beside the model
    (`<model>-self-prompt`)."""
    source = target_of(name, base, model)
    return AuditConfig(
        target=source.folder, adapter=source.adapter, reference=[str(base)], members=str(files[MEMBER]),
        nonmembers=dict(zip(NONMEMBER_SET_NAMES, map(str, (files[NONMEMBER], files["other-hospital"])), strict=True)),
        population=str(files[POPULATION]), calibration_members=str(files[CALIBRATION_MEMBER]), out=str(out),
        signal={"signal": "clm_tokens", "seed": seed}, evaluation={"bootstrap": bootstrap, "seed": seed},
        extraction={"prefix_tokens": (4, 8), "suffix_tokens": 8}, samia=SAMIA_DRAWS, camia=True, reference_kl=True,
        self_prompt_reference=str(self_prompt_folder(model)), neighbours=PERTURBATIONS, neighbour_words=PERTURBED_WORDS)


def self_prompt_folder(model: Path) -> Path:
    """Where a fine-tune's self-prompt reference is saved."""
    return model.with_name(f"{model.name}-self-prompt")


def prepare_finetune(name: str, recipes: dict[str, TrainingRecipe], base: Path, public_texts: list[str],
                     member_texts: list[str], model: Path, progress: bool = False) -> dict:
    """Fine-tune `base` on the members' texts into `model` with `recipes[name]` and build its self-prompt reference, each
    unless done; the fine-tune's recipe, as finetune.json records it."""
    recipe = recipes[name]
    train_language_model_unless_done("clm", member_texts, model, recipe, f"{name} fine-tune", progress)
    train_self_prompt_reference(target_of(name, base, model), base, public_texts, self_prompt_folder(model),
                                recipes["full"], recipe.seed, progress)
    return {"epochs": recipe.epochs, "learning_rate": recipe.learning_rate,
            "lora": None if recipe.lora is None else {"rank": recipe.lora.rank}}


def train_self_prompt_reference(target: ModelSource, base: Path, public_texts: list[str], folder: Path,
                                full_recipe: TrainingRecipe, seed: int, progress: bool = False) -> None:
    """SPV-MIA's reference for one fine-tune: the base fully fine-tuned (models/self_prompt.py, from the suite's full
    fine-tune recipe whatever the target's, so that a LoRA and a full target get references trained alike) on the
    fine-tune's continuations of the public texts' first tokens, into `folder` unless made so from this very target
    (by fingerprint: a target trained again gets a new reference) and these texts; then nothing is sampled."""
    from lmaudit.models.fingerprints import model_fingerprint
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import agrees
    from lmaudit.models.training_file import read_training_summary

    recipe = self_prompt_recipe(full_recipe, base, seed)
    prompts = hashlib.sha256(json.dumps(public_texts).encode("utf-8")).hexdigest()
    made_from = {"target": model_fingerprint(target), "prompts": prompts, "seed": seed}
    done, record = read_training_summary(folder), folder / SELF_PROMPT_SOURCE
    if (done is not None and record.is_file() and json.loads(record.read_text(encoding="utf-8")) == made_from
            and agrees(done, recipe.recorded("clm", done.n_samples))):
        log.info("reusing %s: the self-prompt reference of this target, trained the same way", folder)
        return
    texts = self_prompt_texts(target, public_texts, SelfPromptSettings(seed=seed))
    train_language_model("clm", texts, folder, recipe, None, progress, f"self-prompt reference of {target}")
    write_text(record, json.dumps(made_from))


def strongest_at_low_fpr(report: dict, level: str = "sample") -> list[dict]:
    """Each attack's TPR at 1% FPR at `level` (all data) with its counts and interval, strongest first; `limited` where
    the population has too few units to resolve 1% FPR."""
    rows = []
    for result in report["results"]:
        if result["level"] == level and result["slice"] == "all" and "0.01" in result.get("tpr_at_fpr", {}):
            point = result["tpr_at_fpr"]["0.01"]
            rows.append({"attack": result["attack"], "auc": result["auc"], "tpr": point["tpr"],
                         "tpr_ci": point["tpr_ci"], "tp": point["tp"], "fp": point["fp"],
                         "limited": point.get("resolution_limited", False)})
    return sorted(rows, key=lambda row: -row["tpr"])


def population_nll(scores, column: str) -> float:
    """The population's mean NLL (nats per token) in a scores table's `column`."""
    return float(scores.loc[scores["role"] == POPULATION, column].mean())


def run_finetune_demo(out: str | Path, size: str = "quick", seed: int = 0, progress: bool = False) -> dict:
    """The fine-tuning suite in `out`, held for this run: train the base and its two fine-tunes unless done, audit
    both, write finetune.json; return the full fine-tune's report."""
    with output_lock(out):
        return finetune_demo(Path(out), size, seed, progress)


def finetune_demo(out: Path, size: str, seed: int, progress: bool) -> dict:
    """run_finetune_demo's body, the output folder already held."""
    demo = DEMO_SIZES[size]
    notes, files = write_note_roles(size, seed, out / "data")
    files["other-hospital"] = write_other_hospital_nonmembers(notes, seed, out / "data")
    models = out / "models"
    base = models / "base"
    log.info("fine-tuning suite (%s size): the base on %d public notes, then a full and a LoRA fine-tune on the members",
             size, int((notes["role"] == REFERENCE_TRAIN).sum()))
    public_texts = notes.loc[notes["role"] == REFERENCE_TRAIN, "text"].tolist()
    train_language_model_unless_done("clm", public_texts, base, replace(demo_recipe(demo.epochs), seed=seed + 1), "base",
                                     progress)
    member_texts = notes.loc[notes["role"].isin([MEMBER, CALIBRATION_MEMBER]), "text"].tolist()
    comparison, reports = {}, {}
    recipes = finetune_recipes(demo.epochs, base, seed)
    for name in recipes:
        recorded = prepare_finetune(name, recipes, base, public_texts, member_texts, models / name, progress)
        folder = out if name == "full" else out / name
        outcome = audit(finetune_audit_config(name, base, models / name, files, folder, seed, demo.bootstrap), progress,
                        overwrite=True)
        reports[name] = outcome.report
        comparison[name] = {**recorded, "population_nll": population_nll(outcome.scores, "target_clm_tokens"),
                            "base_population_nll": population_nll(outcome.scores, "reference_clm_tokens"),
                            "sample_level": strongest_at_low_fpr(outcome.report)}
    write_document(out, RESULT_FILE, comparison)
    return reports["full"]
