"""Measurements that test why lmaudit's demos disagree with the papers, read from finished audits (no training, no
model): each prints one markdown table (for docs/studies.md).

    python benchmarks/disagreements.py sections RUN     # a language-model demo with the other hospital's non-members
    python benchmarks/disagreements.py user-attacks RUN [RUN ...] [--feature loss]  # classifier demos

`sections`: the other hospital writes nursing and radiology notes only. The loss attack's AUC against each hospital's
non-members, on all member notes and on the members' notes of those two sections only, at sample and patient level
(a patient's score: the mean over the notes counted), so that the section mix and the hospital are told apart; and
the target's mean energy per note in each section.

`user-attacks` (one row per classifier demo, on one feature): Algorithm 2's user AUC, which reads no threshold (the
shadow sets its threshold, which an AUC ignores); Algorithm 3 (a logistic regression on a user's four statistics)
trained on the shadow users, as the attack is, and fitted on the audited users themselves (5-fold by user: what the
four statistics hold, shadow aside); and Algorithm 4 (the share of a user's posts that Algorithm 1's thresholds call
members) with the shadow's thresholds, with thresholds fitted on the audited users (5-fold by user), and with one
threshold put at each decile of the posts: how far its AUC depends on where the thresholds cut.
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

from lmaudit.attacks.shadow import classwise_thresholds, user_statistics
from lmaudit.studies.setup import OTHER_HOSPITAL_SECTIONS

LOSS_ATTACKS = ("score_loss_mlm_energy", "score_likelihood_ratio")


def member_auc(members: pd.Series, nonmembers: pd.Series) -> float:
    """ROC AUC of the scores (higher = member) of members against non-members."""
    labels = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    return float(roc_auc_score(labels, np.r_[members.to_numpy(), nonmembers.to_numpy()]))


def scores_with_sections(run: Path) -> pd.DataFrame:
    """The run's scores.parquet with each sample's note section (from the run's data files)."""
    scores = pd.read_parquet(run / "scores.parquet")
    sections = pd.concat([pd.read_parquet(path, columns=["sample_id", "section"]) for path in (run / "data").glob("*.parquet")])
    return scores.merge(sections.drop_duplicates("sample_id"), on="sample_id", how="left")


def section_table(run: Path) -> list[dict]:
    """Per attack and level: AUC of all member notes, and of the members' notes of the other hospital's sections,
    against each hospital's non-members (the same hospital's also restricted to those sections)."""
    scores = scores_with_sections(run)
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


def section_energy_table(run: Path) -> list[dict]:
    """The target's mean energy per note (nats), per section, of the members and of each hospital's non-members."""
    scores = scores_with_sections(run)
    audited = scores["role"].isin(["member", "nonmember"])
    who = scores["nonmember_set"].where(scores["role"] == "nonmember", "members")
    means = scores[audited].groupby(["section", who[audited]])["target_mlm_energy"].mean().unstack()
    return [{"section": section, **{name: "-" if pd.isna(value) else f"{value:.2f}" for name, value in row.items()}}
            for section, row in means[["members", "same-hospital", "other-hospital"]].iterrows()]


def user_folds(users: np.ndarray, is_member: np.ndarray, seed: int) -> list[np.ndarray]:
    """Five folds of the users (stratified by membership): each fold's users, as an array of ids."""
    folds = StratifiedKFold(5, shuffle=True, random_state=seed)
    return [users[held_out] for _, held_out in folds.split(users, is_member)]


def vote_shares_fitted_on_audited(posts: pd.DataFrame, oriented: np.ndarray, seed: int) -> pd.Series:
    """Algorithm 4's share of each user's posts called members, with Algorithm 1's class thresholds fitted on the
    other folds' audited users (their members against their non-members) instead of on the shadow model."""
    users = posts.groupby("group_id", sort=True)["role"].first()
    shares = {}
    for held_out in user_folds(users.index.to_numpy(), users.eq("member").to_numpy(), seed):
        fit = ~posts["group_id"].isin(held_out).to_numpy()
        thresholds, _ = classwise_thresholds(oriented[fit], posts["label"].to_numpy()[fit],
                                             (posts["role"] == "member").to_numpy()[fit])
        test = posts[~fit]
        cut = np.array([thresholds.get(str(label), thresholds["*"]) for label in test["label"]])
        called = pd.Series(oriented[~fit] >= cut, index=test.index, dtype=float)
        shares.update(called.groupby(test["group_id"]).mean().to_dict())
    return pd.Series(shares).sort_index()


def vote_auc_range(posts: pd.DataFrame, oriented: np.ndarray, is_member: pd.Series) -> tuple[float, float]:
    """The smallest and largest user-level AUC of Algorithm 4's share called, over one threshold for every class put
    at each decile (10th to 90th percentile) of the audited posts' oriented feature."""
    aucs = []
    for cut in np.quantile(oriented, np.arange(1, 10) / 10):
        shares = pd.Series(oriented >= cut, index=posts.index, dtype=float).groupby(posts["group_id"], sort=True).mean()
        aucs.append(roc_auc_score(is_member.loc[shares.index], shares))
    return min(aucs), max(aucs)


def user_attack_row(run: Path, feature: str, seed: int = 0) -> dict:
    """One audit's user-level AUCs on `feature`: the report's Algorithms 2, 3 and 4 (calibrated on the shadow model)
    beside Algorithms 3 and 4 fitted on the audited users themselves (5 folds by user)."""
    report = json.loads((run / "report.json").read_text())

    def reported(attack: str) -> float:
        return next(r["auc"] for r in report["results"] if r["attack"] == attack and r["signal"] == feature
                    and r["level"] == "group" and r["slice"] == "all")

    calibration = next(r["calibration"] for r in report["results"] if r["attack"] == "sample_threshold"
                       and r["signal"] == feature and r["level"] == "sample" and r["slice"] == "all")
    scores = pd.read_parquet(run / "scores.parquet")
    posts = scores[scores["role"].isin(["member", "nonmember"])].reset_index(drop=True)
    class_threshold = posts["label"].astype(str).map(calibration["class_thresholds"]).fillna(
        calibration["class_thresholds"]["*"])
    oriented = (posts[f"score_sample_threshold_{feature}"] + class_threshold).to_numpy()
    is_member = posts.groupby("group_id", sort=True)["role"].first().eq("member")
    statistics = user_statistics(posts[feature].to_numpy(), posts["group_id"].to_numpy())
    regression = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    fitted = cross_val_predict(regression, statistics.to_numpy(), is_member.to_numpy(),
                               cv=StratifiedKFold(5, shuffle=True, random_state=seed), method="decision_function")
    shares = vote_shares_fitted_on_audited(posts, oriented, seed)
    models = report["models"]
    lowest, highest = vote_auc_range(posts, oriented, is_member)
    called = (posts[f"score_sample_threshold_{feature}"] >= 0).mean()
    return {
        "run": run.name,
        "train accuracy, target / shadow": f"{models['target']['train_accuracy']:.3f} / {models['shadow']['train_accuracy']:.3f}",
        "Alg. 2 mean": f"{reported('user_threshold_avg'):.3f}",
        "Alg. 2 variance": f"{reported('user_threshold_var'):.3f}",
        "Alg. 3, shadow": f"{reported('user_logistic'):.3f}",
        "Alg. 3, audited users (5-fold)": f"{roc_auc_score(is_member, fitted):.3f}",
        "Alg. 4, shadow": f"{reported('sample_to_user'):.3f}",
        "Alg. 4, audited users' thresholds (5-fold)": f"{roc_auc_score(is_member.loc[shares.index], shares):.3f}",
        "posts the shadow's thresholds call members": f"{called:.0%}",
        "Alg. 4 over one threshold at each decile": f"{lowest:.3f} to {highest:.3f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("measurement", choices=("sections", "user-attacks"))
    parser.add_argument("runs", type=Path, nargs="+", help="finished demos' output folders")
    parser.add_argument("--feature", default="loss", help="user-attacks: the classifier feature (default: loss)")
    args = parser.parse_args()
    if args.measurement == "sections":
        for run in args.runs:
            print(markdown_table(section_table(run)))
            print(markdown_table(section_energy_table(run)))
    else:
        print(markdown_table([user_attack_row(run, args.feature) for run in args.runs]))


if __name__ == "__main__":
    main()
