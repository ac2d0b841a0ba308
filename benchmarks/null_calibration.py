"""The null laboratory at full size (src/lmaudit/studies/null_lab.py): every decision rule, interval and p-value the
report prints, on simulated audits with no leakage (false-alarm rate against the stated level) and with a planted leak
(power), hundreds of times each; writes the tables of docs/statistics.md. Scenarios: patients of several notes sharing
a patient effect (intraclass correlation), ragged note counts, ties, few non-members, missing group ids, five attacks
that share most of their signal.

    python benchmarks/null_calibration.py [--runs 200] [--out docs/statistics.md] [--only verdict,intervals,...]

At --runs 200 it takes about an hour on 2 CPU cores (the verdict's scenarios are most of it).
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time
from pathlib import Path

from markdown_section import markdown_table, publish

from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.studies import erasure_null
from lmaudit.studies.erasure_null import ErasureScenario
from lmaudit.studies.gaussian_pair_null import DPSGDScenario, dp_sgd_rates, laplace_rate, unrelated_rate
from lmaudit.studies.memorisation_null import CurveScenario, curve_rates
from lmaudit.studies.null_lab import (
    Rate,
    attack_epsilon_rate,
    canary_rates,
    dataset_inference_rate,
    end_to_end_rates,
    extraction_rate,
    gate_rates,
    interval_misses,
    poisson_rate,
    population_fit_rate,
    texts_separate_rates,
    verdict_rates,
)
from lmaudit.studies.null_scenarios import Scenario

# The verdict's evaluation as an audit runs it, but for the AUC interval's bootstrap, which the verdict does not read
# where no blind baseline ran (a simulated audit has no texts).
VERDICT = EvaluationSettings(bootstrap=100)
NEW_USER = Scenario("the issue's file: 150 x 10 / 30 x 10 / 50 x 10 notes, ICC 0.3", 150, 30, 50, 10, icc=0.3)
VERDICT_SCENARIOS = (
    Scenario("independent notes: 2,000 members, 200 non-members", 2000, 200, 200, 1),
    Scenario("independent notes: 5,000 members, 1,000 non-members", 5000, 1000, 1000, 1),
    Scenario("few non-members: 10,000 members, 100 non-members", 10000, 100, 200, 1),
    Scenario("patients: 150 x 10 / 30 x 10 notes, ICC 0.3", 150, 30, 50, 10, icc=0.3),
    Scenario("patients: 200 / 60, 1-19 notes each, ICC 0.5, ties", 200, 60, 60, 10, icc=0.5, decimals=1, ragged=True),
    Scenario("patients: 150 x 10 / 30 x 10, ICC 0.3, 10% group ids missing", 150, 30, 50, 10, icc=0.3,
             missing_groups=0.1),
)
COVERAGE_SCENARIOS = (
    Scenario("patients 100 x 10 / 100 x 10, ICC 0.5, AUC 0.97", 100, 100, 0, 10, icc=0.5, effect=2.6),
    Scenario("patients 100 x 10 / 100 x 10, ICC 0.3, AUC 0.99", 100, 100, 0, 10, icc=0.3, effect=3.3),
    Scenario("patients 200 / 100, 1-9 notes, ICC 0.5, AUC 0.97", 200, 100, 0, 5, icc=0.5, effect=2.6, ragged=True),
    Scenario("patients 150 x 10 / 30 x 10, ICC 0.5, AUC 0.97", 150, 30, 0, 10, icc=0.5, effect=2.6),
    Scenario("independent notes 1,000 / 100, AUC 0.99", 1000, 100, 0, 1, effect=3.3),
    Scenario("patients 300 x 10 / 100 x 10, ICC 0.3, AUC 0.76", 300, 100, 0, 10, icc=0.3, effect=1.0),
)


def verdict_section(runs: int) -> list[Rate]:
    rates = []
    for scenario in VERDICT_SCENARIOS:
        rates += verdict_rates(scenario, runs, VERDICT)
        rates += verdict_rates(scenario.with_effect(1.0), max(20, runs // 5), VERDICT)
        rates += verdict_rates(scenario.with_effect(2.5), max(20, runs // 5), VERDICT)
    rates += end_to_end_rates(NEW_USER, max(20, runs // 4), VERDICT)
    return rates


def interval_section(runs: int) -> list[Rate]:
    return [rate for scenario in COVERAGE_SCENARIOS for rate in interval_misses(scenario, 2 * runs, 1000)]


def validity_section(runs: int) -> list[Rate]:
    texts = Scenario("40 patients x 10 texts, ICC 0.5", 20, 20, 0, 10, icc=0.5)
    larger = Scenario("100 patients x 5 texts, ICC 0.3", 50, 50, 0, 5, icc=0.3)
    missing = Scenario("patients 40 x 5 / 40 x 5, ICC 0.3, 10% group ids missing", 40, 40, 0, 5, icc=0.3,
                       missing_groups=0.1)
    most = Scenario("patients 40 x 5 / 40 x 5, ICC 0.3, 50% group ids missing", 40, 40, 0, 5, icc=0.3,
                    missing_groups=0.5)
    population = Scenario("patients 150 x 10 / 30 x 10 / 50 x 10, ICC 0.3", 150, 30, 50, 10, icc=0.3)
    return [*texts_separate_rates(texts, runs, 1000), *texts_separate_rates(larger, runs, 1000),
            *texts_separate_rates(texts.with_effect(0.3), max(20, runs // 5), 1000),
            dataset_inference_rate(missing, 2 * runs), dataset_inference_rate(most, 2 * runs),
            dataset_inference_rate(missing.with_effect(0.3), runs // 2),
            population_fit_rate(population, runs, 1000),
            population_fit_rate(Scenario(population.name, 150, 30, 50, 10, icc=0.3, population_effect=0.5),
                                max(20, runs // 5), 1000)]


def bound_section(runs: int) -> list[Rate]:
    patients = Scenario("patients: 150 x 10 / 30 x 10 / 50 x 10 notes, ICC 0.3", 150, 30, 50, 10, icc=0.3)
    extraction = Scenario("patients 40 x 10 / 20 x 10 notes, ICC 0.5", 40, 20, 0, 10, icc=0.5)
    rates = [attack_epsilon_rate(patients, runs, VERDICT), extraction_rate(extraction, 2 * runs)]
    for canaries in (100, 1000):
        for mu in (0.0, 1.0, 2.0):
            rates += canary_rates(canaries, mu, 2 * runs)
    for batch in (1, 2, 4, 8, 32):
        rates.append(poisson_rate(batch, 500, 100 * runs))
    rates += [poisson_rate(4, 500, runs, rate_factor=1.5), poisson_rate(32, 500, runs, rate_factor=1.1)]
    return rates


GATE_SCENARIOS = (
    Scenario("the demo's counts: patients 24 / 12 / 12, 1-29 notes, ICC 0.3", 24, 12, 12, 15, icc=0.3, ragged=True),
    Scenario("patients: 150 x 10 / 30 x 10 / 50 x 10 notes, ICC 0.3", 150, 30, 50, 10, icc=0.3),
    Scenario("independent notes: 2,000 members, 1,000 non-members", 2000, 1000, 1000, 1),
)


def gate_section(runs: int) -> list[Rate]:
    rates = []
    for scenario in GATE_SCENARIOS:
        rates += gate_rates(scenario, runs, VERDICT)
        rates += gate_rates(scenario.with_effect(1.0), max(20, runs // 5), VERDICT)
    return rates


ERASURE_NULL = (
    ErasureScenario("one subject x 10 notes / 39 holdout (1-20 notes), ICC 0.3", 1, 39, 10),
    ErasureScenario("one subject x 5 notes / 19 holdout, ICC 0.3, 3 probes", 1, 19, 5, probes=2),
    ErasureScenario("3 subjects x 4 notes / 39 holdout, ICC 0.6", 3, 39, 4, icc=0.6),
    ErasureScenario("5 subjects x 10 notes / 100 holdout, ICC 0.3, 4 probes (the command's)", 5, 100, 10, probes=3),
)


def erasure_section(runs: int) -> list[Rate]:
    rates = []
    for scenario in ERASURE_NULL:
        rates += erasure_null.verdict_rates(scenario, 20 * runs)
    for icc in (0.05, 0.3):
        for notes in (3, 5, 10, 20):
            for shift in (1.0, 1.5):
                held = ErasureScenario(f"one subject x {notes} notes / 39 holdout, ICC {icc:g}, 4 probes", 1, 39,
                                       notes, icc=icc, shift=shift, before_shift=shift, probes=3)
                rates.append(erasure_null.power_rate(held, max(50, runs)))
    over = ErasureScenario("one subject x 10 notes / 39 holdout, ICC 0.05", 1, 39, 10, icc=0.05, shift=-1.5)
    rates += erasure_null.verdict_rates(over, max(50, runs))[:1]
    alike = ErasureScenario("2 subjects x 8 notes / 39 holdout, ICC 0.3", 2, 39, 8, shift=1.0, before_shift=1.0)
    rates += [erasure_null.change_rate(alike, 10 * runs), erasure_null.change_rate(alike.with_shift(0.0), runs)]
    for scenario, margin in ((ErasureScenario("100 subjects x 10 notes / 200 holdout, ICC 0.1", 100, 200, 10,
                                              icc=0.1), 0.05),
                             (ErasureScenario("20 subjects x 10 notes / 80 holdout, ICC 0.1", 20, 80, 10, icc=0.1), 0.1),
                             (ErasureScenario("5 subjects x 10 notes / 40 holdout, ICC 0.6", 5, 40, 10, icc=0.6), 0.1),
                             (ErasureScenario("one subject x 20 notes / 40 holdout, ICC 0.3", 1, 40, 20), 0.1)):
        for retrained in (False, True):
            rates += [erasure_null.equivalence_rate(scenario, 5 * runs, True, margin, retrained=retrained),
                      erasure_null.equivalence_rate(scenario, runs, False, margin, retrained=retrained)]
    return rates


CURVE_NULL = (
    CurveScenario("250 canaries at 1, 4, 16 copies", 250),
    CurveScenario("250 canaries at 1, 4, 16 copies, ties", 250, ties=True),
    CurveScenario("60 canaries (about 10 planted per count), ties", 60, ties=True),
    CurveScenario("1,000 canaries, ties", 1000, ties=True),
    CurveScenario("300 canaries at 1, 2, 4, 8, 16 copies, ties", 300, {1: 0.0, 2: 0.0, 4: 0.0, 8: 0.0, 16: 0.0}, True),
)


def curve_section(runs: int) -> list[Rate]:
    rates = []
    for scenario in CURVE_NULL:
        rates += curve_rates(scenario, 20 * runs)
    for shift in (0.3, 0.5, 0.7):
        rates += curve_rates(CurveScenario("300 canaries, ties", 300, {1: 0.0, 4: 0.0, 16: shift}, True), 5 * runs)
    rates += curve_rates(CurveScenario("300 canaries, ties", 300, {1: 0.0, 4: 0.5, 16: 1.0}, True), 5 * runs)
    return rates


POISSON = 32 / 527  # the benchmark's tiny causal LM: batches of 32 of 527 notes
WHITE_BOX_NULL = (
    DPSGDScenario("full batches, 20 steps, sigma 4.854 (Gaussian scores)", 1000, 1.0, 4.854, 20),
    DPSGDScenario("one full-batch step, sigma 1 (Gaussian scores)", 1000, 1.0, 1.0, 1),
    DPSGDScenario("Poisson 32 / 527, 340 steps, sigma 2.432", 1000, POISSON, 2.432, 340),
    DPSGDScenario("Poisson 32 / 527, 340 steps, sigma 0.8", 1000, POISSON, 0.8, 340),
    DPSGDScenario("Poisson 0.01, 100 steps, sigma 0.6 (most canaries never sampled)", 1000, 0.01, 0.6, 100),
    DPSGDScenario("Poisson 0.2, 5 steps, sigma 2", 1000, 0.2, 2.0, 5),
    DPSGDScenario("100 canaries, Poisson 32 / 527, 340 steps, sigma 1.462", 100, POISSON, 1.462, 340),
)


def white_box_section(runs: int) -> list[Rate]:
    rates = []
    for scenario in WHITE_BOX_NULL:
        rates += dp_sgd_rates(scenario, runs)
    # The targets: 1,000 canaries at accountant epsilons 4 and 1 (the benchmark's batches and steps).
    rates += dp_sgd_rates(DPSGDScenario("Poisson 32 / 527, 340 steps, sigma 1.462", 1000, POISSON, 1.462, 340),
                          runs, (1.5,))
    rates += dp_sgd_rates(DPSGDScenario("Poisson 32 / 527, 340 steps, sigma 4.375", 1000, POISSON, 4.375, 340),
                          runs, (0.5,))
    return [*rates, unrelated_rate(1000, 5 * runs), unrelated_rate(100, 5 * runs), laplace_rate(1000, 1.0, runs)]


SECTIONS = {"verdict": verdict_section, "intervals": interval_section, "validity": validity_section,
            "bounds": bound_section, "gate": gate_section, "erasure": erasure_section, "curve": curve_section,
            "white-box": white_box_section}


def shown(value: float) -> str:
    """A rate to three decimals, or two significant digits where that would read 0.000."""
    return f"{value:.3f}" if value == 0 or value >= 0.001 else f"{value:.2g}"


def row(rate: Rate) -> dict:
    low, high = rate.interval
    level = "" if rate.nominal is None else f"{rate.nominal:g}"
    return {"rule": rate.rule, "stated level": level, "scenario": rate.scenario, "truth": rate.truth,
            "runs": rate.runs, "fired": rate.events, "rate [95% CI]": f"{shown(rate.rate)} [{shown(low)}, {shown(high)}]"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="simulated audits per null scenario")
    parser.add_argument("--out", type=Path, help="markdown file whose sections to replace (docs/statistics.md)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections: " + ", ".join(SECTIONS))
    arguments = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for name in arguments.only.split(","):
        started = time.time()
        rates = SECTIONS[name](arguments.runs)
        header = (f"`python benchmarks/null_calibration.py --runs {arguments.runs} --only {name}` at {commit} "
                  f"({platform.machine()}, {time.time() - started:.0f} s):\n\n")
        publish(header + markdown_table([row(rate) for rate in rates]), arguments.out, f"null-{name}")


if __name__ == "__main__":
    main()
