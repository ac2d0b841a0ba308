"""Bad input gets one line naming the file and row and what to do, exit status 2, no traceback."""

import json

import pandas as pd
import pytest

from lmaudit.signals.store import default_cache_dir
from tests.helpers import assert_one_line_error, run_cli


def write_csv(path, rows):
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def files(tmp_path):
    """Valid members, non-members and population files."""
    def make(name, prefix, n=4):
        return write_csv(tmp_path / f"{name}.csv", [
            {"sample_id": f"{prefix}{i}", "group_id": f"{prefix}g{i // 2}", "text": f"bp {120 + i}/80 stable"} for i in range(n)
        ])
    return {"members": make("members", "m"), "nonmembers": make("nonmembers", "n"), "population": make("population", "p")}


def audit(files, target, out, **overrides):
    paths = {**files, **overrides}
    args = ["audit", "--target", target, "--out", out]
    for role, path in paths.items():
        args += [f"--{role}", path]
    return run_cli(*args)


@pytest.mark.parametrize("text", ["", "   \t "])
def test_empty_or_whitespace_text(files, tiny_model_dirs, tmp_path, text):
    bad = write_csv(tmp_path / "bad.csv", [{"sample_id": "a", "text": "fine text"}, {"sample_id": "b", "text": text}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", members=bad)
    assert_one_line_error(code, output, "bad.csv, row 2", "empty text")
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("marker", ["NaN", "NULL", "#N/A"])
def test_a_missing_value_marker_as_text_is_refused_not_scored(files, tiny_model_dirs, tmp_path, marker):
    """A CSV keeps 'NaN' as a string (ids like 'NA' must survive), but a whole text 'NaN' is a lost note, not a note."""
    bad = write_csv(tmp_path / "bad.csv", [{"sample_id": "a", "text": "fine text"}, {"sample_id": "b", "text": marker}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", members=bad)
    assert_one_line_error(code, output, "bad.csv, row 2", f"the text is '{marker}'", "missing value", "remove the row")
    assert_nothing_written(tmp_path / "out")


def test_missing_text_column(files, tiny_model_dirs, tmp_path):
    bad = write_csv(tmp_path / "notext.csv", [{"sample_id": "a", "body": "x"}, {"sample_id": "b", "body": "y"}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", nonmembers=bad)
    assert_one_line_error(code, output, "notext.csv", "no 'text' column", "body")


def test_duplicate_sample_id_across_files(files, tiny_model_dirs, tmp_path):
    bad = write_csv(tmp_path / "dup.csv", [{"sample_id": "m1", "group_id": "x", "text": "a"}, {"sample_id": "z", "group_id": "x", "text": "b"}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", population=bad)
    assert_one_line_error(code, output, "dup.csv, row 1", "duplicate sample_id 'm1'", "members.csv, row 2")


def test_unknown_role_in_role_column(tiny_model_dirs, tmp_path):
    data = write_csv(tmp_path / "data.csv", [{"text": "a", "role": "member"}, {"text": "b", "role": "memebr"}])
    code, output = run_cli("audit", "--target", tiny_model_dirs[0], "--data", data, "--out", tmp_path / "out")
    assert_one_line_error(code, output, "data.csv, row 2", "unknown role 'memebr'")


def test_group_in_two_roles(files, tiny_model_dirs, tmp_path):
    leaky = write_csv(tmp_path / "leaky.csv", [{"sample_id": "q1", "group_id": "mg0", "text": "a"}, {"sample_id": "q2", "group_id": "q", "text": "b"}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", population=leaky)
    assert_one_line_error(code, output, "group 'mg0'", "member", "population", "disjoint")


def test_a_patient_in_two_nonmember_sets(files, tiny_model_dirs, tmp_path):
    """Sets are compared as different people: one patient in two of them would be counted twice."""
    other = write_csv(tmp_path / "other.csv", [{"sample_id": f"o{i}", "group_id": "ng1" if i == 1 else "og", "text": "x"}
                                               for i in range(3)])
    code, output = run_cli("audit", "--target", tiny_model_dirs[0], "--out", tmp_path / "out", "--members", files["members"],
                           "--nonmembers", f"here={files['nonmembers']}", "--nonmembers", f"there={other}",
                           "--population", files["population"])
    assert_one_line_error(code, output, "group 'ng1' appears in non-member sets here (", "nonmembers.csv, row 3",
                          "there (", "other.csv, row 2", "disjoint by group")
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize(("how", "fragments"), [
    ("options", ("--nonmembers: two sets named 'x'", "NAME=FILE")),
    ("yaml", ("audit.yaml: nonmembers", "'bad name' cannot name a non-member set")),
])
def test_nonmember_sets_need_distinct_simple_names(files, tiny_model_dirs, tmp_path, how, fragments):
    if how == "options":
        code, output = run_cli("audit", "--target", tiny_model_dirs[0], "--out", tmp_path / "out", "--members",
                               files["members"], "--nonmembers", f"x={files['nonmembers']}", "--nonmembers",
                               f"x={files['population']}")
    else:
        (tmp_path / "audit.yaml").write_text(f"target: {tiny_model_dirs[0]}\nmembers: {files['members']}\n"
                                             f"nonmembers:\n  bad name: {files['nonmembers']}\nout: {tmp_path / 'out'}\n")
        code, output = run_cli("audit", "--config", tmp_path / "audit.yaml")
    assert_one_line_error(code, output, *fragments)
    assert_nothing_written(tmp_path / "out")


def test_role_with_fewer_than_two_samples(files, tiny_model_dirs, tmp_path):
    single = write_csv(tmp_path / "one.csv", [{"sample_id": "n0", "text": "only one"}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", nonmembers=single)
    assert_one_line_error(code, output, "nonmember", "1 sample")


def test_non_utf8_file(files, tiny_model_dirs, tmp_path):
    bad = tmp_path / "latin.csv"
    bad.write_bytes("sample_id,text\na,fine\nb,caf\xe9 au lait\n".encode("latin-1"))
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", members=bad)
    assert_one_line_error(code, output, "latin.csv, line 3", "UTF-8")


def test_missing_model_folder(files, tmp_path):
    code, output = audit(files, tmp_path / "nowhere", tmp_path / "out")
    assert_one_line_error(code, output, "nowhere", "no such model folder")


def test_a_causal_lm_is_audited_on_its_own_signal_and_refused_as_a_masked_lm_with_the_way_out(files, tmp_path,
                                                                                                tiny_tokenizer):
    """Without --signal a causal LM is audited on clm_tokens (the target's kind chooses); asked for a masked-LM signal,
    it is refused in one line that names --signal clm_tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(tiny_tokenizer))).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    code, output = audit(files, folder, tmp_path / "out", **{"recall-prefix": "0"})
    assert code == 0, output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["config"]["signal"]["signal"] == "clm_tokens"
    code, output = run_cli("audit", "--target", folder, "--members", files["members"], "--nonmembers",
                           files["nonmembers"], "--signal", "mlm_energy", "--out", tmp_path / "refused")
    assert_one_line_error(code, output, "gpt2", "not a masked language model", "--signal clm_tokens")


def test_model_folder_with_pickled_weights_only(files, tmp_path, tiny_model_dirs):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text((tiny_model_dirs[0] / "config.json").read_text())
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")
    code, output = audit(files, folder, tmp_path / "out")
    assert_one_line_error(code, output, "pickled", "safetensors")


def test_bad_scores_file(tmp_path):
    scores = write_csv(tmp_path / "scores.csv", [{"sample_id": "a", "role": "member"}])
    code, output = run_cli("attack", "--scores", scores, "--out", tmp_path / "out")
    assert_one_line_error(code, output, "scores.csv", "target_loss")


def test_bad_yaml_field(tmp_path):
    config = tmp_path / "audit.yaml"
    config.write_text(json.dumps({"target": "t", "members": "m.csv", "nonmembers": "n.csv", "out": "o", "signal": {"k": 0}}))
    code, output = run_cli("audit", "--config", config)
    assert_one_line_error(code, output, "audit.yaml", "signal.k")


def test_cuda_requested_without_a_gpu(files, tiny_model_dirs, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, output = run_cli("score", "--target", tiny_model_dirs[0], "--data", files["members"], "--device", "cuda",
                       "--out", tmp_path / "e.csv")
    assert_one_line_error(code, output, "--device cuda", "no CUDA GPU")


def copy_model(source, folder, skip=()):
    """A copy of a model folder without the files named in `skip`."""
    folder.mkdir()
    for path in source.iterdir():
        if path.name not in skip:
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def assert_nothing_written(out):
    """A refused run leaves no output at all: no report, no signal store beside it, not even an empty folder."""
    assert not out.exists() or not any(out.rglob("*")), sorted(map(str, out.rglob("*")))
    assert not default_cache_dir(out).exists()


def test_model_folder_without_tokenizer_files(files, tiny_model_dirs, tmp_path):
    """The error names the folder without tokenizer files, also when a reference is compared with it."""
    folder = copy_model(tiny_model_dirs[0], tmp_path / "no-tokenizer", skip=("tokenizer.json", "tokenizer_config.json"))
    code, output = audit(files, folder, tmp_path / "out")
    assert_one_line_error(code, output, "no-tokenizer", "no tokenizer files", "tokenizer.save_pretrained")
    assert_nothing_written(tmp_path / "out")
    code, output = audit(files, folder, tmp_path / "out", reference=tiny_model_dirs[1])
    assert_one_line_error(code, output, "no-tokenizer", "no tokenizer files")
    assert "allow-tokenizer-mismatch" not in output and str(tiny_model_dirs[1]) not in output


def test_truncated_weights(files, tiny_model_dirs, tmp_path):
    folder = copy_model(tiny_model_dirs[0], tmp_path / "truncated")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, output = audit(files, folder, tmp_path / "out")
    assert_one_line_error(code, output, "truncated", "the weights could not be read", "copy the model folder again")
    assert_nothing_written(tmp_path / "out")


def test_bare_encoder_as_masked_lm_target_is_refused_not_given_a_random_head(files, tmp_path, tiny_tokenizer):
    from transformers import BertConfig, BertModel

    folder = tmp_path / "encoder"
    BertModel(BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                         vocab_size=len(tiny_tokenizer))).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    code, output = audit(files, folder, tmp_path / "out")
    assert_one_line_error(code, output, "encoder", "not in the checkpoint and would be initialised at random",
                          "cls.predictions")
    assert_nothing_written(tmp_path / "out")


def test_a_reference_with_another_tokenizer_is_refused_unless_allowed(files, tiny_model_dirs, tmp_path, notes):
    """Masks are paired only when target and reference share a tokenizer: a different one is refused in one line, and
    --allow-tokenizer-mismatch audits anyway with the caveat in the warnings, the verdict and the terminal."""
    import json

    from lmaudit.models.tokenizer import train_tokenizer

    other = copy_model(tiny_model_dirs[1], tmp_path / "other-tokenizer", skip=("tokenizer.json", "tokenizer_config.json"))
    train_tokenizer(notes["text"].tolist(), vocab_size=300, max_length=64).save_pretrained(other)  # a smaller vocabulary
    arguments = ("--reference", other, "--k", 2, "--bootstrap", 20)
    code, output = run_cli("audit", "--target", tiny_model_dirs[0], "--out", tmp_path / "out", *arguments,
                           *[a for role, path in files.items() for a in (f"--{role}", path)])
    assert_one_line_error(code, output, "other-tokenizer", "tokenizer differs from the target's",
                          "--allow-tokenizer-mismatch")
    assert_nothing_written(tmp_path / "out")
    code, output = run_cli("audit", "--target", tiny_model_dirs[0], "--out", tmp_path / "out", *arguments,
                           "--allow-tokenizer-mismatch", *[a for role, path in files.items() for a in (f"--{role}", path)])
    assert code == 0, output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["summary"]["caveats"][0].startswith("reference's tokenizer differs from the target's (vocabularies")
    assert report["warnings"][0] == report["summary"]["caveats"][0]
    assert "Caveat: reference's tokenizer differs" in output


def test_score_refuses_an_unknown_output_type_before_any_scoring(files, tiny_model_dirs, tmp_path, monkeypatch):
    """The --out extension is checked first: a typo costs nothing, not a whole scoring pass then an error."""
    import lmaudit.signals.compute as compute

    monkeypatch.setattr(compute, "model_signal", lambda *a, **k: pytest.fail("scored before checking --out"))
    out = tmp_path / "out"
    code, output = run_cli("score", "--target", tiny_model_dirs[0], "--data", files["members"], "--out", out / "scores.txt")
    assert_one_line_error(code, output, "scores.txt", "unknown file type '.txt'", "use .csv, .jsonl or .parquet")
    assert_nothing_written(out)


def test_one_file_for_two_roles_is_named_as_such_not_as_duplicate_ids(files, tiny_model_dirs, tmp_path):
    """The same file as --members and --nonmembers (or as --suspect and --validation) is refused as one file given
    twice, naming both options, before any model loads; not row by row as duplicate sample ids."""
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", nonmembers=files["members"])
    assert_one_line_error(code, output, "members.csv: given as both --members and --nonmembers", "its own file")
    assert_nothing_written(tmp_path / "out")
    code, output = run_cli("dataset-inference", "--target", tiny_model_dirs[0], "--suspect", files["members"],
                           "--validation", files["members"], "--out", tmp_path / "di")
    assert_one_line_error(code, output, "members.csv: given as both --suspect and --validation")
    assert_nothing_written(tmp_path / "di")


@pytest.mark.parametrize("option", ["--nonmembers", "--population", "--nonmembers there="])
def test_copies_of_one_file_in_two_roles_are_refused_before_any_scoring(files, tiny_model_dirs, tmp_path, monkeypatch,
                                                                         option):
    """Two copies of a file without sample_id (ids generated from each file's name, so none is a duplicate) used to
    crash in the admission-level blind baseline: with no group_id, nothing kept the copies' shared admission ids, or
    their texts, in one role. Now: one line naming both files and rows and how many texts, before any model runs."""
    import shutil

    import lmaudit.audit.run as run

    monkeypatch.setattr(run, "resolve", lambda *a, **k: pytest.fail("a model was read before the texts were checked"))
    notes = write_csv(tmp_path / "notes.csv", [{"subgroup_id": f"a{i // 2}", "text": f"note {i} of the admission"}
                                               for i in range(6)])
    copy = shutil.copy(notes, tmp_path / "copy.csv")
    roles = ["--members", notes, "--nonmembers", files["nonmembers"]]
    if option == "--nonmembers":
        roles[3] = copy
    elif option == "--population":
        roles += ["--population", copy]
    else:
        roles[2:] = ["--nonmembers", f"here={files['nonmembers']}", "--nonmembers", f"there={copy}"]
    code, output = run_cli("audit", "--target", tiny_model_dirs[0], "--out", tmp_path / "out", *roles)
    side = {"--nonmembers": "nonmember", "--population": "population"}.get(option, "non-member set 'there'")
    assert_one_line_error(code, output, f"copy.csv, row 1 ({side}) has the same text as", "notes.csv, row 1 (member)",
                          "and so do 5 other texts (6 in all)", "meaningless", "keep each text in one role")
    assert_nothing_written(tmp_path / "out")


def test_an_admission_in_two_roles_is_refused(files, tiny_model_dirs, tmp_path):
    """Admission ids numbered per patient (or shared by mistake) would merge a member's and a non-member's admission
    into one unit of the admission level."""
    members = write_csv(tmp_path / "members.csv", [{"group_id": "p1", "subgroup_id": "1", "text": "chest pain"},
                                                   {"group_id": "p1", "subgroup_id": "2", "text": "fever"}])
    nonmembers = write_csv(tmp_path / "held.csv", [{"group_id": "p2", "subgroup_id": "1", "text": "rash"},
                                                   {"group_id": "p2", "subgroup_id": "3", "text": "cough"}])
    code, output = audit(files, tiny_model_dirs[0], tmp_path / "out", members=members, nonmembers=nonmembers)
    assert_one_line_error(code, output, "admission (subgroup_id) '1' appears in roles member (", "members.csv, row 1",
                          "nonmember (", "held.csv, row 1", "disjoint by admission", "id of its own")
    assert_nothing_written(tmp_path / "out")
