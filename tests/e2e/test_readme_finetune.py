"""The README's fine-tune recipe and its SPV-MIA example run as written, in one folder, as a user would type them.

As written the recipe takes about half an hour on 2 CPU cores (docs/performance.md): the synth and split commands run
as written, then the files they write are cut to a few patients (the public text to 3, the split to 3 + 2 + 2), and
every training and audit command runs as written on them, its options unchanged (sizes, epochs, LoRA rank,
neighbours)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.readme import attacks_of, few_patients, options_of, run, scores_rows, section_blocks, starting


@pytest.fixture(scope="module")
def finetune_recipe(tmp_path_factory) -> tuple[Path, list[str]]:
    """The fine-tune recipe run as written in one folder, its generated files cut after the commands that write them:
    (the folder, the recipe's commands)."""
    folder = tmp_path_factory.mktemp("finetune")
    recipe, _ = section_blocks("Audit your fine-tuned model")
    public, notes, split, *rest = recipe
    assert public.startswith("lmaudit synth") and notes.startswith("lmaudit synth") and split.startswith("lmaudit split")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        run(public)
        few_patients(options_of(public)["--out"], 3)
        run(notes)
        run(split)
        plan = Path(options_of(split)["--out"])
        for name, patients in (("train.parquet", 3), ("nonmembers.parquet", 2), ("population.parquet", 2)):
            few_patients(plan / name, patients)
        for command in rest:
            run(command)
    return folder, recipe


def test_the_fine_tune_recipe_as_written_on_fewer_notes(finetune_recipe):
    folder, recipe = finetune_recipe
    audits = starting(recipe, "lmaudit audit")
    assert len(audits) == 2
    bert, lora = (folder / options_of(command)["--out"] for command in audits)
    assert {"likelihood_ratio", "min_k_plus_plus"} <= attacks_of(bert)  # against the base, token by token
    assert {"likelihood_ratio", "ez_mia"} <= attacks_of(lora)  # the base as reference, per token
    plan = folder / options_of(starting(recipe, "lmaudit split")[0])["--out"]
    assert scores_rows(bert) == scores_rows(lora) == sum(len(pd.read_parquet(path)) for path in plan.glob("*.parquet"))
    (adapter,) = (options_of(c)["--out"] for c in starting(recipe, "lmaudit train clm --init-from"))
    assert (folder / adapter / "adapter_config.json").is_file()  # --lora: an adapter, not a whole model


def test_spv_mia_as_written_after_the_recipe(finetune_recipe, monkeypatch):
    folder, _ = finetune_recipe
    monkeypatch.chdir(folder)
    train, audit = section_blocks("Audit your fine-tuned model")[1]
    assert train.startswith("lmaudit train self-prompt") and audit.startswith("lmaudit audit")
    run(train)
    run(audit)
    assert "spv_mia" in attacks_of(Path(options_of(audit)["--out"]))
