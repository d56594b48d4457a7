"""Shared pytest fixtures: the EP library is registered once per process."""

import os

import numpy as np
import pytest

import ortmlx


def pytest_configure(config):
    # Keep ORT quiet; tests read the EP's JSON report instead of logs.
    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")


@pytest.fixture(scope="session", autouse=True)
def _register_ep():
    ortmlx.register_execution_provider_library()


@pytest.fixture
def rng(request):
    # Fresh data per test case, reproducible from the test id.
    seed = abs(hash(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)
