"""Leakage against epsilon: one DP-SGD target per noise level on the same members, each audited (Jagannatha Tables 2-3).

The demo's patients and roles are reused; the reference model is trained once without DP, as an
attacker's public model would be. Every target trains with the same DP-SGD recipe (Poisson
batches, per-sample clipping, the per-patient cap); only the noise differs, and noise 0 is
clipping without noise (epsilon infinite). Utility is the target's mean masked-token loss on the
population (held-out patients, nats per token).
"""

from __future__ import annotations

import json
from pathlib import Path

from lmaudit.config import AuditConfig
from lmaudit.models.dp import DPSettings, cap_samples_per_group

DEFAULT_NOISES = (2.0, 1.0, 0.1, 0.01, 0.001, 0.0)
SWEPT_ATTACKS = (("loss", "sample"), ("likelihood_ratio", "sample"), ("loss", "group"), ("likelihood_ratio", "group"))


def held_out_loss(model_dir: Path, sample_ids: list[str], texts: list[str], k: int, seed: int, cache: Path) -> float:
    """Mean NLL per masked token (nats) of the model on held-out texts: the energy with normalize = mean."""
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.mlm import SignalSettings

    values = model_signal(model_dir, sample_ids, texts, SignalSettings(k=k, normalize="mean", seed=seed), cache)
    return float(values["value"].mean())


def _result(report: dict, attack: str, level: str) -> dict | None:
    return next((r for r in report["results"] if r["attack"] == attack and r["level"] == level and r["slice"] == "all"), None)


def sweep_row(noise: float, training: dict, report: dict, utility: float) -> dict:
    """One noise level: the accountant's epsilon, utility, and per attack the AUC, the advantage and the largest
    empirical epsilon lower bound over its calibrated thresholds."""
    dp = training.get("dp") or {}
    row = {"noise_multiplier": noise, "epsilon_prv": dp.get("epsilon_prv"), "epsilon_rdp": dp.get("epsilon_rdp"),
           "steps": dp.get("steps"), "n_samples": training.get("n_samples"), "held_out_loss": utility, "attacks": {}}
    for attack, level in SWEPT_ATTACKS:
        result = _result(report, attack, level)
        if result is None:
            continue
        population = next((t for t in result["thresholds"] if t["rule"] == "population" and t["alpha"] == 0.1), None)
        row["attacks"][f"{attack} {level}"] = {
            "auc": result["auc"], "auc_ci": result["auc_ci"],
            "advantage": population["advantage"] if population else None,
            "epsilon_lower_bound": max(t["epsilon_lower_bound"] for t in result["thresholds"]),
        }
    return row


