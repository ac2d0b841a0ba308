"""`lmaudit train` refuses, in one line and before training, a DP option that could not take effect: it is never
dropped in silence (issue 49). Nothing is written: no model folder, no checkpoint beside it."""

import pandas as pd
import pytest

from lmaudit.errors import InputError
from lmaudit.models.recipe import DPSettings
from tests.helpers import assert_one_line_error, run_cli

KINDS = ("mlm", "clm", "classifier")


def write_training_file(path, notes, groups=None):
    """Eight notes with labels (so that a classifier reads them too), with a group_id column of `groups` if given."""
    table = pd.DataFrame({"text": notes["text"].tolist()[:8], "label": ["a", "b"] * 4})
    if groups is not None:
        table.insert(0, "group_id", groups)
    if path.suffix == ".jsonl":
        table.to_json(path, orient="records", lines=True)
    else:
        table.to_csv(path, index=False)
    return path


def train(kind, data, out, *options):
    """Exit status and output of `lmaudit train KIND` on `data` (a classifier validating on it too)."""
    validation = ("--validation", data) if kind == "classifier" else ()
    return run_cli("train", kind, "--data", data, *validation, "--out", out, *options)


def assert_nothing_written(tmp_path, *inputs):
    """The refused run left only its input files: no --out folder, no checkpoint folder beside it."""
    assert sorted(tmp_path.iterdir()) == sorted(inputs)


@pytest.mark.parametrize("kind", KINDS)
def test_a_cap_on_a_file_without_group_ids_is_refused(notes, tmp_path, kind):
    """Without group ids the cap would cap nothing while the epsilon recorded claims a bound per patient."""
    data = write_training_file(tmp_path / "notes.csv", notes)
    code, output = train(kind, data, tmp_path / "model", "--dp", "--noise-multiplier", "1",
                         "--max-samples-per-group", "2")
    assert_one_line_error(code, output, "--max-samples-per-group 2", f"no row of {data} has a group_id",
                          "add a group_id column", "drop --max-samples-per-group")
    assert_nothing_written(tmp_path, data)


@pytest.mark.parametrize(("name", "kind"), [("notes.csv", "clm"), ("notes.jsonl", "mlm"), ("notes.csv", "classifier")])
def test_a_cap_on_a_file_where_some_rows_lack_a_group_id_is_refused(notes, tmp_path, name, kind):
    """Rows without a group_id would pass the cap uncapped (one patient's, for all anyone knows): refused, counted."""
    groups = ["p1", "p1", None, "p2", "p2", None, "p3", None]
    data = write_training_file(tmp_path / name, notes, groups)
    code, output = train(kind, data, tmp_path / "model", "--dp", "--target-epsilon", "4",
                         "--max-samples-per-group", "1")
    assert_one_line_error(code, output, "--max-samples-per-group 1", f"3 of the 8 rows of {data} have no group_id",
                          "first: row 3", "fill in their group_id", "drop --max-samples-per-group")
    assert_nothing_written(tmp_path, data)


@pytest.mark.parametrize(("options", "named"), [
    (["--noise-multiplier", "1"], "--noise-multiplier applies"),
    (["--target-epsilon", "4"], "--target-epsilon applies"),
    (["--max-grad-norm", "1.0"], "--max-grad-norm applies"),  # the default's value, given: still no DP to clip for
    (["--delta", "1e-6"], "--delta applies"),
    (["--max-samples-per-group", "2"], "--max-samples-per-group applies"),
    (["--audit-dp"], "--audit-dp applies"),
    (["--max-grad-norm", "2", "--delta", "1e-6", "--audit-dp"], "--max-grad-norm, --delta and --audit-dp apply"),
])
@pytest.mark.parametrize("kind", KINDS)
def test_dp_options_without_dp_are_refused(notes, tmp_path, kind, options, named):
    data = write_training_file(tmp_path / "notes.csv", notes, [f"p{i // 2}" for i in range(8)])
    code, output = train(kind, data, tmp_path / "model", *options)
    assert_one_line_error(code, output, f"{named} to DP training only: add --dp, or drop")
    assert_nothing_written(tmp_path, data)


def test_gradient_canaries_need_dp_and_audit_dp(notes, tmp_path):
    """Gradient canaries are planted by --audit-dp alone: without it the count would be dropped, with or without --dp."""
    data = write_training_file(tmp_path / "notes.csv", notes, [f"p{i // 2}" for i in range(8)])
    code, output = train("clm", data, tmp_path / "model", "--gradient-canaries", "100")
    assert_one_line_error(code, output, "--gradient-canaries applies to DP training only: add --dp --audit-dp, or drop it")
    code, output = train("mlm", data, tmp_path / "model", "--dp", "--noise-multiplier", "1", "--gradient-canaries", "100")
    assert_one_line_error(code, output, "--gradient-canaries applies to --audit-dp only: add --audit-dp, or drop "
                                        "--gradient-canaries")
    assert_nothing_written(tmp_path, data)


@pytest.mark.parametrize("kind", KINDS)
def test_noise_and_target_epsilon_together_are_refused(notes, tmp_path, kind):
    """Each sets the noise, so one of them would be ignored."""
    data = write_training_file(tmp_path / "notes.csv", notes, [f"p{i // 2}" for i in range(8)])
    code, output = train(kind, data, tmp_path / "model", "--dp", "--noise-multiplier", "1", "--target-epsilon", "4")
    assert_one_line_error(code, output, "--noise-multiplier and --target-epsilon, not both", "drop one")
    assert_nothing_written(tmp_path, data)


def test_the_group_check_passes_what_the_cap_can_bound():
    """Every row grouped, or no cap asked for: nothing to refuse (the runs that train are tests/models/test_dp.py's)."""
    DPSettings(1.0, max_samples_per_group=2).refuse_ungrouped([False, False, False], "notes.csv")
    DPSettings(1.0).refuse_ungrouped([True, True], "notes.csv")
    with pytest.raises(InputError, match="1 of the 2 rows of notes.csv has no group_id"):
        DPSettings(1.0, max_samples_per_group=5).refuse_ungrouped([False, True], "notes.csv")


@pytest.mark.parametrize(("kind", "options", "fragments"), [
    ("mlm", ["--lora-rank", "4"], ["--lora-rank applies to --lora only"]),
    ("clm", ["--init-from", "CHECKPOINT", "--model-size", "mini"], ["--model-size is not read with --init-from", "drop it"]),
    ("mlm", ["--init-from", "CHECKPOINT", "--tokenizer", "TOKENIZER"], ["--tokenizer is not read with --init-from"]),
    ("classifier", ["--init-from", "CHECKPOINT", "--architecture", "lstm", "--vocab-size", "50"],
     ["--architecture and --vocab-size are not read with --init-from", "drop them"]),
    ("classifier", ["--tokenizer", "TOKENIZER", "--tokenization", "word"], ["--tokenization is not read with --tokenizer"]),
])
def test_an_option_the_way_training_starts_never_reads_is_refused(notes, tmp_path, kind, options, fragments):
    """A LoRA rank without --lora, or a size, tokenizer or architecture beside a checkpoint (or a tokenizer folder)
    that brings its own, would be dropped in silence: refused in one line naming them, before anything is read."""
    data = write_training_file(tmp_path / "notes.csv", notes)
    code, output = train(kind, data, tmp_path / "model", *options)
    assert_one_line_error(code, output, *fragments)
    assert_nothing_written(tmp_path, data)
