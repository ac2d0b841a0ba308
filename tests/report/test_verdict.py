"""The verdict applies its stated rule to hand-built results, names the evidence with its counts, and the checks warn
about inverted signals, a shadow unlike the target, a population too small to calibrate, and truncation; the
extraction line applies its own rule."""

from dataclasses import asdict

import numpy as np
import pytest
from pydantic import TypeAdapter

from lmaudit.metrics.permutation_tests import LeakageTest, LeakageTests
from lmaudit.metrics.results import AttackResult
from lmaudit.report.checks import audit_warnings
from lmaudit.report.document import RankedAttack, Summary
from lmaudit.report.level_words import shown_p
from lmaudit.report.tables import ranking
from lmaudit.report.verdict import RISK_RULE, dataset_inference_statement, extraction_statement, verdict
from lmaudit.strict_json import json_ready


def result(attack, level="sample", auc=0.6, auc_ci=(0.55, 0.65), tpr=0.02, tpr_ci=(0.005, 0.04), tp=4, fp=1,
           members=2000, nonmembers=2000, epsilons=(0.0,), limited=False, unavailable=None, fpr_ci=(0.003, 0.015)):
    """An attack's result as report.json holds it (null where not measured), with these numbers."""
    point = {"tpr": tpr, "tpr_ci": list(tpr_ci), "fpr_ci": list(fpr_ci), "tp": tp, "fp": fp, "fpr": 0.005,
             "resolution_limited": limited}
    unmeasured = dict.fromkeys(("value", "precision", "recall", "fpr", "accuracy", "advantage"))
    thresholds = [{"rule": "population", "alpha": 0.1, **unmeasured, "tp": 0, "fp": 0, "tn": 0, "fn": 0,
                   "recall_ci": [None, None], "fpr_ci": [None, None], "epsilon_lower_bound": e} for e in epsilons]
    return {"attack": attack, "signal": "loss", "level": level, "slice": "all", "auc": auc, "auc_ci": list(auc_ci),
            "tpr_at_fpr": {"0.01": point, "0.001": point}, "thresholds": thresholds,
            "n_members": members, "n_nonmembers": nonmembers, "n_population": 100, "balanced": None,
            **({"unavailable": unavailable} if unavailable else {})}


def permutation_tests(section: dict | None, results: list[dict]) -> LeakageTests | None:
    """A `leakage_tests` section as the verdict reads it: its tests (observed 0.6, own p-value the family-wise one
    unless given) and, unless given, as many groups relabelled as the results have units."""
    if section is None:
        return None
    groups = {"member_groups": max(r["n_members"] for r in results),
              "nonmember_groups": max(r["n_nonmembers"] for r in results)}
    tests = [LeakageTest(**{"observed": 0.6, "p_value": test["family_p_value"], **test}) for test in section["tests"]]
    return LeakageTests(**{"null": "", "permutations": 1000, "seed": 0, **groups, **section, "tests": tests})


def verdict_of(results: list[dict], names: dict[str, str], delta: float = 1e-5, blind: dict | None = None,
               tests: dict | None = None, nonmember_set: str | None = None) -> Summary:
    """The verdict of results and tests given as report.json holds them, read back as their records."""
    typed = TypeAdapter(list[AttackResult]).validate_python(results)
    return verdict(typed, ranking(typed), names, delta, blind, permutation_tests(tests, results), nonmember_set)


def written_verdict(*args) -> dict:
    """The verdict as report.json writes it (its JSON form)."""
    return json_ready(verdict_of(*args))


def leakage_section(p_values: dict) -> dict:
    """report.json's `leakage_tests` with one AUC test per (attack, level) at the given family-wise p-values."""
    return {"tests": [{"attack": attack, "signal": "loss", "level": level, "statistic": "auc", "observed": 0.6,
                       "p_value": p, "family_p_value": p} for (attack, level), p in p_values.items()]}


def summary_of(*results, names=None, p_values=None, blind=None, nonmember_set=None):
    results = list(results)
    p_values = p_values if p_values is not None else {(r["attack"], r["level"]): 0.5 for r in results}
    return written_verdict(results, names or {"sample": "sample", "group": "patient"}, 1e-5, blind,
                   leakage_section(p_values), nonmember_set)


