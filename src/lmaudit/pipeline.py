"""The one place where stages are wired together: audit from models, attack from scores, demo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.attacks.suite import AttackScores, build_attacks
from lmaudit.config import AuditConfig, EvaluationConfig
from lmaudit.data.corpus import (
    ROLES,
    check_unique_sample_ids,
    combine_corpora,
    load_corpus,
    read_table,
)
from lmaudit.data.roles import check_disjoint_groups, check_role_sizes
from lmaudit.errors import InputError
from lmaudit.metrics.evaluate import EvaluationSettings, evaluate_attack, population_mismatch_warnings
from lmaudit.report.build import (
    build_report,
    data_summary,
    environment_info,
    write_report,
)

AUDITED_ROLES = ("member", "nonmember")


def load_audit_corpus(role_files: dict[str | None, str]) -> pd.DataFrame:
    """Load every role file into one validated corpus (unique ids, roles disjoint by group)."""
    corpus = combine_corpora([load_corpus(path, role) for role, path in role_files.items()])
    check_role_sizes(corpus, AUDITED_ROLES)
    present = set(corpus["role"])
    check_role_sizes(corpus, [r for r in ROLES if r in present and r not in AUDITED_ROLES])
    check_disjoint_groups(corpus)
    return corpus


def evaluate_attacks(attacks: list[AttackScores], skipped: list[dict], settings: EvaluationConfig) -> tuple[list[dict], list[dict]]:
    """Every attack evaluated: result records, and the skipped attacks and slices."""
    evaluation = EvaluationSettings(**settings.model_dump())
    results, skipped = [], list(skipped)
    for attack in attacks:
        attack_results, attack_skipped = evaluate_attack(attack, evaluation)
        results += attack_results
        skipped += attack_skipped
    return results, skipped


def scores_table(signals: pd.DataFrame, attacks: list[AttackScores], texts: pd.Series | None) -> pd.DataFrame:
    """One row per sample: ids, role, length, every signal and sample-level attack score; text only if asked.

    Attack columns are score_<attack>, or score_<attack>_<signal> when the attack runs on several signals."""
    table = signals.copy()
    sample_attacks = [a for a in attacks if a.level == "sample"]
    uses = pd.Series([a.attack for a in sample_attacks]).value_counts()
    for attack in sample_attacks:
        name = f"score_{attack.attack}_{attack.signal}" if uses[attack.attack] > 1 else f"score_{attack.attack}"
        table = table.merge(attack.frame[["id", "score"]].rename(columns={"id": "sample_id", "score": name}),
                            on="sample_id", how="left")
    if texts is not None:
        table["text"] = texts.to_numpy()
    return table.drop(columns=[c for c in ("source", "row") if c in table.columns])


def finish_report(out: str | Path, config: dict, signals: pd.DataFrame, attacks: list[AttackScores], skipped: list[dict],
            evaluation: EvaluationConfig, texts: pd.Series | None, device: str = "cpu", models: dict | None = None) -> dict:
    """Evaluate the attacks and write the output folder (report.json, scores.parquet, report.html)."""
    results, skipped = evaluate_attacks(attacks, skipped, evaluation)
    if not results:
        raise InputError("no attack could be evaluated: " + "; ".join(s["reason"] for s in skipped))
    report = build_report(config, data_summary(signals), results, skipped, environment_info(device),
                          population_mismatch_warnings(results), models)
    write_report(out, report, scores_table(signals, attacks, texts), attacks)
    return report


def _lm_signal_columns(signals: pd.DataFrame, signal: str) -> pd.DataFrame:
    return signals.rename(columns={"target": f"target_{signal}", "reference": f"reference_{signal}"})


def run_audit(config: AuditConfig, progress: bool = False) -> dict:
    """Audit from models: compute (or reuse) the signals, run every attack, write the report."""
    from lmaudit.models.load import resolve_device
    from lmaudit.signals.compute import model_signals
    from lmaudit.signals.mlm import SignalSettings

    if config.signal.signal == "classifier":
        from lmaudit.classifier_audit import run_classifier_audit

        return run_classifier_audit(config, progress)
    corpus = load_audit_corpus(config.role_files())
    scored = corpus[corpus["role"].isin(["member", "nonmember", "population", "calibration_member"])].reset_index(drop=True)
    signal_settings = SignalSettings(**config.signal.model_dump(exclude={"batch_tokens"}))
    cache = config.cache_dir or str(Path(config.out) / "cache")
    models = {name: path for name, path in (("target", config.target), ("reference", config.reference)) if path}
    signals = scored[["sample_id", "role", "group_id", "subgroup_id"]].copy()
    device = resolve_device(config.device)
    per_model = model_signals(models, scored["sample_id"].tolist(), scored["text"].tolist(), signal_settings, cache,
                              config.signal.batch_tokens, progress, config.trust_remote_code, device)
    for name, values in per_model.items():
        signals[name] = values["value"].to_numpy()
        if name == "target":
            signals["length"] = values["n_tokens"].to_numpy()
            signals["truncated"] = values["truncated"].to_numpy()
    texts = scored["text"] if config.include_text else None
    attacks, skipped = build_attacks(signals, config.signal.signal)
    if config.whitebox:
        whitebox_attacks, whitebox_skipped = _whitebox_attacks(config, scored, signals, cache, progress, device)
        attacks += whitebox_attacks
        skipped += whitebox_skipped
    return finish_report(config.out, config.model_dump(), _lm_signal_columns(signals, config.signal.signal), attacks, skipped,
                   config.evaluation, texts, device)


WHITEBOX_FEATURES = {"whitebox_attention": "attention_concentration", "whitebox_gradient": "gradient_norms"}


def whitebox_signals(config: AuditConfig) -> tuple[list[tuple[str, object]], list[dict]]:
    """The white-box features to compute, as (report name, signal settings); and those the model does not allow."""
    from lmaudit.models.load import has_attention
    from lmaudit.signals.mlm import SignalSettings

    chosen, skipped = [], []
    for signal, name in WHITEBOX_FEATURES.items():
        if signal == "whitebox_attention" and not has_attention(config.target):
            skipped.append({"attack": "logistic_*", "level": "*", "slice": "all", "signal": name,
                            "reason": "the model has no attention layers"})
            continue
        # The gradient is of the signal's own loss: for an MLM, the sample's first mask (k = 1, mean).
        chosen.append((name, SignalSettings(signal=signal, seed=config.signal.seed, max_length=config.signal.max_length,
                                            mask_fraction=config.signal.mask_fraction)))
    return chosen, skipped


def _whitebox_attacks(config: AuditConfig, scored: pd.DataFrame, signals: pd.DataFrame, cache: str, progress: bool,
                      device: str) -> tuple[list[AttackScores], list[dict]]:
    """Logistic-regression attacks on the target's attention and gradient features (Jagannatha et al.)."""
    from lmaudit.attacks.learned import build_learned_attacks
    from lmaudit.signals.compute import model_signal

    features, skipped = whitebox_signals(config)
    attacks = []
    for name, settings in features:
        values = model_signal(config.target, scored["sample_id"].tolist(), scored["text"].tolist(), settings, cache,
                              config.signal.batch_tokens, progress, config.trust_remote_code, f"target {name}", device=device)
        feature_attacks, feature_skipped = build_learned_attacks(signals, np.stack(values["value"].to_numpy()), name,
                                                                 seed=config.evaluation.seed)
        attacks += feature_attacks
        skipped += feature_skipped
    return attacks, skipped


