"""Unlearning test beds for `lmaudit erasure` (docs/results.md, "Erasure test beds"). A tiny causal LM is trained by
lmaudit on generated notes (the demo's recipe); one patient of at least 10 notes is erased; a reference is trained on
other patients of another hospital (the fine-tune's public base). Then the erasure audit, with its default probes
(as saved, rounded to 8 and 4 bits, relearnt), reads each way of erasing:

* none: the model before erasure, unchanged (it must read "still detectable");
* retrain: retrained without the patient, as the before model was trained (the gold standard: "not detected");
* ascent-K: gradient ascent on the patient's notes for K steps (the curve from detectable to not, and where
  over-unlearning becomes detectable);
* suppress-K: gradient difference for K steps (ascent on the patient's notes, descent on the retained ones), an
  unlearning that keeps the model's use while pushing the patient's text down;
* output-K: the same with only the last block and the final layer norm moving: the text pushed down at the output
  while the layers below keep it, an unlearning that only suppresses output, which a probe must catch.

Each seed draws new notes, a new patient and new models. Beside them, the cost: the erasure audit's seconds against
one `lmaudit audit` of the after model with the same reference on the same texts, both from an empty signal store.

    python benchmarks/erasure.py [--seeds 3] [--first-seed 0] [--beds none,retrain,ascent,suppress,output]
        [--tokenizer retain|trained] [--patients 80] [--epochs 60] [--work runs/erasure] [--out docs/results.md]

Every model of a seed shares one tokenizer, fit by default on the retained and public notes (never the erased
patient's), as a fine-tune's comes from its base; `--tokenizer trained` fits it on the before model's training text,
as a model trained from scratch does, which the retrained model then keeps.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
from markdown_section import machine_line, markdown_table, publish

from lmaudit.audit.erasure import audit_erasure
from lmaudit.audit.erasure_settings import ErasureSettings
from lmaudit.audit.run import run_audit
from lmaudit.config import load_config
from lmaudit.data.corpus import write_table
from lmaudit.data.synth import generate_notes
from lmaudit.studies.setup import demo_recipe, train_language_model_unless_done

ASCENT_STEPS = (2, 8, 16, 32, 128)
SUPPRESS_STEPS = (8, 16, 24, 32, 64)
OUTPUT_SIDE_STEPS = (32, 64, 128)
LEARNING_RATE = 1e-4  # AdamW on the trained tiny model, for ascent and difference alike
HOLDOUT, RETAIN = 39, 30  # patients


def write_sets(patients: int, seed: int, folder: Path) -> dict[str, Path]:
    """forget (one patient of at least 10 notes), holdout (HOLDOUT patients) and retain (the others) files, and the
    reference's notes of other patients (another hospital's ids)."""
    notes = generate_notes(patients, seed)
    counts = notes.groupby("group_id").size().sample(frac=1, random_state=seed)
    forget = counts[counts >= 10].index[0]
    others = [patient for patient in counts.index if patient != forget]
    sets = {"forget": [forget], "holdout": others[:HOLDOUT], "retain": others[HOLDOUT:HOLDOUT + RETAIN]}
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, chosen in sets.items():
        files[name] = folder / f"{name}.parquet"
        write_table(notes[notes["group_id"].isin(chosen)], files[name])
    files["public"] = folder / "public.parquet"
    write_table(generate_notes(RETAIN, seed + 7919, id_prefix="R-"), files["public"])
    return files


def texts(path: Path) -> list[str]:
    return pd.read_parquet(path)["text"].tolist()


def unlearn(before: Path, forget: list[str], retain: list[str] | None, steps: int, out: Path,
            output_side: bool = False) -> Path:
    """The before model after `steps` AdamW steps that raise its loss on the forget texts (all in one batch), and, with
    `retain`, lower it on as many retained texts drawn in turn (gradient difference); with `output_side`, only the last
    block and the final layer norm move (the text is pushed down at the output, the layers below keep it); saved to
    `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (out / "model.safetensors").is_file():  # made by an earlier run of the same seed
        return out
    model = AutoModelForCausalLM.from_pretrained(before, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(before, local_files_only=True)
    last = f"transformer.h.{model.config.n_layer - 1}."
    moving = [parameter for name, parameter in model.named_parameters()
              if not output_side or name.startswith((last, "transformer.ln_f"))]
    optimiser = torch.optim.AdamW(moving, lr=LEARNING_RATE)

    def loss_of(batch: list[str]):
        encoded = tokenizer(batch, truncation=True, max_length=128, padding=True, return_tensors="pt")
        labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
        return model(**encoded, labels=labels).loss

    model.train()
    for step in range(steps):
        loss = -loss_of(forget)
        if retain:
            start = step * len(forget) % len(retain)
            loss = loss + loss_of((retain * 2)[start:start + len(forget)])
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def emptied(out: Path) -> Path:
    """`out`, its signal store and relearnt model (beside it) removed: an audit from nothing stored."""
    for folder in (out, out.parent / f"{out.name}.signals", out.parent / f"{out.name}.relearned"):
        shutil.rmtree(folder, ignore_errors=True)
    return out


def erasure_of(files: dict, before: Path, after: Path, reference: Path, out: Path) -> tuple[dict, float]:
    """The erasure audit's document and its seconds (an empty signal store)."""
    emptied(out)
    config = load_config(None, {"target": str(after), "reference": [str(reference)], "members": str(files["forget"]),
                                "nonmembers": {"holdout": str(files["holdout"]), "retain": str(files["retain"])},
                                "out": str(out)})
    settings = ErasureSettings(before=str(before), after=str(after), forget=str(files["forget"]),
                               holdout=str(files["holdout"]), retain=str(files["retain"]))
    started = time.perf_counter()
    document = audit_erasure(config, settings, overwrite=True)
    return document, time.perf_counter() - started


def audit_seconds(files: dict, target: Path, reference: Path, out: Path) -> float:
    """Seconds of one `lmaudit audit` of `target` with the reference: members forget + retain, non-members holdout
    (an empty signal store)."""
    emptied(out)
    members = out.parent / f"{out.name}-members.parquet"
    write_table(pd.concat([pd.read_parquet(files["forget"]), pd.read_parquet(files["retain"])]), members)
    config = load_config(None, {"target": str(target), "reference": [str(reference)], "members": str(members),
                                "nonmembers": str(files["holdout"]), "out": str(out)})
    started = time.perf_counter()
    run_audit(config, overwrite=True)
    return time.perf_counter() - started


def row(seed: int, bed: str, document: dict, seconds: float) -> dict:
    pooled, probes = document["findings"][0], {probe["score"]: probe for probe in document["probes"]}
    return {"seed": seed, "bed": bed, "verdict": pooled["finding"], "rests on": ", ".join(pooled["rests_on"]) or "-",
            "AUC as saved": f"{probes['after']['auc']:.3f}", "AUC relearnt": f"{probes['after_relearned']['auc']:.3f}",
            "AUC 4 bits": f"{probes['after_rtn4']['auc']:.3f}",
            "p (family)": f"{min(pooled['family_p_values'].values()):.3g}",
            "found before": "yes" if pooled["found_before"] else "no",
            "change p": f"{document['change']['p_higher']:.3g}",
            "holdout loss": f"{document['utility']['before']:.2f} -> {document['utility']['after']:.2f}",
            "seconds": f"{seconds:.0f}"}


def shared_tokenizer(files: dict, folder: Path, fitted_on: str) -> Path:
    """The tokenizer every model of a seed shares, saved in `folder`: fit on the retained patients' and the public
    notes (`fitted_on` 'retain'), never on the erased patient's, as a fine-tune's tokenizer comes from its base; or on
    the before model's training text, forget included ('trained'), as a model trained from scratch fits its own."""
    from lmaudit.models.tokenizer import train_tokenizer

    if not (folder / "tokenizer_config.json").is_file():
        texts_fitted = texts(files["retain"]) + (texts(files["public"]) if fitted_on == "retain"
                                                 else texts(files["forget"]))
        train_tokenizer(texts_fitted).save_pretrained(folder)
    return folder


def beds(seed: int, patients: int, epochs: int, work: Path, chosen: tuple[str, ...],
         fitted_on: str) -> tuple[list[dict], float]:
    """The `chosen` beds of one seed (those starting with one of its names), and the erasure audit's cost against one
    audit (the retrain bed's models)."""
    folder = work / f"seed-{seed}"
    files = write_sets(patients, seed, folder / "data")
    tokenizer = shared_tokenizer(files, folder / f"tokenizer-{fitted_on}", fitted_on)
    recipe = demo_recipe(epochs)
    before, retrained, reference = (folder / f"{name}-{fitted_on}" for name in ("before", "retrained", "reference"))
    for name, data, model, offset in (("before", texts(files["forget"]) + texts(files["retain"]), before, 0),
                                      ("retrained", texts(files["retain"]), retrained, 0),
                                      ("reference", texts(files["public"]), reference, 1)):
        train_language_model_unless_done("clm", data, model, replace(recipe, seed=seed + offset,
                                                                     tokenizer_dir=str(tokenizer)), name)
    afters = {"none": before, "retrain": retrained}
    for steps in ASCENT_STEPS:
        afters[f"ascent-{steps}"] = folder / f"ascent-{steps}-{fitted_on}"
    for steps in SUPPRESS_STEPS:
        afters[f"suppress-{steps}"] = folder / f"suppress-{steps}-{fitted_on}"
    for steps in OUTPUT_SIDE_STEPS:
        afters[f"output-{steps}"] = folder / f"output-{steps}-{fitted_on}"
    rows, ratio = [], float("nan")
    for bed, after in afters.items():
        if not bed.startswith(chosen):
            continue
        if bed.startswith(("ascent", "suppress", "output")):
            steps = int(bed.split("-")[1])
            unlearn(before, texts(files["forget"]), None if bed.startswith("ascent") else texts(files["retain"]),
                    steps, after, output_side=bed.startswith("output"))
        document, seconds = erasure_of(files, before, after, reference, folder / f"erasure-{bed}-{fitted_on}")
        rows.append({"tokenizer fit on": fitted_on, **row(seed, bed, document, seconds)})
        if bed == "retrain":
            ratio = seconds / audit_seconds(files, after, reference, folder / f"audit-retrain-{fitted_on}")
        print(rows[-1], flush=True)
    return rows, ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--patients", type=int, default=80, help="patients generated per seed")
    parser.add_argument("--epochs", type=int, default=60, help="epochs of the before, retrained and reference models")
    parser.add_argument("--beds", default="none,retrain,ascent,suppress,output",
                        help="comma-separated beds (name prefixes)")
    parser.add_argument("--tokenizer", choices=["retain", "trained"], default="retain",
                        help="what the shared tokenizer is fit on (shared_tokenizer)")
    parser.add_argument("--work", type=Path, default=Path("runs/erasure"))
    parser.add_argument("--out", type=Path, help="markdown file whose section to replace (docs/results.md)")
    parser.add_argument("--section", default="erasure-test-beds")
    arguments = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    started, rows, ratios = time.time(), [], []
    for seed in range(arguments.first_seed, arguments.first_seed + arguments.seeds):
        seed_rows, ratio = beds(seed, arguments.patients, arguments.epochs, arguments.work,
                                tuple(arguments.beds.split(",")), arguments.tokenizer)
        rows += seed_rows
        ratios.append(ratio)
    command = (f"python benchmarks/erasure.py --seeds {arguments.seeds} --first-seed {arguments.first_seed} --beds "
               f"{arguments.beds} --tokenizer {arguments.tokenizer} --patients {arguments.patients} --epochs "
               f"{arguments.epochs}")
    header = (f"`{command}` at {commit} ({machine_line()} {time.time() - started:.0f} s in all). The erasure audit "
              f"took {', '.join(f'{r:.2f}' for r in ratios)} times one `lmaudit audit` of the retrained model with the "
              "same reference on the same texts (forget and retain as members, holdout as non-members), each from an "
              "empty signal store.\n\n")
    publish(header + markdown_table(rows), arguments.out, arguments.section)


if __name__ == "__main__":
    main()
