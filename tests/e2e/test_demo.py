"""The demo at smoke size, end to end through the CLI, and what its output folder must hold."""

import json
import re
from dataclasses import replace
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.signals.store import default_cache_dir
from lmaudit.studies.setup import DEMO_SIZES
from tests.helpers import assert_document_round_trips, demo_member_only_terms, terms_written, text_terms
from tests.report.test_page import chromium_command, measured_widths, needs_chromium


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    # Half the smoke size's epochs: every assertion here is of the output's shape and the report's rules, which the
    # shorter training keeps, and the suite stays under 10 minutes on 2 cores.
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(DEMO_SIZES, "smoke", replace(DEMO_SIZES["smoke"], epochs=15))
        result = CliRunner().invoke(main, ["demo", "--size", "smoke", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_demo_writes_the_three_report_files(demo_run):
    out, output = demo_run
    assert_document_round_trips(out / "report.json")
    assert {"report.json", "report.html", "scores.parquet"} <= {p.name for p in out.iterdir()}
    assert not list(out.glob(".*.tmp-*"))
    assert "likelihood_ratio" in output and "report.html" in output


def test_report_json_follows_the_design_schema(demo_run):
    report = json.loads((demo_run[0] / "report.json").read_text())
    assert report["schema_version"] == 1
    assert {"lmaudit_version", "created", "config", "environment", "data", "results", "skipped", "warnings"} <= set(report)
    # Population and non-members are patients of one generator: no mismatch warning; but a smoke-size population is
    # too small for some thresholds, and the only warnings say so.
    assert report["warnings"] and all("are missing" in w for w in report["warnings"])
    assert report["summary"]["risk"] in ("high", "moderate") and set(report["summary"]["levels"]) == {"sample", "subgroup", "group"}
    assert {"member", "nonmember", "population", "calibration_member"} <= set(report["data"]["counts"])
    assert report["data"]["truncated"] == 0
    levels = {(r["attack"], r["signal"], r["level"]) for r in report["results"]}
    # Two references (smoke size): the likelihood ratio, RMIA and LiRA; the token-level attacks with a masked-LM form on
    # the target's mlm_tokens; and the white-box attacks.
    attacks = [(attack, "mlm_energy") for attack in ("loss", "likelihood_ratio", "rmia", "lira")] + [
        (attack, "mlm_tokens") for attack in ("loss", "zlib", "min_k", "min_k_plus_plus", "dc_pdd")] + [
        (attack, signal) for attack in ("logistic_split", "logistic_calibration")
        for signal in ("attention_concentration", "gradient_norms")] + [("gradnorm", "gradient_norms")]
    assert {(attack, signal, level) for attack, signal in attacks for level in ("sample", "subgroup", "group")} <= levels
    # Three length slices (tertiles of the audited lengths) that split every attack's samples between them.
    for attack, signal in attacks:
        sample = [r for r in report["results"] if (r["attack"], r["signal"], r["level"]) == (attack, signal, "sample")]
        assert [r["slice"] for r in sample][0] == "all" and len(sample) == 6
        lengths = [r for r in sample if r["slice"].startswith("length:")]
        assert len(lengths) == 3
        assert sum(r["n_members"] for r in lengths) == sample[0]["n_members"]
        assert sum(r["n_nonmembers"] for r in lengths) == sample[0]["n_nonmembers"]
    for result in report["results"]:
        assert 0 <= result["auc_ci"][0] <= result["auc"] <= result["auc_ci"][1] <= 1
        assert set(result["tpr_at_fpr"]) == {"0.1", "0.01", "0.001"}
        rules = {(t["rule"], t["alpha"]) for t in result["thresholds"]}
        # A population too small for the threshold leaves it out and says why.
        assert (("population", 0.1) in rules) != ("population_threshold_0.1" in result.get("unavailable", {}))
        if result["slice"] == "all" and result["level"] == "sample" and ("population", 0.1) not in rules:
            # 97 population samples calibrate a 10% threshold unless an attack's top population scores tie
            assert result["unavailable"]["population_threshold_0.1"].startswith("the highest population scores tie")
        assert (("mean_member_loss", None) in rules) == (result["attack"] == "loss")
        assert (("probability_0.5", None) in rules) == result["attack"].startswith("logistic")


def test_every_result_is_also_reported_per_nonmember_set(demo_run):
    """The demo's second non-member set (another hospital's notes): 'all' audits the first set, and each set has its
    own result at every level, with every member."""
    out = demo_run[0]
    report = json.loads((out / "report.json").read_text())
    sizes = {name: len(pd.read_parquet(out / "data" / file)) for name, file in
             (("same-hospital", "nonmember.parquet"), ("other-hospital", "nonmember-other-hospital.parquet"))}
    assert report["data"]["nonmember_sets"] == sizes
    assert report["data"]["counts"]["nonmember"] == sum(sizes.values())
    results = {(r["attack"], r["signal"], r["level"], r["slice"]): r for r in report["results"]}
    for (attack, signal, level, name), result in results.items():
        if name != "all":
            continue
        first = results[(attack, signal, level, "nonmembers:same-hospital")]
        other = results[(attack, signal, level, "nonmembers:other-hospital")]
        assert (first["auc"], first["n_nonmembers"]) == (result["auc"], result["n_nonmembers"])
        assert other["n_members"] == result["n_members"]
    loss = ("loss", "mlm_energy", "sample")  # scores every sample (logistic_split scores a held-out part)
    assert [results[(*loss, name)]["n_nonmembers"] for name in ("all", "nonmembers:other-hospital")] == list(sizes.values())
    scores = pd.read_parquet(out / "scores.parquet")
    assert scores.groupby("nonmember_set").size().to_dict() == sizes
    html = (out / "report.html").read_text()
    assert '<details id="nonmember-sets"><summary>Per non-member set' in html and "the first, same-hospital" in html


def test_the_blind_baseline_flags_the_other_hospital_and_the_terminal_says_so_beside_the_verdict(demo_run):
    """The texts alone (no model) tell members from the other hospital's notes, which keep no discharge summaries, and
    not from the same hospital's: the shift is said in report.json, on the page and in the terminal as one about
    another set than the verdict's, which it does not change; each level of the verdict's set carries the lift of its
    strongest attack."""
    out, output = demo_run
    report = json.loads((out / "report.json").read_text())
    sets = report["validity"]["sets"]
    assert list(sets) == ["same-hospital", "other-hospital"]
    same, other = (sets[name]["levels"] for name in sets)
    assert set(same) == set(other) == {"sample", "subgroup", "group"}
    assert any(level["texts_separate"] for level in other.values())
    assert not any(level["texts_separate"] for level in same.values())
    assert other["sample"]["auc"] > same["sample"]["auc"]
    strongest = report["summary"]["levels"]["sample"]["strongest"]
    assert same["sample"]["lift"] == pytest.approx(strongest["auc"] - same["sample"]["auc"])
    assert "shift" not in report["summary"] and report["summary"]["nonmember_set"] == "same-hospital"
    [shift] = report["summary"]["shift_elsewhere"]
    assert "other-hospital non-members" in shift and "does not change it" in shift
    lines = output.splitlines()
    assert not any(line.startswith("SHIFT:") for line in lines)
    assert next(i for i, line in enumerate(lines) if line.startswith("VERDICT:")) < next(
        i for i, line in enumerate(lines) if line.strip().startswith("Another non-member set:"))
    html = (out / "report.html").read_text()
    assert "<strong>Another non-member set:</strong>" in html and "<strong>Shift:</strong>" not in html
    assert "Is it leakage or shift?" in html and "lift over blind" in html
    # the verdict's own set (the same hospital) is not shifted: its levels read the attacks, with the blind AUC beside
    for level, entry in report["summary"]["levels"].items():
        assert "shift" not in entry and entry["blind"]["auc"] == same[level]["auc"]
        assert "members against the same-hospital non-members" in entry["statement"]
    assert report["validity"]["population"]["tested"] > 0


def test_audited_against_the_other_hospital_the_verdict_names_the_shift(demo_run, tmp_path):
    """The same models and stored signals, with the other hospital's notes as the verdict's non-members: where the
    texts alone separate them as well as the attacks do, that level is inconclusive and its statement says why."""
    out = demo_run[0]
    result = CliRunner().invoke(main, [
        "audit", "--target", str(out / "models" / "target"), "--reference", str(out / "models" / "reference"),
        "--members", str(out / "data" / "member.parquet"),
        "--nonmembers", f"other-hospital={out / 'data' / 'nonmember-other-hospital.parquet'}",
        "--population", str(out / "data" / "population.parquet"), "--k", "4", "--bootstrap", "50",
        "--cache-dir", str(default_cache_dir(out)), "--out", str(tmp_path / "other")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "other" / "report.json").read_text())
    shifted = [entry for entry in report["summary"]["levels"].values() if entry.get("shift")]
    assert shifted, report["summary"]["levels"]
    for entry in shifted:
        assert entry["blind"]["texts_separate"] and entry["risk"] == "inconclusive"
        assert entry["statement"].startswith(f"Inconclusive at {entry['name']} level: the texts alone separate members "
                                             "from non-members")
    assert report["summary"]["shift"] and "SHIFT:" in result.output
    assert "VERDICT:" in result.output and "the texts alone separate" in result.output


def test_scores_parquet_holds_no_text_and_one_row_per_audited_sample(demo_run):
    out = demo_run[0]
    scores = pd.read_parquet(out / "scores.parquet")
    assert "text" not in scores.columns
    assert {"sample_id", "role", "length", "target_mlm_energy", "reference_1_mlm_energy", "reference_2_mlm_energy",
            "target_mlm_tokens", "score_loss_mlm_energy", "score_loss_mlm_tokens", "score_likelihood_ratio",
            "score_min_k"} <= set(scores.columns)
    report = json.loads((out / "report.json").read_text())
    assert len(scores) == sum(report["data"]["counts"].values())
    member_texts = set(pd.read_parquet(out / "data" / "member.parquet")["text"])
    assert not scores.astype(str).isin(member_texts).any().any()


def test_html_report_is_self_contained(demo_run):
    html = (demo_run[0] / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 6  # two ROC figures, four histograms
    # Histograms of the attacks each level's main ROC figure draws: its six strongest, in the ranking's order.
    report = json.loads((demo_run[0] / "report.json").read_text())
    expected = [f"{row['attack']} ({row['signal']}), {report['level_names'][level]} level"
                for level in ("sample", "subgroup", "group") for row in report["ranking"][level][:6]]
    assert re.findall(r"<figcaption>([^<]*)</figcaption>", html) == expected
    assert "http://" not in html and "https://" not in html and "<script" not in html


class VisibleRows(HTMLParser):
    """Counts the table rows a reader sees without unfolding anything (outside every <details>)."""

    def __init__(self):
        super().__init__()
        self.folded, self.visible = 0, 0

    def handle_starttag(self, tag, attrs):
        self.folded += tag == "details"
        self.visible += tag == "tr" and not self.folded

    def handle_endtag(self, tag):
        self.folded -= tag == "details"


def test_the_page_shows_at_most_60_rows_and_never_breaks_a_name(demo_run):
    """Each level shows its strongest attacks, the rest one click away; the side-by-side and per-set tables are
    folded: at most 60 table rows show unfolded. Attack and signal names are never wrapped inside."""
    html = (demo_run[0] / "report.html").read_text()
    counter = VisibleRows()
    counter.feed(html)
    assert 0 < counter.visible <= 60
    assert "<wbr>" not in html and '<span class="id">min_k_plus_plus</span>' in html
    assert ".id{white-space:nowrap}" in html
    assert "Every attack at patient level" in html


def test_second_audit_reuses_stored_signals_and_include_text(demo_run, tmp_path):
    out = demo_run[0]
    parts = sorted(default_cache_dir(out).rglob("part-*.parquet"))
    config = json.loads((out / "report.json").read_text())["config"]
    references = [option for folder in config["reference"] for option in ("--reference", folder)]
    args = ["audit", "--target", config["target"], *references, "--members", config["members"],
            *[option for name, path in config["nonmembers"].items() for option in ("--nonmembers", f"{name}={path}")],
            "--population", config["population"],
            "--calibration-members", config["calibration_members"], "--k", str(config["signal"]["k"]),
            "--cache-dir", str(default_cache_dir(out)), "--out", str(tmp_path / "again"), "--include-text"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert sorted(default_cache_dir(out).rglob("part-*.parquet")) == parts
    first = pd.read_parquet(out / "scores.parquet")
    second = pd.read_parquet(tmp_path / "again" / "scores.parquet")
    pd.testing.assert_series_equal(first["score_likelihood_ratio"], second["score_likelihood_ratio"])
    assert "text" in second.columns
    # asked for, the training text is there: the scan below is one that finds it
    listed = terms_written(tmp_path / "again", demo_member_only_terms(out))
    assert listed["scores.parquet"] and listed["report.json"]


def test_no_output_holds_a_word_or_word_pair_found_only_in_the_training_text(demo_run):
    """The report folder (all but the demo's own inputs, data/ and models/) and the terminal hold no word or word pair
    that only the members' texts have: not in the blind baseline's telling words, scores, figures' tables or
    warnings. The signal store, which holds token ids, is not in the folder."""
    out, output = demo_run
    terms = demo_member_only_terms(out)
    assert len(terms) > 100  # patients' names, drugs and values: the scan has something to find
    assert terms_written(out, terms, skip=("data", "models")) == {}
    assert not text_terms(output) & terms
    assert not default_cache_dir(out).is_relative_to(out) and default_cache_dir(out).is_dir()
    report = json.loads((out / "report.json").read_text())
    assert all("member_words" not in entry and entry["member_words_withheld"] == 5
               for entry in report["validity"]["sets"].values())
    assert "are training text and are not written here" in (out / "report.html").read_text()


def test_dataset_inference_finds_the_members_and_not_a_random_half_of_the_non_members(demo_run):
    """Maini et al.'s test in report.json: the members, as a set, against the same hospital's non-members, p < 0.1
    (the paper's rule) per patient, said in the terminal; and on the demo's own scores, random halves of patients
    who were never trained on (population and non-members, each halved) give p < 0.05 at most 7 times in 100. The
    halves reuse 15 patients, so the 100 p-values are not independent and no uniformity test applies here; the
    synthetic one is in tests/metrics/test_dataset_inference.py."""
    from lmaudit.metrics.dataset_inference import dataset_inference

    out, output = demo_run
    report = json.loads((out / "report.json").read_text())
    section = report["dataset_inference"]
    assert section["unit"] == "patient" and section["decisions"]["p<0.1"] and section["p_value"] < 0.1
    assert section["n_test"]["suspect"] + section["n_learn"]["suspect"] == report["data"]["groups"]["member"]
    assert "logistic_split on gradient_norms" not in section["features"]  # fitted on the audited labels
    assert "Dataset inference (Maini et al. 2024)" in output
    scores = pd.read_parquet(out / "scores.parquet")
    unseen = scores[(scores["role"] == "population") | (scores["nonmember_set"] == "same-hospital")]
    columns = [name for name in section["features"]]
    named = {f"score_{c.split(' on ')[0]}" for c in columns} | {f"score_{c.replace(' on ', '_')}" for c in columns}
    features = unseen[[c for c in unseen.columns if c in named and unseen[c].notna().all()]]
    assert features.shape[1] >= 5
    p_values = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        halves = [rng.permutation(part["group_id"].unique()) for _, part in unseen.groupby("role")]
        chosen = np.concatenate([half[: len(half) // 2] for half in halves])
        p_values.append(dataset_inference(features, unseen["group_id"].isin(chosen).to_numpy(),
                                          unseen["group_id"].to_numpy(), "patient", seed).p_value)
    assert sum(p < 0.05 for p in p_values) <= 7


def test_the_dataset_inference_command_reads_the_stored_signals_and_refuses_a_suspect_patient_as_validation(demo_run,
                                                                                                            tmp_path):
    """`lmaudit dataset-inference` on the demo's target: its members as the suspect set, the same hospital's
    non-members as the validation set; the signals come from the demo's store (the same settings); the answer is said
    in one sentence and written without text; templated notes that recur in both sets are counted in a warning. A
    validation file holding a suspect patient is refused in one line, exit 2, nothing written."""
    out = demo_run[0]
    data = out / "data"
    common = ["dataset-inference", "--target", str(out / "models" / "target"),
              "--reference", str(out / "models" / "reference"), "--reference", str(out / "models" / "reference-2"),
              "--population", str(data / "population.parquet"), "--k", "4", "--cache-dir", str(default_cache_dir(out))]
    stored = sorted(path.name for path in default_cache_dir(out).rglob("*") if path.is_file())
    result = CliRunner().invoke(main, [*common, "--suspect", str(data / "member.parquet"),
                                       "--validation", str(data / "nonmember.parquet"), "--out", str(tmp_path / "di")])
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in default_cache_dir(out).rglob("*") if path.is_file()) == stored  # no new model pass
    document = json.loads((tmp_path / "di" / "dataset_inference.json").read_text())
    assert_document_round_trips(tmp_path / "di" / "dataset_inference.json")
    assert document["p_value"] < 0.1 and document["unit"] == "patient" and document["decisions"]["p<0.1"]
    assert document["statement"] in result.output and "the suspect set as a set against the validation set" in result.output
    assert not document["texts_separate"]  # one hospital, one generator
    members = pd.read_parquet(data / "member.parquet")
    nonmembers = pd.read_parquet(data / "nonmember.parquet")
    shared = nonmembers["text"].isin(set(members["text"])).sum()
    assert document["warnings"] == [] if shared == 0 else document["warnings"][0].startswith(
        f"{shared} of {len(nonmembers)} validation samples have the very text of a suspect sample")
    assert not any(text in json.dumps(document) for text in members["text"])
    mixed = pd.concat([nonmembers, members.iloc[[3]].assign(sample_id="new-0")])
    mixed.to_parquet(tmp_path / "mixed.parquet")
    refused = CliRunner().invoke(main, [*common, "--suspect", str(data / "member.parquet"),
                                        "--validation", str(tmp_path / "mixed.parquet"), "--out", str(tmp_path / "no")])
    assert refused.exit_code == 2 and members["group_id"].iloc[3] in refused.output, refused.output
    assert len(refused.output.strip().splitlines()) == 1 and not (tmp_path / "no" / "dataset_inference.json").exists()


@needs_chromium
def test_every_table_of_the_demo_page_scrolls_within_1280_px(demo_run, tmp_path):
    """Opened, the demo's page (every <details> open, "All thresholds" included) is no wider than a 1280 px window:
    a wide table scrolls inside its own box instead of being clipped or widening the page."""
    page_width, table_right, tables = measured_widths(demo_run[0] / "report.html", tmp_path, chromium_command(tmp_path))
    assert tables >= 10 and page_width <= 1280 and table_right <= 1280


def test_the_demos_pdf_fits_four_pages_and_every_number_in_it_is_report_jsons(demo_run):
    """report.pdf, laid out by Typst from the same report: at most 4 pages; every decimal number its text holds is one
    of report.json's (a value at the three decimals the page shows, or a number of report.json's own sentences), and
    each level's headline AUC is there."""
    import io

    pypdf = pytest.importorskip("pypdf")
    out, output = demo_run
    assert f"pdf: {out / 'report.pdf'}" in output
    reader = pypdf.PdfReader(io.BytesIO((out / "report.pdf").read_bytes()))
    assert 1 <= len(reader.pages) <= 4
    text = " ".join(page.extract_text() for page in reader.pages)
    report = json.loads((out / "report.json").read_text())
    decimals = re.compile(r"\d+\.\d+")

    def values(node):
        if isinstance(node, dict):
            return [v for child in node.values() for v in values(child)]
        if isinstance(node, list):
            return [v for child in node for v in values(child)]
        return [node] if isinstance(node, float) else []

    known = {f"{value:.3f}" for value in values(report)} | set(decimals.findall(json.dumps(report)))
    found = set(decimals.findall(text)) - {report["lmaudit_version"].rsplit(".", 1)[0]}
    assert found and found <= known, sorted(found - known)
    for level in report["summary"]["levels"].values():
        assert f"{level['strongest']['auc']:.3f}" in text
