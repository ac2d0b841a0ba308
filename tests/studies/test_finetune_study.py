"""The fine-tuning study: a cell trains its base on its own public text (here user posts, not clinical), fine-tunes it
on the members, builds the fine-tune's self-prompt reference and audits it against the base; the other cells differ
only in the base's text or the kind of fine-tune."""

import json
from dataclasses import replace

from lmaudit.models.training_file import read_training_summary
from lmaudit.studies import finetune_suite
from lmaudit.studies.setup import DEMO_SIZES, DemoSize


def test_a_cell_fine_tunes_a_base_of_its_own_text_and_audits_it_against_that_base(tmp_path, monkeypatch):
    from lmaudit.studies.finetune import plan
    from lmaudit.studies.runner import run_study

    monkeypatch.setitem(DEMO_SIZES, "smoke", DemoSize(patients=24, epochs=4, k=2, bootstrap=20, references=1,
                                                      neighbours=0))
    monkeypatch.setattr(finetune_suite, "SAMIA_DRAWS", 0)  # SaMIA is the fine-tuning suite's test's (generation is slow)
    monkeypatch.setattr(finetune_suite, "PERTURBATIONS", 2)
    planned = plan(tmp_path, "smoke", 0)
    assert [c.settings for c in planned.cells] == [{"base": base, "fine-tune": name} for base in ("notes", "posts")
                                                   for name in ("full", "lora")]
    study = run_study(replace(planned, cells=[c for c in planned.cells if c.name == "full-on-posts"]), tmp_path)
    [cell] = study["cells"]
    report = json.loads((tmp_path / "cells" / "full-on-posts" / "report.json").read_text())
    base, model = tmp_path / "models" / "base-posts", tmp_path / "models" / "full-on-posts"
    assert report["config"]["reference"] == [str(base)] and report["config"]["target"] == str(model)
    assert read_training_summary(model).init_from == str(base)
    assert read_training_summary(model.with_name("full-on-posts-self-prompt")).init_from == str(base)
    assert not (tmp_path / "models" / "base-notes").exists()  # the other base is trained by its own cells only
    assert {"spv_mia", "ez_mia", "petal", "user_inference"} <= {r["attack"] for r in report["results"]}
    # fine-tuned on notes, the model knows the population's notes better than its base, which read posts
    assert cell["measured"]["target_population_nll"] < cell["measured"]["base_population_nll"]
    assert (tmp_path / "study.json").exists() and (tmp_path / "study.html").exists()
