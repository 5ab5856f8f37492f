"""Shared helpers of the ringreduce Python tests."""

import importlib

import pytest


def need(module, why):
    """Import `module` or skip the test, saying why (never pass silently)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.skip(f"SKIPPED: {module} is not installed ({why})")


@pytest.fixture
def np():
    return need("numpy", "the numpy path needs it")
