"""Which reference (Mireshghallah et al. 2022, Table 5): the same target audited against references trained on other
patients' notes of the same hospital, on notes generated independently (clinical, another source), and on text that is
not clinical at all (user posts about everyday topics)."""

from __future__ import annotations

from pathlib import Path

from lmaudit.demos import REFERENCE_TRAIN
from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import Cell, StudyPlan

# Seed offset of the independently generated notes: other patients, the same generator.
OTHER_SOURCE_SEED = 7919


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell per reference; the target and the audited samples are the same in each."""
    from lmaudit.data.synth import generate_notes
    from lmaudit.data.users import generate_user_posts

    study = notes_study(out, size, seed, progress)
    n_texts = len(study.texts(REFERENCE_TRAIN))
    references = {
        "same-notes": lambda: study.reference(),
        "other-notes": lambda: study.train(
            "mlm", "reference-other-notes",
            generate_notes(study.size.patients, seed + OTHER_SOURCE_SEED)["text"].head(n_texts).tolist(), seed=seed + 1),
        "not-clinical": lambda: study.train(
            "mlm", "reference-not-clinical",
            generate_user_posts(study.size.patients, seed)["text"].head(n_texts).tolist(), seed=seed + 1),
    }

    def cell(name: str) -> Cell:
        def prepare(folder: Path):
            target = study.train("mlm", "target", study.texts(*TARGET_ROLES))
            return study.audit(folder, target, [references[name]()])

        return Cell(name, {"reference": name}, prepare)

    return StudyPlan(
        study="reference-choice",
        description="One target audited against three references, each trained like it on as many texts: other "
                    "patients' notes (same-notes), notes of independently generated patients (other-notes), and user "
                    "posts, which are not clinical (not-clinical). The loss attack, which reads no reference, is the "
                    "same in each cell.",
        paper="a reference closer to the target's domain is stronger (Table 5: AUC 0.900 with PubMed-BERT, 0.883 with "
              "bert-base; recall at the population threshold 79.2% and 71.5%).",
        cells=[cell(name) for name in references], x="reference",
        setup={"patients": study.size.patients, "texts per reference": n_texts, "seed": seed},
    )
