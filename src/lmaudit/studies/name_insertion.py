"""Names in the training notes (Mireshghallah et al. 2022, Table 6, Base-b; Lehman et al. 2021): a target trained on
the members' notes with the patient's first and last name prepended to each, audited with and without the names in the
audited member notes, beside the target trained on the notes as they are. Non-members and the population carry no
names: a name never seen in training is what a non-member's note would carry too, had it one.

Every target is audited after epochs spaced on a log scale as well as at the end: whether the loss attack falls with
names (the paper) or rises depends on whether the target has learnt the names yet. The last epoch's cells are analysed
on the paper's short and long samples apart (its Tables 9-10, column Base-b)."""

from __future__ import annotations

from pathlib import Path

from lmaudit.data.corpus import write_table
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER
from lmaudit.studies.epochs import checkpoint_epochs
from lmaudit.studies.length_split import PAPER_LENGTH_BOUNDS, short_and_long
from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import Cell, StudyPlan

AUDITS = (("plain", "as trained"), ("names", "with names"), ("names", "without names"))


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """Cells: the plain target on plain notes; the named target on named member notes, and on plain member notes;
    each after every checkpoint epoch (the last epoch's cells named without one)."""
    from lmaudit.data.synth import generate_notes
    from lmaudit.models.trained import checkpoint_folder

    study = notes_study(out, size, seed, progress, length_bounds=PAPER_LENGTH_BOUNDS)
    epochs = checkpoint_epochs(study.size.epochs)
    tabulate_lengths = short_and_long(out)
    named = generate_notes(study.size.patients, seed, insert_names=True).set_index("sample_id")["text"]

    def named_files() -> dict[str, Path]:
        """The member files with each note's names (same ids, rows and order)."""
        files = {}
        for role in TARGET_ROLES:
            rows = study.notes[study.notes["role"] == role].drop(columns="role")
            files[role] = out / "data" / f"{role}-with-names.parquet"
            write_table(rows.assign(text=named.loc[rows["sample_id"]].to_numpy()), files[role])
        return files

    def cell(target_name: str, audited: str, epoch: int) -> Cell:
        def prepare(folder: Path):
            if target_name == "names":
                training = named.loc[study.notes.loc[study.notes["role"].isin(TARGET_ROLES), "sample_id"]].tolist()
            else:
                training = study.texts(*TARGET_ROLES)
            target = study.train("mlm", f"target-{target_name}", training, checkpoints=tuple(epochs))
            model = target if epoch == study.size.epochs else checkpoint_folder(target, epoch)
            files = named_files() if audited == "with names" else {}
            return study.audit(folder, model, [study.reference()], files=files)

        after = "" if epoch == study.size.epochs else f"-epoch-{epoch}"
        return Cell(f"{target_name}-target-{audited.replace(' ', '-')}{after}",
                    {"target": target_name, "audited members": audited, "epochs": epoch}, prepare)

    return StudyPlan(
        study="name-insertion",
        description="The target trained on member notes as they are (plain), and one trained on the same notes with "
                    "the patient's name prepended to each (names, the paper's Base-b), audited with the names in the "
                    "member notes and without them, after epochs "
                    f"{', '.join(map(str, epochs))}. Non-members and the population never carry names.",
        paper="the name-insertion model leaks more to the likelihood ratio and less to the loss attack (Table 6: "
              "sample-level AUC 0.900 on Base, 0.960 on Base-b; the loss 0.662 and 0.561), at the patient level too.",
        cells=[cell(target_name, audited, epoch) for target_name, audited in AUDITS for epoch in epochs],
        x="epochs", series="audited members",
        analyse=lambda records: tabulate_lengths([r for r in records if r["settings"]["epochs"] == study.size.epochs]),
        shown=(("loss", "sample"), ("likelihood_ratio", "sample"), ("likelihood_ratio", "group")),
        setup={"patients": study.size.patients, "seed": seed, "roles with names": f"{MEMBER}, {CALIBRATION_MEMBER}",
               "checkpoints": ", ".join(map(str, epochs))},
    )
