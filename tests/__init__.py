"""The tests: one folder per package (tests/<package>/…), repository-wide tests here."""
