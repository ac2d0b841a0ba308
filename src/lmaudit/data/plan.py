"""Planning an audit before training (`lmaudit split`): the training file split at random, by whole groups, into the
members to train on, the non-members to hold out, and a population to calibrate thresholds, all drawn from one
distribution.

Why before: members and non-members collected at different times or places differ in ways a classifier that never
sees the model can spot (Das, Zhang and Tramèr 2024; Duan et al. 2024; Meeus et al.'s SoK), and an audit's AUC then
measures the collection, not the model. A random split of one file, made before training, is the only way to
non-members that differ from the members by chance alone.

The output folder holds train.parquet (train on these, and nothing from the other two), nonmembers.parquet,
population.parquet, and split.json (the seed, the fractions, the counts, the rows without a group id and how they were
drawn, the warnings, and the source file's name and SHA-256; no text).
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
from lmaudit.data.roles import DEFAULT_HELD_OUT, MEMBER, NONMEMBER, POPULATION, UNGROUPED, same_texts, split_groups
from lmaudit.data.units import drawn_units, own_units
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


def ungrouped_rows(corpus: pd.DataFrame, source: Path, ungrouped: str) -> tuple[dict, list[str]]:
    """split.json's record of the rows without a group id, and the warnings about them; InputError where some rows have
    one and others not, unless `ungrouped` is 'own-group' (a row drawn apart from its patient's other rows would put
    the patient in two roles)."""
    missing = corpus["group_id"].isna()
    count, total = int(missing.sum()), len(corpus)
    if count == 0:
        return {"rows": 0, "drawn_as": None}, []
    if count == total:
        by = ("with the rows of its admission (subgroup_id) and of its exact text" if corpus["subgroup_id"].notna().any()
              else "alone, or with the rows of its exact text")
        return {"rows": count, "drawn_as": "rows"}, [
            f"no row of {source} has a group_id: every row was drawn {by}, so the rows of one patient or user land in "
            "different files and the audit counts them as independent; give the file a group_id column (or name "
            "yours with --group-column)"]
    if ungrouped == "refuse":
        first = corpus.loc[missing.idxmax(), "row"]
        raise InputError(f"{source}, row {first}: no group_id, and {count} of the {total} rows lack one while the "
                         "others have it; a row without its patient's id would be drawn apart from the patient's other "
                         "rows, which may land in another file: fill in the group_id of every row, or pass --ungrouped "
                         "own-group to draw each such row as a group of its own (recorded in split.json)")
    return {"rows": count, "drawn_as": "own-group"}, [
        f"{count} of the {total} rows of {source} have no group_id and were drawn as groups of their own "
        "(--ungrouped own-group), each with the rows that share its admission or its exact text: one that belongs to "
        "a patient with other rows may land in another file than they, and the audit counts it as independent"]


def role_counts(corpus: pd.DataFrame, roles: pd.Series, units: pd.Series, fractions: dict) -> dict:
    """split.json's counts per role: samples, units drawn (groups, a row without a group id counting as its unit's),
    and rows without a group id."""
    return {role: {"samples": int((roles == role).sum()), "groups": int(units[roles == role].nunique()),
                   "rows_without_group_id": int(corpus.loc[roles == role, "group_id"].isna().sum())}
            for role in fractions}


def shared_texts(corpus: pd.DataFrame, roles: pd.Series) -> int:
    """How many texts land in two of the split's files: only texts that two writers hold (boilerplate), which the audit
    accepts in two roles; the units keep every other text in one file."""
    return int(roles.groupby(same_texts(corpus["text"])).nunique().gt(1).sum())


def plan_split(source: str | Path, out: str | Path, nonmembers: float = DEFAULT_HELD_OUT,
               population: float = DEFAULT_HELD_OUT, seed: int = 0, names: ColumnNames = DEFAULT_COLUMNS,
               ungrouped: str = "refuse") -> dict:
    """Split `source` (its columns named as `names` says) by whole units (`data/units.py:drawn_units`: each group, and
    rows without a group id as `ungrouped` says, 'refuse' or 'own-group') into the members to train on, the
    non-members and the population, in the given fractions of the units (seeded), and write the plan's folder `out`
    (all or nothing; an existing folder is refused; its files use lmaudit's column names). Returns split.json's
    document, whose `warnings` the caller shows."""
    source, out = Path(source), Path(out)
    if out.exists():
        raise InputError(f"{out}: already exists; a split decides which samples a model may train on, so lmaudit never "
                         f"overwrites one; give a new --out")
    if not (0 < nonmembers < 1 and 0 < population < 1 and nonmembers + population < 1):
        raise InputError(f"--nonmembers {nonmembers:g} and --population {population:g}: each a fraction above 0, "
                         f"together below 1 (the rest are the members)")
    if ungrouped not in UNGROUPED:
        raise InputError(f"--ungrouped {ungrouped}: use one of {', '.join(UNGROUPED)}")
    corpus = load_corpus(source, names=names)
    record, warnings = ungrouped_rows(corpus, source, ungrouped)
    units = drawn_units(corpus)
    fractions = {MEMBER: 1 - nonmembers - population, NONMEMBER: nonmembers, POPULATION: population}
    if units.nunique() < 2 * len(fractions):
        raise InputError(f"{source}: {units.nunique()} groups (patients, users; a row without group_id counts as "
                         f"one); a split needs at least {2 * len(fractions)}, two per role")
    roles = units.map(split_groups(units.tolist(), fractions, seed))
    counts = role_counts(corpus, roles, units, fractions)
    empty = [role for role, count in counts.items() if count["groups"] == 0]
    if empty:
        raise InputError(f"{source}: no group falls to the {empty[0]}s at these fractions; give larger fractions or "
                         "a file with more groups")
    record["joined"] = int((units != own_units(corpus))[corpus["group_id"].isna()].sum())
    manifest = {"kind": "audit_split", "lmaudit_version": __version__,
                "created": datetime.now(UTC).isoformat(timespec="seconds"), "source": source.name,
                "source_sha256": file_sha256(source), "seed": seed, "fractions": fractions, "counts": counts,
                "ungrouped": record, "texts_in_two_files": shared_texts(corpus, roles), "warnings": warnings,
                "files": PLAN_FILES}
    write_plan(out, corpus, roles, manifest)
    return manifest


def write_plan(out: Path, corpus: pd.DataFrame, roles: pd.Series, manifest: dict) -> None:
    """The plan's folder, all or nothing: one file per role (the columns the corpus has) and split.json."""
    columns = [column for column in ("sample_id", "group_id", "subgroup_id", "text", "label")
               if corpus[column].notna().any() or column in ("sample_id", "text")]
    with staged(out) as (folder,):
        folder.mkdir(parents=True)
        for role, name in PLAN_FILES.items():
            write_table(pd.DataFrame(corpus.loc[roles == role, columns]), folder / name)
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
