#!/bin/bash
# terminal-bench convention: tests live in $TEST_DIR; print one PASSED/FAILED line per test.
TEST_DIR=${TEST_DIR:-/tests}
for t in "$TEST_DIR"/test_*.sh; do
  name=$(basename "$t" .sh)
  if bash "$t"; then echo "PASSED tests/$name"; else echo "FAILED tests/$name"; fi
done
