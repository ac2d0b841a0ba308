"""The memorisation predictor's features against hand counts, and its regression on data where one feature decides."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.studies.memorisation import exposure_predictor, sample_features, token_frequencies


def test_token_frequencies_are_shares_of_all_training_tokens():
    assert token_frequencies([[1, 2, 2], [2, 3]]) == {1: 0.2, 2: 0.6, 3: 0.2}


def test_features_by_hand():
    frequencies = {10: 0.5, 11: 0.01, 12: 0.2, 13: 0.05}
    features = sample_features(["BP 120/80, HR 88.", "no  change"], [[10, 11, 12, 13, 99], [12]], frequencies)
    # digits 1,2,0,8,0,8,8; '/', ',' and '.' (spaces are not counted); token 99 never seen in training: frequency 0
    assert features.iloc[0].to_dict() == {"digits": 7, "length": 5, "non_alphanumeric": 3,
                                          "rarest_1": 0.0, "rarest_2": 0.01, "rarest_3": 0.05}
    # one token: its frequency three times
    assert features.iloc[1].to_dict() == {"digits": 0, "length": 1, "non_alphanumeric": 0,
                                          "rarest_1": 0.2, "rarest_2": 0.2, "rarest_3": 0.2}


def test_the_feature_that_decides_exposure_predicts_it_and_the_others_do_not():
    rng = np.random.default_rng(0)
    n = 400
    features = pd.DataFrame({"digits": rng.integers(0, 10, n), "length": rng.integers(5, 60, n),
                             "non_alphanumeric": rng.integers(0, 12, n), "rarest_1": rng.random(n),
                             "rarest_2": rng.random(n), "rarest_3": rng.random(n)})
    exposed = features["non_alphanumeric"].to_numpy() >= 6
    train = np.arange(n) % 2 == 0
    result = exposure_predictor(features, exposed, train)
    punctuation = result["feature sets"]["C non-alphanumeric"]
    assert punctuation["test precision"] > 0.9 and punctuation["test recall"] > 0.9
    digits = result["feature sets"]["A digits"]
    assert digits["test precision"] < 0.7  # about the base rate of exposure (half): digits say nothing here
    coefficients = result["coefficients"]
    assert max(coefficients, key=lambda k: abs(coefficients[k])) == "non_alphanumeric"
    assert set(result["feature sets"]) == {"A digits", "B length", "C non-alphanumeric", "D 3 rarest tokens", "C + D",
                                           "B + C + D", "A + B + C + D"}
    assert exposed.mean() == pytest.approx(0.5, abs=0.06)
