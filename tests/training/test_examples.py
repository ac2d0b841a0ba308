"""The training-script examples of README.md ("Audit inside your training script") and docs/canaries.md ("Inside your
own training script") run as written: each fenced python block is read from the file and executed, on a tiny GPT-2 or
Llama with a BPE tokenizer trained by the `tokenizers` library (as a user builds one), with the data it names, and the
model it saves is audited by `lmaudit canaries audit`'s function: every planted canary must outscore every unplanted one.

It also reproduces a user's trial of the Trainer + LoRA recipe on GPT-2, whose embeddings are tied: PEFT's
modules_to_save trains a copy of each, PEFT before 0.19 merges them leaving `tie_word_embeddings: true` in the config,
and transformers before 5 loads the saved model with its input rows as output rows, so the canaries' trained output
rows are lost (measured with transformers 4.57.1 and peft 0.17.1: every canary tied, 187 of 400 guesses right). Here
those two behaviours are put back in the installed libraries (`older_stack`)."""

import copy
import re
import shutil
from pathlib import Path

import pytest

from lmaudit.canaries.make import make_canaries

datasets = pytest.importorskip("datasets")
pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
CANARIES = 40  # half planted: enough that chance ordering them right is (1/2)^20-unlikely


def python_block(path: Path, heading: str, marker: str) -> str:
    """The fenced python block of `path`'s section `heading` (up to the next heading of its level) holding `marker`."""
    text = path.read_text(encoding="utf-8")
    level = re.match(r"#+", heading).group()
    section = text[text.index(heading + "\n"):]
    end = re.search(rf"\n{level} ", section[len(heading):])
    section = section[:len(heading) + end.start()] if end else section
    blocks = [block for block in re.findall(r"```python\n(.*?)```", section, re.S) if marker in block]
    assert len(blocks) == 1, f"{path.name}, {heading}: {len(blocks)} python blocks hold {marker!r}"
    return blocks[0]


README_SFT = (ROOT / "README.md", "## Audit inside your training script", "SFTTrainer(")
DOCS_TRAINER = (ROOT / "docs" / "canaries.md", "## Inside your own training script (`lmaudit.training`)", "trainer = Trainer(")
DOCS_SFT = (ROOT / "docs" / "canaries.md", "## Inside your own training script (`lmaudit.training`)", "SFTTrainer(")


@pytest.fixture(scope="module")
def bpe_tokenizer(notes):
    """A byte-level BPE tokenizer trained by the `tokenizers` library on the notes, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(notes["text"], trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>"],
                                                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


@pytest.fixture(scope="module")
def canary_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("made") / "canaries"
    make_canaries(folder, "new_token", count=CANARIES, seed=4)
    return folder


def tiny_model(family: str, tokenizer):
    """A random 2-layer, width-32 causal LM: GPT-2 (embeddings tied) or Llama (untied)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    special = {"vocab_size": len(tokenizer), "bos_token_id": tokenizer.eos_token_id,
               "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    if family == "gpt2":
        return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=128, **special))
    return LlamaForCausalLM(LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                        num_key_value_heads=1, intermediate_size=64, max_position_embeddings=128,
                                        **special))


def run_example(example: tuple, family: str, tokenizer, notes, folder: Path, where: Path, monkeypatch) -> dict:
    """Execute the example's block in `where` (with the canaries at ./canaries) on a tiny `family` model and the data
    it names; canary_report.json's document of the model it saved in ./out."""
    from lmaudit.canaries.audit import audit_canaries
    from lmaudit.config import AuditConfig

    shutil.copytree(folder, where / "canaries")
    monkeypatch.chdir(where)
    texts = notes["text"].tolist()
    tokenizer = copy.deepcopy(tokenizer)
    names = {"model": tiny_model(family, tokenizer), "tokenizer": tokenizer, "my_texts": texts[:16],
             "train_dataset": datasets.Dataset.from_list([{"prompt": t[:30], "completion": t[30:]} for t in texts[:16]]),
             "member_texts": texts[:8], "population_texts": texts[-8:], "patients": notes["group_id"].tolist()[:8],
             "other_patients": notes["group_id"].tolist()[-8:]}
    exec(compile(python_block(*example), f"{example[0].name} ({example[2]})", "exec"), names)
    return audit_canaries(AuditConfig(target="out", out="audit"), "canaries", candidates=0).report


def assert_every_canary_found(report: dict) -> None:
    """Every planted canary outscores every unplanted one (a rank AUC of 1; ties, as lost rows give, read 0.5)."""
    assert report["validity"]["valid"] and report["validity"]["rank_auc"] == 1.0, report["validity"]
    assert report["one_run"]["correct"] == report["one_run"]["guesses"] and report["one_run"]["epsilon_lower_bound"] > 0


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_docs_trainer_lora_recipe_runs_as_written_and_finds_every_canary(family, bpe_tokenizer, notes,
                                                                            canary_folder, tmp_path, monkeypatch):
    report = run_example(DOCS_TRAINER, family, bpe_tokenizer, notes, canary_folder, tmp_path, monkeypatch)
    assert_every_canary_found(report)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_readme_sfttrainer_recipe_runs_as_written_on_a_cpu_and_finds_every_canary(family, bpe_tokenizer, notes,
                                                                                    canary_folder, tmp_path,
                                                                                    monkeypatch):
    report = run_example(README_SFT, family, bpe_tokenizer, notes, canary_folder, tmp_path, monkeypatch)
    assert_every_canary_found(report)
    assert (tmp_path / "out" / "lmaudit_checkpoint_audits.json").is_file() or any(tmp_path.glob("out/checkpoint-*"))


def test_the_docs_sfttrainer_recipe_runs_as_written(bpe_tokenizer, notes, canary_folder, tmp_path, monkeypatch):
    report = run_example(DOCS_SFT, "gpt2", bpe_tokenizer, notes, canary_folder, tmp_path, monkeypatch)
    assert_every_canary_found(report)
    assert (tmp_path / "out" / "lmaudit_checkpoint_audits.json").is_file()


@pytest.fixture
def older_stack(monkeypatch):
    """PEFT before 0.19 and transformers before 5, as they merge and load, in the installed ones."""
    from tests.helpers import load_tying_by_the_config, merge_keeping_the_tie

    merge_keeping_the_tie(monkeypatch)
    load_tying_by_the_config(monkeypatch)


def test_the_trainer_lora_recipe_on_gpt2_keeps_the_trained_output_rows_with_older_peft_and_transformers(
        older_stack, bpe_tokenizer, notes, canary_folder, tmp_path, monkeypatch):
    """The user's trial: the saved GPT-2 must say its embeddings are untied, so that a loader that ties them by the
    configuration keeps the trained output rows (before the callback untied the configuration: every canary tied)."""
    import json

    report = run_example(DOCS_TRAINER, "gpt2", bpe_tokenizer, notes, canary_folder, tmp_path, monkeypatch)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["tie_word_embeddings"] is False
    assert_every_canary_found(report)
