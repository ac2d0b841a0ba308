"""The attacks on fine-tuned models, on the fine-tuning suite (`lmaudit demo --suite finetune`, its models reused):

1. the passes each attack needs, each timed on its own with a fresh signal store (the target's per-token pass, which
   every token attack reads, PETAL's greedy tokens included; the base's, for the reference attacks and PETAL's
   surrogate; ReCaLL's prefixed pass and Con-ReCall's second; CAMIA's repeated texts; SaMIA's sampled continuations;
   SPV-MIA's self-prompt texts, the reference's fine-tuning, the neighbours the base proposes and both models'
   passes over them);
2. both fine-tunes audited (full and LoRA), EZ-MIA as lmaudit fixes it and as the authors' code scores: per attack,
   AUC and TPR at 1% FPR (counts, interval; * where the population is too small to resolve 1% FPR) at sample level,
   and at patient level for user inference; the strongest new attack (EZ-MIA, Con-ReCall, CAMIA, SaMIA, PETAL,
   SPV-MIA) against the strongest of the others at 1% FPR;
3. full against LoRA at matched utility: the LoRA run retrained with a checkpoint every 5 epochs, the checkpoint whose
   population NLL is closest to the full fine-tune's audited like the others (with its own self-prompt reference).

    python benchmarks/finetune_attacks.py --demo runs/demo-finetune [--out docs/performance.md]

4. with `--regime papers`, instead: the papers' regime (finetune_regime.py), a base that never read the members' kind
   of notes and over 1,000 non-members and population notes, every attack at 1% and 0.1% FPR by the reference it needs:

    python benchmarks/finetune_attacks.py --regime papers --work runs/finetune-regime [--out docs/results.md]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
from markdown_section import machine_line, markdown_table, publish

from lmaudit.attacks.camia import REPEATS
from lmaudit.attacks.settings import AttackSettings
from lmaudit.audit.run import audit
from lmaudit.data.corpus import load_corpus
from lmaudit.data.roles import CALIBRATION_MEMBER, POPULATION, TARGET_ROLES
from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource
from lmaudit.signals.compute import Scoring, model_signal
from lmaudit.signals.samia import SamiaJob
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.variants import prefix_samples, prefix_text
from lmaudit.studies.finetune_suite import (
    PERTURBATIONS,
    PERTURBED_WORDS,
    SAMIA_DRAWS,
    finetune_audit_config,
    finetune_recipes,
    self_prompt_folder,
    strongest_at_low_fpr,
    train_self_prompt_reference,
)
from lmaudit.studies.setup import DEMO_SIZES

NEW_ATTACKS = ("ez_mia", "con_recall", "camia", "samia", "petal", "spv_mia")
PREFIX_SAMPLES = 4  # --recall-prefix's default


def timed_passes(demo: Path) -> list[dict]:
    """Seconds of each pass on the full fine-tune's target-role samples, each into a fresh store."""
    rows = pd.concat([load_corpus(path, path.stem) for path in sorted((demo / "data").glob("*.parquet"))
                      if path.stem in TARGET_ROLES], ignore_index=True)
    ids, texts = rows["sample_id"].tolist(), rows["text"].tolist()
    settings = SignalSettings(signal="clm_tokens")

    def prefix_of(role: str) -> str:
        pool = rows.index[rows["role"] == role].tolist()
        return prefix_text([texts[pool[i]] for i in prefix_samples(pool, PREFIX_SAMPLES, 0)])

    passes = {"target, per token (every token attack)": (demo / "models" / "full", None),
              "base, per token (likelihood ratio, RMIA, EZ-MIA, user inference)": (demo / "models" / "base", None),
              "target after a population prefix (ReCaLL, Con-ReCall)": (demo / "models" / "full", prefix_of(POPULATION)),
              "target after a member prefix (Con-ReCall)": (demo / "models" / "full", prefix_of(CALIBRATION_MEMBER)),
              f"target on each text repeated {REPEATS} times (CAMIA)": (demo / "models" / "full", None)}
    with tempfile.TemporaryDirectory() as store:  # torch's first pass in a process pays for its start-up: not timed
        model_signal(demo / "models" / "full", ids[:16], texts[:16], settings, Scoring(Path(store)))
    timings = []
    for name, (model, prefix) in passes.items():
        scored = [" ".join([text] * REPEATS) for text in texts] if "repeated" in name else texts
        with tempfile.TemporaryDirectory() as store:
            started = time.perf_counter()
            model_signal(model, ids, scored, settings, Scoring(Path(store)), prefix=prefix)
            timings.append({"pass": name, "samples": len(ids), "seconds": f"{time.perf_counter() - started:.1f}"})
    started = time.perf_counter()
    SamiaJob(ModelSource(str(demo / "models" / "full")), DEFAULT_PLACEMENT, SAMIA_DRAWS, 0)(ids, texts)
    timings.append({"pass": f"target, {SAMIA_DRAWS} sampled continuations per text (SaMIA)", "samples": len(ids),
                    "seconds": f"{time.perf_counter() - started:.1f}"})
    return timings + spv_mia_passes(demo, ids, texts)


