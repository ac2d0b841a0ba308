"""The DP sweep page is a table ordered by the accountant's epsilon (no noise last, as infinity), with each attack's
AUC interval, advantage and empirical bound, the canary epsilons with their guesses, the white-box bound, and a figure against epsilon; a
missing advantage says n/a."""

import json
import re

from lmaudit.report.sweep import sweep_table, write_sweep


def row(noise, prv, rdp, auc, advantage):
    cell = {"auc": auc, "auc_ci": [auc - 0.05, auc + 0.05], "advantage": advantage, "epsilon_lower_bound": 0.0}
    return {"noise_multiplier": noise, "epsilon_prv": prv, "epsilon_rdp": rdp, "steps": 10, "n_samples": 100,
            "held_out_loss": 3.0 - auc, "canary_epsilon": 2 * (auc - 0.5), "canary_correct": int(100 * auc),
            "canary_guesses": 100, "canary_f_dp_epsilon": 3 * (auc - 0.5), "white_box_epsilon": None,
            "white_box_f_dp_epsilon": None, "white_box_verdict": None, "attacks": {"loss sample": cell}}


def test_sweep_page_orders_rows_by_epsilon_and_shows_intervals(tmp_path):
    sweep = {"size": "smoke", "seed": 0, "epochs": 2, "attacks": ["loss sample"],
             "dp": {"max_grad_norm": 1.0, "delta": 1e-5, "max_samples_per_group": 50},
             "rows": [row(0.0, None, None, 0.71, 0.2), row(1.0, 3.2, 4.1, 0.52, None), row(0.1, None, 812.0, 0.6, 0.1)]}
    sweep["rows"][1]["attacks"]["loss sample"]["epsilon_lower_bound"] = None  # no threshold calibrated
    sweep["rows"][1] |= {"white_box_epsilon": 1.25, "white_box_verdict": "consistent: below the accountant's"}
    write_sweep(tmp_path, sweep)
    html = (tmp_path / "sweep.html").read_text()
    noises = re.findall(r"<tr><td>([0-9.]+)</td>", html)
    assert noises == ["1", "0.1", "0"]  # by epsilon: PRV 3.2, else RDP 812, else infinity (no noise)
    assert "0.520 [0.470, 0.570]" in html and "<td>n/a</td><td>n/a</td>" in html and "data:image/png;base64," in html
    assert "0.520 / " in sweep_table(sweep) and "/ n/a" in sweep_table(sweep)
    # the canaries' bounds (Steinke's, f-DP's) and guesses, and the white-box bound and verdict where audited
    assert "<td>0.42</td>\n<td>0.63</td><td>71 / 100</td>" in html and "0.42 / 0.63 (71/100)" in sweep_table(sweep)
    assert "<td>1.25</td><td class=\"l\">consistent</td>" in html and html.count("not audited") == 2
    assert "1.25" in sweep_table(sweep).splitlines()[4]
    assert json.loads((tmp_path / "sweep.json").read_text())["rows"][0]["epsilon_prv"] is None
