"""Grids of train + audit cells that reproduce the papers' experiments, each written as one JSON and one HTML page."""