def spv_mia_passes(demo: Path, ids: list[str], texts: list[str]) -> list[dict]:
    """Seconds of SPV-MIA's work: the self-prompt reference (the target's texts and the fine-tuning, into a scratch
    folder), the neighbours the base proposes, and the target's and the reference's passes over them."""
    from lmaudit.models.load import load_causal_lm
    from lmaudit.signals.neighbours import neighbour_texts

    public = load_corpus(demo / "data" / "reference_train.parquet")["text"].tolist()
    recipe = finetune_recipes(DEMO_SIZES["quick"].epochs, demo / "models" / "base", 0)["full"]
    timings = []
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        train_self_prompt_reference(ModelSource(str(demo / "models" / "full")), demo / "models" / "base", public,
                                    Path(scratch) / "reference", recipe, 0)
        timings.append({"pass": f"self-prompt reference: the target continues {len(public)} public notes, the base "
                                "is fine-tuned on them (SPV-MIA)", "samples": len(public),
                        "seconds": f"{time.perf_counter() - started:.1f}"})
        started = time.perf_counter()
        base = load_causal_lm(demo / "models" / "base")
        neighbours = neighbour_texts(base.model, base.tokenizer, texts, ids, PERTURBATIONS, PERTURBED_WORDS, 0)
        timings.append({"pass": f"{PERTURBATIONS} neighbours per text, {PERTURBED_WORDS} words each proposed by the base "
                                "(SPV-MIA, neighbourhood)", "samples": len(ids),
                        "seconds": f"{time.perf_counter() - started:.1f}"})
        flat = [text for per_text in neighbours for text in per_text]
        flat_ids = [i for i in ids for _ in range(PERTURBATIONS)]
        for name, model in (("target", demo / "models" / "full"), ("self-prompt reference", Path(scratch) / "reference")):
            with tempfile.TemporaryDirectory() as store:
                started = time.perf_counter()
                model_signal(model, flat_ids, flat, SignalSettings(signal="clm_loss"), Scoring(Path(store)))
                timings.append({"pass": f"{name} on the neighbours (SPV-MIA; the target's also neighbourhood)",
                                "samples": len(flat), "seconds": f"{time.perf_counter() - started:.1f}"})
    return timings


def matched_lora(demo: Path, files: dict) -> tuple[dict, dict]:
    """The LoRA fine-tune retrained with a checkpoint every 5 epochs (the demo's recipe and seed, on the same texts);
    the checkpoint whose population NLL is closest to the full fine-tune's, audited against the
    base: (each checkpoint's population NLL by epoch, that audit's report)."""
    from dataclasses import replace

    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.studies.setup import train_language_model_unless_done

    recipe = finetune_recipes(DEMO_SIZES["quick"].epochs, demo / "models" / "base", 0)["lora"]
    recipe = replace(recipe, checkpoints=tuple(range(5, recipe.epochs, 5)))
    folder = demo / "models" / "lora-curve"
    trained = pd.concat([load_corpus(files[role], role) for role in ("member", "calibration_member")])["text"].tolist()
    train_language_model_unless_done("clm", trained, folder, recipe, "LoRA with checkpoints")
    population = load_corpus(files["population"], "population")
    target = json.loads((demo / "finetune.json").read_text())["full"]["population_nll"]
    nll = {}
    for epoch in (*recipe.checkpoints, recipe.epochs):
        adapter = folder if epoch == recipe.epochs else checkpoint_folder(folder, epoch)
        with tempfile.TemporaryDirectory() as store:
            frame = model_signal(ModelSource(str(demo / "models" / "base"), str(adapter)), population["sample_id"].tolist(),
                                 population["text"].tolist(), SignalSettings(signal="clm_loss"), Scoring(Path(store)))
        nll[epoch] = float(frame["value"].mean())
    epoch = min(nll, key=lambda e: abs(nll[e] - target))
    adapter = folder if epoch == recipe.epochs else checkpoint_folder(folder, epoch)
    public = load_corpus(files["reference_train"])["text"].tolist()
    full = finetune_recipes(DEMO_SIZES["quick"].epochs, demo / "models" / "base", 0)["full"]
    train_self_prompt_reference(ModelSource(str(demo / "models" / "base"), str(adapter)), demo / "models" / "base", public,
                                self_prompt_folder(adapter), full, 0)
    out = Path(tempfile.mkdtemp()) / "lora-matched"
    config = finetune_audit_config("lora", demo / "models" / "base", adapter, files, out, 0, 500)
    return nll, {"epoch": epoch, "report": audit(config).report}


def attack_rows(report: dict, level: str) -> dict[str, dict]:
    """Per attack at `level` (all data): AUC, and TPR at 1% FPR with its counts and interval."""
    return {row["attack"]: row for row in strongest_at_low_fpr(report, level)}


