"""Helpers shared by the tests: the command line in-process, the one-line error contract, attack inputs."""

from __future__ import annotations

import math

import pandas as pd
from click.testing import CliRunner

from lmaudit.attacks.base import REFERENCE_LOSSES, TARGET_LOSS, AttackInput
from lmaudit.cli import main
from lmaudit.metrics.results import AttackResult, ThresholdResult


def run_cli(*args) -> tuple[int, str]:
    """Exit status and output (stdout and stderr) of `lmaudit -q ARGS`: quiet, so that the output is the command's
    results or its error line without the stage lines logged before it (logging is tested in tests/cli/test_cli_options.py)."""
    result = CliRunner().invoke(main, ["-q", *[str(a) for a in args]])
    return result.exit_code, result.output


def invoke(*args) -> str:
    """The output of `lmaudit ARGS`, which must succeed."""
    code, output = run_cli(*args)
    assert code == 0, output
    return output


def assert_one_line_error(code: int, output: str, *fragments: str) -> None:
    """Bad input: exit status 2, one line starting 'lmaudit: error:' that holds every fragment, no traceback."""
    assert code == 2, output
    lines = [line for line in output.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("lmaudit: error:"), output
    assert "Traceback" not in output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def loss_input(table: pd.DataFrame, signal: str = "mlm_energy", seed: int = 0) -> AttackInput:
    """The attack input of a language-model audit from a table with columns target (and reference) losses."""
    values = {TARGET_LOSS: table["target"].to_numpy(dtype=float)}
    if "reference" in table:
        values[REFERENCE_LOSSES] = table[["reference"]].to_numpy(dtype=float)
    return AttackInput(signal, table, values, seed)


def audited_auc(frame: pd.DataFrame) -> float:
    """AUC of an attack's scores, members against non-members (higher score = member)."""
    from lmaudit.metrics.roc import auc

    audited = frame[frame["role"].isin(["member", "nonmember"])]
    return auc((audited["role"] == "member").to_numpy(), audited["score"].to_numpy(dtype=float))


def scores_of(attacks: list, name: str, level: str = "sample"):
    """The scores of one attack at one level."""
    return next(a for a in attacks if a.attack == name and a.level == level)


def text_terms(text: str) -> set[str]:
    """The words (letters only, 3 or more, lowercased) and the word pairs (adjacent tokens of 2 or more letters or
    digits, as the blind baseline's vectorizer splits them) of `text`."""
    import re

    tokens = re.findall(r"[a-z0-9]{2,}", text.lower())
    words = {token for token in tokens if token.isalpha() and len(token) >= 3}
    pairs = {f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False) if not (a + b).isdigit()}
    return words | pairs


def member_only_terms(members: pd.Series, others: pd.Series) -> set[str]:
    """The words and word pairs found in member texts and in no other text: what no output may hold unless the user
    asks for text."""
    def terms(texts: pd.Series) -> set[str]:
        return set().union(*map(text_terms, texts))

    return terms(members) - terms(others)


def pdf_text(path) -> str:
    """The text of every page of a PDF (pypdf's extraction)."""
    from pypdf import PdfReader

    return "\n".join(page.extract_text() for page in PdfReader(path).pages)


def terms_written(folder, terms: set[str], skip: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Each file under `folder` (but those under the top-level folders `skip`) that holds any of `terms`, with the
    terms it holds: text files as text, parquet tables as their CSV, PDFs as their extracted text; PNG figures are
    pixels (their compressed bytes would match short words by chance), and any other kind of file fails the test until
    it is added here."""
    from pathlib import Path

    found = {}
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file() or path.relative_to(folder).parts[0] in skip or path.suffix == ".png":
            continue
        assert path.suffix in {".parquet", ".json", ".jsonl", ".html", ".csv", ".txt", ".md", ".yaml", ".pdf"}, path
        content = (pd.read_parquet(path).to_csv() if path.suffix == ".parquet" else pdf_text(path) if path.suffix == ".pdf"
                   else path.read_text(encoding="utf-8"))
        held = text_terms(content) & terms
        if held:
            found[str(path.relative_to(folder))] = held
    return found


def demo_member_only_terms(out, trained: tuple[str, ...] = ("member", "calibration_member")) -> set[str]:
    """The words and word pairs of a demo's training texts (its data/ files of the `trained` roles) found in no other
    text it generated."""
    from pathlib import Path

    tables = {path.stem: pd.read_parquet(path)["text"] for path in (Path(out) / "data").glob("*.parquet")}
    return member_only_terms(pd.concat([tables[name] for name in trained if name in tables]),
                             pd.concat([text for name, text in tables.items() if name not in trained]))


def assert_document_round_trips(path) -> None:
    """The document at `path` reads into its model (report/document.py) and writes out to the same JSON."""
    import json
    from pathlib import Path

    from lmaudit.report.document import load_document
    from lmaudit.strict_json import json_ready

    written = json.loads(Path(path).read_text(encoding="utf-8"))
    assert json.loads(json.dumps(json_ready(load_document(path)))) == written


def load_tying_by_the_config(monkeypatch) -> None:
    """transformers before 5 in the installed one: loading ties the output embeddings to the input ones whenever the
    configuration says they are tied, even where the weights file holds output embeddings of their own."""
    from transformers import PreTrainedModel

    load = PreTrainedModel.from_pretrained.__func__

    def load_then_tie(cls, *args, **kwargs):
        loaded = load(cls, *args, **kwargs)
        (loaded[0] if isinstance(loaded, tuple) else loaded).tie_weights()
        return loaded

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(load_then_tie))


def merge_keeping_the_tie(monkeypatch) -> None:
    """PEFT before 0.19 in the installed one: merging leaves the configuration's tie_word_embeddings as it was, even
    where modules_to_save trained the input and output embeddings apart."""
    from peft.tuners.tuners_utils import BaseTuner

    merge = BaseTuner._unload_and_optionally_merge

    def merged_as_before(self, *args, **kwargs):
        tied = self.model.config.tie_word_embeddings
        merged = merge(self, *args, **kwargs)
        merged.config.tie_word_embeddings = tied
        return merged

    monkeypatch.setattr(BaseTuner, "_unload_and_optionally_merge", merged_as_before)


def typed_threshold(rule: str, value: float = 0.0, advantage: float = math.nan, accuracy: float = math.nan,
                    epsilon: float = math.nan) -> ThresholdResult:
    """A threshold record as a report reads back: the given numbers, NaN (null in report.json) for the rest."""
    nan = math.nan
    return ThresholdResult(rule=rule, alpha=None, value=value, tp=0, fp=0, tn=0, fn=0, precision=nan, recall=nan, fpr=nan,
                           accuracy=accuracy, advantage=advantage, recall_ci=(nan, nan), fpr_ci=(nan, nan),
                           epsilon_lower_bound=epsilon)


def typed_result(attack: str, signal: str, level: str, auc: float, thresholds=(), slice_name: str = "all") -> AttackResult:
    """An attack's result as a report reads back: its AUC and thresholds, 10 members and 10 non-members."""
    return AttackResult(attack=attack, signal=signal, level=level, slice=slice_name, auc=auc, auc_ci=(math.nan, math.nan),
                        tpr_at_fpr={}, thresholds=list(thresholds), balanced=None, n_members=10, n_nonmembers=10,
                        n_population=0)
