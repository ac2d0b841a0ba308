"""The attack registry: well-formed specs, documented in docs/attacks.md, which attacks apply to which audit, and the
order of the results."""

import re
from pathlib import Path

import numpy as np

from lmaudit.attacks.base import FEATURE_VECTORS, LEVELS, REFERENCE_LOSSES, TARGET_LOSS, VALUES, AttackInput
from lmaudit.attacks.registry import ATTACKS, run_attacks
from lmaudit.data.roles import AUDITED_ROLES, ROLES, SHADOW_ROLES, TARGET_ROLES
from tests.attacks.test_direction import synthetic_samples, synthetic_values
from tests.helpers import loss_input


def test_specs_are_well_formed():
    names = [spec.name for spec in ATTACKS]
    assert len(names) == len(set(names))
    for spec in ATTACKS:
        assert spec.reads and set(spec.reads) <= set(VALUES), spec.name
        assert set(spec.levels) <= set(LEVELS) and len(set(spec.levels)) == len(spec.levels), spec.name
        assert set(spec.fitted_on) <= set(ROLES), spec.name
        assert spec.description and spec.score_label and spec.paper, spec.name


def documented_attacks(markdown: str) -> set[str]:
    """The attack names in the first column of the table of docs/attacks.md (each in backticks)."""
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])}


def test_docs_attacks_md_lists_every_registered_attack_and_no_other():
    """A new attack is documented in the table of docs/attacks.md (its score, what it reads, its paper), and a removed
    one leaves the table."""
    markdown = (Path(__file__).resolve().parents[2] / "docs" / "attacks.md").read_text(encoding="utf-8")
    assert documented_attacks(markdown) == {spec.name for spec in ATTACKS}
    assert documented_attacks("| attack | score |\n|---|---|\n| `a`, `b_c` | `not_this` |\n") == {"a", "b_c"}


def inputs_for(scored_roles, seed=0):
    samples = synthetic_samples()
    samples = samples[samples["role"].isin(scored_roles)].reset_index(drop=True)
    values = synthetic_values(samples, np.random.default_rng(seed))
    return samples, values


def test_shadow_trained_attacks_apply_only_to_audits_with_a_shadow_model():
    """A language-model audit (no shadow) never lists logistic_shadow; a classifier audit never lists
    logistic_calibration: neither could run there whatever data the user gave."""
    samples, values = inputs_for(TARGET_ROLES)
    lm_scores, lm_skipped = run_attacks([AttackInput("f", samples, {FEATURE_VECTORS: values[FEATURE_VECTORS]})])
    assert {s.attack for s in lm_scores} == {"logistic_split", "logistic_calibration"} and not lm_skipped
    samples, values = inputs_for(AUDITED_ROLES + SHADOW_ROLES)
    classifier = AttackInput("f", samples, {FEATURE_VECTORS: values[FEATURE_VECTORS]}, scored_roles=AUDITED_ROLES + SHADOW_ROLES)
    scores, skipped = run_attacks([classifier])
    assert {s.attack for s in scores} == {"logistic_split", "logistic_shadow"} and not skipped


def test_missing_calibration_members_skip_the_calibration_variant_with_the_reason():
    samples, values = inputs_for(("member", "nonmember", "population"))
    _, skipped = run_attacks([AttackInput("f", samples, {FEATURE_VECTORS: values[FEATURE_VECTORS]})])
    assert [(s.attack, s.level, s.signal) for s in skipped] == [("logistic_calibration", "sample", "f")]
    assert "calibration_member" in skipped[0].reason


def test_results_are_ordered_by_input_then_level_then_registry():
    samples, values = inputs_for(TARGET_ROLES)
    table = samples.assign(target=values[TARGET_LOSS], reference=values[REFERENCE_LOSSES][:, 0])
    features = AttackInput("gradient_norms", samples, {FEATURE_VECTORS: values[FEATURE_VECTORS]})
    scores, _ = run_attacks([loss_input(table), features])
    registry_order = [spec.name for spec in ATTACKS]
    keys = [(["mlm_energy", "gradient_norms"].index(s.signal), LEVELS.index(s.level), registry_order.index(s.attack))
            for s in scores]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    ran = {(s.signal, s.level, s.attack) for s in scores}
    assert {("mlm_energy", level, attack) for level in LEVELS for attack in ("loss", "likelihood_ratio", "rmia")} <= ran
    assert {("gradient_norms", level, attack) for level in LEVELS
            for attack in ("logistic_split", "logistic_calibration")} <= ran
