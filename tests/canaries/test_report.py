"""The canary report and its checks, without models: the verdict against the accountant, what the terminal prints
when a side is empty, a key that does not match, canaries left without a score, and candidates the format cannot
give. None of it reveals the seed that rebuilds the key."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lmaudit.canaries.audit import check_scored, exposure_summary, read_key, secret_candidates
from lmaudit.canaries.make import CanarySet, inclusion, make_canaries, planted_canaries
from lmaudit.canaries.report import REPORT_FILE, canary_lines, canary_report, write_canary_audit
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.metrics.exposure import exposures
from lmaudit.metrics.fdp_one_run import GaussianBound
from lmaudit.metrics.one_run import CanaryGuesses, OneRunBound
from lmaudit.report.document import typed_document

SECRETS = CanarySet("secret", 200, seed=987654321, secret_format="mrn {secret}", secret_digits=6)


def report_with(bound: float, dp: dict | None, exposure: dict | None = None) -> dict:
    config = AuditConfig(target="model", out="out")
    guesses = CanaryGuesses(200, 10, 0, 10)
    return canary_report(config, SECRETS, "loss", OneRunBound(guesses, bound, 1e-5, 0.95, 8),
                         GaussianBound(guesses, 0.0, 0.0, 1e-5, 0.95, 8), exposure, dp)


def lines_of(report: dict) -> list[str]:
    """What the terminal prints of a canary report, read as its model (the audit adds its configuration)."""
    return canary_lines(typed_document(REPORT_FILE, {"config": {}, **report}))


def test_the_verdict_compares_the_bound_with_the_accountants_epsilon_at_the_same_delta():
    prv = {"epsilon_prv": 1.0, "epsilon_rdp": 3.0, "delta": 1e-5}
    assert report_with(0.9, prv)["verdict"].startswith("consistent")
    assert report_with(2.0, prv)["verdict"].startswith("CONTRADICTION")  # above PRV's 1.0, though below RDP's 3.0
    assert report_with(2.0, {**prv, "epsilon_prv": None})["verdict"].startswith("consistent")  # RDP where no PRV
    assert report_with(2.0, {**prv, "delta": 1e-6})["verdict"] is None  # another delta: no comparison
    assert report_with(2.0, None)["verdict"] is None
    lines = lines_of(report_with(2.0, prv))
    assert any("1 (PRV)" in line and "CONTRADICTION" in line for line in lines)  # prints the epsilon it compared


def test_repeated_canaries_are_compared_with_the_groups_epsilon_and_say_what_one_record_gets(tmp_path):
    """Planted r = 3 times: the bound is a group's, compared with Dwork and Roth's (3 eps, 3 e^(2 eps) delta) at that
    delta; the f-DP mu of the group over 3 is the record's (mu-GDP per record is 3 mu-GDP per group)."""
    from dataclasses import replace

    from lmaudit.canaries.report import compared_epsilon
    from lmaudit.metrics.fdp_one_run import gdp_epsilon

    dp = {"epsilon_prv": 1.0, "epsilon_rdp": 3.0, "delta": 1e-5}
    group_epsilon, group_delta = compared_epsilon(dp, 3)
    assert (group_epsilon, group_delta) == pytest.approx((3.0, 3 * np.exp(2.0) * 1e-5))
    assert compared_epsilon(dp, 1) == (1.0, 1e-5) and compared_epsilon(None, 3) is None
    assert compared_epsilon({**dp, "epsilon_prv": 10.0}, 3) is None  # 3 e^20 1e-5 >= 1: vacuous

    def repeated(bound: float, mu: float) -> dict:
        guesses = CanaryGuesses(200, 10, 0, 10)
        return canary_report(AuditConfig(target="model", out="out"), replace(SECRETS, repeats=3), "loss",
                             OneRunBound(guesses, bound, group_delta, 0.95, 8),
                             GaussianBound(guesses, mu, None, group_delta, 0.95, 8), None, dp)

    assert repeated(2.5, 0.0)["verdict"].startswith("consistent")  # above the record's 1.0, below the group's 3.0
    assert repeated(3.5, 0.0)["verdict"].startswith("CONTRADICTION")
    group = repeated(2.5, 1.5)["group"]
    assert group["repeats"] == 3 and group["record_mu_lower_bound"] == pytest.approx(0.5)
    assert group["record_epsilon_lower_bound"] == pytest.approx(gdp_epsilon(0.5, 1e-5)) == pytest.approx(1.99, abs=0.01)
    text = " ".join(lines_of(repeated(2.5, 1.5)))
    assert "each planted 3 times" in text and "for a group of 3: 3 at delta" in text and "mu >= 0.500" in text
    assert report_with(0.5, dp)["group"] is None  # planted once: no group
    write_canary_audit(tmp_path, repeated(2.5, 1.5) | {"config": {}}, pd.DataFrame({"sample_id": ["canary-0001"], "score": [0.1]}))
    page = (tmp_path / "canary_report.html").read_text()
    assert "3 times: the bounds are a group's" in page and "the accountant's epsilon for a group of 3" in page


