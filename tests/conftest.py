"""Shared pytest fixtures: the EP library is registered once per process."""

import os
import zlib

import numpy as np
import pytest

import ortmlx

# On MLX's CPU backend the EP claims by default only what runs at least as fast as ORT's CPU EP
# (option cpu_claim=auto). The suite tests every claim the EP can make, so it claims everything;
# set here, before any session (and inherited by child interpreters). Tests of the default
# policy pass cpu_claim=auto explicitly (tests/plugin/test_cpu_claim.py).
os.environ["ONNXRUNTIME_EP_MLX_CPU_CLAIM"] = "all"


def pytest_configure(config):
    # Keep ORT quiet; tests read the EP's JSON report instead of logs.
    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")


@pytest.fixture(scope="session", autouse=True)
def _register_ep():
    ortmlx.register_execution_provider_library()


@pytest.fixture
def rng(request):
    # Fresh data per test case, reproducible from the test id.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
