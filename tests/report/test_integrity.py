"""report.json's canonical self-hash and `lmaudit verify` on an audit from precomputed losses (no model files): the hash
is a hand computation with hashlib, an untouched report is intact, and every flipped byte of the report or of the
scores file is found (exit 3; a report no longer readable as JSON is bad input, exit 2)."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.report.integrity import CANONICAL, canonical_sha256, sealed
from tests.helpers import assert_one_line_error, run_cli


def hand_hash(document: dict) -> str:
    """SHA-256 of the document without `integrity`, sorted keys, no whitespace: the documented canonical form."""
    content = {key: value for key, value in document.items() if key != "integrity"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """An audit from 40 member and 40 non-member losses: (scores file, output folder)."""
    root = tmp_path_factory.mktemp("integrity")
    rng = np.random.default_rng(0)
    scores = root / "scores.csv"
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(80)], "role": ["member"] * 40 + ["nonmember"] * 40,
                  "target_loss": np.r_[rng.normal(2, 1, 40), rng.normal(3, 1, 40)]}).to_csv(scores, index=False)
    code, output = run_cli("attack", "--scores", scores, "--out", root / "out", "--bootstrap", "20")
    assert code == 0, output
    return scores, root / "out"


def flipped(data: bytes, position: int) -> bytes:
    """`data` with the byte at `position` changed (its lowest bit flipped)."""
    return data[:position] + bytes([data[position] ^ 1]) + data[position + 1:]


def positions(size: int) -> list[int]:
    """The first, a quarter, the middle, three quarters and the last byte of a file of `size` bytes."""
    return sorted({0, size // 4, size // 2, 3 * size // 4, size - 1})


def test_canonical_hash_is_the_hand_computation():
    document = {"b": [1, 2.5, None], "a": {"z": "é", "y": True}, "integrity": {"report_sha256": "x"}}
    assert canonical_sha256(document) == hand_hash(document)
    assert sealed(document, "report_sha256")["integrity"] == {"report_sha256": hand_hash(document),
                                                              "canonical": CANONICAL}


def test_report_records_its_hash_and_the_scores_file_hash(audited):
    scores, out = audited
    report = json.loads((out / "report.json").read_text())
    assert report["integrity"] == {"report_sha256": hand_hash(report), "canonical": CANONICAL}
    assert report["provenance"]["data"] == {str(scores): hashlib.sha256(scores.read_bytes()).hexdigest()}
    assert run_cli("verify", out) == (0, f"intact: {out}\n")


@pytest.mark.parametrize("which", ["report", "scores"])
def test_verify_finds_every_flipped_byte(audited, which):
    scores, out = audited
    path = out / "report.json" if which == "report" else scores
    original = path.read_bytes()
    try:
        for position in positions(len(original)):
            changed = flipped(original, position)
            path.write_bytes(changed)
            code, output = run_cli("verify", out)
            try:
                json.loads(changed.decode("utf-8"))
                readable = True
            except ValueError:
                readable = which != "report"  # a scores file is hashed as bytes, never parsed by verify
            if readable:
                assert code == 3, (position, output)
                assert output.startswith("tampered: ") and str(path) in output.splitlines()[0], output
            else:
                assert_one_line_error(code, output, str(path), "not readable JSON")
    finally:
        path.write_bytes(original)
    assert run_cli("verify", out)[0] == 0


def test_a_changed_number_is_named_and_whitespace_counts(audited):
    _, out = audited
    path = out / "report.json"
    original = path.read_text()
    try:
        report = json.loads(original)
        report["data"]["counts"]["member"] += 1
        path.write_text(json.dumps(report, indent=2) + "\n")
        code, output = run_cli("verify", out)
        assert code == 3 and f"recorded {report['integrity']['report_sha256']}" in output, output
        path.write_text(original.replace('{\n  "', '{\n\t"', 1))  # the same JSON, one byte of it other
        code, output = run_cli("verify", out)
        assert code == 3 and "bytes are not those lmaudit wrote" in output, output
    finally:
        path.write_text(original)


def test_verify_refuses_a_missing_report_in_one_line(tmp_path):
    assert_one_line_error(*run_cli("verify", tmp_path), str(tmp_path / "report.json"), "no such report")
