#!/bin/bash
# The mutation benchmark in calls of limited length (a lent GPU machine): runs
# benchmarks/bench_mutants.py over benchmarks/mutants_subset.txt for at most LIMIT seconds,
# keeping its state in mutstate/ (ignored), restoring it from STATE (a tarball of an earlier
# call) when mutstate/ is empty, else from RECORD (a recorded run's mutants.json; RECORD=none
# starts afresh; a mutant the generator now writes differently is verified again), and writing
# the state and the reports to OUT. A lent machine does not keep mutstate/ from one call to the
# next, even warm: copy each call's OUT/mutants-state.tgz to STATE before the next. Call it again
# until the log ends in the tables.
#   OUT=$OUT bash benchmarks/mutants_resumable.sh LIMIT [more bench_mutants.py options, e.g. --redo KEY]
set -u
OUT=${OUT:-mutstate/out}
STATE=${STATE:-.devrun/mutants-state.tgz}
RUN=mutstate/h200-mutants
mkdir -p "$OUT"
RECORD=${RECORD:-docs/measured/h200-mutants-public/mutants.json}
if [ ! -f $RUN/mutants.json ] && [ -f "$STATE" ]; then tar xzf "$STATE"; fi
mkdir -p $RUN
if [ ! -f $RUN/mutants.json ] && [ -f "$RECORD" ]; then cp "$RECORD" $RUN/mutants.json; fi
LIMIT=${1:-500}; shift
PYTHONUNBUFFERED=1 timeout "$LIMIT" python3 benchmarks/bench_mutants.py corpus \
  --only $(grep -v '^#' benchmarks/mutants_subset.txt) --out $RUN --device cuda --jobs 12 --memcheck \
  --accept-offered --kernelbench-src .devrun/kb-src --kb-jobs 4 --resume "$@" >> "$OUT/mutants.log" 2>&1
echo "exit $?" >> "$OUT/mutants.log"
tar czf "$OUT/mutants-state.tgz" --exclude=cache $RUN
cp $RUN/mutants.md $RUN/mutants.csv $RUN/mutants.json "$OUT/" 2>/dev/null
echo "verdicts this call, ours: $(grep -c '^\[ours\] .* in [0-9]* s' "$OUT/mutants.log") kernelbench: $(grep -c '^\[kernelbench\] .*: done' "$OUT/mutants.log")"
tail -3 "$OUT/mutants.log"
