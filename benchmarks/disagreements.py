"""Measurements that test why lmaudit's demos disagree with the papers, read from finished audits (no training, no
model): each prints one markdown table (for docs/studies.md).

    python benchmarks/disagreements.py sections RUN      # a language-model demo with the other hospital's non-members
    python benchmarks/disagreements.py user-attacks RUN  # a classifier demo

`sections`: the other hospital writes nursing and radiology notes only. The loss attack's AUC against each hospital's
non-members, on all member notes and on the members' notes of those two sections only, at sample and patient level
(a patient's score: the mean over the notes counted), so that the section mix and the hospital are told apart.

`user-attacks`: Algorithm 4 (the share of a user's posts Algorithm 1 calls members) against the mean of the same
Algorithm 1 scores before they are cut at the threshold (what the vote throws away); and Algorithm 3 (a logistic
regression on a user's four statistics) trained on the shadow users, as the attack is, against the same regression
fitted on the audited users themselves (5-fold cross-validation: what the four statistics hold, shadow aside).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from markdown_section import markdown_table
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

OTHER_HOSPITAL_SECTIONS = ("nursing", "radiology")
LOSS_ATTACKS = ("score_loss_mlm_energy", "score_likelihood_ratio")
USER_STATISTICS = ("avg", "min", "max", "var")


def member_auc(members: pd.Series, nonmembers: pd.Series) -> float:
    """ROC AUC of the scores (higher = member) of members against non-members."""
    labels = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    return float(roc_auc_score(labels, np.r_[members.to_numpy(), nonmembers.to_numpy()]))


def section_table(run: Path) -> list[dict]:
    """Per attack and level: AUC of all member notes, and of the members' notes of the other hospital's sections,
    against each hospital's non-members (the same hospital's also restricted to those sections)."""
    scores = pd.read_parquet(run / "scores.parquet")
    sections = pd.concat([pd.read_parquet(path, columns=["sample_id", "section"]) for path in (run / "data").glob("*.parquet")])
    scores = scores.merge(sections.drop_duplicates("sample_id"), on="sample_id", how="left")
    kept = scores["section"].isin(OTHER_HOSPITAL_SECTIONS)
    members = scores["role"] == "member"
    same, other = (scores["nonmember_set"] == "same-hospital"), (scores["nonmember_set"] == "other-hospital")
    pairs = {
        "all member notes vs same hospital, all notes": (members, same),
        "all member notes vs other hospital": (members, other),
        "all member notes vs same hospital, nursing and radiology": (members, same & kept),
        "members' nursing and radiology vs same hospital's": (members & kept, same & kept),
        "members' nursing and radiology vs other hospital": (members & kept, other),
    }
    rows = []
    for attack in LOSS_ATTACKS:
        for level in ("sample", "patient"):
            row = {"attack": attack.removeprefix("score_"), "level": level}
            for name, (member_rows, nonmember_rows) in pairs.items():
                chosen = [scores[rows_][[attack, "group_id"]] for rows_ in (member_rows, nonmember_rows)]
                if level == "patient":
                    chosen = [frame.groupby("group_id")[[attack]].mean() for frame in chosen]
                row[name] = f"{member_auc(chosen[0][attack], chosen[1][attack]):.3f}"
            rows.append(row)
    return rows


def user_statistics(values: pd.Series, users: pd.Series) -> pd.DataFrame:
    """Per user (sorted): the mean, minimum, maximum and variance (ddof 0) of the values."""
    grouped = values.groupby(users.to_numpy(), sort=True)
    return pd.DataFrame({"avg": grouped.mean(), "min": grouped.min(), "max": grouped.max(), "var": grouped.var(ddof=0)})


def user_attack_table(run: Path, seed: int = 0) -> list[dict]:
    """Per feature: the report's Algorithm 2 (best statistic), 3 and 4 user AUCs beside the two measurements."""
    report = json.loads((run / "report.json").read_text())
    scores = pd.read_parquet(run / "scores.parquet")
    audited = scores[scores["role"].isin(["member", "nonmember"])]
    is_member = audited.groupby("group_id", sort=True)["role"].first().eq("member").to_numpy()
    rows = []
    for column in sorted(c for c in audited.columns if c.startswith("score_sample_threshold_")):
        feature = column.removeprefix("score_sample_threshold_")

        def reported(attack: str) -> float:
            return next(r["auc"] for r in report["results"] if r["attack"] == attack and r["signal"] == feature
                        and r["level"] == "group" and r["slice"] == "all")

        margins = audited[column].groupby(audited["group_id"].to_numpy(), sort=True)
        statistics = user_statistics(audited[feature], audited["group_id"])
        regression = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        folds = StratifiedKFold(5, shuffle=True, random_state=seed)
        fitted_on_audited = cross_val_predict(regression, statistics.to_numpy(), is_member, cv=folds,
                                              method="decision_function")
        best = max(USER_STATISTICS, key=lambda s: reported(f"user_threshold_{s}"))
        rows.append({
            "feature": feature,
            "Alg. 2, best statistic": f"{reported(f'user_threshold_{best}'):.3f} ({best})",
            "Alg. 2, mean": f"{reported('user_threshold_avg'):.3f}",
            "Alg. 4 (share called)": f"{reported('sample_to_user'):.3f}",
            "mean Alg. 1 score (no vote)": f"{roc_auc_score(is_member, margins.mean()):.3f}",
            "distinct shares": str(margins.apply(lambda m: (m >= 0).mean()).nunique()),
            "Alg. 3 (shadow users)": f"{reported('user_logistic'):.3f}",
            "Alg. 3 fitted on audited users (5-fold)": f"{roc_auc_score(is_member, fitted_on_audited):.3f}",
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("measurement", choices=("sections", "user-attacks"))
    parser.add_argument("run", type=Path, help="a finished demo's output folder")
    args = parser.parse_args()
    rows = section_table(args.run) if args.measurement == "sections" else user_attack_table(args.run)
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
