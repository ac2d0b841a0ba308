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