def run_dp_sweep(out: str | Path, noises: tuple[float, ...] = DEFAULT_NOISES, size: str = "smoke", seed: int = 0,
                 max_grad_norm: float = 1.0, delta: float = 1e-5, max_samples_per_group: int | None = 50,
                 whitebox: bool = False, progress: bool = False, epochs: int | None = None) -> dict:
    """Train and audit one DP target per noise level (`epochs` overrides the size's); write sweep.json and sweep.html."""
    from lmaudit.data.synth import generate_notes
    from lmaudit.models.train import read_training_summary
    from lmaudit.pipeline import DEMO_LEARNING_RATE, DEMO_SIZES, DEMO_SPLIT, _train_unless_done, run_audit, split_and_write_roles

    demo = DEMO_SIZES[size]
    out = Path(out)
    notes = generate_notes(demo.patients, seed)
    # Cap every patient before the roles are written, so the training cap never drops a note that the
    # audit would then count as a member.
    notes = notes.iloc[cap_samples_per_group(notes["group_id"].tolist(), max_samples_per_group, seed)].reset_index(drop=True)
    files = split_and_write_roles(notes, DEMO_SPLIT, seed, out / "data")
    recipe = {"dropout": 0.1, "learning_rate": DEMO_LEARNING_RATE, "progress": progress}
    reference = out / "models" / "reference"
    # The reference is the demo's (same patients, seed and epochs); only the targets take `epochs`.
    _train_unless_done("mlm", notes.loc[notes["role"] == "reference_train", "text"].tolist(), reference, seed=seed + 1,
                       label="reference", epochs=demo.epochs, **recipe)
    epochs = epochs or demo.epochs
    target_rows = notes[notes["role"].isin(["member", "calibration_member"])]
    population = notes[notes["role"] == "population"]
    rows = []
    for noise in noises:
        name = f"sigma-{noise:g}"
        target = out / "models" / f"target-{name}"
        dp = DPSettings(noise, max_grad_norm, delta, max_samples_per_group)
        _train_unless_done("mlm", target_rows["text"].tolist(), target, tokenizer_dir=reference, seed=seed, label=f"target {name}",
                           dp=dp, groups=target_rows["group_id"].tolist(), epochs=epochs, **recipe)
        config = AuditConfig(
            target=str(target), reference=str(reference), members=str(files["member"]), nonmembers=str(files["nonmember"]),
            population=str(files["population"]), calibration_members=str(files["calibration_member"]),
            out=str(out / name), cache_dir=str(out / "cache"), signal={"k": demo.k, "seed": seed},
            evaluation={"bootstrap": demo.bootstrap, "seed": seed, "delta": delta}, whitebox=whitebox,
        )
        report = run_audit(config, progress=progress)
        utility = held_out_loss(target, population["sample_id"].tolist(), population["text"].tolist(), demo.k, seed,
                                out / "cache")
        rows.append(sweep_row(noise, read_training_summary(target), report, utility))
    sweep = {"size": size, "seed": seed, "dp": {"max_grad_norm": max_grad_norm, "delta": delta,
                                                 "max_samples_per_group": max_samples_per_group},
             "epochs": epochs, "rows": rows}
    write_sweep(out, sweep)
    return sweep


def sweep_table(sweep: dict) -> str:
    """The sweep as text: per noise level, epsilon, utility, and each attack's AUC, advantage and empirical epsilon."""
    names = [f"{a} {level}" for a, level in SWEPT_ATTACKS]
    width = 26
    header = f"{'sigma':>7}{'eps PRV':>9}{'eps RDP':>9}{'loss':>7}" + "".join(f"{n:>{width}}" for n in names)
    lines = [header, f"{'':>32}" + "".join(f"{'AUC / adv / eps >=':>{width}}" for _ in names), "-" * len(header)]
    for row in sweep["rows"]:
        eps = ["-" if row[key] is None else f"{row[key]:.3g}" for key in ("epsilon_prv", "epsilon_rdp")]
        cells = []
        for name in names:
            cell = row["attacks"].get(name)
            advantage = "" if not cell or cell["advantage"] is None else f"{cell['advantage']:.3f}"
            cells.append(f"{cell['auc']:.3f} / {advantage} / {cell['epsilon_lower_bound']:.2f}" if cell else "")
        lines.append(f"{row['noise_multiplier']:>7g}{eps[0]:>9}{eps[1]:>9}{row['held_out_loss']:>7.2f}"
                     + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def write_sweep(out: Path, sweep: dict) -> None:
    """sweep.json and a self-contained sweep.html (table and plot), each written atomically."""
    import os

    from jinja2 import Environment, PackageLoader, select_autoescape

    from lmaudit.report.build import json_safe
    from lmaudit.report.plots import sweep_figure

    environment = Environment(loader=PackageLoader("lmaudit.report", "templates"), autoescape=select_autoescape())
    html = environment.get_template("sweep.html.j2").render(sweep=sweep, table=sweep_table(sweep), figure=sweep_figure(sweep))
    for name, text in (("sweep.html", html), ("sweep.json", json.dumps(json_safe(sweep), indent=2, allow_nan=False))):
        temporary = out / f".{name}.tmp-{os.getpid()}"
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, out / name)

