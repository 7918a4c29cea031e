#!/usr/bin/env bash
# One prepared GPU session for issue 41: every measurement benchmarks/README.md's GPU table holds, in one call.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh          # on the GPU machine (its own PyTorch, 2.9 or newer)
#   TINY=1 OUT=/tmp/gpu bash benchmarks/gpu_session.sh   # the same commands at a tiny shape on a CPU (a dry run)
#
# Stages, most important first; each has its own time limit so a slow one cannot starve the rest:
#   speed   - the Llama 3.2 1B shape, micro-batch 8: engine and bare loop, eager and compiled (MFU, tokens/s)
#   memory  - the shared table's rows (1B shape and m200, loss=full as measured there) against the planner
#   snapshot- m200 micro-batch 16 with full recomputation: the allocations alive at the peak
#   recompute - the compiled engine at the 1B shape with selective and full recomputation
#   chunks  - the compiled engine's loss chunk (256 MiB, 1 GiB), transformers' loss, and micro-batch 16
# Each stage writes $OUT/<stage>.json and appends its log to $OUT/stages.log (the device tool brings back at most
# 8 files: six JSON, that log, and the caller's own). On one H100 the first five stages took 324 s, the sixth 285 s
# on an H200: a 15-minute device budget holds one of each call, so run them as two calls (STAGES=...).
set -u
OUT=${OUT:?set OUT to a folder for the JSON and logs}
mkdir -p "$OUT"
PY=${PY:-python}
cd "$(dirname "$0")/.."
if [ "${TINY:-0}" = 1 ]; then
  BIG="--hidden 64 --layers 2 --heads 4 --kv-heads 2 --ffn 176 --vocab 512 --seq 64"
  M200="--hidden 32 --layers 2 --heads 4 --kv-heads 2 --ffn 88 --vocab 512 --seq 64"
  LIMIT=120
else
  BIG=""   # gpu_step.py's defaults: the Llama 3.2 1B shape at 2,048 tokens
  M200="--hidden 1024 --layers 12 --heads 16 --kv-heads 4 --ffn 2816 --vocab 32000 --seq 2048"
  LIMIT=170
fi
stage() {  # stage NAME SECONDS ARGS...
  local name=$1 seconds=$2; shift 2
  echo "=== $name ($(date -u +%T), limit ${seconds}s)"
  local log; log=$(mktemp)
  PYTHONUNBUFFERED=1 timeout "$seconds" $PY benchmarks/gpu_step.py "$@" --json "$OUT/$name.json" >"$log" 2>&1
  echo "exit $?"
  sed -n '/^contender /,$p' "$log"
  grep -m3 -E "Error|error:|Traceback" "$log" || true
  { echo "=== $name"; cat "$log"; } >>"$OUT/stages.log"; rm -f "$log"
}
nvidia-smi --query-gpu=name,memory.total,power.limit,clocks.max.sm --format=csv 2>/dev/null || echo "no nvidia-smi"
$PY -c "import torch, transformers, sys; print('torch', torch.__version__, 'transformers', transformers.__version__, 'python', sys.version.split()[0])"
STAGES=${STAGES:-speed memory snapshot recompute chunks}
want() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
want speed && stage speed "$LIMIT" $BIG --micro-batch 8 --steps 12 --matmul-precision high --contenders engine,engine-compiled,bare,bare-compiled
want memory && stage memory 90 --contenders engine --compile false --loss full --steps 3 $M200 --sweep "micro_batch=1,4,16;recompute=none,full"
want memory && stage memory-1b 60 --contenders engine --compile false --loss full --steps 3 $BIG --micro-batch 8 --sweep "recompute=none,full"
want snapshot && stage snapshot 60 --contenders engine --compile false --loss full --steps 3 $M200 --micro-batch 16 --recompute full --snapshot "${SNAPSHOT_DIR:-/tmp/gpu-snapshots}"
want recompute && stage recompute 130 $BIG --micro-batch 8 --steps 8 --matmul-precision high --contenders engine-compiled --sweep "recompute=selective,full"
want chunks && stage chunks 300 $BIG --micro-batch 8 --steps 12 --matmul-precision high \
  --contenders engine-compiled,bare-compiled --setting loss_chunk_mib=256 --setting loss_chunk_mib=1024 \
  --setting loss=full --setting micro_batch=16,loss_chunk_mib=1024
echo "=== done $(date -u +%T)"
