"""What a DP audit's numbers say, in words: an empirical epsilon lower bound against the accountant's epsilon (the
canary audit and the white-box audit of DP-SGD word it alike), and the white-box audit's verdict and line
(`metrics/privacy.py` and `metrics/dp_audit.py` compute; this module only words)."""

from __future__ import annotations

from lmaudit.metrics.dp_audit import failed_checks
from lmaudit.metrics.privacy import contradicts


def verdict_against(empirical: float, claimed: float, bound: str = "the bound") -> str:
    """'consistent' or 'CONTRADICTION', in words, for an empirical epsilon lower bound (`bound` names it) against the
    accountant's epsilon (`metrics/privacy.py:contradicts`)."""
    if not contradicts(empirical, claimed):
        return f"consistent: {bound} is below the accountant's epsilon"
    return (f"CONTRADICTION: {bound} {empirical:.3g} exceeds the accountant's epsilon {claimed:.3g}; the DP training or "
            f"its accounting is wrong")


def white_box_verdict(audit: dict) -> str:
    """A white-box audit's (`metrics/dp_audit.py:white_box_audit`'s) verdict: CONTRADICTION where Steinke et al.'s
    bound exceeds the accountant's epsilon, else FAILED CHECK where a check failed, else consistent."""
    verdict = verdict_against(audit["epsilon_lower_bound"], audit["accountant_epsilon"], "the white-box bound")
    if contradicts(audit["epsilon_lower_bound"], audit["accountant_epsilon"]):
        return verdict
    failed = failed_checks(audit)
    return ("FAILED CHECK: " + "; ".join(f"{check['name']}: {check['detail']}" for check in failed) if failed
            else f"{verdict}, and every check held")


def with_verdict(audit: dict) -> dict:
    """A white-box audit with its verdict in words (`verdict`, last), as the training summary's readers and
    canary_report.json's `white_box` carry it."""
    return {**audit, "verdict": white_box_verdict(audit)}


def gaussian_pair_clause(audit: dict) -> str:
    """The score-based bound of a white-box audit in words ('' for an audit recorded before it existed): a bound above
    the accountant's epsilon is a contradiction only under the Gaussian limit of the steps' sum, so it is said as such."""
    bound = audit.get("gaussian_pair_epsilon_lower_bound")
    if bound is None:
        return ""
    clause = f"; from the scores' Gaussian limit: {bound:.3f}"
    if contradicts(bound, audit["accountant_epsilon"]):
        clause += (" (above the accountant's epsilon: wrong accounting if the steps' sum is Gaussian, which this "
                   "bound assumes; plant more gradient canaries to test it without that assumption)")
    return clause


def white_box_line(audit: dict) -> str:
    """A white-box audit (`with_verdict`'s) in one line: every bound against the accountant's epsilon, the verdict."""
    return (f"white-box audit of DP-SGD ({audit['gradient_canaries']} gradient canaries): epsilon >= "
            f"{audit['epsilon_lower_bound']:.3f} (Steinke et al.; f-DP's Gaussian curve: "
            f"{audit['f_dp_epsilon_lower_bound']:.3f}{gaussian_pair_clause(audit)}) at "
            f"delta {audit['delta']:g} against the accountant's {audit['accountant_epsilon']:.3g}; {audit['verdict']}")
