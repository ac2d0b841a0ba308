"""Tests of report/: the tables and the all-or-nothing writing of the output folder."""