@pytest.mark.parametrize(("kwargs", "p_value", "risk"), [
    # the test rejects at 1% and the TPR's lower bound is 5 times the FPR's upper bound (and at least 5%)
    ({"tpr_ci": (0.08, 0.2), "fpr_ci": (0.005, 0.016)}, 0.005, "high"),
    ({"epsilons": (0.2, 1.0)}, 0.005, "high"),  # ... or the counts prove epsilon >= 1
    ({"tpr_ci": (0.08, 0.2), "fpr_ci": (0.005, 0.016)}, 0.02, "moderate"),  # rejects at 5% only: moderate whatever
    ({"tpr_ci": (0.07, 0.2), "fpr_ci": (0.005, 0.016)}, 0.005, "moderate"),  # 0.07 < 5 x 0.016: not exposed enough
    ({"tpr_ci": (0.04, 0.2), "fpr_ci": (0.0, 0.005)}, 0.005, "moderate"),  # 5 times at least 1%, not the FPR's bound
    ({"epsilons": (2.0,)}, 0.2, "low"),  # no rejection: nothing else counts, and 1% FPR is resolved (bound <= 2%)
    ({}, 0.049, "moderate"),  # the attacks beat chance
    ({}, 0.05, "low"),
    ({"fpr_ci": (0.0, 0.021)}, 0.3, "inconclusive"),  # no rejection, but 1% FPR is not resolved
])
def test_the_risk_follows_the_stated_rule(kwargs, p_value, risk):
    summary = summary_of(result("loss", **kwargs), p_values={("loss", "sample"): p_value})
    assert summary["levels"]["sample"]["risk"] == risk and summary["risk"] == risk
    assert summary["levels"]["sample"]["p_value"] == p_value
    assert summary["rule"] == RISK_RULE


def test_without_a_test_no_level_reads_leakage():
    summary = summary_of(result("loss", tpr_ci=(0.5, 0.9), epsilons=(3.0,)), p_values={})
    assert summary["levels"]["sample"]["risk"] == "low" and summary["levels"]["sample"]["p_value"] is None
    assert "no permutation test could run" in summary["levels"]["sample"]["statement"]


def test_each_level_reports_its_strongest_attack_most_exposing_attack_and_largest_bound():
    summary = summary_of(
        result("loss", auc=0.7, auc_ci=(0.66, 0.74), tpr=0.02, tpr_ci=(0.006, 0.05), epsilons=(0.1, 0.3)),
        result("likelihood_ratio", auc=0.65, tpr=0.12, tpr_ci=(0.08, 0.17), tp=240, fp=20, epsilons=(0.8,)),
        result("loss", level="group", auc=0.55, auc_ci=(0.4, 0.7), members=30, nonmembers=30, tpr=0.0,
               tpr_ci=(0.0, 0.1), fpr_ci=(0.0, 0.116), tp=0, fp=0, limited=True),
        p_values={("loss", "sample"): 0.004, ("likelihood_ratio", "sample"): 0.2, ("loss", "group"): 0.3},
        nonmember_set="same-hospital")
    sample = summary["levels"]["sample"]
    assert sample["strongest"]["attack"] == "loss" and sample["strongest"]["auc"] == 0.7
    assert sample["tpr_at_1pct_fpr"]["attack"] == "likelihood_ratio" and sample["tpr_at_1pct_fpr"]["tp"] == 240
    assert sample["epsilon_lower_bound"] == {"attack": "likelihood_ratio", "signal": "loss", "rule": "population",
                                             "alpha": 0.1, "epsilon_lower_bound": 0.8, "bounds": 3}
    assert sample["risk"] == "high" and sample["p_value"] == 0.004  # the level's smallest family-wise p-value
    assert sample["statement"].startswith(
        "High risk at sample level, members against the same-hospital non-members: an attacker can tell member samples "
        "from non-members at a low false-positive rate. Evidence: the permutation test gives family-wise p = 0.004. The "
        "strongest attack, loss on loss, reaches AUC 0.700 [0.660, 0.740]. ")
    assert ("At the threshold fitted to accuse at most 1% of the 2,000 non-member samples (it accused 20), "
            "likelihood_ratio on loss exposes 240 of 2,000 member samples (12.0%). From 2,000 non-members, the "
            "false-positive rate an attacker would meet at that threshold is known only to be below 1.5%."
            in sample["statement"])
    assert ("If members and non-members were drawn alike, the counts of likelihood_ratio on loss rule out (epsilon, "
            "1e-05)-differential privacy per sample for every epsilon below 0.80, with 95% confidence (the largest of "
            "3 bounds, each at 95%)." in sample["statement"])
    group = summary["levels"]["group"]
    assert group["name"] == "patient" and group["risk"] == "inconclusive"
    assert group["statement"].startswith(  # the plain reason first: 30 non-member patients can never read low
        "Inconclusive at patient level, members against the same-hospital non-members: too few non-member patients to "
        "rule out leakage (about 581 independent ones needed, 30 given); no attack beat chance. Evidence: the "
        "permutation test gives "
        "family-wise p = 0.3.")
    assert group["power"]["can_read_low"] is False and group["power"]["nonmembers_for_low"] == 581
    assert summary["risk"] == "high"  # the highest level's
    assert summary["delta"] == 1e-5 and summary["nonmember_set"] == "same-hospital"