def test_the_report_never_holds_the_seed_that_rebuilds_the_key():
    report = report_with(0.5, None)
    assert "seed" not in report["canaries"] and str(SECRETS.seed) not in str(report)
    assert report["canaries"]["count"] == 200 and report["canaries"]["space_bits"] == pytest.approx(6 * np.log2(10))


def test_exposure_lines_say_n_a_where_a_side_has_no_secret():
    scores = pd.DataFrame({"loss": [1.0, 2.0, 3.0]})
    found = exposures(scores["loss"].to_numpy(), np.linspace(0, 10, 50), 19.9)
    scores["exposure_sampled"] = [e.sampled for e in found]
    scores["exposure_extrapolated"] = [e.extrapolated for e in found]
    summary = exposure_summary(scores, np.array([True, True, True]), 19.9, 50)
    assert summary["not_planted"] == {"secrets": 0, "sampled_median": None, "sampled_max": None,
                                      "extrapolated_median": None, "extrapolated_max": None}
    assert summary["planted"]["sampled_max"] == pytest.approx(found[0].sampled)
    assert any("never planted median n/a" in line for line in lines_of(report_with(0.0, None, summary)))


def test_equal_candidate_losses_give_no_extrapolation_rather_than_an_error():
    found = exposures(np.array([1.0]), np.full(30, 2.0), 19.9)
    assert found[0].rank == 1 and np.isnan(found[0].extrapolated)


def test_a_key_that_does_not_match_the_canaries_is_refused(tmp_path):
    make_canaries(tmp_path / "k", "secret", 10, seed=0)
    canaries = pd.read_json(tmp_path / "k" / "canaries.jsonl", lines=True)
    assert read_key(tmp_path / "k", canaries).tolist() == inclusion(10, 0).tolist()
    with pytest.raises(InputError, match="does not match"):
        read_key(tmp_path / "k", canaries.iloc[:9])


def test_a_canary_without_a_score_is_refused_before_the_key_is_read(tmp_path):
    scores = pd.DataFrame({"sample_id": ["canary-0001", "canary-0002"], "score": [0.1, np.nan], "loss": [1.0, 2.0]})
    with pytest.raises(InputError, match="1 canaries \\(first canary-0002\\) got no score"):
        check_scored(scores, tmp_path)


def test_candidates_the_format_cannot_give_are_refused_before_scoring():
    secrets = [" ".join(f"{i:03d}") for i in range(10)]
    canaries = pd.DataFrame({"text": [f"mrn {secret}" for secret in secrets], "secret": secrets})
    small = CanarySet("secret", 10, seed=0, secret_format="mrn {secret}", secret_digits=3)
    with pytest.raises(InputError, match="at most 495"):
        secret_candidates(small, canaries, 1000)
    with pytest.raises(InputError, match="at least 20"):
        secret_candidates(small, canaries, 5)
    drawn = secret_candidates(small, canaries, 400)
    assert drawn["text"].is_unique and not set(drawn["text"]) & set(canaries["text"])


