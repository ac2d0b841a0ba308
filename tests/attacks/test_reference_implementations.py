"""Every new attack against a slow, obviously right implementation of its paper's formula: one sample at a time, plain
loops. Each token-level attack is checked twice: on the very token values the fast path computed (to 1e-9: the formula),
and on token values from the model run on each text alone with its whole vocabulary at once (to 1e-5: an fp32 forward
pass rounds differently, by about 1e-6, when the LM head runs on a chunk of positions instead of all of them).

The fast path is the real one: the per-token signal from `causal_token_values` (length-sorted, the LM head run on
chunks of positions), unpacked as the pipeline unpacks it, then the attack's vectorised score. It runs one sample per
call here, so that the fp32 forward pass does the same arithmetic as the reference's; that padded batches change the
values only by fp32 rounding (1e-5) is a test of its own.
"""

import math
import statistics
import zlib
from collections import Counter

import numpy as np
import pytest
import torch

from lmaudit.attacks.dc_pdd import dc_pdd_score
from lmaudit.attacks.gradnorm import gradnorm_score
from lmaudit.attacks.lira import lira_score
from lmaudit.attacks.lowercase import lowercase_score
from lmaudit.attacks.min_k import min_k_score
from lmaudit.attacks.min_k_plus_plus import min_k_plus_plus_score
from lmaudit.attacks.neighbourhood import neighbourhood_score
from lmaudit.attacks.recall import recall_score
from lmaudit.attacks.rmia import log_likelihood_ratio, rmia_score
from lmaudit.attacks.zlib import zlib_score
from lmaudit.signals.base import unpack_token_values
from lmaudit.signals.causal import causal_token_values
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.variants import compressed_bytes, corpus_counts, smoothed_frequencies, token_ids_of

TOLERANCE = 1e-6  # formulas on the same inputs
FORWARD_TOLERANCE = 1e-5  # values recomputed by a second fp32 forward pass
SETTINGS = SignalSettings(signal="clm_tokens", max_length=48, batch_tokens=4096)


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_tokenizer):
    from transformers import GPT2LMHeadModel

    from lmaudit.models.architectures import clm_config

    torch.manual_seed(1)
    return GPT2LMHeadModel(clm_config("tiny", len(tiny_tokenizer), 64, tiny_tokenizer)).eval()


@pytest.fixture(scope="module")
def texts(notes):
    return notes["text"].tolist()[:9], notes["sample_id"].tolist()[:9]


@pytest.fixture(scope="module")
def fast(tiny_gpt2, tiny_tokenizer, texts):
    stored = [causal_token_values(tiny_gpt2, tiny_tokenizer, [text], [sample_id], SETTINGS, position_chunk=5)[0][0]
              for text, sample_id in zip(*texts, strict=True)]
    return unpack_token_values(stored)


