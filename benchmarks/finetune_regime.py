"""The attacks on fine-tunes in the papers' regime (`finetune_attacks.py --regime papers`): a base that has not seen the
members' kind of text, and enough non-members to resolve 0.1% FPR.

* The base is trained on public text of another kind: user posts (data/users.py, not clinical) and the nursing and
  radiology notes of other patients (the only clinical text it reads; the members' discharge summaries, medication lists
  and labs are new to it), as a web-trained base has read some clinical text but not these notes.
* The notes of REGIME_PATIENTS patients are split by patient into members (the fine-tune's training set), non-members
  and a population of at least 1,000 notes each, and public patients whose notes prompt SPV-MIA's self-prompt reference.
* The base is fine-tuned on the members in full and with LoRA (the suite's recipes), and each fine-tune audited (the
  suite's audit: every attack on fine-tunes, the base as the one reference, a self-prompt reference per fine-tune).

Each attack's AUC and TPR at 1% and 0.1% FPR (interval, TP/FP), grouped by the reference it needs: the self-prompt
reference (SPV-MIA), the base (WBC, InfoRMIA, EZ-MIA, the likelihood ratio, ...), none. Then the issue's comparison:
the best of WBC, InfoRMIA, SPV-MIA and EZ-MIA at 1% FPR against the best of loss, zlib, Min-K%++ and the likelihood
ratio, and WBC against EZ-MIA at 0.1% FPR.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

from lmaudit.attacks.base import REFERENCE_READS, SELF_PROMPT_LOSS, SELF_PROMPT_NEIGHBOUR_LOSSES
from lmaudit.attacks.registry import attack_spec
from lmaudit.audit.run import audit
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.data.synth import generate_notes
from lmaudit.data.users import generate_user_posts
from lmaudit.studies.finetune_suite import finetune_audit_config, finetune_recipes, prepare_finetune
from lmaudit.studies.setup import (
    DEMO_SIZES,
    OTHER_HOSPITAL_SECTIONS,
    REFERENCE_TRAIN,
    demo_recipe,
    split_and_write_roles,
    train_language_model_unless_done,
    write_other_hospital_nonmembers,
)

REGIME_PATIENTS = 240
REGIME_SPLIT = {MEMBER: 0.16, CALIBRATION_MEMBER: 0.04, NONMEMBER: 0.32, POPULATION: 0.32, REFERENCE_TRAIN: 0.16}
BASE_POSTS_USERS = 200  # about 2,400 posts
BASE_PUBLIC_PATIENTS = 60  # their nursing and radiology notes
PUBLIC_SEED = 7919  # added to the seed: the base's patients are none of the audited ones
NEW_ATTACKS = ("wbc", "informia", "spv_mia", "ez_mia")
OLDER_ATTACKS = ("loss", "zlib", "min_k_plus_plus", "likelihood_ratio")


def base_texts(seed: int) -> list[str]:
    """The base's public text: user posts and other patients' nursing and radiology notes."""
    posts = generate_user_posts(BASE_POSTS_USERS, seed)["text"].tolist()
    notes = generate_notes(BASE_PUBLIC_PATIENTS, seed + PUBLIC_SEED, sections=OTHER_HOSPITAL_SECTIONS, id_prefix="P-")
    return posts + notes["text"].tolist()


def reference_needed(attack: str) -> str:
    """Which reference an attack reads: 'self-prompt', 'base' or 'none'."""
    reads = set(attack_spec(attack).reads)
    if reads & {SELF_PROMPT_LOSS, SELF_PROMPT_NEIGHBOUR_LOSSES}:
        return "self-prompt"
    return "base" if reads & set(REFERENCE_READS) else "none"


def point(result: dict, fpr: str) -> str:
    """'0.057 [0.035, 0.087] (20/0)' at one FPR, TP/FP; '*' where the population cannot resolve it."""
    entry = result["tpr_at_fpr"][fpr]
    low, high = entry["tpr_ci"]
    limited = "*" if entry.get("resolution_limited") else ""
    return f"{entry['tpr']:.3f}{limited} [{low:.3f}, {high:.3f}] ({entry['tp']}/{entry['fp']})"


def sample_results(report: dict) -> dict[str, dict]:
    """Each attack's sample-level result on all audited data."""
    return {r["attack"]: r for r in report["results"] if r["level"] == "sample" and r["slice"] == "all"
            and "0.001" in r.get("tpr_at_fpr", {})}