def test_the_headline_tpr_is_the_one_that_exposes_most_named_with_its_own_attack_and_test():
    """Two attacks at 1% FPR: the level's TPR record is the one that exposes most members (zlib's 6%, though loss's
    own test rejects and zlib's does not), named with zlib and its own p-value, never another attack's; its test's
    verdict is said as it is. Equal TPRs go to the higher lower bound."""
    results = [result("loss", tpr=0.03, tpr_ci=(0.02, 0.05), tp=60, fp=20),
               result("zlib", tpr=0.06, tpr_ci=(0.04, 0.09), tp=120, fp=20)]
    section = leakage_section({("loss", "sample"): 0.01, ("zlib", "sample"): 0.3})
    tpr_tests = [{**section["tests"][0], "statistic": "tpr_at_1pct_fpr", "family_p_value": p, "attack": attack}
                 for attack, p in (("loss", 0.004), ("zlib", 0.6))]
    summary = written_verdict(results, {"sample": "note"}, 1e-5, None,
                      {"tests": section["tests"] + tpr_tests})
    level = summary["levels"]["sample"]
    assert level["tpr_at_1pct_fpr"]["attack"] == "zlib" and level["tpr_at_1pct_fpr"]["p_value"] == 0.6
    assert level["tpr_at_1pct_fpr"]["tpr"] == max(r["tpr_at_fpr"]["0.01"]["tpr"] for r in results)
    assert ("zlib on loss exposes 120 of 2,000 member notes (6.0%), no more than chance would (its own family-wise "
            "p = 0.6)" in level["statement"])
    tpr_tests[1]["family_p_value"] = 0.01
    level = written_verdict(results, {"sample": "note"}, 1e-5, None,
                    {"tests": section["tests"] + tpr_tests})["levels"]["sample"]
    assert "zlib on loss exposes 120 of 2,000 member notes (6.0%), beyond chance (its own family-wise p = 0.01)" in \
        level["statement"]
    tied = [result("loss", tpr=0.06, tpr_ci=(0.03, 0.09)), result("zlib", tpr=0.06, tpr_ci=(0.04, 0.09))]
    level = summary_of(*tied)["levels"]["sample"]
    assert level["tpr_at_1pct_fpr"]["attack"] == "zlib"


def test_the_smallest_p_value_the_relabellings_can_show_is_said_as_such():
    """A family-wise p-value at the floor of 1,000 relabellings (2/1001 with two families) reads '< 0.002 (the
    smallest 1,000 relabellings can show)', any larger one '= p'."""
    floor = 2 / 1001
    tests = {"permutations": 1000, "member_groups": 2000, "nonmember_groups": 2000,
             "tests": [{"attack": "loss", "signal": "loss", "level": "sample", "statistic": statistic,
                        "family_p_value": floor} for statistic in ("auc", "tpr_at_1pct_fpr")]}
    results = [result("loss")]
    level = written_verdict(results, {"sample": "note"}, 1e-5, None, tests)["levels"]["sample"]
    assert "family-wise p < 0.002 (the smallest 1,000 relabellings can show)" in level["statement"]
    assert level["power"]["counts"]["families"] == 2 and level["power"]["smallest_p"] == pytest.approx(floor, rel=1e-6)
    tests["tests"][0]["family_p_value"] = tests["tests"][1]["family_p_value"] = 0.004
    level = written_verdict(results, {"sample": "note"}, 1e-5, None, tests)["levels"]["sample"]
    assert "family-wise p = 0.004." in level["statement"] and "smallest" not in level["statement"]


