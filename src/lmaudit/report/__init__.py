"""The audit's output folder: report.json, scores.parquet, report.html, and the terminal summary."""
