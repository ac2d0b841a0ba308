"""Every model-running path on a CUDA GPU agrees with the CPU (skipped without one): training places the model and
records the device, the audit (white-box included) gives the CPU's AUCs within 0.002 in fp32, extraction and
reconstruction run. `make gpu-check` runs this folder; docs/performance.md says when it last ran and where."""

import json

import pytest
import torch

from tests.helpers import invoke

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Notes split at random by patient, and a tiny causal target and reference trained on the GPU."""
    root = tmp_path_factory.mktemp("gpu")
    invoke("synth", "--out", root / "notes.csv", "--patients", 60, "--seed", 1)
    invoke("split", "--data", root / "notes.csv", "--out", root / "split", "--seed", 1)
    for name, data, tokenizer in (("target", "train", []), ("reference", "population", ["--tokenizer", root / "target"])):
        invoke("train", "clm", "--data", root / "split" / f"{data}.parquet", "--out", root / name, "--epochs", 3,
               "--device", "cuda", *tokenizer)
    return root


def test_training_on_the_gpu_records_it(trained):
    recorded = json.loads((trained / "target" / "lmaudit_training.json").read_text())
    assert (recorded["device"], recorded["precision"]) == ("cuda", "fp32")


def test_the_audit_on_the_gpu_gives_the_cpus_aucs(trained):
    split = trained / "split"
    reports = {}
    for device in ("cpu", "cuda"):
        invoke("audit", "--target", trained / "target", "--reference", trained / "reference", "--members",
               split / "train.parquet", "--nonmembers", split / "nonmembers.parquet", "--population", split / "population.parquet",
               "--whitebox", "--device", device, "--out", trained / f"audit-{device}", "--permutations", 100)
        reports[device] = json.loads((trained / f"audit-{device}" / "report.json").read_text())
    cpu = {(r["attack"], r["signal"], r["level"], r["slice"]): r["auc"] for r in reports["cpu"]["results"]}
    cuda = {(r["attack"], r["signal"], r["level"], r["slice"]): r["auc"] for r in reports["cuda"]["results"]}
    assert cpu.keys() == cuda.keys() and any(key[1] == "gradient_norms" for key in cuda)
    assert max(abs(cpu[key] - cuda[key]) for key in cpu) <= 0.002


def test_extraction_and_reconstruction_run_on_the_gpu(trained):
    split = trained / "split"
    invoke("extract", "--target", trained / "target", "--members", split / "train.parquet", "--nonmembers",
           split / "nonmembers.parquet", "--out", trained / "extract", "--prefix-tokens", 8, "--suffix-tokens", 8,
           "--device", "cuda")
    assert json.loads((trained / "extract" / "extraction.json").read_text())["environment"]["device"] == "cuda"
    invoke("reconstruct", "--target", trained / "target", "--members", split / "train.parquet", "--nonmembers",
           split / "nonmembers.parquet", "--out", trained / "reconstruct", "--field", r"age=(\d+) year", "--device", "cuda")
    assert json.loads((trained / "reconstruct" / "reconstruction.json").read_text())["environment"]["device"].startswith("cuda")
