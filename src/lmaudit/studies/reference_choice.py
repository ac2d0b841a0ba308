"""Which reference (Mireshghallah et al. 2022, Table 5): the same target audited against references trained on other
patients' notes of the same hospital, on notes generated independently (clinical, another source), and on text that is
not clinical at all (user posts about everyday topics).

Every model of a notes study shares the first reference's tokenizer, fitted on that reference's own notes, which
favours the other references and the target over it: their texts are tokenized by a vocabulary fitted elsewhere, its
texts by one fitted on them. A control trains a second target and the two clinical references on a tokenizer fitted
on a third, independently generated corpus that no model trains on."""

from __future__ import annotations

from pathlib import Path

from lmaudit.atomic import staged
from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import Cell, StudyPlan
from lmaudit.studies.setup import REFERENCE_TRAIN

# Seed offsets of the independently generated notes: other patients, the same generator.
OTHER_SOURCE_SEED = 7919
TOKENIZER_SOURCE_SEED = 31337  # the control's tokenizer: a third corpus, which no model trains on
FIRST_REFERENCES = "the same-notes reference's"
INDEPENDENT = "independent notes'"


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell per reference on the study's tokenizer; and the two clinical references, with their own target, on
    the independent tokenizer. The audited samples are the same in each."""
    from lmaudit.data.synth import generate_notes
    from lmaudit.data.users import generate_user_posts
    from lmaudit.models.tokenizer import train_tokenizer

    study = notes_study(out, size, seed, progress)
    n_texts = len(study.texts(REFERENCE_TRAIN))

    def independent_tokenizer() -> Path:
        """out/models/tokenizer-independent-notes-...: a tokenizer fitted on as many texts of a third generated corpus
        (named by its corpus's seed and size, so that a run of another seed or size fits its own)."""
        folder = out / "models" / f"tokenizer-independent-notes-seed-{seed}-texts-{n_texts}"
        if not folder.is_dir():
            texts = generate_notes(study.size.patients, seed + TOKENIZER_SOURCE_SEED)["text"].head(n_texts).tolist()
            with staged(folder) as (temporary,):
                train_tokenizer(texts).save_pretrained(temporary)
        return folder

    def other_notes() -> list[str]:
        return generate_notes(study.size.patients, seed + OTHER_SOURCE_SEED)["text"].head(n_texts).tolist()

    references = {
        (FIRST_REFERENCES, "same-notes"): lambda: study.reference(),
        (FIRST_REFERENCES, "other-notes"): lambda: study.train("mlm", "reference-other-notes", other_notes(),
                                                               seed=seed + 1),
        (FIRST_REFERENCES, "not-clinical"): lambda: study.train(
            "mlm", "reference-not-clinical", generate_user_posts(study.size.patients, seed)["text"].head(n_texts).tolist(),
            seed=seed + 1),
        (INDEPENDENT, "same-notes"): lambda: study.train(
            "mlm", "reference-independent-tokenizer", study.texts(REFERENCE_TRAIN), seed=seed + 1,
            tokenizer_dir=independent_tokenizer()),
        (INDEPENDENT, "other-notes"): lambda: study.train(
            "mlm", "reference-other-notes-independent-tokenizer", other_notes(), seed=seed + 1,
            tokenizer_dir=independent_tokenizer()),
    }

    def cell(tokenizer: str, name: str) -> Cell:
        def prepare(folder: Path):
            if tokenizer == FIRST_REFERENCES:
                target = study.train("mlm", "target", study.texts(*TARGET_ROLES))
            else:
                target = study.train("mlm", "target-independent-tokenizer", study.texts(*TARGET_ROLES),
                                     tokenizer_dir=independent_tokenizer())
            return study.audit(folder, target, [references[tokenizer, name]()])

        after = "" if tokenizer == FIRST_REFERENCES else "-independent-tokenizer"
        return Cell(f"{name}{after}", {"reference": name, "tokenizer": tokenizer}, prepare)

    return StudyPlan(
        study="reference-choice",
        description="One target audited against three references, each trained like it on as many texts: other "
                    "patients' notes (same-notes), notes of independently generated patients (other-notes), and user "
                    "posts, which are not clinical (not-clinical), all on the tokenizer fitted on the same-notes "
                    "reference's notes; and a control: a second target and the two clinical references on a tokenizer "
                    "fitted on a third generated corpus. The loss attack, which reads no reference, is the same for "
                    "one target.",
        paper="a reference closer to the target's domain is stronger (Table 5: AUC 0.900 with PubMed-BERT, 0.883 with "
              "bert-base; recall at the population threshold 79.2% and 71.5%).",
        cells=[cell(tokenizer, name) for tokenizer, name in references], x="reference", series="tokenizer",
        setup={"patients": study.size.patients, "texts per reference": n_texts, "seed": seed},
    )
