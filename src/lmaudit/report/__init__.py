"""The audit's output folder: report.json (built in build.py), scores.parquet, report.html, the terminal tables, the sweep page."""
