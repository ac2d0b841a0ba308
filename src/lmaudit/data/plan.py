"""Planning an audit before training (`lmaudit split`): the training file split at random, by whole groups, into the
members to train on, the non-members to hold out, and a population to calibrate thresholds, all drawn from one
distribution.

Why before: members and non-members collected at different times or places differ in ways a classifier that never
sees the model can spot (Das, Zhang and Tramèr 2024; Duan et al. 2024; Meeus et al.'s SoK), and an audit's AUC then
measures the collection, not the model. A random split of one file, made before training, is the only way to
non-members that differ from the members by chance alone.

The output folder holds train.parquet (train on these, and nothing from the other two), nonmembers.parquet,
population.parquet, and split.json (the seed, the fractions, the counts, and the source file's name and SHA-256; no
text).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from lmaudit import __version__
from lmaudit.atomic import staged
from lmaudit.data.columns import DEFAULT_COLUMNS, ColumnNames
from lmaudit.data.corpus import load_corpus, write_table
from lmaudit.data.roles import DEFAULT_HELD_OUT, MEMBER, NONMEMBER, POPULATION, split_groups
from lmaudit.errors import InputError

PLAN_FILES = {MEMBER: "train.parquet", NONMEMBER: "nonmembers.parquet", POPULATION: "population.parquet"}
MANIFEST = "split.json"


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def plan_split(source: str | Path, out: str | Path, nonmembers: float = DEFAULT_HELD_OUT,
               population: float = DEFAULT_HELD_OUT, seed: int = 0, names: ColumnNames = DEFAULT_COLUMNS) -> dict:
    """Split `source` (its columns named as `names` says) by whole groups (a row without group_id is a group of its own)
    into the members to train on, the non-members and the population, in the given fractions of the groups (seeded),
    and write the plan's folder `out` (all or nothing; an existing folder is refused; its files use lmaudit's column
    names). Returns split.json's document."""
    source, out = Path(source), Path(out)
    if out.exists():
        raise InputError(f"{out}: already exists; a split decides which samples a model may train on, so lmaudit never "
                         f"overwrites one; give a new --out")
    if not (0 < nonmembers < 1 and 0 < population < 1 and nonmembers + population < 1):
        raise InputError(f"--nonmembers {nonmembers:g} and --population {population:g}: each a fraction above 0, "
                         f"together below 1 (the rest are the members)")
    corpus = load_corpus(source, names=names)
    groups = corpus["group_id"].fillna(corpus["sample_id"])
    fractions = {MEMBER: 1 - nonmembers - population, NONMEMBER: nonmembers, POPULATION: population}
    if groups.nunique() < 2 * len(fractions):
        raise InputError(f"{source}: {groups.nunique()} groups (patients, users; a row without group_id counts as "
                         f"one); a split needs at least {2 * len(fractions)}, two per role")
    roles = groups.map(split_groups(groups.tolist(), fractions, seed))
    counts = {role: {"samples": int((roles == role).sum()), "groups": int(groups[roles == role].nunique())}
              for role in fractions}
    empty = [role for role, count in counts.items() if count["groups"] == 0]
    if empty:
        raise InputError(f"{source}: no group falls to the {empty[0]}s at these fractions; give larger fractions or "
                         "a file with more groups")
    manifest = {"kind": "audit_split", "lmaudit_version": __version__,
                "created": datetime.now(UTC).isoformat(timespec="seconds"), "source": source.name,
                "source_sha256": file_sha256(source), "seed": seed, "fractions": fractions, "counts": counts,
                "files": PLAN_FILES}
    columns = [column for column in ("sample_id", "group_id", "subgroup_id", "text", "label")
               if corpus[column].notna().any() or column in ("sample_id", "text")]
    with staged(out) as (folder,):
        folder.mkdir(parents=True)
        for role, name in PLAN_FILES.items():
            write_table(pd.DataFrame(corpus.loc[roles == role, columns]), folder / name)
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest
