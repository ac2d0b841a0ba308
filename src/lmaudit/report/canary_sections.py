"""The sections of canary_report.json that its builder (`canaries/report.py:canary_report`) makes as models and its
readers (the terminal lines, the page) read as attributes; `report/document.py:CanaryReportDocument` holds them. A
number that is not measured is None (null in the file)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CanaryPart(BaseModel):
    """A section of canary_report.json: exactly the fields listed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class OneRunSection(CanaryPart):
    """Steinke et al.'s one-run bound: the guesses (planted, not planted, right of how many), the epsilon lower bound at
    delta with its confidence, how many guess counts were tried, and the most these canaries can prove."""

    canaries: int
    guesses: int
    positive_guesses: int
    negative_guesses: int
    correct: int
    accuracy: float | None
    epsilon_lower_bound: float
    delta: float
    confidence: float
    choices_of_k: int
    ceiling: float
    at_ceiling: bool


class FdpSection(CanaryPart):
    """The f-DP bound from the same guesses (Mahloujifar et al.): mu, the rejected Gaussian curve's epsilon at delta
    (None at delta 0), the guesses, and the most these canaries can prove."""

    mu_lower_bound: float
    epsilon_lower_bound: float | None
    delta: float
    confidence: float
    positive_guesses: int
    negative_guesses: int
    correct: int
    guesses: int
    mu_ceiling: float
    epsilon_ceiling: float | None


class ValiditySection(CanaryPart):
    """The rank test of planted against unplanted scores (`metrics/canary_validity.py`): counts, rank AUC, the
    probability of scores this far below chance (None without a canary on one side), its level, the audit's validity."""

    test: str
    planted: int
    unplanted: int
    rank_auc: float | None
    p_below: float | None
    level: float
    valid: bool


class GroupSection(CanaryPart):
    """For canaries planted r > 1 times: the group's accountant epsilon and delta (None where vacuous) and what the
    group's f-DP bound implies per record (mu, and its epsilon at the record's delta)."""

    repeats: int
    accountant_epsilon: float | None
    accountant_delta: float | None
    record_mu_lower_bound: float
    record_epsilon_lower_bound: float | None
    record_delta: float


class AccountantSection(CanaryPart):
    """The accountant's epsilons the training recorded (RDP; PRV, None above its range; infinite without noise) and
    their delta."""

    epsilon_rdp: float | None
    epsilon_prv: float | None
    delta: float