def slow_token_values(model, tokenizer, text: str, prefix: str = "") -> list[tuple[float, float, float, int]]:
    """(log p, mean, std, id) of every token after the text's first, one position at a time: the fp32 log-softmax lmaudit
    defines its signals with, every sum over the vocabulary in float64."""
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
    ids = tokenizer(text, truncation=True, max_length=SETTINGS.max_length - len(prefix_ids))["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prefix_ids + ids])).logits[0]
    rows = []
    for t in range(len(ids) - 1):
        log_p = torch.log_softmax(logits[len(prefix_ids) + t], dim=-1).double()
        p = log_p.exp()
        mean = float((p * log_p).sum())
        std = math.sqrt(float((p * (log_p - mean) ** 2).sum()))
        rows.append((float(log_p[ids[t + 1]]), mean, std, ids[t + 1]))
    return rows


@pytest.fixture(scope="module")
def model_values(tiny_gpt2, tiny_tokenizer, texts):
    return [slow_token_values(tiny_gpt2, tiny_tokenizer, text) for text in texts[0]]


@pytest.fixture(scope="module", params=["same token values", "one text at a time"])
def slow(request, fast, model_values):
    """(per sample, a list of (log p, mean, std, id)), and the tolerance of comparing the attacks on them."""
    if request.param == "one text at a time":
        return model_values, FORWARD_TOLERANCE
    rows = [[tuple(float(fast[f][r, t]) for f in ("log_prob", "mean", "std")) + (int(fast["token_id"][r, t]),)
             for t in range(int(np.sum(~np.isnan(fast["log_prob"][r]))))] for r in range(len(model_values))]
    return rows, 1e-9


def test_token_values_equal_one_text_at_a_time(fast, model_values):
    for row, values in enumerate(model_values):
        assert int(np.sum(~np.isnan(fast["log_prob"][row]))) == len(values)
        for field, column in (("log_prob", 0), ("mean", 1), ("std", 2), ("token_id", 3)):
            expected = [v[column] for v in values]
            assert np.allclose(fast[field][row, : len(values)], expected, rtol=0, atol=FORWARD_TOLERANCE), field


def test_padded_batches_change_token_values_only_by_fp32_rounding(tiny_gpt2, tiny_tokenizer, texts, fast):
    stored, _ = causal_token_values(tiny_gpt2, tiny_tokenizer, *texts, SETTINGS)
    for field, table in unpack_token_values(stored).items():
        assert np.allclose(table, fast[field], rtol=0, atol=1e-5, equal_nan=True), field


@pytest.mark.parametrize("fraction", [0.2, 0.5, 1.0])
def test_min_k_and_min_k_plus_plus(fast, slow, fraction):
    slow, tolerance = slow
    for row, values in enumerate(slow):
        count = max(1, math.floor(fraction * len(values)))
        lowest = sorted(v[0] for v in values)[:count]
        standardised = sorted((v[0] - v[1]) / v[2] for v in values)[:count]
        assert min_k_score(fast["log_prob"], fraction)[row] == pytest.approx(sum(lowest) / count, abs=tolerance)
        # a standardised value carries its inputs' rounding divided by the std: (d lp + d mean + |z| d std) / std
        spread = max((2 + abs((v[0] - v[1]) / v[2])) / v[2] for v in values)
        assert min_k_plus_plus_score(fast["log_prob"], fast["mean"], fast["std"], fraction)[row] == pytest.approx(
            sum(standardised) / count, abs=tolerance * max(1.0, spread))


def test_zlib(fast, slow, texts):
    slow, tolerance = slow
    loss = -np.nanmean(fast["log_prob"], axis=1)
    scores = zlib_score(loss, compressed_bytes(texts[0]))
    for row, (values, text) in enumerate(zip(slow, texts[0], strict=True)):
        mean_nll = -sum(v[0] for v in values) / len(values)
        assert scores[row] == pytest.approx(-mean_nll / len(zlib.compress(text.encode("utf-8"))), abs=tolerance)


def test_dc_pdd_with_population_samples_left_out_of_their_own_frequencies(fast, slow, texts, tiny_tokenizer):
    """The frequency corpus is texts 6-8 (the 'population'); each of them is scored against the other two only."""
    slow, tolerance = slow
    population = [6, 7, 8]
    corpus_ids = token_ids_of(tiny_tokenizer, [texts[0][i] for i in population])
    own = [corpus_ids[population.index(i)] if i in population else None for i in range(len(texts[0]))]
    frequencies = smoothed_frequencies(corpus_counts(corpus_ids, len(tiny_tokenizer)), fast["token_id"], own)
    scores = dc_pdd_score(fast["log_prob"], fast["token_id"], frequencies, bound=0.01)
    vocabulary = len(tiny_tokenizer)
    for row, values in enumerate(slow):
        counts = Counter()
        for i in population:
            if i != row:
                counts.update(tiny_tokenizer(texts[0][i], add_special_tokens=False)["input_ids"])
        total, seen, alphas = sum(counts.values()), set(), []
        for log_p, _, _, token in values:
            if token in seen:
                continue
            seen.add(token)
            frequency = (counts[token] + 1) / (total + vocabulary)
            alphas.append(min(math.exp(log_p) * math.log(1 / frequency), 0.01))
        assert scores[row] == pytest.approx(sum(alphas) / len(alphas), abs=tolerance)


def test_recall(tiny_gpt2, tiny_tokenizer, fast, model_values, texts, notes):
    prefix = "\n\n".join(notes["text"].tolist()[20:22]) + "\n\n"
    stored = [causal_token_values(tiny_gpt2, tiny_tokenizer, [text], [sample_id], SETTINGS, prefix=prefix)[0][0]
              for text, sample_id in zip(*texts, strict=True)]
    prefixed = unpack_token_values(stored)["log_prob"]
    scores = recall_score(prefixed, fast["log_prob"])
    limit = SETTINGS.max_length // 2
    kept_prefix = tiny_tokenizer.decode(tiny_tokenizer(prefix, add_special_tokens=False)["input_ids"][-limit:])
    for row, (values, text) in enumerate(zip(model_values, texts[0], strict=True)):
        prefix_ids = tiny_tokenizer(prefix, add_special_tokens=False)["input_ids"][-limit:]
        ids = tiny_tokenizer(text, truncation=True, max_length=SETTINGS.max_length - len(prefix_ids))["input_ids"]
        with torch.no_grad():
            logits = tiny_gpt2(input_ids=torch.tensor([prefix_ids + ids])).logits[0]
        conditioned = [float(torch.log_softmax(logits[len(prefix_ids) + t], -1)[ids[t + 1]]) for t in range(len(ids) - 1)]
        unconditioned = [v[0] for v in values[: len(conditioned)]]
        expected = (sum(conditioned) / len(conditioned)) / (sum(unconditioned) / len(unconditioned))
        assert scores[row] == pytest.approx(expected, abs=FORWARD_TOLERANCE), kept_prefix


def test_lowercase_and_neighbourhood_by_hand():
    assert lowercase_score(np.array([2.0, 4.0]), np.array([3.0, 4.0])).tolist() == [1.5, 1.0]
    assert neighbourhood_score(np.array([2.0]), np.array([[3.0, 4.0, 5.0]])).tolist() == [2.0]


def slow_rmia_ratio(target: float, references: list[float], offline_a: float) -> float:
    """P(x | target) / P(x), P(x) = ((1 + a) mean_i P(x | reference_i) + 1 - a) / 2, P(x | model) = exp(-loss)."""
    prior = 0.5 * ((1 + offline_a) * sum(math.exp(-loss) for loss in references) / len(references) + (1 - offline_a))
    return math.exp(-target) / prior


@pytest.mark.parametrize("offline_a, gamma", [(1.0, 1.0), (0.3, 1.0), (1.0, 1.5), (0.6, 0.8)])
def test_rmia_against_pairwise_comparisons(offline_a, gamma):
    rng = np.random.default_rng(0)
    target, references = rng.uniform(1, 5, 30), rng.uniform(1, 5, (30, 3))
    is_population = np.arange(30) >= 18
    log_ratio = log_likelihood_ratio(target, references, offline_a)
    scores = rmia_score(log_ratio, log_ratio[is_population], gamma, is_population)
    ratios = [slow_rmia_ratio(target[i], list(references[i]), offline_a) for i in range(30)]
    for x in range(30):
        others = [z for z in np.flatnonzero(is_population) if z != x]
        expected = sum(ratios[x] / ratios[z] >= gamma for z in others) / len(others)
        assert scores[x] == pytest.approx(expected, abs=TOLERANCE)


def test_lira_against_a_gaussian_per_sample():
    rng = np.random.default_rng(1)
    target, references = rng.uniform(1, 5, 12), rng.uniform(1, 5, (12, 4))
    per_sample = lira_score(target, references, global_variance=False)
    pooled = lira_score(target, references, global_variance=True)
    global_sd = math.sqrt(sum(statistics.variance(r) for r in references) / len(references))
    for i in range(12):
        gaussian = statistics.NormalDist(statistics.mean(references[i]), statistics.stdev(references[i]))
        # The score is the z of the one-sided tail: Phi(z) = Pr[reference loss >= target loss].
        assert statistics.NormalDist().cdf(per_sample[i]) == pytest.approx(1 - gaussian.cdf(target[i]), abs=TOLERANCE)
        assert pooled[i] == pytest.approx((statistics.mean(references[i]) - target[i]) / global_sd, abs=TOLERANCE)


def test_gradnorm_against_one_backward_pass_per_sample(tiny_gpt2, tiny_tokenizer, texts):
    """MIMIR's GradNorm: the mean over parameter tensors of |grad| for the sample's own loss, from autograd."""
    from lmaudit.signals.whitebox import gradient_features

    settings = SignalSettings(signal="gradient_norms", max_length=48)
    squared, _ = gradient_features(tiny_gpt2, tiny_tokenizer, *texts, settings)
    scores = gradnorm_score(np.sqrt(squared))
    for row, text in enumerate(texts[0][:4]):
        ids = tiny_tokenizer(text, truncation=True, max_length=48, return_tensors="pt")["input_ids"]
        tiny_gpt2.zero_grad()
        tiny_gpt2(input_ids=ids, labels=ids).loss.backward()
        norms = [p.grad.double().norm().item() for p in tiny_gpt2.parameters() if p.requires_grad]
        tiny_gpt2.zero_grad()
        assert scores[row] == pytest.approx(-sum(norms) / len(norms), rel=1e-5)


def slow_ez_mia(target_rows, reference_rows, target_first_choice, paper_parity):
    """EZ-MIA as the paper's code reads, one sample at a time: drop the first scored position, keep where the target's
    first choice is wrong, P / (N + 1e-12); the code's zeros with `paper_parity`, else lmaudit's fix (every position
    when the zone is too small, the ratio kept when N = 0)."""
    def ratio(deltas):
        positive, negative = sum(max(d, 0.0) for d in deltas), sum(max(-d, 0.0) for d in deltas)
        return 0.0 if paper_parity and negative == 0 else positive / (negative + 1e-12)

    scores = []
    for target, reference, first_choice in zip(target_rows, reference_rows, target_first_choice, strict=True):
        deltas = [t[0] - r[0] for t, r in zip(target, reference, strict=True)][1:]
        zone = [d for d, top in zip(deltas, first_choice[1:], strict=True) if not top]
        if len(zone) < 2:
            scores.append(0.0 if paper_parity else ratio(deltas))
        else:
            scores.append(ratio(zone))
    return scores


@pytest.mark.parametrize("paper_parity", [False, True])
def test_ez_mia(tiny_gpt2, tiny_tokenizer, texts, fast, model_values, paper_parity):
    from lmaudit.attacks.ez_mia import ez_mia_score

    torch.manual_seed(2)
    reference = type(tiny_gpt2)(tiny_gpt2.config).eval()
    reference_fast = unpack_token_values([causal_token_values(reference, tiny_tokenizer, [text], [sample_id], SETTINGS,
                                                              position_chunk=5)[0][0] for text, sample_id in zip(*texts)])
    reference_rows = [slow_token_values(reference, tiny_tokenizer, text) for text in texts[0]]
    first_choice = []
    for text in texts[0]:
        ids = tiny_tokenizer(text, truncation=True, max_length=SETTINGS.max_length)["input_ids"]
        with torch.no_grad():
            logits = tiny_gpt2(input_ids=torch.tensor([ids])).logits[0, :-1]
        first_choice.append([int(logits[t].argmax()) == ids[t + 1] for t in range(len(ids) - 1)])
    is_top1 = np.where(np.isnan(fast["token_id"]), np.nan, fast["top1_id"] == fast["token_id"])
    np.testing.assert_array_equal(is_top1[~np.isnan(fast["log_prob"])], np.concatenate(first_choice))
    expected = slow_ez_mia(model_values, reference_rows, first_choice, paper_parity)
    got = ez_mia_score(fast["log_prob"], reference_fast["log_prob"], is_top1, paper_parity)
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_ez_mia_fixes_the_codes_zeros_by_hand():
    """Every delta positive (N = 0): the code gives 0, lmaudit the largest score; a zone of one position: the code gives
    0, lmaudit the ratio over every position."""
    from lmaudit.attacks.ez_mia import ez_mia_score

    target = np.array([[-9.0, -1.0, -1.0, -1.0], [-9.0, -1.0, -3.0, -1.0], [-9.0, -1.0, -1.0, -3.0]])
    reference = np.array([[-1.0, -2.0, -2.0, -2.0], [-1.0, -2.0, -2.0, -2.0], [-1.0, -2.0, -2.0, -2.0]])
    wrong_first = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    paper = ez_mia_score(target, reference, wrong_first, paper_parity=True)
    fixed = ez_mia_score(target, reference, wrong_first)
    assert paper.tolist() == [0.0, pytest.approx(2.0), 0.0]
    assert fixed[0] == pytest.approx(3.0 / 1e-12) and fixed[1] == pytest.approx(2.0)
    assert fixed[2] == pytest.approx(2.0 / 1.0)  # over positions 2-4: +1, +1, -1


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0])
def test_con_recall(tiny_gpt2, tiny_tokenizer, fast, model_values, texts, notes, gamma):
    """(LL(x | P_nm) - gamma LL(x | P_m)) / LL(x) from a plain forward pass per text and prefix, the three means over
    the tokens both prefixed passes scored (the shorter prefix leaves room for more); gamma 0 is ReCaLL."""
    from lmaudit.attacks.con_recall import con_recall_score

    prefixes = {"nonmember": "\n\n".join(notes["text"].tolist()[20:22]) + "\n\n",
                "member": "\n\n".join(notes["text"].tolist()[30:31]) + "\n\n"}
    limit = SETTINGS.max_length // 2
    stored, conditioned = {}, {}
    for name, prefix in prefixes.items():
        stored[name] = unpack_token_values([causal_token_values(tiny_gpt2, tiny_tokenizer, [text], [sample_id], SETTINGS,
                                                                prefix=prefix)[0][0]
                                            for text, sample_id in zip(*texts, strict=True)])["log_prob"]
        prefix_ids = tiny_tokenizer(prefix, add_special_tokens=False)["input_ids"][-limit:]
        conditioned[name] = []
        for text in texts[0]:
            ids = tiny_tokenizer(text, truncation=True, max_length=SETTINGS.max_length - len(prefix_ids))["input_ids"]
            with torch.no_grad():
                logits = tiny_gpt2(input_ids=torch.tensor([prefix_ids + ids])).logits[0]
            conditioned[name].append([float(torch.log_softmax(logits[len(prefix_ids) + t], -1)[ids[t + 1]])
                                      for t in range(len(ids) - 1)])
    scores = con_recall_score(stored["nonmember"], stored["member"], fast["log_prob"], gamma)
    for row, values in enumerate(model_values):
        shared = min(len(conditioned["nonmember"][row]), len(conditioned["member"][row]))
        mean = [sum(part[:shared]) / shared for part in (conditioned["nonmember"][row], conditioned["member"][row],
                                                         [v[0] for v in values])]
        assert scores[row] == pytest.approx((mean[0] - gamma * mean[1]) / mean[2], abs=FORWARD_TOLERANCE)
    np.testing.assert_allclose(con_recall_score(stored["nonmember"], stored["nonmember"], fast["log_prob"], 0.0),
                               recall_score(stored["nonmember"], fast["log_prob"]), rtol=1e-12)