def test_no_canary_planted_is_an_empty_insert_not_an_error(tmp_path):
    seed = next(s for s in range(100) if not inclusion(2, s).any())  # both coins came up 'out'
    make_canaries(tmp_path / "none", "secret", 2, seed=seed)
    assert planted_canaries(tmp_path / "none").empty


def test_without_a_seed_every_folder_gets_its_own_key(tmp_path):
    first, second = make_canaries(tmp_path / "a", "secret", 64), make_canaries(tmp_path / "b", "secret", 64)
    assert first.seed != second.seed
    keys = [pd.read_parquet(tmp_path / name / "key.parquet")["included"].tolist() for name in ("a", "b")]
    assert keys[0] == inclusion(64, first.seed).tolist() and keys[0] != keys[1]


def test_only_steinkes_bound_decides_a_contradiction():
    # The f-DP epsilon is that of a rejected Gaussian curve: a correct DP-SGD, not exactly Gaussian, may exceed it.
    config = AuditConfig(target="model", out="out")
    guesses = CanaryGuesses(200, 10, 0, 10)
    report = canary_report(config, SECRETS, "loss", OneRunBound(guesses, 0.5, 1e-5, 0.95, 8),
                           GaussianBound(guesses, 0.9, 3.5, 1e-5, 0.95, 8), None,
                           {"epsilon_prv": 3.0, "epsilon_rdp": 4.0, "delta": 1e-5})
    assert report["verdict"].startswith("consistent")
    assert any("mu >= 0.900, the rejected Gaussian curve's epsilon 3.500 at delta 1e-05 (a lower bound on epsilon only "
               "where the training's trade-off curve is Gaussian" in line for line in lines_of(report))


def test_a_bound_of_zero_says_nothing_was_proved_and_not_that_the_model_is_private():
    report = report_with(0.0, None)
    assert report["explanation"].startswith("Nothing was proved: 10 of 10 guesses")
    assert "does NOT say the training is private" in report["explanation"]
    assert report_with(0.4, None)["explanation"].startswith("What the bounds mean")


def test_a_result_far_below_chance_is_reported_invalid_with_its_probability_and_no_verdict():
    from lmaudit.metrics.canary_validity import RankCheck

    config, guesses = AuditConfig(target="model", out="out"), CanaryGuesses(200, 13, 13, 0)
    dp = {"epsilon_prv": 1.0, "epsilon_rdp": 3.0, "delta": 1e-5}
    report = canary_report(config, SECRETS, "secret", OneRunBound(guesses, 0.0, 1e-5, 0.95, 10),
                           GaussianBound(guesses, 0.0, 0.0, 1e-5, 0.95, 10), None, dp,
                           check=RankCheck(100, 100, 0.02, 3e-9, 1e-3))
    assert report["validity"] == {"test": "one-sided Mann-Whitney U, planted below unplanted", "planted": 100,
                                  "unplanted": 100, "rank_auc": 0.02, "p_below": 3e-9, "level": 1e-3, "valid": False}
    assert report["explanation"].startswith("INVALID audit") and "3e-09" in report["explanation"]
    assert "chance gives often enough" not in report["explanation"]
    assert report["verdict"].startswith("INVALID")  # not "consistent": the bound of an invalid audit says nothing
    lines = lines_of(report)
    assert lines[0].startswith("INVALID AUDIT") and "probability 3e-09" in lines[0]
    valid = report_with(0.0, None)  # no rank test given: none is claimed invalid, and nothing proved is chance
    assert valid["validity"]["valid"] and "chance gives often enough" in valid["explanation"]