@pytest.mark.parametrize(("kwargs", "opening"), [
    # 79% exposed, but 12 non-member patients and no calibrated threshold can never read high: never "few members"
    ({"tpr": 0.79, "tpr_ci": (0.58, 0.93), "fpr_ci": (0.0, 0.265), "members": 24, "nonmembers": 12, "tp": 19, "fp": 0,
      "epsilons": ()},
     "Moderate risk at patient level: the attacks tell member patients from non-members better than chance, and loss "
     "on loss exposes most of them (79.0%); whether at a low false-positive rate, 12 non-member patients are too few to "
     "show."),
    # the same with a calibrated threshold: an epsilon bound of 1 was within reach, so it could have read high
    ({"tpr": 0.79, "tpr_ci": (0.58, 0.93), "fpr_ci": (0.0, 0.265), "members": 24, "nonmembers": 12, "tp": 19, "fp": 0,
      "epsilons": (0.4,)},
     "Moderate risk at patient level: the attacks tell member patients from non-members better than chance, and loss "
     "on loss exposes most of them (79.0%), though not surely at a low false-positive rate."),
    ({"tpr": 0.02, "tpr_ci": (0.01, 0.04), "fpr_ci": (0.005, 0.016)},
     "Moderate risk at patient level: the attacks tell member patients from non-members better than chance, but none "
     "exposes members at 5 times the rate it accuses non-members."),
])
def test_a_moderate_level_says_plainly_why_it_is_not_high(kwargs, opening):
    results = [result("loss", level="group", **kwargs)]
    summary = summary_of(*results, names={"group": "patient"}, p_values={("loss", "group"): 0.02})
    statement = summary["levels"]["group"]["statement"]
    assert statement.startswith(opening) and "few members" not in statement


def blind(auc, low, high):
    """The blind baseline's result at a level, as metrics/validity.py writes it."""
    return {"auc": auc, "auc_ci": [low, high], "texts_separate": low > 0.5}


STRONG = {"tpr_ci": (0.08, 0.2), "fpr_ci": (0.005, 0.016)}


@pytest.mark.parametrize(("attack", "texts", "risk"), [
    # the texts separate and the blind interval reaches the attack's: inconclusive, whatever the attack shows
    ({**STRONG, "auc": 0.66, "auc_ci": (0.62, 0.70)}, blind(0.62, 0.55, 0.69), "inconclusive"),
    # the attack is clearly beyond a weak blind baseline: the attacks decide
    ({**STRONG, "auc": 0.80, "auc_ci": (0.75, 0.85)}, blind(0.60, 0.53, 0.67), "high"),
    # the blind AUC is at least 0.7: inconclusive even with the attack far beyond it
    ({**STRONG, "auc": 0.95, "auc_ci": (0.93, 0.97)}, blind(0.72, 0.66, 0.78), "inconclusive"),
    # the blind interval holds 0.5: no shift shown, the attacks decide (even with overlapping intervals)
    ({"auc_ci": (0.55, 0.65)}, blind(0.55, 0.45, 0.65), "low"),
    # a shift hides leakage as well as it fakes it: a low reading becomes inconclusive
    ({}, blind(0.60, 0.52, 0.68), "inconclusive"),
])
def test_a_shift_the_texts_alone_show_makes_the_level_inconclusive(attack, texts, risk):
    results = [result("loss", epsilons=(0.5,), **attack)]
    p_value = 0.001 if "tpr_ci" in attack else 0.4
    summary = summary_of(*results, names={"sample": "note"}, blind={"sample": texts}, p_values={("loss", "sample"): p_value})
    level = summary["levels"]["sample"]
    assert level["risk"] == risk and summary["risk"] == risk
    assert level["blind"] == texts
    if risk == "inconclusive":
        assert level["shift"] is True
        assert level["statement"].startswith("Inconclusive at note level: the texts alone separate members from "
                                             "non-members, so the attacks measure how the data was collected as much "
                                             "as the model. A blind classifier that never sees the model reaches AUC "
                                             f"{texts['auc']:.3f} [")
        assert f"this level would read {level['risk_from_attacks']}" in level["statement"]
        assert "differential privacy" not in level["statement"]  # no DP reading where the sets differ
    else:
        assert "shift" not in level and "risk_from_attacks" not in level
        assert "differential privacy per note for every epsilon below 0.50" in level["statement"]
    assert summary["blind_baseline_ran"] is True
    assert summary_of(*results)["blind_baseline_ran"] is False  # no texts, no blind baseline: the attacks decide


def test_inconclusive_outranks_low_overall():
    summary = summary_of(result("loss"), result("loss", level="group", nonmembers=40, fpr_ci=(0.0, 0.088)))
    assert [e["risk"] for e in summary["levels"].values()] == ["low", "inconclusive"]
    assert summary["risk"] == "inconclusive"