def cell(row: dict) -> str:
    """'AUC 0.872; TPR 0.057 [0.035, 0.087] (20/0)', TP/FP; '*' where too few population units resolve 1% FPR."""
    return (f"AUC {row['auc']:.3f}; TPR {row['tpr']:.3f}{'*' if row['limited'] else ''} [{row['tpr_ci'][0]:.3f}, "
            f"{row['tpr_ci'][1]:.3f}] ({row['tp']}/{row['fp']})")


def papers_regime(work: Path, base_epochs: int, out: Path | None) -> None:
    """The papers' regime's tables (finetune_regime.py), into `out`'s section."""
    from finetune_regime import run_papers_regime

    result = run_papers_regime(work, base_epochs)
    utility = "; ".join(f"{name}: {u['population_nll']:.3f} (base {u['base_population_nll']:.3f})"
                        for name, u in result["utility"].items() if name != "counts")
    text = (f"{machine_line()}\n\nNotes per role: {result['utility']['counts']}. Population NLL, nats per token: "
            f"{utility}.\n\n{markdown_table(result['table'])}\n{markdown_table(result['comparison'])}")
    publish(text, out, "Fine-tune attacks in the papers' regime (benchmarks/finetune_attacks.py --regime papers)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", type=Path, help="A finished `lmaudit demo --suite finetune` folder.")
    parser.add_argument("--regime", choices=("suite", "papers"), default="suite")
    parser.add_argument("--work", type=Path, default=Path("runs/finetune-regime"), help="--regime papers: its folder.")
    parser.add_argument("--base-epochs", type=int, default=100, help="--regime papers: the base's epochs.")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.regime == "papers":
        papers_regime(args.work, args.base_epochs, args.out)
        return
    if args.demo is None:
        parser.error("--demo is required with --regime suite")
    timings = timed_passes(args.demo)
    files = {path.stem: path for path in (args.demo / "data").glob("*.parquet")}
    files["other-hospital"] = files.pop("nonmember-other-hospital")
    table, comparison = [], []
    for name in ("full", "lora"):
        for parity in (False, True):
            out = Path(tempfile.mkdtemp()) / f"{name}-{parity}"
            cache = args.demo / ("cache" if name == "full" else "lora/cache")  # the demo's own stores: nothing recomputed
            config = finetune_audit_config(name, args.demo / "models" / "base", args.demo / "models" / name, files, out,
                                           0, 500).model_copy(update={"cache_dir": str(cache),
                                                                      "attacks": AttackSettings(ez_mia_paper_parity=parity)})
            report = audit(config).report
            sample = attack_rows(report, "sample")
            if parity:
                table.append({"fine-tune": name, "attack": "ez_mia (the authors' zeros)", "result": cell(sample["ez_mia"])})
                continue
            table += [{"fine-tune": name, "attack": attack, "result": cell(row)}
                      for attack, row in sorted(sample.items(), key=lambda item: -item[1]["tpr"])]
            patient = attack_rows(report, "group")
            table.append({"fine-tune": name, "attack": "user_inference (patient level)",
                          "result": cell(patient["user_inference"])})
            new = max((a for a in NEW_ATTACKS if a in sample), key=lambda a: sample[a]["tpr"])
            old = max((a for a in sample if a not in NEW_ATTACKS), key=lambda a: sample[a]["tpr"])
            comparison.append({"fine-tune": name, "strongest new at 1% FPR": f"{new} {sample[new]['tpr']:.3f}",
                               "strongest other": f"{old} {sample[old]['tpr']:.3f}",
                               "ratio": f"{sample[new]['tpr'] / max(sample[old]['tpr'], 1e-12):.2f}"})
    nll, matched = matched_lora(args.demo, files)
    lora_rows = attack_rows(matched["report"], "sample")
    table += [{"fine-tune": f"lora, epoch {matched['epoch']} (population NLL {nll[matched['epoch']]:.3f})",
               "attack": attack, "result": cell(row)}
              for attack, row in sorted(lora_rows.items(), key=lambda item: -item[1]["tpr"])]
    table.append({"fine-tune": f"lora, epoch {matched['epoch']}", "attack": "user_inference (patient level)",
                  "result": cell(attack_rows(matched["report"], "group")["user_inference"])})
    utility = json.loads((args.demo / "finetune.json").read_text())
    text = (f"{machine_line()}\n\nPasses (seconds, one at a time, fresh store):\n\n{markdown_table(timings)}\n"
            f"Utility, the population's mean NLL (nats per token): base {utility['full']['base_population_nll']:.3f}, "
            f"full fine-tune {utility['full']['population_nll']:.3f}, LoRA {utility['lora']['population_nll']:.3f}; "
            f"the LoRA run by epoch: {', '.join(f'{e}: {v:.3f}' for e, v in nll.items())} (the epoch closest to the "
            f"full fine-tune's is audited at matched utility below).\n\n"
            f"{markdown_table(table)}\n{markdown_table(comparison)}")
    publish(text, args.out, "Attacks on fine-tuned models (benchmarks/finetune_attacks.py)")


if __name__ == "__main__":
    main()
