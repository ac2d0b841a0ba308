"""The white-box audit of DP-SGD's verdict, from what the training recorded (`models/dp.py:dp_record`'s
`gradient_canary_observations`: each canary's score and key, and the implementation checks): both one-run bounds beside the
accountant's epsilon, CONTRADICTION when Steinke et al.'s bound exceeds it, FAILED CHECK when a check failed."""

from __future__ import annotations

import numpy as np

from lmaudit.metrics.fdp_one_run import gaussian_bound
from lmaudit.metrics.one_run import one_run_bound
from lmaudit.metrics.privacy import accountant_epsilon, verdict_against


def white_box_audit(dp: dict, confidence: float = 0.95) -> dict:
    """The audit of a DP-SGD run's record `dp` (with its gradient canaries' observations): bounds, the accountant's
    epsilon (PRV, else RDP) at the run's delta, the checks, and the verdict."""
    canaries, delta = dp["gradient_canary_observations"], dp["delta"]
    accountant = accountant_epsilon(dp)[1]
    scores, included = np.asarray(canaries["scores"]), np.asarray(canaries["included"], dtype=bool)
    steinke = one_run_bound(scores, included, delta, confidence)
    fdp = gaussian_bound(scores, included, delta, confidence)
    failed = [check for check in canaries["checks"] if not check["passed"]]
    verdict = verdict_against(steinke.epsilon_lower_bound, accountant, "the white-box bound")
    if verdict.startswith("consistent"):
        verdict = ("FAILED CHECK: " + "; ".join(f"{check['name']}: {check['detail']}" for check in failed) if failed
                   else f"{verdict}, and every check held")
    return {"gradient_canaries": len(scores), "confidence": confidence, "delta": delta,
            "epsilon_lower_bound": steinke.epsilon_lower_bound, "correct": steinke.guesses.correct,
            "guesses": steinke.guesses.guesses, "f_dp_mu_lower_bound": fdp.mu_lower_bound,
            "f_dp_epsilon_lower_bound": fdp.epsilon_lower_bound, "accountant_epsilon": accountant,
            "checks": canaries["checks"], "verdict": verdict}


def white_box_line(audit: dict) -> str:
    """A white-box audit (`white_box_audit`'s) in one line: both bounds against the accountant's epsilon, the verdict."""
    return (f"white-box audit of DP-SGD ({audit['gradient_canaries']} gradient canaries): epsilon >= "
            f"{audit['epsilon_lower_bound']:.3f} (Steinke et al.; f-DP's Gaussian curve: {audit['f_dp_epsilon_lower_bound']:.3f}) at "
            f"delta {audit['delta']:g} against the accountant's {audit['accountant_epsilon']:.3g}; {audit['verdict']}")
