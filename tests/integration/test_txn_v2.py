"""Transactions v2 (KIP-890 part 2) with hand-built requests: the
transaction.version feature (UpdateFeatures, ApiVersions, `odradek features`),
EndTxn v5's epoch bump, Produce v12's and TxnOffsetCommit v5's implicit adds,
Produce v13's topic ids, and the old versions unchanged while TV2 is off."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from odradek.protocol import api
from tests.integration.txn_helpers import TXN_BROKER, call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

NONE, INVALID_UPDATE_VERSION = 0, 95
TV = "transaction.version"


def _features(bootstrap: str) -> tuple[dict[str, tuple[int, int]], dict[str, int], int]:
    r = call(bootstrap, api.ApiKey.API_VERSIONS, 3, {
        "client_software_name": "test", "client_software_version": "1"})
    assert r.error_code.value == NONE
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    return supported, finalized, r.finalized_features_epoch


def _update(bootstrap: str, level: int, upgrade_type: int = 1, version: int = 1) -> Any:
    update: dict[str, Any] = {"feature": TV, "max_version_level": level}
    if version == 0:
        update["allow_downgrade"] = upgrade_type != 1
    else:
        update["upgrade_type"] = upgrade_type
    return call(bootstrap, api.ApiKey.UPDATE_FEATURES, version, {
        "timeout": 30000, "feature_updates": [update]})


def _features_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "features",
                           "--bootstrap-server", bootstrap, *args],
                          check=False, capture_output=True, text=True, timeout=60)


def enable_tv2(bootstrap: str) -> None:
    r = _update(bootstrap, 2)
    assert [x.error_code.value for x in r.results] == [NONE]
    assert _features(bootstrap)[1] == {TV: 2}


def test_transaction_version_is_finalized_by_update_features_and_survives_restart(
        broker_factory):
    b = broker_factory(TXN_BROKER)
    supported, finalized, _ = _features(b.bootstrap)
    assert supported == {TV: (0, 2)} and finalized == {}
    # out of range, unknown, or a downgrade without a downgrade type: refused, nothing changes
    assert _update(b.bootstrap, 3).results[0].error_code.value == INVALID_UPDATE_VERSION
    unknown = call(b.bootstrap, api.ApiKey.UPDATE_FEATURES, 2, {"feature_updates": [
        {"feature": "no.such.feature", "max_version_level": 1}]})
    assert unknown.error_code.value == INVALID_UPDATE_VERSION
    dry = _features_cli(b.bootstrap, "upgrade", "--feature", f"{TV}=2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert _features(b.bootstrap)[1] == {}
    up = _features_cli(b.bootstrap, "upgrade", "--feature", f"{TV}=2")
    assert up.returncode == 0 and "upgraded to 2" in up.stdout, up.stderr
    _, finalized, epoch = _features(b.bootstrap)
    assert finalized == {TV: 2} and epoch >= 0
    assert _update(b.bootstrap, 1).results[0].error_code.value == INVALID_UPDATE_VERSION
    b.restart()
    assert _features(b.bootstrap)[1] == {TV: 2}
    described = _features_cli(b.bootstrap, "describe")
    assert described.returncode == 0, described.stderr
    assert f"Feature: {TV}\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t" \
           "FinalizedVersionLevel: 2" in described.stdout
    down = _features_cli(b.bootstrap, "downgrade", "--feature", f"{TV}=1")
    assert down.returncode == 0, down.stderr
    assert _features(b.bootstrap)[1] == {TV: 1}
    assert _update(b.bootstrap, 0, upgrade_type=2, version=0).results[0].error_code.value == NONE
    assert _features(b.bootstrap)[1] == {}
