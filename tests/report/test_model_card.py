"""The model card's privacy section and the Hub's results come from report.json, number for number: the section reads
back through huggingface_hub's model-card parser with its model-index metadata, an existing card keeps its own text and
results, a second section is refused without --overwrite (nothing written) and replaced with it, and
privacy_evaluation.json holds the same headline numbers."""

import json

import pytest
from huggingface_hub import ModelCard

from lmaudit.errors import InputError
from lmaudit.report.document import load_report
from lmaudit.report.documents import write_document
from lmaudit.report.model_card import EVALUATION_FILE, HEADING, write_model_card
from tests.report.test_build import small_report


@pytest.fixture()
def audited(tmp_path):
    """A model folder and the report.json of its audit."""
    write_document(tmp_path / "audit", "report.json", small_report())
    (tmp_path / "model").mkdir()
    return tmp_path / "model", tmp_path / "audit" / "report.json"


def test_the_section_and_the_hubs_results_hold_the_reports_numbers(audited):
    model, report_path = audited
    report = load_report(report_path)
    card = ModelCard.load(write_model_card(model, report_path))
    assert HEADING in card.text and f"**{report.summary.risk}**" in card.text
    for name, level in report.summary.levels.items():
        strongest = level.strongest
        assert f"| {name} | {level.risk} | {strongest.attack} | {strongest.auc:.3f} [{strongest.auc_ci[0]:.3f}, " \
               f"{strongest.auc_ci[1]:.3f}] |" in card.text
    aucs = {r.dataset_name: r.metric_value for r in card.data.eval_results if r.metric_type == "roc_auc"}
    assert aucs == {f"audited {name}s": round(level.strongest.auc, 4) for name, level in report.summary.levels.items()}
    evaluation = json.loads((model / EVALUATION_FILE).read_text())
    assert evaluation["risk"] == report.summary.risk
    assert {name: entry["auc"] for name, entry in evaluation["levels"].items()} == \
        {name: level.strongest.auc for name, level in report.summary.levels.items()}
    assert "not a determination that the model is anonymous" in card.text.replace("\n", " ")


def test_an_existing_card_keeps_its_text_and_a_second_section_needs_overwrite(audited):
    model, report_path = audited
    (model / "README.md").write_text("---\nlicense: mit\n---\n# My model\n\nTrained on notes.\n\n## Uses\n\nResearch.\n")
    write_model_card(model, report_path)
    before = (model / "README.md").read_text()
    with pytest.raises(InputError, match="already has a 'Privacy evaluation' section; pass --overwrite"):
        write_model_card(model, report_path)
    assert (model / "README.md").read_text() == before
    write_model_card(model, report_path, overwrite=True)
    card = ModelCard.load(model / "README.md")
    assert card.text.count(HEADING) == 1 and "## Uses\n\nResearch." in card.text and card.data.license == "mit"


def test_every_headline_puts_the_tpr_beside_its_own_attack(tmp_path):
    """The trial's PDF: "dc_pdd ... 0.825", where 0.825 was min_k_plus_plus's and dc_pdd's own 0.875. With the strongest
    attack by AUC (loss) not the one that exposes most (zlib), the model card's row, privacy_evaluation.json, the Hub's
    results and the PDF's verdict table each name zlib beside zlib's TPR, and that TPR is the level's highest."""
    from lmaudit.report.model_card import evaluation, level_cells
    from lmaudit.report.pdf import view
    from lmaudit.strict_json import json_ready
    from tests.report.test_verdict import leakage_section, result, verdict_of

    results = [result("loss", auc=0.8, auc_ci=(0.7, 0.9), tpr=0.5, tpr_ci=(0.4, 0.6), tp=1000),
               result("zlib", auc=0.7, auc_ci=(0.6, 0.8), tpr=0.875, tpr_ci=(0.8, 0.93), tp=1750)]
    report = small_report()
    report["summary"] = {**json_ready(verdict_of(results, {"sample": "sample"}, 1e-5, None,
                                              leakage_section({("loss", "sample"): 0.01, ("zlib", "sample"): 0.01}))),
                         "caveats": report["summary"].get("caveats")}
    write_document(tmp_path / "audit", "report.json", report)
    level = load_report(tmp_path / "audit").summary.levels["sample"]
    assert level.strongest.attack == "loss" and level.tpr_at_1pct_fpr.attack == "zlib"
    assert level_cells(level)["tpr"] == "0.875 [0.800, 0.930] (zlib)" and level_cells(level)["attack"] == "loss"
    pdf_row = view(load_report(tmp_path / "audit"))["levels"][0]
    assert pdf_row["tpr"].endswith("(zlib)") and pdf_row["attack"] == "loss"
    entry = evaluation(load_report(tmp_path / "audit"))["levels"]["sample"]
    assert (entry["tpr_attack"], entry["tpr_at_1pct_fpr"], entry["tpr_at_1pct_fpr_ci"]) == ("zlib", 0.875, [0.8, 0.93])
