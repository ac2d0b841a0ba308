"""Fine-tunes against their base (the fine-tuning suite as a study): a causal base trained on public text, either the
same hospital's notes of other patients or user posts that are not clinical at all, fine-tuned on the members in full
and with LoRA, each audited with its base as the one reference and a self-prompt reference of its own. EZ-MIA's authors
fine-tune a base on text it never saw; the suite's base has seen notes like the members', which leaves the attacks that
read the base less to find. The two bases show the difference."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lmaudit.config import AuditConfig
from lmaudit.signals.store import default_cache_dir
from lmaudit.studies.finetune_suite import finetune_audit_config, finetune_recipes, prepare_finetune, target_of
from lmaudit.studies.notes import TARGET_ROLES, held_out_loss, notes_study
from lmaudit.studies.runner import Cell, StudyPlan
from lmaudit.studies.setup import REFERENCE_TRAIN, demo_recipe, train_language_model_unless_done, write_other_hospital_nonmembers

BASES = ("notes", "posts")  # the base's public text: other patients' notes, or user posts (not clinical)
FINE_TUNES = ("full", "lora")


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell per base and fine-tune: the same members, the same audited samples."""
    from lmaudit.data.roles import POPULATION
    from lmaudit.data.users import generate_user_posts

    study = notes_study(out, size, seed, progress)
    files = {**study.files, "other-hospital": write_other_hospital_nonmembers(study.notes, seed, Path(out) / "data")}
    notes = study.texts(REFERENCE_TRAIN)
    public = {"notes": notes, "posts": generate_user_posts(study.size.patients, seed)["text"].head(len(notes)).tolist()}
    population = study.notes[study.notes["role"] == POPULATION]

    def base_model(name: str) -> Path:
        folder = study.out / "models" / f"base-{name}"
        train_language_model_unless_done("clm", public[name], folder, replace(demo_recipe(study.size.epochs),
                                                                            seed=seed + 1), f"base on {name}", progress)
        return folder

    def cell(base_name: str, name: str) -> Cell:
        model = study.out / "models" / f"{name}-on-{base_name}"

        def prepare(folder: Path) -> AuditConfig:
            base = base_model(base_name)
            recipes = finetune_recipes(study.size.epochs, base, seed)
            prepare_finetune(name, recipes, base, public[base_name], study.texts(*TARGET_ROLES), model, progress)
            config = finetune_audit_config(name, base, model, files, folder, seed, study.size.bootstrap)
            return config.model_copy(update={"cache_dir": str(default_cache_dir(study.out))})

        def measure() -> dict:
            """Utility: the population's mean NLL (nats per token) under the fine-tune and under its base."""
            base = study.out / "models" / f"base-{base_name}"
            ids, texts = population["sample_id"].tolist(), population["text"].tolist()
            return {f"{label}_population_nll": held_out_loss(source, "clm_loss", ids, texts, 1, seed,
                                                             default_cache_dir(study.out))
                    for label, source in (("target", target_of(name, base, model)), ("base", base))}

        return Cell(f"{name}-on-{base_name}", {"base": base_name, "fine-tune": name}, prepare, measure)

    return StudyPlan(
        study="finetune",
        description="A causal base trained on public text (other patients' notes, or user posts), fine-tuned on the "
                    "members in full and with LoRA; each fine-tune audited with its base as the one reference, a "
                    "self-prompt reference of its own (SPV-MIA), CAMIA, SaMIA and extraction.",
        paper="EZ-MIA (Ilić et al. 2026): 66.3% TPR at 1% FPR against 17.5% for the previous best on GPT-2 fine-tuned on "
              "WikiText; SPV-MIA (Fu et al. 2024): AUC about 0.9 against about 0.7; a report on EZ-MIA: LoRA leaks far "
              "less at low FPR.",
        cells=[cell(base, name) for base in BASES for name in FINE_TUNES], x="base", series="fine-tune",
        shown=(("spv_mia", "sample"), ("ez_mia", "sample"), ("min_k_plus_plus", "sample"), ("user_inference", "group")),
        setup={"patients": study.size.patients, "public texts per base": len(notes), "seed": seed},
    )