def regime_rows(name: str, report: dict) -> list[dict]:
    """One table row per attack, strongest at 1% FPR first within each reference group."""
    results = sample_results(report)
    rows = [{"fine-tune": name, "reference": reference_needed(a), "attack": a, "AUC": f"{r['auc']:.3f}",
             "TPR at 1% FPR": point(r, "0.01"), "TPR at 0.1% FPR": point(r, "0.001"),
             "_order": (("self-prompt", "base", "none").index(reference_needed(a)), -r["tpr_at_fpr"]["0.01"]["tpr"])}
            for a, r in results.items()]
    return [{k: v for k, v in row.items() if k != "_order"} for row in sorted(rows, key=lambda row: row["_order"])]


def comparison(name: str, report: dict) -> dict:
    """The best new attack against the best older one at 1% FPR, and WBC against EZ-MIA at 0.1%."""
    results = sample_results(report)

    def best(names: tuple[str, ...]) -> str:
        return max((a for a in names if a in results), key=lambda a: results[a]["tpr_at_fpr"]["0.01"]["tpr"])

    new, old = best(NEW_ATTACKS), best(OLDER_ATTACKS)
    tpr = {a: results[a]["tpr_at_fpr"]["0.01"]["tpr"] for a in (new, old)}
    return {"fine-tune": name, "best new at 1% FPR": f"{new} {tpr[new]:.3f}", "best older": f"{old} {tpr[old]:.3f}",
            "ratio": f"{tpr[new] / tpr[old]:.2f}" if tpr[old] > 0 else "inf (older finds none)",
            "wbc at 0.1%": point(results["wbc"], "0.001"), "ez_mia at 0.1%": point(results["ez_mia"], "0.001")}


def saturation(scores: pd.DataFrame, attack: str) -> dict:
    """How coarse an attack's top is: the share of the population at the attack's largest population score, and of the
    members at or above it (a threshold cannot split a tie, so at that share of the population no lower FPR exists)."""
    column = scores[f"score_{attack}"]
    population, members = column[scores["role"] == POPULATION], column[scores["role"] == MEMBER]
    return {f"{attack}: population at its top score": f"{(population == population.max()).mean():.3f}",
            f"{attack}: members at or above it": f"{(members >= population.max()).mean():.3f}"}


def run_papers_regime(out: Path, base_epochs: int, seed: int = 0, size: str = "quick") -> dict:
    """Build the regime's data and models in `out` (reused when done; the base trained `base_epochs` epochs), audit both
    fine-tunes; the tables' rows."""
    demo = DEMO_SIZES[size]
    notes = generate_notes(REGIME_PATIENTS, seed)
    files = split_and_write_roles(notes, REGIME_SPLIT, seed, out / "data")
    files["other-hospital"] = write_other_hospital_nonmembers(notes, seed, out / "data")
    counts = notes["role"].value_counts().to_dict()
    for role in (NONMEMBER, POPULATION):
        if counts.get(role, 0) < 1000:
            raise SystemExit(f"{role}: {counts.get(role, 0)} notes, fewer than the 1,000 that resolve 0.1% FPR")
    base = out / "models" / "base"
    train_language_model_unless_done("clm", base_texts(seed), base, replace(demo_recipe(base_epochs), seed=seed + 1),
                                     "base on posts and nursing/radiology notes", progress=True)
    public = notes.loc[notes["role"] == REFERENCE_TRAIN, "text"].tolist()
    members = notes.loc[notes["role"].isin([MEMBER, CALIBRATION_MEMBER]), "text"].tolist()
    recipes = finetune_recipes(demo.epochs, base, seed)
    table, compared, utility = [], [], {"counts": {k: int(v) for k, v in counts.items()}}
    for name in recipes:
        prepare_finetune(name, recipes, base, public, members, out / "models" / name, progress=True)
        config = finetune_audit_config(name, base, out / "models" / name, files, out / f"audit-{name}", seed,
                                       demo.bootstrap).model_copy(update={"cache_dir": str(out / "cache")})
        outcome = audit(config, progress=True, overwrite=True)
        table += regime_rows(name, outcome.report)
        scores = pd.read_parquet(out / f"audit-{name}" / "scores.parquet")
        compared.append(comparison(name, outcome.report) | saturation(scores, "wbc"))
        utility[name] = {"population_nll": float(scores.loc[scores["role"] == POPULATION, "target_clm_tokens"].mean()),
                         "base_population_nll": float(scores.loc[scores["role"] == POPULATION,
                                                                 "reference_clm_tokens"].mean())}
    (out / "regime.json").write_text(json.dumps({"table": table, "comparison": compared, "utility": utility}, indent=1))
    return {"table": table, "comparison": compared, "utility": utility}
