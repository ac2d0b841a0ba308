#!/usr/bin/env bash
# The README's canary audit example: tiny causal LMs on generated notes, with and without DP-SGD, into ${1:-runs/canary-example}.
set -euo pipefail
LMAUDIT="${LMAUDIT:-.venv/bin/lmaudit}"
out="${1:-runs/canary-example}"
mkdir -p "$out" && cd "$out"
$LMAUDIT -q synth --out notes.csv --patients 60 --seed 0          # the private training notes
$LMAUDIT -q synth --out public.csv --patients 60 --seed 1         # public text: the reference, and the tokenizer
$LMAUDIT -q synth --out held-out.csv --patients 400 --seed 2      # notes never trained on: the canaries
$LMAUDIT -q train clm --data public.csv --out reference --epochs 20
$LMAUDIT -q canaries make --n 200 --kind sample --source held-out.csv --exclude notes.csv --seed 7 \
  --out canaries
$LMAUDIT -q canaries make --n 200 --kind secret --seed 8 --out secrets
for run in "target canaries" "target-dp canaries --dp --noise-multiplier 1" "target-secrets secrets"; do
  set -- $run
  model=$1 folder=$2; shift 2
  $LMAUDIT -q train clm --data notes.csv --out "$model" --epochs 20 --tokenizer reference --canaries "$folder" "$@"
  $LMAUDIT -q canaries audit --target "$model" --reference reference --canaries "$folder" --out "audit-$model" \
    --signal clm_loss
done
# The same canaries scored by the target's loss alone, and a target whose tokenizer is fitted on its own training data
# (canaries included), audited against a reference on that tokenizer.
$LMAUDIT -q canaries audit --target target --canaries canaries --out audit-target-loss --signal clm_loss --attack loss
$LMAUDIT -q train clm --data notes.csv --out target-own-tokenizer --epochs 20 --canaries canaries
$LMAUDIT -q train clm --data public.csv --out reference-own-tokenizer --epochs 20 --tokenizer target-own-tokenizer
$LMAUDIT -q canaries audit --target target-own-tokenizer --reference reference-own-tokenizer --canaries canaries \
  --out audit-target-own-tokenizer --signal clm_loss