SCORES_COLUMNS = ("sample_id", "role", "target_loss")


def load_scores(path: str | Path) -> pd.DataFrame:
    """Precomputed losses (lower = more likely under the model) in the internal signals layout."""
    table = read_table(path)
    missing = [c for c in SCORES_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; a scores file needs sample_id, role, target_loss")
    signals = pd.DataFrame({"sample_id": table["sample_id"].astype(str), "role": table["role"].astype(str)})
    for column, name in (("target_loss", "target"), ("reference_loss", "reference")):
        if column in table.columns:
            values = pd.to_numeric(table[column], errors="coerce")
            bad = np.flatnonzero(~np.isfinite(values.to_numpy(dtype=float)))
            if len(bad):
                raise InputError(f"{path}, row {bad[0] + 1}: {column} is not a finite number; fix or remove the row")
            signals[name] = values.to_numpy(dtype=float)
    for column in ("group_id", "subgroup_id", "length"):
        signals[column] = table[column].to_numpy() if column in table.columns else None
    signals["length"] = pd.to_numeric(signals["length"], errors="coerce")
    corpus_like = signals.assign(source=str(path), row=np.arange(1, len(signals) + 1))
    unknown = corpus_like[~corpus_like["role"].isin(ROLES)]
    if not unknown.empty:
        row = unknown.iloc[0]
        raise InputError(f"{path}, row {row['row']}: unknown role '{row['role']}'; use one of {', '.join(ROLES)}")
    check_unique_sample_ids(corpus_like)
    check_role_sizes(corpus_like, AUDITED_ROLES)
    check_disjoint_groups(corpus_like)
    return signals


def run_attack(scores_path: str | Path, out: str | Path, evaluation: EvaluationConfig, signal: str = "loss") -> dict:
    """Audit from precomputed scores: the same attacks, metrics and report, without any model."""
    signals = load_scores(scores_path)
    config = {"scores": str(scores_path), "out": str(out), "signal": signal, "evaluation": evaluation.model_dump()}
    attacks, skipped = build_attacks(signals, signal)
    return finish_report(out, config, _lm_signal_columns(signals, signal), attacks, skipped, evaluation, texts=None)


def write_signal_file(values: pd.DataFrame, signal: str, out: str | Path) -> None:
    """`lmaudit score` output: sample_id and the signal, CSV or Parquet by extension."""
    out = Path(out)
    table = pd.DataFrame({"sample_id": values["sample_id"], signal: values["value"]})
    if out.suffix.lower() in (".parquet", ".pq"):
        table.to_parquet(out, index=False)
    elif out.suffix.lower() == ".csv":
        table.to_csv(out, index=False)
    else:
        raise InputError(f"{out}: unknown output type '{out.suffix}'; use .csv or .parquet")


@dataclass(frozen=True)
class DemoSize:
    """How big the demo is: patients generated, training epochs, masks, bootstrap resamples."""

    patients: int
    epochs: int
    k: int
    bootstrap: int


# Both models train long enough to memorise (train loss ~0.5 nats at 100 epochs)
# with the same recipe: a reference trained like the target on other patients is what makes the
# ratio cancel sample difficulty (tried: a weaker, 30-epoch reference made the ratio no better than the loss).
DEMO_SIZES = {
    "smoke": DemoSize(patients=60, epochs=30, k=4, bootstrap=200),
    "default": DemoSize(patients=300, epochs=100, k=10, bootstrap=1000),
}
DEMO_LEARNING_RATE = 3e-3
# Patients per role. The reference trains on its own patients: training it on the population
# that calibrates the thresholds would lower the population's scores and break the FPR guarantee.
# It gets the largest share: a reference that has seen less of the distribution than the target
# finds text the target saw in other patients (rare diagnoses, drugs) alien, which makes
# non-members look like members (measured: non-member energy 6.4 +- 7.1 nats under a reference
# trained on 30% of patients, against 4.5 +- 4.2 under the target trained on 40%).
DEMO_SPLIT = {"member": 0.24, "calibration_member": 0.06, "nonmember": 0.12, "population": 0.12, "reference_train": 0.46}


def _train_unless_done(kind: str, texts: list[str], folder: Path, **settings) -> None:
    """Train an LM of `kind` (mlm, clm) unless `folder` holds one trained the same way on the same texts."""
    from dataclasses import asdict

    from lmaudit.models.train import read_training_summary, train_language_model

    done = read_training_summary(folder)
    wanted = {key: settings[key] for key in ("epochs", "seed", "dropout", "learning_rate")} | {"kind": kind}
    dp = settings.get("dp")
    if dp is None:
        wanted["n_samples"] = len(texts)
    same_dp = (done or {}).get("dp") is None if dp is None else all(
        ((done or {}).get("dp") or {}).get(key) == value for key, value in asdict(dp).items())
    if done is not None and same_dp and all(done.get(key) == value for key, value in wanted.items()):
        return
    train_language_model(kind, texts, folder, **settings)


def split_and_write_roles(corpus: pd.DataFrame, split: dict[str, float], seed: int, data_dir: Path) -> dict[str, Path]:
    """Give whole groups a role in the `split` proportions (seeded; sets corpus["role"]) and write one Parquet file per role."""
    from lmaudit.data.roles import split_groups

    corpus["role"] = corpus["group_id"].map(split_groups(corpus["group_id"].tolist(), split, seed))
    data_dir.mkdir(parents=True, exist_ok=True)
    files = {role: data_dir / f"{role}.parquet" for role in split}
    for role, path in files.items():
        corpus[corpus["role"] == role].drop(columns="role").to_parquet(path, index=False)
    return files


DEMO_SUITES = {"mlm": ("mlm", "mlm_energy"), "causal": ("clm", "clm_loss")}


def run_demo(out: str | Path, size: str = "default", seed: int = 0, progress: bool = False, suite: str = "mlm") -> dict:
    """Generate notes, split patients into roles, train target and reference, audit, report.

    suite "mlm": BERT masked LMs and the MLM energy; "causal": GPT-2 causal LMs and the mean
    next-token loss (Jagannatha's black-box setting, at sample, admission and patient level)."""
    from lmaudit.data.synth import generate_notes

    demo = DEMO_SIZES[size]
    out = Path(out)
    notes = generate_notes(demo.patients, seed)
    files = split_and_write_roles(notes, DEMO_SPLIT, seed, out / "data")
    models = out / "models"
    reference_texts = notes.loc[notes["role"] == "reference_train", "text"].tolist()
    target_texts = notes.loc[notes["role"].isin(["member", "calibration_member"]), "text"].tolist()
    kind, signal = DEMO_SUITES[suite]
    recipe = {"epochs": demo.epochs, "dropout": 0.1, "learning_rate": DEMO_LEARNING_RATE, "progress": progress}
    _train_unless_done(kind, reference_texts, models / "reference", seed=seed + 1, label="reference", **recipe)
    _train_unless_done(kind, target_texts, models / "target", tokenizer_dir=models / "reference", seed=seed, label="target",
                       **recipe)
    config = AuditConfig(
        target=str(models / "target"), reference=str(models / "reference"),
        members=str(files["member"]), nonmembers=str(files["nonmember"]),
        population=str(files["population"]), calibration_members=str(files["calibration_member"]),
        out=str(out), signal={"signal": signal, "k": demo.k, "seed": seed}, evaluation={"bootstrap": demo.bootstrap, "seed": seed},
        whitebox=True,
    )
    return run_audit(config, progress=progress)
