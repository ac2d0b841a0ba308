"""Masks are a pure function of (seed, sample_id, k): paired across models, unchanged by order."""

import math

import numpy as np
import pytest

from lmaudit.errors import InputError
from lmaudit.signals.masks import (
    all_masks,
    mask_size,
    random_masks,
    single_position_masks,
)


@pytest.mark.parametrize("n_content, expected", [(1, 1), (6, 1), (7, 2), (20, 3), (21, 4), (40, 6), (60, 9)])
def test_mask_size_is_ceil_of_15_percent(n_content, expected):
    assert mask_size(n_content) == expected


def test_random_masks_depend_only_on_seed_sample_and_index():
    first = random_masks("note-7", 40, k=10, seed=5)
    again = random_masks("note-7", 40, k=10, seed=5)
    np.testing.assert_array_equal(first, again)
    # Asking for fewer masks gives the first ones unchanged: mask j never depends on K.
    np.testing.assert_array_equal(random_masks("note-7", 40, k=3, seed=5), first[:3])
    assert not np.array_equal(random_masks("note-8", 40, k=10, seed=5), first)
    assert not np.array_equal(random_masks("note-7", 40, k=10, seed=6), first)


def test_random_masks_are_distinct_sorted_positions_in_range():
    masks = random_masks("x", 33, k=50, seed=0)
    assert masks.shape == (50, mask_size(33))
    assert masks.min() >= 0 and masks.max() < 33
    for row in masks:
        assert len(set(row)) == len(row) and list(row) == sorted(row)


def test_all_masks_enumerates_every_subset_once():
    masks = all_masks(8)
    assert masks.shape == (math.comb(8, 2), 2)
    assert len({tuple(m) for m in masks}) == len(masks)


def test_all_masks_refuses_more_than_the_cap():
    with pytest.raises(InputError, match="over the cap"):
        all_masks(60, cap=1000, sample_id="long-one")


def test_single_position_masks_cover_each_position_once():
    np.testing.assert_array_equal(single_position_masks(4).ravel(), [0, 1, 2, 3])
