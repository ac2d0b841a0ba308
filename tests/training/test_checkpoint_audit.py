"""`CheckpointAudit` in a real transformers Trainer run (tiny GPT-2 memorising 8 notes, new-token canaries planted):
every save adds one entry whose AUC, TPR and canary bound match slow references computed here from the model's own
forward pass; the file holds numbers only; bad input, masked LMs and a repeated step are handled; a PEFT model is
scored through its adapters."""

import copy
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from lmaudit.canaries.make import CANARIES_FILE, KEY_FILE, make_canaries
from lmaudit.data.corpus import read_table
from lmaudit.errors import InputError
from lmaudit.metrics.one_run import one_run_bound
from lmaudit.signals.compute import in_memory_signal
from lmaudit.training.checkpoint_audit import AUDITS_FILE, CheckpointAudit, read_audits, write_audits
from lmaudit.training.planting import add_canary_tokens, canary_texts, secret_only
from tests.families import tiny_family_model

MAX_LENGTH = 64
SAVE_STEPS, MAX_STEPS = 3, 9


def roles(notes):
    """8 members (2 notes of each of 4 patients) and 16 population notes (4 of each of 4 other patients)."""
    chosen = {"members": (notes.group_id.unique()[:4], 2), "population": (notes.group_id.unique()[4:8], 4)}
    return {role: notes[notes.group_id.isin(groups)].groupby("group_id").head(count)
            for role, (groups, count) in chosen.items()}


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_tokenizer, notes):
    """A Trainer run of 9 steps on the members and the planted canaries (one batch of all), saving every 3: the members
    are learnt over the run, the planted secrets (trained on alone) by the first save."""
    canaries = tmp_path_factory.mktemp("canaries") / "set"
    make_canaries(canaries, "new_token", count=16, seed=1)
    tokenizer = copy.deepcopy(tiny_tokenizer)
    model = tiny_family_model("gpt2", "clm", tokenizer).train()
    secret_ids = add_canary_tokens(model, tokenizer, canaries)
    split = roles(notes)
    members, population = split["members"], split["population"]
    rows = [{"input_ids": tokenizer(text, truncation=True, max_length=MAX_LENGTH)["input_ids"]}
            for text in [*members.text, *canary_texts(canaries)]]
    out = tmp_path_factory.mktemp("run")
    arguments = TrainingArguments(output_dir=str(out), max_steps=MAX_STEPS, per_device_train_batch_size=len(rows),
                                  save_strategy="steps", save_steps=SAVE_STEPS, save_only_model=True, report_to=[],
                                  logging_strategy="no", use_cpu=True, learning_rate=3e-4, seed=0)
    callback = CheckpointAudit(members.text.tolist(), population.text.tolist(), members.group_id.tolist(),
                               population.group_id.tolist(), canaries=canaries)
    trainer = Trainer(model=model, args=arguments, train_dataset=rows, processing_class=tokenizer, callbacks=[callback],
                      data_collator=secret_only(DataCollatorForLanguageModeling(tokenizer, mlm=False), secret_ids))
    trainer.train()
    return SimpleNamespace(out=out, model=trainer.model.eval(), tokenizer=tokenizer, members=members,
                           population=population, canaries=canaries, callback=callback)


@torch.no_grad()
def slow_losses(model, tokenizer, texts):
    """Each text's mean next-token NLL (nats) from the model's own loss, one text at a time."""
    losses = []
    for text in texts:
        ids = torch.tensor([tokenizer(text, truncation=True, max_length=MAX_LENGTH)["input_ids"]])
        losses.append(model(input_ids=ids, labels=ids).loss.item())
    return np.array(losses)


