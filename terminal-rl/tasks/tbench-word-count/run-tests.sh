#!/bin/bash
# terminal-bench convention: tests live in $TEST_DIR. The results are printed at the end, in
# pytest's `-rA` short-summary format, under its header: only that last section is counted, so
# whatever a test prints along the way cannot add PASSED lines.
TEST_DIR=${TEST_DIR:-/tests}
results=()
for t in "$TEST_DIR"/test_*.sh; do
  name=$(basename "$t" .sh)
  if bash "$t"; then results+=("PASSED tests/$name"); else results+=("FAILED tests/$name"); fi
done
echo "=========================== short test summary info ============================"
printf '%s\n' "${results[@]}"
failed=$(printf '%s\n' "${results[@]}" | grep -c '^FAILED')
echo "=========================== $failed failed ==========================="
[ "$failed" = 0 ]
