"""The one way a number, an interval and a count read, wherever a reader sees them."""

import math

from lmaudit.report.formatting import counted, number, percent, with_interval


def test_numbers_intervals_and_counts_read_as_hand_written():
    assert with_interval(0.81234, (0.7, 0.9)) == "0.812 [0.700, 0.900]"
    assert counted(9, 385, "member samples", 9 / 385, (0.0107, 0.0439)) == "9 of 385 member samples (0.023 [0.011, 0.044])"
    assert (number(0.5), number(None)) == ("0.500", "")
    assert (percent(0.0123), percent(None), percent(math.nan)) == ("1.2%", "", "")
