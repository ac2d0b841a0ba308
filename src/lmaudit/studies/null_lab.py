"""The null laboratory: every decision rule, interval and p-value the report prints, run through lmaudit's own functions
on simulated audits (studies/null_scenarios.py) where the truth is known, many times: how often a rule claims leakage
when there is none (its false-alarm rate, against its stated level), how often it finds a planted one (power), and how
often an interval covers the truth. benchmarks/null_calibration.py writes docs/statistics.md from it; the test suite
runs small versions (tests/studies/test_null_lab.py). No torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmaudit.data.roles import MEMBER, NONMEMBER
from lmaudit.metrics.auc_interval import auc_interval
from lmaudit.metrics.clusters import frame_clusters
from lmaudit.metrics.dataset_inference import members_against_nonmembers
from lmaudit.metrics.evaluate import evaluate_attacks
from lmaudit.metrics.extraction import rates_by_side
from lmaudit.metrics.fdp_one_run import gaussian_bound, gdp_epsilon
from lmaudit.metrics.one_run import one_run_bound
from lmaudit.metrics.permutation_tests import leakage_tests
from lmaudit.metrics.population_fit import population_fit
from lmaudit.metrics.roc import auc, tpr_at_fpr
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.slices import data_summary
from lmaudit.metrics.uncertainty import clopper_pearson, rate_interval
from lmaudit.metrics.validity import blind_validity
from lmaudit.models.dp_checks import ALARM, poisson_check
from lmaudit.report.build import AuditFacts, build_report
from lmaudit.report.document import Summary
from lmaudit.studies.null_scenarios import Scenario, losses_file, samples, simulated_attacks, texts

LEVEL_NAMES = {"sample": "note", "group": "patient"}


@dataclass(frozen=True)
class Rate:
    """How often a rule fired (or an interval missed) in `runs` simulated audits: `events`, with the rate's exact 95%
    interval; `nominal`: the level the rule states (None where it states none)."""

    rule: str
    scenario: str
    truth: str  # "null" or the alternative planted
    events: int
    runs: int
    nominal: float | None = None

    @property
    def rate(self) -> float:
        return self.events / self.runs

    @property
    def interval(self) -> tuple[float, float]:
        return clopper_pearson(self.events, self.runs)


def counted(rule: str, scenario: Scenario, runs: int, fired: Callable[[int], bool], nominal: float | None = None,
            truth: str | None = None) -> Rate:
    """A Rate of `fired(seed)` over seeds 0 .. runs - 1; `truth` names what was planted (by default the scenario's)."""
    return Rate(rule, scenario.name, truth or scenario.truth, sum(bool(fired(seed)) for seed in range(runs)), runs,
                nominal)


def lab_summary(scenario: Scenario, seed: int, settings: EvaluationSettings) -> Summary:
    """report.json's `summary` of one simulated audit, built as an audit builds it (evaluation, permutation tests,
    ranking, verdict), without files."""
    table, attacks = simulated_attacks(scenario, seed)
    settings = settings.model_copy(update={"seed": seed})
    results, _ = evaluate_attacks(attacks, settings)
    tests = leakage_tests(attacks, None, settings.permutations, seed)
    facts = AuditFacts({}, {}, LEVEL_NAMES)
    return Summary.model_validate(build_report(facts, data_summary(table), results, [], [], settings.delta,
                                               tests=tests)["summary"])


def verdict_rates(scenario: Scenario, runs: int, settings: EvaluationSettings) -> list[Rate]:
    """How often the verdict reads moderate or high at any level (stated: at most 5% when nothing leaked), and high
    (at most 1%)."""
    risks = [lab_summary(scenario, seed, settings).risk for seed in range(runs)]
    return [counted("verdict: moderate or high", scenario, runs, lambda s: risks[s] in ("moderate", "high"), 0.05),
            counted("verdict: high", scenario, runs, lambda s: risks[s] == "high", 0.01)]


def gate_rates(scenario: Scenario, runs: int, settings: EvaluationSettings) -> list[Rate]:
    """How often the release gate (report/gate.py) fails a `risk=moderate` and a `risk=low` threshold at some level
    (stated: at most 5% each when nothing leaked, the verdict's family-wise level), and how often it cannot decide
    them or passes them: what the scenario's counts let a gate say."""
    from lmaudit.report.gate import FAIL, PASS, UNDECIDED, decide
    from lmaudit.report.plan import parse_threshold

    decided = []
    for seed in range(runs):
        levels = lab_summary(scenario, seed, settings).levels
        decided.append({limit: {decide(level, parse_threshold(f"{key}:risk={limit}")).decision
                                for key, level in levels.items()} for limit in ("moderate", "low")})
    rates = []
    for limit in ("moderate", "low"):
        rates += [counted(f"gate risk={limit}: FAIL at some level", scenario, runs,
                          lambda s, limit=limit: FAIL in decided[s][limit], 0.05),
                  counted(f"gate risk={limit}: CANNOT DECIDE at some level (none fails)", scenario, runs,
                          lambda s, limit=limit: FAIL not in decided[s][limit] and UNDECIDED in decided[s][limit]),
                  counted(f"gate risk={limit}: PASS at every level", scenario, runs,
                          lambda s, limit=limit: decided[s][limit] == {PASS})]
    return rates


def end_to_end_rates(scenario: Scenario, runs: int, settings: EvaluationSettings) -> list[Rate]:
    """The same two rates through the Python API on a scores file (`lmaudit attack --scores`'s path): target and
    reference losses, the loss, likelihood-ratio and RMIA attacks at note and patient level."""
    from lmaudit.api import audit_losses

    risks = [audit_losses(losses_file(scenario, seed), **settings.model_copy(update={"seed": seed}).model_dump()
                          ).verdict.risk for seed in range(runs)]
    return [counted("verdict, end to end: moderate or high", scenario, runs,
                    lambda s: risks[s] in ("moderate", "high"), 0.05),
            counted("verdict, end to end: high", scenario, runs, lambda s: risks[s] == "high", 0.01)]


def interval_misses(scenario: Scenario, runs: int, bootstrap: int) -> list[Rate]:
    """How often the sample-level intervals of one attack miss the truth: the AUC's (whole patients resampled), and the
    TPR's and the FPR's at the threshold that accuses 1% of the non-members (nominal 5% each)."""
    misses = {"auc": [], "tpr": [], "fpr": []}
    for seed in range(runs):
        table, attacks = simulated_attacks(scenario, seed)
        frame = attacks[0].frame[attacks[0].frame["role"].isin([MEMBER, NONMEMBER])]
        labels, scores = (frame["role"] == MEMBER).to_numpy(), frame["score"].to_numpy()
        clusters = frame_clusters(frame)
        low, high = auc_interval(labels, scores, auc(labels, scores), clusters, bootstrap, seed=seed)
        misses["auc"].append(not low <= scenario.true_auc <= high)
        point = tpr_at_fpr(labels, scores, 0.01)
        called = scores >= point.threshold
        for name, side, truth in (("tpr", labels, scenario.tpr), ("fpr", ~labels, scenario.fpr)):
            low, high = rate_interval(called[side], clusters[side])
            misses[name].append(not low <= truth(point.threshold) <= high)
    names = {"auc": "AUC interval misses", "tpr": "TPR interval at the 1% threshold misses",
             "fpr": "FPR interval at the 1% threshold misses"}
    return [counted(names[key], scenario, runs, lambda s, key=key: misses[key][s], 0.05) for key in names]


def texts_separate_rates(scenario: Scenario, runs: int, bootstrap: int) -> list[Rate]:
    """How often the blind baseline says the texts alone separate members from non-members, per level (stated: at
    most 2.5% each, its one-sided level) and at any level (the caveat the report prints; at most the levels' sum)."""
    separate = []
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        table = samples(scenario, rng)
        written = pd.Series(texts(scenario, table, rng), index=table["sample_id"])
        audited = table[table["role"].isin([MEMBER, NONMEMBER])].drop(columns="patient")
        levels = blind_validity(audited, written, bootstrap, seed)["sets"]["nonmembers"].get("levels", {})
        separate.append({level: entry["texts_separate"] for level, entry in levels.items()})
    rates = [counted(f"blind baseline: texts_separate at {LEVEL_NAMES.get(level, level)} level", scenario, runs,
                     lambda s, level=level: separate[s].get(level, False), 0.025) for level in separate[0]]
    return rates + [counted("blind baseline: texts_separate at any level", scenario, runs,
                            lambda s: any(separate[s].values()), 0.025 * len(separate[0]))]


def dataset_inference_rate(scenario: Scenario, runs: int) -> Rate:
    """How often dataset inference finds the members trained on at p < 0.01 (stated: at most 1%), as an audit runs it
    (`members_against_nonmembers`: groups kept whole, samples without a group id left out)."""
    def fired(seed: int) -> bool:
        table, attacks = simulated_attacks(scenario, seed)
        return members_against_nonmembers(table, [a for a in attacks if a.level == "sample"], "patient",
                                          seed).p_value < 0.01

    return counted("dataset inference: p < 0.01", scenario, runs, fired, 0.01)


def canary_rates(canaries: int, mu: float, runs: int, delta: float = 1e-5) -> list[Rate]:
    """The one-run bounds on canaries whose scores a mu-Gaussian mechanism gives (an included canary's score shifted by
    mu; mu = 0: the model learnt nothing): how often Steinke et al.'s epsilon lower bound exceeds the mechanism's true
    epsilon at delta, and how often the f-DP bound's mu exceeds mu (each stated at most 5%); for mu > 0 also how often
    Steinke et al.'s bound is above 0 (power)."""
    scenario = Scenario(f"{canaries} canaries, each in with probability 1/2", 0, 0, 0, 1)
    true_epsilon = gdp_epsilon(mu, delta) if mu > 0 else 0.0
    bounds = []
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        included = rng.random(canaries) < 0.5
        scores = rng.normal(size=canaries) + mu * included
        bounds.append((one_run_bound(scores, included, delta, seed=seed).epsilon_lower_bound,
                       gaussian_bound(scores, included, delta).mu_lower_bound))
    truth = "null" if mu == 0 else f"a {mu:g}-GDP mechanism (epsilon {true_epsilon:.2f} at delta {delta:g})"
    rates = [counted("canaries: Steinke et al.'s bound above the true epsilon", scenario, runs,
                     lambda s: bounds[s][0] > true_epsilon + 1e-9, 0.05, truth),
             counted("canaries: f-DP's mu above the true mu", scenario, runs, lambda s: bounds[s][1] > mu + 1e-9, 0.05,
                     truth)]
    if mu > 0:
        rates.append(counted("canaries: Steinke et al.'s bound above 0", scenario, runs, lambda s: bounds[s][0] > 0,
                             truth=truth))
    return rates


def attack_epsilon_rate(scenario: Scenario, runs: int, settings: EvaluationSettings) -> Rate:
    """How often one attack's epsilon lower bound at the population's 10% threshold is above 0 at note level when
    nothing leaked (stated: at most 5%, its confidence)."""
    def fired(seed: int) -> bool:
        _, attacks = simulated_attacks(scenario, seed)
        results, _ = evaluate_attacks(attacks[:1], settings.model_copy(update={"seed": seed}))
        return any(t.epsilon_lower_bound > 0 for t in results[0].thresholds if t.alpha == 0.1)

    return counted("attack epsilon bound > 0 (one threshold)", scenario, runs, fired, 0.05)


def population_fit_rate(scenario: Scenario, runs: int, permutations: int) -> Rate:
    """How often the population test warns that the population scores unlike the non-members (stated: at most 1%,
    family-wise over every attack and level) when the two are drawn alike."""
    def fired(seed: int) -> bool:
        _, attacks = simulated_attacks(scenario, seed)
        return bool(population_fit(attacks, None, permutations, seed)["rejected"])

    return counted("population test warns", scenario, runs, fired, 0.01)


def extraction_rate(scenario: Scenario, runs: int, prefixes: int = 3) -> Rate:
    """How often the extraction line says the model gives training text back (the members' exact rate's interval wholly
    above the non-members' at one of `prefixes` prefix lengths) when members' and non-members' suffixes come back
    alike, one patient's notes more alike than others' (per note: a patient's own chance, shared by its notes)."""
    def fired(seed: int) -> bool:
        rng = np.random.default_rng(seed)
        table = samples(scenario, rng)
        audited = table[table["role"].isin([MEMBER, NONMEMBER])]
        chance = rng.beta(2, 5, size=table["patient"].max() + 1)[audited["patient"].to_numpy()]
        clusters = frame_clusters(audited, "sample_id")
        member = (audited["role"] == MEMBER).to_numpy()
        for _ in range(prefixes):
            rates = rates_by_side(rng.random(len(audited)) < chance, member, clusters)
            if rates["member"].interval[0] > rates["nonmember"].interval[1]:
                return True
        return False

    return counted("extraction: gives training text back", scenario, runs, fired, 0.05)


def poisson_rate(expected_batch: float, steps: int, runs: int, rate_factor: float = 1.0) -> Rate:
    """How often the DP-SGD Poisson check fails on batch sizes drawn Binomial(n, q x rate_factor), empty draws
    included, while the accountant was told q (rate_factor 1: a correct run; stated: at most ALARM)."""
    samples_count = 10_000
    q = expected_batch / samples_count
    scenario = Scenario(f"expected batch {expected_batch:g}, {steps} steps", 0, 0, 0, 1)
    truth = "null" if rate_factor == 1 else f"batches drawn at {rate_factor:g} x the accounted rate"
    return counted("DP-SGD Poisson check fails", scenario, runs,
                   lambda seed: not poisson_check(np.random.default_rng(seed).binomial(samples_count, q * rate_factor,
                                                                                         steps), samples_count, q).passed,
                   ALARM, truth)
