"""Leakage against epsilon: one DP-SGD target per noise level on the same members, each audited (Jagannatha Tables 2-3).

The demo's patients and roles are reused; the reference model is trained once without DP, as an
attacker's public model would be. Every target trains with the same DP-SGD recipe (Poisson
batches, per-sample clipping, the per-patient cap); only the noise differs, and noise 0 is
clipping without noise (epsilon infinite). Utility is the target's mean masked-token loss on the
population (held-out patients, nats per token). Every target also trains on the same planted canaries (new-token
canaries, each a coin flip; `studies/canary_epsilon.py`), whose one-run audit gives the canary epsilon, and with gradient
canaries in every DP-SGD step (`lmaudit train --audit-dp`), whose white-box audit gives the white-box epsilon and checks
the implementation; both stand beside the accountant's epsilon and the attacks'.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from lmaudit.attacks.base import REFERENCE_LOSSES, TARGET_LOSS
from lmaudit.attacks.registry import attacks_reading
from lmaudit.audit.run import run_audit
from lmaudit.config import AuditConfig
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.locks import output_lock
from lmaudit.report.document import ReportDocument, typed_report
from lmaudit.report.sweep import write_sweep
from lmaudit.report.tables import largest_bound, population_threshold_at, result_of
from lmaudit.signals.store import default_cache_dir
from lmaudit.strict_json import json_ready
from lmaudit.studies.canary_epsilon import (
    canary_measurement,
    record_canaries,
    study_canaries,
    white_box_measurement,
    with_canaries,
)
from lmaudit.studies.notes import held_out_loss
from lmaudit.studies.setup import (
    DEMO_SIZES,
    DEMO_SPLIT,
    REFERENCE_TRAIN,
    demo_recipe,
    split_and_write_roles,
    train_language_model_unless_done,
)

if TYPE_CHECKING:
    from lmaudit.models.training_file import TrainingRecord

DEFAULT_NOISES = (2.0, 1.0, 0.1, 0.01, 0.001, 0.0)
SWEPT_LEVELS = ("sample", "group")
log = logging.getLogger(__name__)


def swept_attacks() -> list[tuple[str, str]]:
    """(attack, level) of every black-box attack on the target's and the references' losses, at sample and patient
    level (the token-level attacks need a per-token signal, which the sweep's masked LMs do not give)."""
    return [(spec.name, level) for level in SWEPT_LEVELS for spec in attacks_reading(TARGET_LOSS)
            if level in spec.levels and set(spec.reads) <= {TARGET_LOSS, REFERENCE_LOSSES}]


def sweep_row(noise: float, training: TrainingRecord, report: ReportDocument, utility: float, canaries: dict) -> dict:
    """One noise level: the accountant's epsilon, utility, the canary audit's epsilon lower bounds and guesses, the
    white-box audit's bound and verdict, and per attack the AUC, the advantage and the largest empirical epsilon lower
    bound over its calibrated thresholds."""
    dp = training.dp
    row = {"noise_multiplier": noise, "epsilon_prv": dp and dp.epsilon_prv, "epsilon_rdp": dp and dp.epsilon_rdp,
           "steps": dp and dp.steps, "n_samples": training.n_samples, "held_out_loss": utility, **canaries,
           "white_box_epsilon": None, "white_box_f_dp_epsilon": None, "white_box_verdict": None,
           **white_box_measurement(training), "attacks": {}}
    for attack, level in swept_attacks():
        result = result_of(report.results, attack, level)
        if result is None:
            continue
        population = population_threshold_at(result)
        row["attacks"][f"{attack} {level}"] = json_ready({
            "auc": result.auc, "auc_ci": list(result.auc_ci), "advantage": population.advantage if population else None,
            # None where the level's population calibrates no threshold (its report says why)
            "epsilon_lower_bound": largest_bound(result),
        })
    return row


def run_dp_sweep(out: str | Path, noises: tuple[float, ...] = DEFAULT_NOISES, size: str = "smoke", seed: int = 0,
                 max_grad_norm: float = 1.0, delta: float = 1e-5, max_samples_per_group: int | None = 50,
                 whitebox: bool = False, progress: bool = False, epochs: int | None = None) -> dict:
    """Train and audit one DP target per noise level (`epochs` overrides the size's); write sweep.json and sweep.html."""
    from lmaudit.canaries.make import reserved_tokens
    from lmaudit.data.synth import generate_notes
    from lmaudit.models.dp import cap_samples_per_group
    from lmaudit.models.recipe import DEFAULT_GRADIENT_CANARIES, DPSettings
    from lmaudit.models.training_file import read_training_summary

    demo = DEMO_SIZES[size]
    out = Path(out)
    with output_lock(out):
        log.info("dp sweep (%s size): %d noise levels, the notes of %d patients", size, len(noises), demo.patients)
        cache = default_cache_dir(out)
        notes = generate_notes(demo.patients, seed)
        # Cap every patient before the roles are written, so the training cap never drops a note that the
        # audit would then count as a member.
        notes = notes.iloc[cap_samples_per_group(notes["group_id"].tolist(), max_samples_per_group, seed)].reset_index(drop=True)
        files = split_and_write_roles(notes, DEMO_SPLIT, seed, out / "data")
        reference = out / "models" / "reference"
        canaries = study_canaries(out, size, seed)
        words = reserved_tokens(canaries)  # in the reference's tokenizer too, which every target shares
        log.info("dp sweep: %d notes in roles (at most %s per patient); training the reference unless already trained",
                 len(notes), max_samples_per_group)
        # The reference is the demo's (same patients, seed and epochs); only the targets take `epochs`.
        train_language_model_unless_done("mlm", notes.loc[notes["role"] == REFERENCE_TRAIN, "text"].tolist(), reference,
                                         replace(demo_recipe(demo.epochs), seed=seed + 1, reserved_tokens=words),
                                         "reference", progress)
        epochs = epochs or demo.epochs
        target_rows = notes[notes["role"].isin([MEMBER, CALIBRATION_MEMBER])]
        population = notes[notes["role"] == POPULATION]
        texts, groups = with_canaries(target_rows, canaries)
        rows = []
        for number, noise in enumerate(noises, start=1):
            name = f"sigma-{noise:g}"
            log.info("dp sweep: noise %g (%d of %d): training the DP-SGD target unless already trained", noise, number,
                     len(noises))
            target = out / "models" / f"target-{name}"
            recipe = replace(demo_recipe(epochs), seed=seed, tokenizer_dir=reference, reserved_tokens=words,
                             dp=DPSettings(noise, max_grad_norm, delta, max_samples_per_group, DEFAULT_GRADIENT_CANARIES))
            train_language_model_unless_done("mlm", texts, target, recipe, f"target {name}", progress, groups)
            record_canaries([target], canaries)
            config = AuditConfig(
                target=str(target), reference=str(reference), members=str(files[MEMBER]), nonmembers=str(files[NONMEMBER]),
                population=str(files[POPULATION]), calibration_members=str(files[CALIBRATION_MEMBER]),
                out=str(out / name), cache_dir=str(cache), signal={"k": demo.k, "seed": seed},
                evaluation={"bootstrap": demo.bootstrap, "seed": seed, "delta": delta}, whitebox=whitebox,
            )
            log.info("dp sweep: noise %g: auditing the target", noise)
            report = run_audit(config, progress=progress, overwrite=True)  # the sweep's own folders
            log.info("dp sweep: noise %g: the target's held-out loss on the population", noise)
            utility = held_out_loss(target, "mlm_energy", population["sample_id"].tolist(), population["text"].tolist(),
                                    demo.k, seed, cache)
            log.info("dp sweep: noise %g: auditing the planted canaries", noise)
            planted = canary_measurement(target, None, canaries, out / name / "canaries", cache, delta, seed)
            rows.append(sweep_row(noise, read_training_summary(target), typed_report(report), utility, planted))
        sweep = {"size": size, "seed": seed, "dp": {"max_grad_norm": max_grad_norm, "delta": delta,
                                                     "max_samples_per_group": max_samples_per_group},
                 "epochs": epochs, "rows": rows,
                 "attacks": [name for name in (f"{attack} {level}" for attack, level in swept_attacks())
                             if any(name in row["attacks"] for row in rows)]}
        write_sweep(out, sweep)
        log.info("dp sweep: %d noise levels done; wrote %s", len(rows), out / "sweep.html")
        return sweep
