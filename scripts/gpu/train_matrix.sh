# The GPU plan's training comparisons, one row each (sourced by scripts/gpu/pack.sh, which runs the
# CPU side here, and scripts/gpu/jobs.sh, which runs the GPU side there and compares):
#   name|ref|tolerance|arguments|GPU-only arguments
# `ref` names the row whose CPU run is the reference (a graphs row shares its eager twin's: graphs
# are the GPU's alone). The CPU reference runs `--device cpu --policy-of cuda`: the GPU's own plan
# (16-bit stream, logits and gradients between ops), so each row compares kernels, not plans.
# Tolerances (relative, per step's loss) are the device tests': fp32 1e-4, tf32 1e-2, 16-bit 3e-2.
# $DATA is where pack.sh put the shards and instances (.gpu/data).
#
# Rows: GPT-2 d2 (head size 32: naive attention) in every precision x AdamW/Sophia/Muon, each
# eager and with CUDA graphs; BERT bert-tiny (head size 64: flash in 16-bit) padded and packed in
# every precision x AdamW/Sophia/Muon (no graphs: GPT-2's only); GPT-2 d4 (head size 64) in the
# 16-bit precisions, where flash attention runs, eager and with graphs; Llama llama-tiny (4 heads
# over 2 key/value heads of 16: the grouped heads expanded for the naive attention) in fp32 and
# bf16 with AdamW, bf16 with Muon and with graphs, and with QK-norm and the ReLU² MLP (the norm's
# grouped rows, its in-place backward and the relu2 kernels) in fp32 and bf16.

gpt2_args() {  # PRESET
  echo "train --preset $1 --train-data '$DATA/gpt2/train_*.bin' --val-data '$DATA/gpt2/val_*.bin'" \
    "--batch 2 --seq 32 --total-batch 128 --steps 20 --lr 1e-3 --warmup 2 --val-steps 2 --sample-tokens 0" \
    "--seed 7 --threads 2 --deterministic --progress none"
}
llama_args() {
  gpt2_args llama-tiny | sed 's/^train /train --model llama /'
}
bert_args() {  # LAYOUT
  echo "train --model bert --preset bert-tiny --data '$DATA/bert/b_train.bert' --batch-layout $1" \
    "--batch 8 --max-predictions 5 --steps 20 --lr 1e-3 --warmup 2 --seed 7 --threads 2 --deterministic" \
    "--progress none"
}
precision_args() {  # PRECISION: fp16 starts at a scale neither device overflows (a skip on one side
  # only would be a trajectory difference, not an error)
  echo "--precision $1$([[ $1 == fp16 ]] && echo " --loss-scale-init 1024")"
}
tolerance() { case $1 in fp32) echo 1e-4 ;; tf32) echo 1e-2 ;; *) echo 3e-2 ;; esac; }
optimizer_args() {
  case $1 in adamw) echo "" ;; sophia) echo "--optimizer sophia --sophia-k 5" ;; muon) echo "--optimizer muon" ;; esac
}

# Prints every row.
matrix_rows() {
  local p o l
  for p in fp32 tf32 bf16 fp16; do
    for o in adamw sophia muon; do
      echo "gpt2-$p-$o|gpt2-$p-$o|$(tolerance $p)|$(gpt2_args d2) $(precision_args $p) $(optimizer_args $o)|"
      echo "gpt2-$p-$o-graphs|gpt2-$p-$o|$(tolerance $p)|$(gpt2_args d2) $(precision_args $p) $(optimizer_args $o)|--graphs on"
    done
  done
  for p in fp32 tf32 bf16 fp16; do
    for l in padded unpadded; do
      for o in adamw sophia muon; do
        echo "bert-$p-$l-$o|bert-$p-$l-$o|$(tolerance $p)|$(bert_args $l) $(precision_args $p) $(optimizer_args $o)|"
      done
    done
  done
  for p in bf16 fp16; do
    echo "flash-d4-$p-adamw|flash-d4-$p-adamw|$(tolerance $p)|$(gpt2_args d4) $(precision_args $p)|"
  done
  echo "flash-d4-bf16-adamw-graphs|flash-d4-bf16-adamw|$(tolerance bf16)|$(gpt2_args d4) $(precision_args bf16)|--graphs on"
  for p in fp32 bf16; do
    echo "llama-$p-adamw|llama-$p-adamw|$(tolerance $p)|$(llama_args) $(precision_args $p)|"
  done
  echo "llama-bf16-muon|llama-bf16-muon|$(tolerance bf16)|$(llama_args) $(precision_args bf16) $(optimizer_args muon)|"
  echo "llama-bf16-adamw-graphs|llama-bf16-adamw|$(tolerance bf16)|$(llama_args) $(precision_args bf16)|--graphs on"
  for p in fp32 bf16; do
    echo "llama-$p-qknorm-relu2|llama-$p-qknorm-relu2|$(tolerance $p)|$(llama_args) --qk-norm --mlp relu2 $(precision_args $p)|"
  done
}
