"""The white-box audit of DP-SGD, from what the training recorded (`models/dp.py:dp_record`'s
`gradient_canary_observations`: each canary's score and key, and the implementation checks): both guess-based one-run
bounds and the score-based one (`gaussian_pair.py`) beside the accountant's epsilon, and the checks. Numbers only:
`report/privacy_words.py` words the verdict (CONTRADICTION when Steinke et al.'s bound, which assumes nothing of the
scores' shape, exceeds the accountant's epsilon; FAILED CHECK when a check failed)."""

from __future__ import annotations

import numpy as np

from lmaudit.metrics.fdp_one_run import gaussian_bound
from lmaudit.metrics.gaussian_pair import gaussian_pair_bound
from lmaudit.metrics.one_run import one_run_bound
from lmaudit.metrics.privacy import accountant_epsilon


def white_box_audit(dp: dict, confidence: float = 0.95) -> dict:
    """The audit of a DP-SGD run's record `dp` (with its gradient canaries' observations): bounds, the accountant's
    epsilon (PRV, else RDP) at the run's delta, and the checks (`report/privacy_words.py:with_verdict` adds the
    verdict)."""
    canaries, delta = dp["gradient_canary_observations"], dp["delta"]
    accountant = accountant_epsilon(dp)[1]
    scores, included = np.asarray(canaries["scores"]), np.asarray(canaries["included"], dtype=bool)
    steinke = one_run_bound(scores, included, delta, confidence)
    fdp = gaussian_bound(scores, included, delta, confidence)
    pair = gaussian_pair_bound(scores, included, delta, confidence)
    return {"gradient_canaries": len(scores), "confidence": confidence, "delta": delta,
            "epsilon_lower_bound": steinke.epsilon_lower_bound, "correct": steinke.guesses.correct,
            "guesses": steinke.guesses.guesses, "f_dp_mu_lower_bound": fdp.mu_lower_bound,
            "f_dp_epsilon_lower_bound": fdp.epsilon_lower_bound, "gaussian_pair_mu_lower_bound": pair.mu_lower_bound,
            "gaussian_pair_epsilon_lower_bound": pair.epsilon_lower_bound, "accountant_epsilon": accountant,
            "checks": canaries["checks"]}


def failed_checks(audit: dict) -> list[dict]:
    """The implementation checks of a white-box audit (`white_box_audit`'s) that failed."""
    return [check for check in audit["checks"] if not check["passed"]]
