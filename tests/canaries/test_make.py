"""Making canaries: seeded secrets and draws, a fair coin per canary recorded in the key, the planted ones alone in
insert.jsonl, and one-line refusals of bad requests."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.canaries.make import (
    CANARIES_FILE,
    INSERT_FILE,
    KEY_FILE,
    MANIFEST_FILE,
    folder_fingerprint,
    key_fingerprint,
    make_canaries,
    planted_canaries,
    read_canary_set,
    reserved_tokens,
)
from lmaudit.canaries.settings import SecretShape
from lmaudit.errors import InputError
from tests.helpers import assert_one_line_error, run_cli


def read(folder, name):
    return pd.read_parquet(folder / name) if name.endswith(".parquet") else pd.read_json(folder / name, lines=True)


def test_secret_canaries_are_seeded_distinct_and_fill_the_format(tmp_path):
    spec = make_canaries(tmp_path / "a", "secret", 300, seed=4, shape=SecretShape(format="mrn {secret} on file", digits=6))
    make_canaries(tmp_path / "b", "secret", 300, seed=4, shape=SecretShape(format="mrn {secret} on file", digits=6))
    first, second = read(tmp_path / "a", CANARIES_FILE), read(tmp_path / "b", CANARIES_FILE)
    pd.testing.assert_frame_equal(first, second)  # same seed, same canaries
    assert first["text"].is_unique and len(first) == 300
    assert first["text"].str.fullmatch(r"mrn( \d){6} on file").all()
    assert spec.space_bits == pytest.approx(6 * np.log2(10))
    manifest = json.loads((tmp_path / "a" / MANIFEST_FILE).read_text())
    assert manifest["kind"] == "secret" and "included" not in json.dumps(manifest)


def test_new_token_canaries_are_seeded_distinct_new_words_and_all_are_reserved(tmp_path):
    spec = make_canaries(tmp_path / "a", "new_token", 300, seed=4, shape=SecretShape(tokens=2))
    make_canaries(tmp_path / "b", "new_token", 300, seed=4, shape=SecretShape(tokens=2))
    first = read(tmp_path / "a", CANARIES_FILE)
    pd.testing.assert_frame_equal(first, read(tmp_path / "b", CANARIES_FILE))
    words = first["secret"].str.split().explode()
    assert spec.kind == "new_token" and spec.secret_tokens == 2 and words.is_unique and len(words) == 600
    assert words.str.fullmatch(r"xq[0-9a-f]{10}").all()
    assert (first["text"] == "the patient's medical record number is " + first["secret"] + " .").all()
    # every canary's tokens, planted or not: the vocabulary must not tell which were planted
    assert reserved_tokens(tmp_path / "a") == tuple(words)
    make_canaries(tmp_path / "s", "secret", 10, seed=1)
    assert reserved_tokens(tmp_path / "s") == ()


def test_the_key_is_a_fair_coin_per_canary_and_insert_holds_the_planted_only(tmp_path):
    make_canaries(tmp_path / "c", "secret", 2000, seed=1)
    canaries, key = read(tmp_path / "c", CANARIES_FILE), read(tmp_path / "c", KEY_FILE)
    planted = planted_canaries(tmp_path / "c")
    assert list(key["sample_id"]) == list(canaries["sample_id"])
    assert abs(key["included"].mean() - 0.5) < 0.035  # 2000 fair coins: within 3 standard deviations of 1/2
    assert set(planted["sample_id"]) == set(key.loc[key["included"], "sample_id"])
    assert set(planted["text"]) == set(canaries.set_index("sample_id").loc[planted["sample_id"], "text"])
    assert (planted["group_id"] == planted["sample_id"]).all()  # each canary its own group: no per-group cap drops it
    assert "included" not in pd.read_json(tmp_path / "c" / INSERT_FILE, lines=True)
    make_canaries(tmp_path / "d", "secret", 2000, seed=2)
    assert not np.array_equal(read(tmp_path / "d", KEY_FILE)["included"], key["included"])  # another seed, another key


def test_repeated_canaries_plant_each_planted_one_r_times_each_copy_its_own_group(tmp_path):
    make_canaries(tmp_path / "r", "new_token", 30, seed=0, repeats=3)
    key, planted = read(tmp_path / "r", KEY_FILE), planted_canaries(tmp_path / "r")
    included = key.loc[key["included"], "sample_id"]
    assert len(planted) == 3 * len(included) and planted["group_id"].is_unique  # no per-group cap drops a copy
    assert sorted(planted["sample_id"].str.split(".").str[0]) == sorted(list(included) * 3)
    assert planted.groupby(planted["sample_id"].str.split(".").str[0])["text"].nunique().eq(1).all()
    assert read_canary_set(tmp_path / "r").repeats == (3,)


def test_tiers_deal_the_canaries_in_turn_and_plant_each_as_often_as_its_tier(tmp_path):
    """--repeat 1,4,16 on 300 canaries: canary i is of tier i mod 3, a planted one copied that many times; the coins
    are the ones a single count draws (the tiers never move them)."""
    make_canaries(tmp_path / "t", "secret", 300, seed=4, shape=SecretShape(digits=6), repeats=(1, 4, 16))
    make_canaries(tmp_path / "u", "secret", 300, seed=4, shape=SecretShape(digits=6))
    spec, key = read_canary_set(tmp_path / "t"), read(tmp_path / "t", KEY_FILE)
    assert spec.repeats == (1, 4, 16) and spec.is_curve and spec.group_size == 16
    assert list(spec.repetition_counts()[:4]) == [1, 4, 16, 1]
    copies = planted_canaries(tmp_path / "t")["sample_id"].str.split(".").str[0].value_counts()
    planted = key.loc[key["included"], "sample_id"]
    expected = pd.Series(spec.repetition_counts(), index=key["sample_id"]).loc[planted]
    assert copies.loc[planted].tolist() == expected.tolist()
    assert key["included"].equals(read(tmp_path / "u", KEY_FILE)["included"])


@pytest.mark.parametrize("repeat,message", [("0", "distinct repetition counts of at least 1"),
                                            ("1,1", "distinct repetition counts"), ("x", "separated by commas")])
def test_a_bad_repetition_count_is_refused_in_one_line(tmp_path, repeat, message):
    code, output = run_cli("canaries", "make", "--design", "secret", "--n", "300", "--repeat", repeat,
                           "--out", tmp_path / "c")
    assert_one_line_error(code, output, message)
    assert not (tmp_path / "c").exists()


def test_a_curve_with_too_few_controls_is_refused_and_says_how_many_are_needed(tmp_path):
    code, output = run_cli("canaries", "make", "--design", "secret", "--n", "120", "--repeat", "1,4,16",
                           "--seed", "0", "--out", tmp_path / "c")
    assert_one_line_error(code, output, "needs at least 100 of them as controls", "--n 250")
    assert not (tmp_path / "c").exists()


def test_sample_canaries_are_held_out_rows_one_per_group_with_their_labels(tmp_path):
    source = tmp_path / "held.csv"
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(40)], "group_id": [f"u{i // 2}" for i in range(40)],
                  "text": [f"post number {i}" for i in range(40)], "label": ["a", "b"] * 20}).to_csv(source, index=False)
    make_canaries(tmp_path / "s", "sample", 15, seed=0, source=source)
    canaries = read(tmp_path / "s", CANARIES_FILE)
    assert len(canaries) == 15 and canaries["sample_id"].str.startswith("canary-").all()
    groups = canaries["text"].str.split().str[-1].astype(int) // 2
    assert groups.is_unique  # never two canaries of one user
    assert set(canaries["label"]) <= {"a", "b"}
    with pytest.raises(InputError, match="fewer than --n 30"):
        make_canaries(tmp_path / "t", "sample", 30, seed=0, source=source)
    training = tmp_path / "training.csv"
    pd.DataFrame({"text": [f"post number {i}" for i in range(0, 40, 2)]}).to_csv(training, index=False)
    make_canaries(tmp_path / "e", "sample", 15, seed=0, source=source, exclude=(training,))
    assert not set(read(tmp_path / "e", CANARIES_FILE)["text"]) & set(pd.read_csv(training)["text"])  # never training text
    # mislabelled: the same draw, each with another of the labels
    make_canaries(tmp_path / "m", "mislabelled", 15, seed=0, source=source)
    wrong = read(tmp_path / "m", CANARIES_FILE)
    assert list(wrong["text"]) == list(canaries["text"]) and (wrong["label"] != canaries["label"]).all()
    assert set(wrong["label"]) <= {"a", "b"}
    pd.DataFrame({"text": [f"post {i}" for i in range(20)]}).to_csv(tmp_path / "unlabelled.csv", index=False)
    with pytest.raises(InputError, match="--design mislabelled: needs a --source with a 'label' column"):
        make_canaries(tmp_path / "u", "mislabelled", 5, seed=0, source=tmp_path / "unlabelled.csv")


@pytest.mark.parametrize(("args", "message"), [
    (["--n", "10", "--format", "no slot here"], "exactly one {secret}"),
    (["--n", "10", "--kind", "sample"], "--source"),
    (["--n", "600", "--design", "secret", "--secret-digits", "3"], "too few distinct secrets"),
    (["--n", "10", "--design", "new_token", "--source", "x.csv"], "--source gives sample canaries"),
    (["--n", "1"], "--n"),
])
def test_bad_requests_get_one_line_and_exit_status_2(tmp_path, args, message):
    code, output = run_cli("canaries", "make", *args, "--out", tmp_path / "x")
    assert code == 2 and message in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()  # nothing half-written


def test_each_family_refuses_the_other_familys_canaries_in_one_line(tmp_path):
    make_canaries(tmp_path / "c", "new_token", 10, seed=0)
    posts = pd.DataFrame({"text": [f"post {i}" for i in range(20)], "label": ["a", "b"] * 10})
    posts.to_csv(tmp_path / "posts.csv", index=False)
    code, output = run_cli("train", "classifier", "--data", tmp_path / "posts.csv", "--validation", tmp_path / "posts.csv",
                           "--canaries", tmp_path / "c", "--out", tmp_path / "model")
    assert code == 2 and "new-token canaries are for language models" in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "model").exists()
    pd.DataFrame({"text": [f"held {i}" for i in range(20)], "label": ["a", "b"] * 10}).to_csv(tmp_path / "held.csv",
                                                                                              index=False)
    make_canaries(tmp_path / "m", "mislabelled", 10, seed=0, source=tmp_path / "held.csv")
    code, output = run_cli("train", "mlm", "--data", tmp_path / "posts.csv", "--canaries", tmp_path / "m",
                           "--out", tmp_path / "model")
    assert code == 2 and "mislabelled canaries are for classifiers" in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "model").exists()


def test_an_existing_canary_folder_is_never_overwritten(tmp_path):
    assert run_cli("canaries", "make", "--n", "10", "--out", tmp_path / "k")[0] == 0
    key = (tmp_path / "k" / KEY_FILE).read_bytes()
    code, output = run_cli("canaries", "make", "--n", "10", "--seed", "5", "--out", tmp_path / "k")
    assert code == 2 and "never overwrites" in output
    assert (tmp_path / "k" / KEY_FILE).read_bytes() == key


def test_the_key_fingerprint_is_its_content_not_its_parquet_bytes(tmp_path):
    make_canaries(tmp_path / "k", "secret", 20, seed=0)
    make_canaries(tmp_path / "same", "secret", 20, seed=0)
    fingerprint, key = key_fingerprint(tmp_path / "k"), read(tmp_path / "k", KEY_FILE)
    assert key_fingerprint(tmp_path / "same") == fingerprint and len(fingerprint) == 16  # made again: the same
    key.to_parquet(tmp_path / "k" / KEY_FILE, compression="gzip", row_group_size=7)  # other bytes, the same content
    assert key_fingerprint(tmp_path / "k") == fingerprint != folder_fingerprint(tmp_path / "k")
    changed = [key.assign(included=key["included"].where(key.index != 3, ~key["included"])), key.iloc[:-1],
               pd.concat([key, key.iloc[:1]], ignore_index=True), key.assign(sample_id=key["sample_id"] + "x")]
    for other in changed:
        other.to_parquet(tmp_path / "k" / KEY_FILE)
        assert key_fingerprint(tmp_path / "k") != fingerprint
    make_canaries(tmp_path / "s", "secret", 20, seed=1)  # salted by the canaries: the same coins, another fingerprint
    key.to_parquet(tmp_path / "s" / KEY_FILE)
    assert key_fingerprint(tmp_path / "s") != fingerprint


def test_training_refuses_data_that_holds_a_canary_naming_the_row(tmp_path):
    make_canaries(tmp_path / "k", "secret", 10, seed=0)
    text = read(tmp_path / "k", CANARIES_FILE)["text"].iloc[3]  # planted or not: either way it is not held out
    pd.DataFrame({"text": ["a note", "another note", text]}).to_csv(tmp_path / "train.csv", index=False)
    code, output = run_cli("train", "clm", "--data", tmp_path / "train.csv", "--out", tmp_path / "model",
                           "--canaries", tmp_path / "k")
    assert code == 2 and "train.csv, row 3" in output and "held out" in output
    assert not (tmp_path / "model").exists()


def test_training_records_what_it_planted_and_an_audit_refuses_other_canaries_or_none(tmp_path):
    from lmaudit.data.synth import generate_notes
    from lmaudit.models.training_file import read_training_summary

    generate_notes(4, seed=0).to_csv(tmp_path / "notes.csv", index=False)
    make_canaries(tmp_path / "mine", "new_token", 10, seed=0)
    make_canaries(tmp_path / "other", "new_token", 10, seed=1)
    code, output = run_cli("train", "clm", "--data", tmp_path / "notes.csv", "--out", tmp_path / "model", "--epochs", "1",
                           "--canaries", tmp_path / "mine")
    assert code == 0, output
    [recorded] = read_training_summary(tmp_path / "model").canaries
    assert recorded.design == "new_token" and recorded.planted == len(planted_canaries(tmp_path / "mine"))
    assert len(recorded.folder_fingerprint) == 16
    assert recorded.key_fingerprint == key_fingerprint(tmp_path / "mine")
    code, output = run_cli("canaries", "audit", "--target", tmp_path / "model", "--canaries", tmp_path / "other",
                           "--out", tmp_path / "audit")
    assert code == 2 and "was trained with other canaries" in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "audit").exists()
    code, output = run_cli("canaries", "audit", "--target", tmp_path / "model", "--canaries", tmp_path / "mine",
                           "--out", tmp_path / "audit")
    assert code == 0 and "new_token canaries scored by secret (clm_tokens)" in output
    code, output = run_cli("train", "clm", "--data", tmp_path / "notes.csv", "--out", tmp_path / "plain", "--epochs", "1")
    assert code == 0, output
    code, output = run_cli("canaries", "audit", "--target", tmp_path / "plain", "--canaries", tmp_path / "mine",
                           "--out", tmp_path / "plain-audit")
    assert code == 2 and "trained by lmaudit without canaries" in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "plain-audit").exists()


def test_word_canaries_draw_whole_words_of_the_models_vocabulary_seeded_and_distinct(tmp_path, tiny_tokenizer):
    """--design words: 16 words each, every one a whole-word token of the tokenizer given (each encodes, after a
    space, as one token), secrets distinct and the same for the same seed; without --vocabulary, one line, exit 2."""
    from lmaudit.canaries.settings import DEFAULT_FORMAT
    from lmaudit.canaries.words import vocabulary_words

    tiny_tokenizer.save_pretrained(tmp_path / "model")
    make_canaries(tmp_path / "w", "words", 250, seed=3, shape=SecretShape(vocabulary=str(tmp_path / "model")),
                  repeats=(1, 4, 16))
    make_canaries(tmp_path / "v", "words", 250, seed=3, shape=SecretShape(vocabulary=str(tmp_path / "model")))
    canaries = read(tmp_path / "w", CANARIES_FILE)
    words = set(vocabulary_words(tmp_path / "model"))
    secrets = canaries["secret"].str.split()
    assert secrets.str.len().eq(16).all() and all(set(secret) <= words for secret in secrets)
    assert canaries["secret"].is_unique and canaries["secret"].equals(read(tmp_path / "v", CANARIES_FILE)["secret"])
    for word in list(words)[:20]:
        assert len(tiny_tokenizer(" " + word, add_special_tokens=False)["input_ids"]) == 1
    assert canaries["text"].tolist() == [DEFAULT_FORMAT.replace("{secret}", secret) for secret in canaries["secret"]]
    code, output = run_cli("canaries", "make", "--design", "words", "--n", "300", "--out", tmp_path / "x")
    assert_one_line_error(code, output, "--vocabulary")
    assert not (tmp_path / "x").exists()
