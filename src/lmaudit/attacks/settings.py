"""The attacks' own parameters: one settings type, shared by the configuration and the attacks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class AttackSettings(BaseModel):
    """Parameters of the attacks that have any (each in the unit its attack states)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_k_fraction: float = Field(0.2, gt=0, le=1, description="fraction of a text's least likely tokens that Min-K% "
                                                               "and Min-K%++ average (Shi et al.: 0.2)")
    dc_pdd_bound: float = Field(0.01, gt=0, description="DC-PDD's upper bound a on each token's score (Zhang et al.: 0.01)")
    rmia_offline_a: float = Field(1.0, gt=0, le=1, description="RMIA's offline scaling a: P(x) = ((1 + a) mean_ref + 1 - a)"
                                                               " / 2; 1 takes the references' mean as is (see docs)")
    rmia_gamma: float = Field(1.0, gt=0, description="RMIA's gamma: x beats z when its likelihood ratio over z is >= gamma")
    con_recall_gamma: float = Field(0.5, ge=0, description="Con-ReCall's weight of the member prefix's log-likelihood "
                                                           "(the paper sweeps 0.1-1 on labelled data; not tuned here)")
    ez_mia_paper_parity: bool = Field(False, description="EZ-MIA: score 0 where the authors' code does (no negative "
                                                         "part, or fewer than 2 error-zone tokens), not lmaudit's fix")
    lira_per_sample_variance_from: int = Field(64, ge=2, description="LiRA fits each sample's own variance from this "
                                                                    "many references on; below, one global variance")
    whitebox_split: Literal["patient", "sample"] = Field(
        "patient", description="logistic_split's 20% training split: by patient or user (no one's samples on both "
                               "sides), or by sample as Jagannatha et al. (a patient's other notes in the training 20% "
                               "make the audited ones easier)")

