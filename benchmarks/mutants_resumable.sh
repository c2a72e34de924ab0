#!/bin/bash
# The mutation benchmark in calls of limited length (a lent GPU machine): runs
# benchmarks/bench_mutants.py over benchmarks/mutants_subset.txt for at most LIMIT seconds,
# keeping its state in mutstate/ (ignored; a machine kept warm between calls keeps it), restoring
# it from STATE (a tarball of an earlier call) when mutstate/ is empty, and writing the state and
# the reports to OUT. Call it again until the log ends in the tables.
#   OUT=$OUT bash benchmarks/mutants_resumable.sh LIMIT [more bench_mutants.py options]
set -u
OUT=${OUT:-mutstate/out}
STATE=${STATE:-.devrun/mutants-state.tgz}
RUN=mutstate/h200-mutants
mkdir -p "$OUT"
if [ ! -f $RUN/mutants.json ] && [ -f "$STATE" ]; then tar xzf "$STATE"; fi
mkdir -p $RUN
LIMIT=${1:-500}; shift
PYTHONUNBUFFERED=1 timeout "$LIMIT" python3 benchmarks/bench_mutants.py corpus \
  --only $(grep -v '^#' benchmarks/mutants_subset.txt) --out $RUN --device cuda --jobs 12 --memcheck \
  --accept-offered --kernelbench-src .devrun/kb-src --kb-jobs 4 --resume "$@" >> "$OUT/mutants.log" 2>&1
echo "exit $?" >> "$OUT/mutants.log"
tar czf "$OUT/mutants-state.tgz" --exclude=cache $RUN
cp $RUN/mutants.md $RUN/mutants.csv $RUN/mutants.json "$OUT/" 2>/dev/null
echo "ours: $(grep -c '^\[ours' "$OUT/mutants.log") kernelbench: $(grep -c '^\[kernelbench\]' "$OUT/mutants.log")"
tail -3 "$OUT/mutants.log"
