"""End-to-end tests through the command line: demos, audits, bad input, resumption, the released scores."""