def test_the_report_says_what_m_canaries_can_prove_at_most_and_when_the_bound_is_there():
    """The ceiling is the bound with every guess right (one_run_bound and gaussian_bound on perfect scores)."""
    from lmaudit.metrics.fdp_one_run import gaussian_bound
    from lmaudit.metrics.one_run import one_run_bound

    included = np.arange(200) % 2 == 0
    perfect, gaussian = one_run_bound(included * 1.0, included, 1e-5), gaussian_bound(included * 1.0, included, 1e-5)
    below = report_with(1.0, None)
    assert below["one_run"]["ceiling"] == pytest.approx(perfect.epsilon_lower_bound) == pytest.approx(3.4, abs=0.05)
    assert below["f_dp"]["mu_ceiling"] == pytest.approx(gaussian.mu_lower_bound)
    assert below["f_dp"]["epsilon_ceiling"] == pytest.approx(gaussian.epsilon_lower_bound)
    text = " ".join(lines_of(below))
    assert f"With 200 canaries no audit can prove more than epsilon {perfect.epsilon_lower_bound:.2f}" in text
    assert not below["one_run"]["at_ceiling"] and "at that ceiling" not in text
    at = report_with(perfect.epsilon_lower_bound, None)
    assert at["one_run"]["at_ceiling"] and "This bound is at that ceiling" in " ".join(lines_of(at))
    # a run without DP-SGD: at the ceiling, the bound shows only that the run is not DP
    assert "shows only that it is not DP" in " ".join(lines_of(at))
    dp = {"epsilon_rdp": 8.0, "epsilon_prv": 7.5, "delta": 1e-5}
    assert "shows only that it is not DP" not in " ".join(lines_of(report_with(perfect.epsilon_lower_bound, dp)))


def test_the_pdf_is_made_from_canary_report_json_sealed_with_it_and_removed_by_a_new_audit(tmp_path):
    """`lmaudit pdf` of a canary audit's folder writes canary_report.pdf from canary_report.json (its bounds table
    beside the terminal's statements, the white-box audit's score-based bound where there is one), recorded in
    derived.json; verify finds it intact and an edited one (exit 3); writing the audit again removes the stale PDF."""
    pytest.importorskip("typst")
    from lmaudit.canaries.report import canary_pdf_view
    from lmaudit.report.document import load_document
    from tests.helpers import run_cli

    white_box = {"gradient_canaries": 1000, "epsilon_lower_bound": 1.2, "f_dp_epsilon_lower_bound": 1.6,
                 "gaussian_pair_epsilon_lower_bound": 3.1, "delta": 1e-5, "accountant_epsilon": 3.9,
                 "verdict": "consistent"}
    report = report_with(0.9, {"epsilon_prv": 1.0, "epsilon_rdp": 3.0, "delta": 1e-5}) | {"config": {},
                                                                                           "white_box": white_box}
    scores = pd.DataFrame({"sample_id": ["canary-0001"], "score": [0.1]})
    write_canary_audit(tmp_path, report, scores)
    view = canary_pdf_view(load_document(tmp_path / REPORT_FILE))
    assert view["statements"] == lines_of(report)
    assert [row["epsilon"] for row in view["tables"][0]["rows"]] == ["0.900", "0.000", "1.200", "3.100"]
    assert view["provenance"][-1]["name"] == "canary_report.json (canonical)"
    code, output = run_cli("pdf", tmp_path)
    assert code == 0 and output.strip() == f"pdf: {tmp_path / 'canary_report.pdf'}", output
    pdf = (tmp_path / "canary_report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF")
    code, output = run_cli("verify", tmp_path)
    assert code == 0 and output.strip().endswith(f"intact: {tmp_path}"), output
    (tmp_path / "canary_report.pdf").write_bytes(pdf + b"%")
    code, output = run_cli("verify", tmp_path)
    assert code == 3 and "canary_report.pdf" in output, output
    write_canary_audit(tmp_path, report, scores)
    assert not (tmp_path / "canary_report.pdf").exists() and not (tmp_path / "derived.json").exists()