def warnings_of(report: dict) -> list[str]:
    """The checks' warnings on a report.json document, its results read as their records."""
    return audit_warnings(report, TypeAdapter(list[AttackResult]).validate_python(report["results"]))


def document(results, models=None, truncated=0):
    return {"results": results, "models": models or {}, "data": {"counts": {"member": 150, "nonmember": 50},
                                                                 "truncated": truncated},
            "level_names": {"sample": "sample", "group": "user"}}


def test_warnings_for_inverted_signals_and_too_small_populations():
    inverted = result("loss", auc=0.07, auc_ci=(0.03, 0.12))
    weak = result("zlib", auc=0.45, auc_ci=(0.40, 0.52))  # below 0.5 but not clearly: no warning
    small = result("loss", level="group", unavailable={
        "population_threshold_0.1": "the population has 7 users; a 10% threshold needs at least 10",
        "population_threshold_0.01": "the population has 7 users; a 1% threshold needs at least 100"})
    warnings = warnings_of(document([inverted, weak, small]))
    assert len(warnings) == 2
    assert warnings[0].startswith("sample level: AUC well below 0.5 for loss (loss) 0.070") and "zlib" not in warnings[0]
    assert warnings[1].startswith("user level: the population has 7 users; a 10% threshold needs at least 10; a 1% "
                                  "threshold needs at least 100.")


def test_warnings_for_a_shadow_unlike_the_target_and_for_truncation():
    models = {"target": {"train_accuracy": 0.92}, "shadow": {"train_accuracy": 0.57}}
    warnings = warnings_of(document([result("loss")], models, truncated=3))
    assert warnings[0].startswith("the shadow model's train accuracy (57.0%) differs from the target's (92.0%) by 35 points")
    assert warnings[1].startswith("3 of 200 scored samples (1.5%) were longer than the model's limit")
    alike = {"target": {"train_accuracy": 0.92}, "shadow": {"train_accuracy": 0.85}}
    assert warnings_of(document([result("loss")], alike)) == []


def test_a_warning_when_algorithm_4_calls_no_sample_or_every_sample_a_member():
    def vote(called, signal="loss"):
        return dict(result("sample_to_user", level="group"), signal=signal, calibration={"posts_called_members": called})

    [warning] = warnings_of(document([vote(0.0), vote(0.97, "rank"), vote(0.5, "confidence"), vote(0.06, "mentropy")]))
    assert warning.startswith("sample_to_user (Algorithm 4) on loss (0% called), rank (97% called): the shadow model's "
                              "thresholds call almost none or almost all")
    assert warnings_of(document([vote(0.5), result("sample_threshold")])) == []


def test_a_warning_when_an_attack_gets_no_threshold_at_all_names_its_cause():
    """No threshold because there is no population: give population data; because the population is too small (or
    tied): give more, and the population warning gives the counts. Never 'no population data' beside a population."""
    small = {**result("rmia"), "thresholds": [], "n_population": 7,
             "unavailable": {"population_threshold_0.1": "the population has 7 patients; a 10% threshold needs at least 10"}}
    warnings = warnings_of(document([small]))
    assert warnings[-1] == ("sample level: no threshold could be calibrated for rmia (its population of 7 is too small "
                            "or too tied to calibrate a threshold): precision, recall, advantage and the epsilon bound "
                            "are missing; give more population data")
    assert not any("no population data" in w for w in warnings)
    bare = {**result("loss"), "thresholds": [], "n_population": 0}
    warnings = warnings_of(document([bare, result("likelihood_ratio")]))
    assert warnings == ["sample level: no threshold could be calibrated for loss (no population data, and no calibration "
                        "members or shadow model for them): precision, recall, advantage and the epsilon bound are "
                        "missing; give population data (--population)"]


def dataset_section(p_value, needed=20):
    return {"suspect": "the audited members", "validation": "the verdict's non-members", "unit": "patient",
            "p_value": p_value, "n_test": {"suspect": 30, "validation": 28},
            "decisions": {"p<0.1": p_value < 0.1, "p<0.01": p_value < 0.01},
            "minimum_needed": {"p<0.1": 10, "p<0.01": needed}}