def test_user_inference_against_a_loop_over_users():
    """T(U): per user, the mean over their texts of the summed per-token log-likelihood ratio (NaN padding ignored),
    through the attack's own build, population users included."""
    import pandas as pd

    from lmaudit.attacks.base import REFERENCE_TOKEN_LOG_PROBS, TARGET_LOSS, TOKEN_LOG_PROBS, AttackInput
    from lmaudit.attacks.user_inference import build

    rng = np.random.default_rng(3)
    samples = pd.DataFrame({"sample_id": [f"s{i}" for i in range(9)], "group_id": list("aabbbccdd"),
                            "role": ["member"] * 2 + ["nonmember"] * 3 + ["population"] * 2 + ["member"] * 2})
    lengths = rng.integers(2, 7, 9)
    target = np.where(np.arange(6)[None, :] < lengths[:, None], rng.normal(-3, 1, (9, 6)), np.nan)
    reference = np.where(np.isnan(target), np.nan, rng.normal(-3, 1, (9, 6)))
    data = AttackInput("clm_tokens", samples, {TARGET_LOSS: np.zeros(9), TOKEN_LOG_PROBS: target,
                                               REFERENCE_TOKEN_LOG_PROBS: reference})
    frame = build(data).frame.set_index("id")
    for user, rows in samples.groupby("group_id").groups.items():
        ratios = [sum(target[r, t] - reference[r, t] for t in range(lengths[r])) for r in rows]
        assert frame.loc[user, "score"] == pytest.approx(sum(ratios) / len(ratios), abs=1e-12)
        assert frame.loc[user, "role"] == samples.loc[rows[0], "role"]
