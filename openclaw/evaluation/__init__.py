"""openclaw-test's evaluation harness: one module per family (conversation, coding, tool-use),
the model source (local weights served by our server, or an OpenAI-compatible endpoint), and the
report. Entry point: `bash openclaw-test/run_eval.sh` (`openclaw.evaluation.cli.main`)."""