@pytest.mark.parametrize(("p_value", "shifted", "says"), [
    (0.003, False, "below 0.01: evidence that the model was trained on them"),
    (0.05, False, "below Maini et al.'s 0.1, not below 0.01"),
    (0.4, False, "not below 0.1: no evidence"),
    (0.003, True, "but the texts alone separate the two sets"),
])
def test_the_dataset_inference_sentence_reads_its_p_value_by_the_stated_levels(p_value, shifted, says):
    sentence = dataset_inference_statement(dataset_section(p_value), shifted)
    assert sentence.startswith("Dataset inference (Maini et al. 2024), the audited members as a set against the "
                               f"verdict's non-members: p = {p_value:.2g} (one-sided t-test over 30 suspect and 28 "
                               "validation patients held out)")
    assert says in sentence and ("provided the two sets were drawn alike" in sentence) != shifted
    assert dataset_inference_statement({"unavailable": "too few"}) == "Dataset inference: n/a: too few."
    assert dataset_inference_statement(None) is None


def _extraction_entry(member: tuple[int, int], nonmember: tuple[int, int]) -> dict:
    """A prefix length's section against one set, greedy exact counts as given, intervals computed."""
    from lmaudit.metrics.extraction import rate

    exact = {side: asdict(rate(np.arange(units) < exposed)) for side, (exposed, units) in
             (("member", member), ("nonmember", nonmember))}
    return {"used": member[1] + nonmember[1], "too_short": 0, "sets": {"same-hospital": {"greedy": {"sample": {"exact": exact}}}}}


def test_the_extraction_line_follows_its_rule():
    """Disjoint intervals say the model gives text back, overlapping ones do not; the prefix with the members' largest
    lead is the one stated; nothing long enough is n/a; no extraction, no line."""
    leads = {"suffix_tokens": 8, "prefix_lengths": {"4": _extraction_entry((30, 100), (20, 100)),
                                                     "8": _extraction_entry((70, 100), (20, 100))}}
    line = extraction_statement(leads)
    assert "first 8 tokens" in line and "70 of 100 members" in line and "gives training text back beyond" in line
    overlap = {"suffix_tokens": 8, "prefix_lengths": {"4": _extraction_entry((30, 100), (20, 100))}}
    assert "no evidence that it gives training text back" in extraction_statement(overlap)
    assert "n/a" in extraction_statement({"suffix_tokens": 8, "prefix_lengths": {"64": {"used": 0, "too_short": 9}}})
    assert extraction_statement(None) is None


def test_the_verdict_names_the_threat_models_tried_and_not_tried():
    """Each attack's access follows from what it reads (a reference, a shadow model, white-box features); the verdict
    lists each access level tried with its attacks and the levels no attack tried."""
    from lmaudit.attacks.base import ACCESS_LEVELS
    from lmaudit.attacks.registry import attack_spec
    from lmaudit.report.verdict import threat_models

    names = ("samia", "petal", "loss", "ez_mia", "user_threshold_avg", "gradnorm")
    assert [attack_spec(name).access for name in names] == list(ACCESS_LEVELS)
    probabilities, with_reference = ACCESS_LEVELS[2], ACCESS_LEVELS[3]
    def ranked(attack: str, access: str) -> RankedAttack:
        return RankedAttack(attack=attack, signal="loss", auc=0.5, auc_ci=(0.4, 0.6), tpr_at_fpr={}, n_members=10,
                            n_nonmembers=10, description="", paper="", access=access)

    rows = {"sample": [ranked("loss", probabilities), ranked("ez_mia", with_reference)],
            "group": [ranked("loss", probabilities), ranked("user_inference", with_reference)]}
    section = threat_models(rows)
    assert section.tried == {probabilities: ["loss"], with_reference: ["ez_mia", "user_inference"]}
    assert section.not_tried == [*ACCESS_LEVELS[:2], *ACCESS_LEVELS[4:]]
    assert section.statement == (f"Threat models tried: {probabilities} (1 attack); {with_reference} (2 attacks); "
                                    f"not tried: {', '.join([*ACCESS_LEVELS[:2], *ACCESS_LEVELS[4:]])}.")


def test_the_dataset_inference_sentence_counts_the_samples_left_out_for_want_of_a_group_id():
    sentence = dataset_inference_statement({**dataset_section(0.003), "excluded": 7})
    assert sentence.endswith("; 7 samples without a group id left out.")
    assert "left out" not in dataset_inference_statement(dataset_section(0.003))


def test_a_p_value_is_never_rounded_onto_the_level_it_is_read_against():
    assert shown_p(0.0499) == "0.0499" and shown_p(0.0099) == "0.0099" and shown_p(0.0095) == "0.0095"
    assert shown_p(0.002) == "0.002" and shown_p(0.13) == "0.13" and shown_p(0.051) == "0.051"
    assert shown_p(0.0499996) == "0.0499996" and shown_p(0.05) == "0.05"
