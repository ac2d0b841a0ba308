"""The fine-tuning suite end to end: a base, its full and LoRA fine-tunes, each audited with the base as its reference;
every attack built for fine-tunes runs on both (SPV-MIA with a self-prompt reference per fine-tune); finetune.json agrees with the two reports."""

import json

from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.studies import finetune_suite
from lmaudit.studies.setup import DEMO_SIZES, DemoSize
from tests.helpers import assert_document_round_trips


def test_finetune_suite_audits_both_fine_tunes_against_their_base(tmp_path, monkeypatch):
    """What it checks holds at any size, so a smaller one than smoke (24 patients, 4 epochs, 2 SaMIA generations per
    text) keeps the test fast."""
    monkeypatch.setitem(DEMO_SIZES, "smoke", DemoSize(patients=24, epochs=4, k=2, bootstrap=50, references=1, neighbours=0))
    monkeypatch.setattr(finetune_suite, "SAMIA_DRAWS", 2)
    monkeypatch.setattr(finetune_suite, "PERTURBATIONS", 2)
    result = CliRunner().invoke(main, ["demo", "--suite", "finetune", "--size", "smoke", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    full = json.loads((tmp_path / "report.json").read_text())
    lora = json.loads((tmp_path / "lora" / "report.json").read_text())
    base = str(tmp_path / "models" / "base")
    assert full["config"]["reference"] == [base] and full["config"]["target"] == str(tmp_path / "models" / "full")
    assert lora["config"]["target"] == base and lora["config"]["adapter"] == str(tmp_path / "models" / "lora")
    assert (tmp_path / "models" / "lora" / "adapter_config.json").exists()
    comparison = json.loads((tmp_path / "finetune.json").read_text())
    for document in ("report.json", "lora/report.json", "finetune.json"):
        assert_document_round_trips(tmp_path / document)
    for name, report in (("full", full), ("lora", lora)):
        assert {"ez_mia", "con_recall", "user_inference", "camia", "samia", "petal", "spv_mia", "likelihood_ratio",
                "rmia", "informia_tokens"} <= {r["attack"] for r in report["results"]}
        assert {"generated text only", "generated text + a reference model"} <= set(report["summary"]["threat_models"]["tried"])
        rows = comparison[name]["sample_level"]
        assert [row["tpr"] for row in rows] == sorted((row["tpr"] for row in rows), reverse=True)
        ez = next(r for r in report["results"] if r["attack"] == "ez_mia" and r["level"] == "sample" and r["slice"] == "all")
        assert next(row for row in rows if row["attack"] == "ez_mia")["tp"] == ez["tpr_at_fpr"]["0.01"]["tp"]
        assert comparison[name]["population_nll"] > 0 and comparison[name]["base_population_nll"] > 0
    assert comparison["full"]["base_population_nll"] == comparison["lora"]["base_population_nll"]
