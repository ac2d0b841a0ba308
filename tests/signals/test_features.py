"""Classifier features (Shejwalkar et al., Appendix A.1) against hand computations, and their directions."""

import math

import numpy as np
import pytest

from lmaudit.signals.features import FEATURE_DIRECTIONS, classifier_features

PROBS = np.array([[0.7, 0.2, 0.1], [0.25, 0.25, 0.5], [0.3, 0.3, 0.4]])
LABELS = np.array([0, 1, 1])


def test_features_equal_hand_computation():
    features = classifier_features(np.log(PROBS), LABELS)
    # Sample 0: true label 0 with p = 0.7.
    assert features["loss"][0] == pytest.approx(-math.log(0.7))
    assert features["mentropy"][0] == pytest.approx(-0.3 * math.log(0.7) - 0.2 * math.log(0.8) - 0.1 * math.log(0.9))
    assert features["rank"][0] == 1
    assert features["confidence"][0] == pytest.approx(0.7)
    assert features["correctness"][0] == 1.0
    # Sample 1: true label 1 with p = 0.25, label 2 is more probable, label 0 ties with it.
    assert features["loss"][1] == pytest.approx(-math.log(0.25))
    assert features["mentropy"][1] == pytest.approx(-0.75 * math.log(0.25) - 0.25 * math.log(0.75) - 0.5 * math.log(0.5))
    assert features["rank"][1] == 2  # a tie with label 0 does not push the true label down
    assert features["confidence"][1] == pytest.approx(0.25)
    assert features["correctness"][1] == 0.0
    # Sample 2: the true label is second of three.
    assert features["rank"][2] == 2
    assert features["correctness"][2] == 0.0


def test_feature_directions_point_towards_members():
    """A confident right prediction (member-like) scores higher than an unsure one for every feature."""
    confident = np.log(np.array([[0.98, 0.01, 0.01]]))
    unsure = np.log(np.array([[0.3, 0.4, 0.3]]))
    label = np.array([0])
    for name, direction in FEATURE_DIRECTIONS.items():
        member_like = direction * classifier_features(confident, label)[name][0]
        nonmember_like = direction * classifier_features(unsure, label)[name][0]
        assert member_like > nonmember_like, name
