"""Why a served model's samples are sent in one random order: a server's log-probabilities change with what it batches
together (vllm #11778, #51187), and the verdict's test, which relabels whole patients, holds its level only when nothing
but membership follows the role. Simulated on a model that learnt nothing, scored by a server whose batches of 16
consecutive requests each shift their scores by one shared offset: sent by role (as the files are read), the test
fires far above its level; sent in `sending_order`'s random order, at its level; and a real leak is still found."""

from __future__ import annotations

import numpy as np

from lmaudit.metrics.permutation_tests import auc_statistics, raw_p_values, relabellings
from lmaudit.signals.store import sending_order

LEVEL = 0.05
BATCH = 16


def one_audit(rng: np.random.Generator, order_seed: int | None, shift: float = 0.0) -> float:
    """The AUC permutation p-value (199 relabellings of whole patients) of one simulated served audit: 60 member and
    20 non-member patients of 1-4 notes, a patient effect (ICC 0.3), scores in steps of 0.05 (ties), members first
    as the audit's rows are; each batch of the sending order offset by N(0, 0.5), members `shift` higher."""
    is_member_group = np.r_[np.ones(60, bool), np.zeros(20, bool)]
    groups = np.repeat(np.arange(80), rng.integers(1, 5, size=80))
    scores = rng.normal(0, np.sqrt(0.3), 80)[groups] + rng.normal(0, np.sqrt(0.7), len(groups))
    scores += shift * is_member_group[groups]
    order = sending_order(np.arange(len(groups)), order_seed)
    offsets = rng.normal(0, 0.5, -(-len(groups) // BATCH))
    scores[order] += offsets[np.arange(len(groups)) // BATCH]
    statistics = auc_statistics(np.round(scores / 0.05) * 0.05, groups, relabellings(is_member_group, 199,
                                                                                      int(rng.integers(2**31))))
    return float(raw_p_values(statistics[:, None])[0])


def simulate(runs: int, random_order: bool, shift: float = 0.0, seed: int = 0) -> int:
    """How many of `runs` simulated audits reject at LEVEL, sent by role or in a random order (seeded per audit)."""
    rng = np.random.default_rng(seed)
    return sum(one_audit(rng, int(rng.integers(2**31)) if random_order else None, shift) <= LEVEL for _ in range(runs))


def test_sending_order_is_a_permutation_of_the_positions_drawn_from_the_seed():
    positions = np.arange(10, 30)
    drawn = sending_order(positions, 7)
    assert sorted(drawn) == list(positions) and not np.array_equal(drawn, positions)
    assert np.array_equal(drawn, sending_order(positions, 7)) and np.array_equal(sending_order(positions, None), positions)


def test_batch_effects_sent_by_role_break_the_verdicts_level_and_a_random_order_keeps_it():
    by_role = simulate(600, random_order=False, seed=1)
    shuffled = simulate(600, random_order=True, seed=2)
    # 5% of 600 is 30, and 46 its one-sided binomial 99.9% limit: by role the batches' offsets follow the role
    assert by_role > 46, by_role
    assert shuffled <= 46, shuffled


def test_a_real_leak_is_found_in_the_random_order():
    assert simulate(100, random_order=True, shift=1.0, seed=3) >= 80