@torch.no_grad()
def slow_secret_log_probability(model, tokenizer, text, secret):
    """Mean log-probability of the secret's tokens where they last occur in the text, from the model's logits."""
    ids = tokenizer(text, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    secret_ids = tokenizer(" " + secret, add_special_tokens=False)["input_ids"]
    start = max(i for i in range(len(ids)) if ids[i:i + len(secret_ids)] == secret_ids)
    log_probs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    return np.mean([log_probs[position - 1, ids[position]].item() for position in range(start, start + len(secret_ids))])


def test_every_save_adds_one_entry_whose_auc_and_tpr_match_sklearn_on_the_models_own_losses(run):
    """Protects the curve itself: one entry per save in step order, each of the model as it was at that save (leakage
    grows as the members are learnt), and the last one's loss attack is sklearn's AUC of minus the losses the model's
    forward pass gives (members above: a memorised training set separates)."""
    entries = read_audits(run.out)
    assert [entry["step"] for entry in entries] == list(range(SAVE_STEPS, MAX_STEPS + 1, SAVE_STEPS))
    assert all(np.isfinite(value) for entry in entries for key, value in entry.items() if key != "canary_epsilon_lower_bound")
    members = -slow_losses(run.model, run.tokenizer, run.members.text)
    population = -slow_losses(run.model, run.tokenizer, run.population.text)
    first, last = entries[0], entries[-1]
    assert first["auc"] < last["auc"]
    labels = np.r_[np.ones(len(members)), np.zeros(len(population))]
    assert last["auc"] == pytest.approx(roc_auc_score(labels, np.r_[members, population]), abs=1e-12)
    assert last["auc"] > 0.9
    assert last["auc_low"] <= last["auc"] <= last["auc_high"]
    # With 16 non-members, FPR <= 1% means none above the threshold: the share of members above every non-member.
    assert last["tpr_at_1pct_fpr"] == pytest.approx(np.mean(members > population.max()))
    assert (last["members"], last["population"]) == (8, 16)


def test_a_saves_entry_is_what_lmaudit_audit_reports_of_the_saved_checkpoint_on_the_same_texts(run, tmp_path):
    """Protects the one scoring pipeline: the callback's numbers at the last save are the audit's loss attack at sample
    level on the checkpoint saved there (same scorer, attack and evaluation), its interval resampling the same patients."""
    from lmaudit.audit.run import run_audit
    from lmaudit.config import AuditConfig
    from lmaudit.report.document import typed_report

    for name, frame in (("members", run.members), ("nonmembers", run.population)):
        frame.assign(sample_id=[f"{name}-{i}" for i in range(len(frame))]).to_csv(tmp_path / f"{name}.csv", index=False)
    config = AuditConfig(target=str(run.out / f"checkpoint-{MAX_STEPS}"), members=str(tmp_path / "members.csv"),
                         nonmembers=str(tmp_path / "nonmembers.csv"), out=str(tmp_path / "audit"),
                         signal={"signal": "clm_loss", "max_length": MAX_LENGTH})
    report = typed_report(run_audit(config))
    audited = next(r for r in report.results if (r.attack, r.level, r.slice) == ("loss", "sample", "all"))
    last = read_audits(run.out)[-1]
    assert (last["members"], last["population"]) == (audited.n_members, audited.n_nonmembers)
    assert last["auc"] == pytest.approx(audited.auc, abs=1e-9)
    assert (last["auc_low"], last["auc_high"]) == pytest.approx(tuple(audited.auc_ci), abs=1e-9)
    assert last["tpr_at_1pct_fpr"] == pytest.approx(audited.tpr_at_fpr["0.01"].tpr, abs=1e-12)


def test_the_canary_bound_is_steinkes_bound_of_the_slow_secret_scores(run):
    """Protects the canary reading: each canary's secret scored on its secret tokens alone, planted or not, and the
    bound computed against the key."""
    canaries = read_table(run.canaries / CANARIES_FILE)
    scores = np.array([slow_secret_log_probability(run.model, run.tokenizer, text, secret)
                       for text, secret in zip(canaries.text, canaries.secret, strict=True)])
    key = read_table(run.canaries / KEY_FILE).set_index("sample_id").loc[canaries.sample_id, "included"].to_numpy(bool)
    expected = one_run_bound(scores, key, 1e-5, 0.95).epsilon_lower_bound
    last = read_audits(run.out)[-1]
    assert last["canary_epsilon_lower_bound"] == pytest.approx(expected, abs=1e-9)
    assert expected > 0  # the planted secrets were learnt: a bound of 0 would compare nothing
    from lmaudit.metrics.canary_validity import rank_check

    check = rank_check(scores, key)  # and the audit is valid: the planted canaries do not score below the others
    assert last["canaries_valid"] and last["canary_rank_auc"] == pytest.approx(check.auc, abs=1e-6) and check.auc > 0.5


def test_the_file_holds_numbers_and_never_a_word_of_the_texts(run):
    """Protects privacy: the curve may be shared, the training texts may not."""
    text = (run.out / AUDITS_FILE).read_text().lower()
    words = {word.lower() for note in run.members.text for word in re.findall(r"[A-Za-z]{4,}", note)}
    assert words and not [word for word in words if word in text]
    assert all(value is None or isinstance(value, int | float) for entry in json.loads(text) for value in entry.values())


def test_a_step_saved_again_replaces_its_entry_and_keeps_the_others(run, tmp_path):
    """Protects resumption: a run resumed from a checkpoint continues its curve, one entry per step."""
    (tmp_path / AUDITS_FILE).write_text((run.out / AUDITS_FILE).read_text())
    args = SimpleNamespace(output_dir=str(tmp_path))
    state = SimpleNamespace(global_step=SAVE_STEPS, epoch=1.0, is_world_process_zero=True)
    for _ in range(2):
        run.callback.on_save(args, state, None, model=run.model, processing_class=run.tokenizer)
    entries = read_audits(tmp_path)
    assert [entry["step"] for entry in entries] == [3, 6, 9]
    # Step 3's entry now holds the final model's numbers, not the ones the run saved at step 3.
    assert entries[0]["auc"] == read_audits(run.out)[-1]["auc"] != read_audits(run.out)[0]["auc"]


@pytest.mark.parametrize("case, option", [
    ("no members", "members"), ("an empty text", "population"), ("a group in both roles", "member_groups"),
    ("fewer member group ids than texts", "member_groups"), ("more population group ids", "population_groups"),
])
def test_bad_input_is_refused_in_one_line_naming_the_option(case, option):
    """Protects the audit from meaningless numbers: an empty role, an empty text, a patient on both sides, misaligned
    group ids."""
    members, population, member_groups, population_groups = ["a note", "b note"], ["c note"], ["p1", "p2"], ["p3"]
    if case == "no members":
        members = []
    elif case == "an empty text":
        population = [" "]
    elif case == "a group in both roles":
        population_groups = ["p2"]
    elif case == "more population group ids":
        population_groups = ["p3", "p4"]
    else:
        member_groups = ["p1"]
    with pytest.raises(InputError, match=f"CheckpointAudit {option}") as refused:
        CheckpointAudit(members, population, member_groups, population_groups)
    assert len(str(refused.value).splitlines()) == 1


def test_more_texts_than_max_texts_keep_whole_groups_chosen_once():
    """Protects the curve's comparability and the interval's clusters: the subset holds whole patients, the same for a
    given seed."""
    members = [f"note {i}" for i in range(12)]
    groups = [f"p{i // 3}" for i in range(12)]
    def chosen(audit: CheckpointAudit) -> list[str]:
        return audit.samples.loc[audit.samples["role"] == "member", "text"].tolist()

    first = chosen(CheckpointAudit(members, ["other note"], groups, max_texts=7, seed=4))
    assert first == chosen(CheckpointAudit(members, ["other note"], groups, max_texts=7, seed=4))
    kept = {groups[members.index(text)] for text in first}
    assert len(first) == 6 and all(sum(g == group for g in groups) == 3 for group in kept)


def test_a_masked_lm_is_refused_in_one_line(tiny_bert, tiny_tokenizer):
    """Protects against meaningless left-to-right losses of a model that is not a causal LM."""
    callback = CheckpointAudit(["a note"], ["another note"])
    with pytest.raises(InputError, match="not a causal LM") as refused:
        callback.on_train_begin(None, None, None, model=tiny_bert, processing_class=tiny_tokenizer)
    assert len(str(refused.value).splitlines()) == 1


def test_a_peft_model_is_scored_through_its_adapters(tiny_tokenizer, notes):
    """Protects LoRA runs: the scores are the PeftModel's own losses, adapters active (not the base model's)."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_family_model("gpt2", "clm", tiny_tokenizer),
                           LoraConfig(r=2, target_modules=["c_attn"], fan_in_fan_out=True))
    torch.manual_seed(1)
    for name, weight in model.named_parameters():
        if "lora_B" in name:  # B starts at zero: a trained adapter changes the function
            torch.nn.init.normal_(weight, std=0.5)
    texts = notes.text.tolist()[:6]
    callback = CheckpointAudit(texts[:3], texts[3:], max_length=MAX_LENGTH)
    losses = in_memory_signal(model.get_base_model().eval(), tiny_tokenizer, [str(i) for i in range(6)], texts,
                              callback.settings)["value"].to_numpy(dtype=float)
    np.testing.assert_allclose(losses, slow_losses(model, tiny_tokenizer, texts), rtol=1e-5)
    scores = -losses
    with model.disable_adapter():
        assert not np.allclose(-scores, slow_losses(model, tiny_tokenizer, texts), rtol=1e-3)
    entry = callback.audit(model.train(), tiny_tokenizer)
    assert model.training and entry["auc"] == pytest.approx(roc_auc_score([1, 1, 1, 0, 0, 0], scores))


def test_the_audits_file_is_strict_json_checked_against_its_model(tmp_path):
    """An AUC that is not a number is written as null (never NaN, which strict readers refuse, nor an error that stops
    the training run), an entry with a misspelt key is refused before the file is replaced, and a file that is not
    one CheckpointAudit writes is one InputError naming it."""
    entry = {"step": 1, "epoch": 0.5, "members": 3, "population": 3, "auc": float("nan"), "auc_low": 0.1,
             "auc_high": 0.9, "tpr_at_1pct_fpr": 0.0, "canary_epsilon_lower_bound": None}
    write_audits(tmp_path, [entry])
    text = (tmp_path / AUDITS_FILE).read_text()
    assert '"auc": null' in text and "NaN" not in text
    assert read_audits(tmp_path) == [{**entry, "auc": None}]
    with pytest.raises(ValueError, match="aucc"):
        write_audits(tmp_path, [{**entry, "aucc": 0.5}])
    assert (tmp_path / AUDITS_FILE).read_text() == text
    (tmp_path / AUDITS_FILE).write_bytes(b"\xff\xfe[]")
    with pytest.raises(InputError, match=f"{AUDITS_FILE}: unreadable"):
        read_audits(tmp_path)
