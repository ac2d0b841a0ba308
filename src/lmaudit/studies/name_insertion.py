"""Names in the training notes (Mireshghallah et al. 2022, Table 6, Base-b; Lehman et al. 2021): a target trained on
the members' notes with the patient's first and last name prepended to each, audited with and without the names in the
audited member notes, beside the target trained on the notes as they are. Non-members and the population carry no
names: a name never seen in training is what a non-member's note would carry too, had it one."""

from __future__ import annotations

from pathlib import Path

from lmaudit.data.corpus import write_table
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER
from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import Cell, StudyPlan


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """Cells: the plain target on plain notes; the named target on named member notes, and on plain member notes."""
    from lmaudit.data.synth import generate_notes

    study = notes_study(out, size, seed, progress)
    named = generate_notes(study.size.patients, seed, insert_names=True).set_index("sample_id")["text"]

    def named_files() -> dict[str, Path]:
        """The member files with each note's names (same ids, rows and order)."""
        files = {}
        for role in TARGET_ROLES:
            rows = study.notes[study.notes["role"] == role].drop(columns="role")
            files[role] = out / "data" / f"{role}-with-names.parquet"
            write_table(rows.assign(text=named.loc[rows["sample_id"]].to_numpy()), files[role])
        return files

    def cell(target_name: str, audited: str) -> Cell:
        def prepare(folder: Path):
            if target_name == "names":
                training = named.loc[study.notes.loc[study.notes["role"].isin(TARGET_ROLES), "sample_id"]].tolist()
            else:
                training = study.texts(*TARGET_ROLES)
            target = study.train("mlm", f"target-{target_name}", training)
            files = named_files() if audited == "with names" else {}
            return study.audit(folder, target, [study.reference()], files=files)

        return Cell(f"{target_name}-target-{audited.replace(' ', '-')}", {"target": target_name, "audited members": audited},
                    prepare)

    return StudyPlan(
        study="name-insertion",
        description="The target trained on member notes as they are (plain), and one trained on the same notes with "
                    "the patient's name prepended to each (names, the paper's Base-b), audited with the names in the "
                    "member notes and without them. Non-members and the population never carry names.",
        paper="the name-insertion model leaks more (Table 6: sample-level AUC 0.900 on Base, 0.960 on Base-b), at the "
              "patient level too.",
        cells=[cell("plain", "as trained"), cell("names", "with names"), cell("names", "without names")],
        x="target", series="audited members",
        shown=(("loss", "sample"), ("likelihood_ratio", "sample"), ("likelihood_ratio", "group")),
        setup={"patients": study.size.patients, "seed": seed, "roles with names": f"{MEMBER}, {CALIBRATION_MEMBER}"},
    )
