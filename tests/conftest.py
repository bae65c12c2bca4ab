"""What every test shares: text output laid out at 100 columns, whatever terminal runs the suite
(``COLUMNS`` set for the tests and the processes they start), so that a table drops the same
columns and a sentence wraps at the same word on every machine."""

import pytest


@pytest.fixture(autouse=True)
def _a_terminal_100_columns_wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
