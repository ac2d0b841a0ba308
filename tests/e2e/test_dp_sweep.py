"""The DP sweep end to end at a tiny size: one private target per noise level, audited, in one report."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.canaries.make import planted_canaries
from lmaudit.cli import main
from lmaudit.models.dp import privacy_spent
from lmaudit.models.training_file import read_training_summary
from lmaudit.studies.canary_epsilon import CANARY_COUNTS
from lmaudit.studies.dp_sweep import run_dp_sweep, swept_attacks
from lmaudit.studies.setup import DEMO_SIZES, DemoSize
from tests.helpers import assert_document_round_trips

CAP = 5  # notes per patient: binds (the generator writes more for most patients)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    with pytest.MonkeyPatch.context() as patch:  # smaller than smoke: 40 patients, a 4-epoch reference
        patch.setitem(DEMO_SIZES, "smoke", DemoSize(patients=40, epochs=4, k=2, bootstrap=50, references=1, neighbours=2))
        return out, run_dp_sweep(out, noises=(1.0, 0.0), size="smoke", epochs=2, max_samples_per_group=CAP)


def test_sweep_rows_carry_the_accountants_epsilon_and_every_attack(sweep):
    out, result = sweep
    assert [row["noise_multiplier"] for row in result["rows"]] == [1.0, 0.0]
    noisy, clipped = result["rows"]
    dp = read_training_summary(out / "models" / "target-sigma-1").dp
    assert noisy["epsilon_prv"] == pytest.approx(privacy_spent(dp.sample_rate, 1.0, dp.steps, 1e-5)["epsilon_prv"])
    assert clipped["epsilon_prv"] == float("inf")  # clipping without noise: no guarantee
    for row in result["rows"]:
        assert {f"{attack} {level}" for attack in ("loss", "likelihood_ratio", "rmia") for level in ("sample", "group")} \
            <= set(row["attacks"]) <= {f"{attack} {level}" for attack, level in swept_attacks()}
        assert row["held_out_loss"] > 0
        report = json.loads((out / f"sigma-{row['noise_multiplier']:g}" / "report.json").read_text())
        sample_loss = next(r for r in report["results"] if r["attack"] == "loss" and r["level"] == "sample" and r["slice"] == "all")
        assert row["attacks"]["loss sample"]["auc"] == sample_loss["auc"]
        assert row["attacks"]["loss sample"]["epsilon_lower_bound"] == max(t["epsilon_lower_bound"] for t in sample_loss["thresholds"])


def test_sweep_files_are_written_and_strict_json(sweep):
    out, _ = sweep
    saved = json.loads((out / "sweep.json").read_text())
    assert_document_round_trips(out / "sweep.json")
    assert saved["rows"][1]["epsilon_prv"] is None  # infinity is written as null
    html = (out / "sweep.html").read_text()
    assert "data:image/png;base64," in html and "accountant's epsilon" in html and "&infin;" in html


def test_sweep_rejects_bad_noise_levels(tmp_path):
    result = CliRunner().invoke(main, ["dp-sweep", "--noise-multipliers", "1,abc", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "comma-separated" in result.output
    result = CliRunner().invoke(main, ["dp-sweep", "--noise-multipliers", "1,-2", "--out", str(tmp_path)])
    assert result.exit_code == 2 and ">= 0" in result.output


def test_capped_notes_are_never_audited_as_members(sweep):
    """With a per-patient cap that binds, every audited member note is one the target trained on."""
    out, _ = sweep
    members = pd.concat([pd.read_parquet(out / "data" / f"{role}.parquet") for role in ("member", "calibration_member")])
    assert members.groupby("group_id").size().max() == CAP
    planted = planted_canaries(out / "canaries")  # every canary planted too, none dropped by the cap
    assert read_training_summary(out / "models" / "target-sigma-1").n_samples == len(members) + len(planted)


def test_every_noise_level_has_its_canary_epsilon_from_the_same_canaries(sweep):
    out, result = sweep
    key = pd.read_parquet(out / "canaries" / "key.parquet")
    assert len(key) == CANARY_COUNTS["smoke"] and not set(key["sample_id"]) & set(
        pd.concat([pd.read_parquet(f) for f in (out / "data").glob("*.parquet")])["sample_id"])  # in no role
    for row in result["rows"]:
        report = json.loads((out / f"sigma-{row['noise_multiplier']:g}" / "canaries" / "canary_report.json").read_text())
        assert row["canary_epsilon"] == report["one_run"]["epsilon_lower_bound"] >= 0
        assert row["canary_f_dp_epsilon"] == report["f_dp"]["epsilon_lower_bound"]
        assert (row["canary_correct"], row["canary_guesses"]) == (report["one_run"]["correct"], report["one_run"]["guesses"])
        assert report["one_run"]["delta"] == 1e-5 and (report["canaries"]["kind"], report["attack"]) == ("new_token", "secret")
    noisy, clipped = result["rows"]
    assert noisy["canary_epsilon"] <= noisy["epsilon_rdp"]  # a lower bound never above the accountant's epsilon
    # the white-box audit of DP-SGD: consistent under noise; without noise every gradient canary is seen
    assert noisy["white_box_verdict"].startswith("consistent") and noisy["white_box_epsilon"] <= noisy["epsilon_rdp"]
    assert clipped["white_box_epsilon"] > 2
