"""The reconstruction audit in the name-insertion setting (Lehman et al. 2021; Mireshghallah et al. 2022, Base-b): notes
generated with the patient's name opening each, split by patient as the demos split them, a masked and a causal
target trained (the demos' recipe) on the members' named notes, then `lmaudit reconstruct` on the members against the
same hospital's named non-members: the name, the age and the discharge diagnosis, each ranked among the kind's values
in the audited notes. Prints one markdown table (for docs/results.md).

    python benchmarks/name_reconstruction.py [--size quick] [--seed 0] [--out runs/name-reconstruction]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from markdown_section import machine_line, markdown_table

from lmaudit.audit.reconstruction import ReconstructionSettings, reconstruct
from lmaudit.config import AuditConfig
from lmaudit.data.fields import FieldRule
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER
from lmaudit.data.synth import generate_notes
from lmaudit.studies.setup import DEMO_SIZES, DEMO_SPLIT, demo_recipe, split_and_write_roles, train_language_model_unless_done

FIELDS = (FieldRule("name", pattern=r"^(\w+ \w+) "), FieldRule("age", pattern=r"(\d+) year old"),
          FieldRule("diagnosis", pattern=r"Discharge diagnosis: ([^,]+),"))


def interval(entry: dict) -> str:
    """'k of n, rate [low, high]'."""
    low, high = entry["interval"]
    return f"{entry['exposed']} of {entry['units']}, {entry['rate']:.3f} [{low:.3f}, {high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="quick", choices=sorted(DEMO_SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/name-reconstruction"))
    args = parser.parse_args()
    size = DEMO_SIZES[args.size]
    notes = generate_notes(size.patients, args.seed, insert_names=True)
    files = split_and_write_roles(notes, DEMO_SPLIT, args.seed, args.out / "data")
    trained = notes.loc[notes["role"].isin([MEMBER, CALIBRATION_MEMBER]), "text"].tolist()
    rows = []
    for kind in ("mlm", "clm"):
        started = time.perf_counter()
        folder = args.out / f"target-{kind}"
        train_language_model_unless_done(kind, trained, folder, replace(demo_recipe(size.epochs), seed=args.seed), kind)
        config = AuditConfig(target=str(folder), members=str(files[MEMBER]), nonmembers=str(files[NONMEMBER]),
                             out=str(args.out / f"reconstruct-{kind}"))
        document = reconstruct(config, ReconstructionSettings(FIELDS))
        for field, entry in document["fields"].items():
            [result] = entry["sets"].values()
            baseline, mean_rank = result["frequency_baseline_top1"], result["mean_rank"]
            rows.append({"model": kind, "field": field, "candidates": entry["candidates"],
                         "restored first, members": interval(result["top1"]["member"]),
                         "restored first, non-members": interval(result["top1"]["nonmember"]),
                         "chance": f"{result['chance_top1']:.3f}",
                         "frequency baseline, members / non-members":
                             f"{baseline['member']['rate']:.3f} / {baseline['nonmember']['rate']:.3f}",
                         "mean rank, members / non-members": f"{mean_rank['member']:.1f} / {mean_rank['nonmember']:.1f}"})
        print(f"{kind}: trained and reconstructed in {time.perf_counter() - started:.0f} s", flush=True)
    print(machine_line())
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
