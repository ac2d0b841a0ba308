"""An AttackInput no attack can read rightly is refused where it is made, not misread by the attack: a missing
column, a repeated sample id, a value not aligned with the samples."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import TARGET_LOSS, AttackInput


def samples(n: int = 3) -> pd.DataFrame:
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "role": ["member"] * n, "group_id": ["p"] * n})


def test_an_aligned_input_is_made():
    made = AttackInput("loss", samples(), {TARGET_LOSS: np.zeros(3)})
    assert len(made.values[TARGET_LOSS]) == len(made.samples) == 3


@pytest.mark.parametrize(("frame", "values", "says"), [
    (samples().drop(columns="group_id"), {TARGET_LOSS: np.zeros(3)}, "no group_id column"),
    (samples().assign(sample_id=["s0", "s0", "s1"]), {TARGET_LOSS: np.zeros(3)}, "a sample id repeats"),
    (samples(), {TARGET_LOSS: np.zeros(2)}, f"{TARGET_LOSS} not aligned with the 3 samples"),
])
def test_a_misshapen_input_is_refused(frame, values, says):
    with pytest.raises(ValueError, match=says):
        AttackInput("loss", frame, values)
