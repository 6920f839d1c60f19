from pathlib import Path

import pytest

from odradek.config import BrokerConfig
from odradek.configdef import ConfigError
from odradek.tiered.settings import RemoteTierSettings
from odradek.topic_config import InvalidConfig, effective_log_config, validate_topic_configs


def test_broker_keys_and_fs_options(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path / "logs"),
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "500",
        "remote.log.manager.copier.thread.pool.size": "2",
        "remote.fetch.max.wait.ms": "700",
        "rsm.config.url": "s3://bucket/prefix",
        "rsm.config.fs.endpoint_url": "http://127.0.0.1:9000",
        "rsm.config.fs.anon": "false",
    })
    s = RemoteTierSettings.from_broker(config)
    assert s.enabled and s.url == "s3://bucket/prefix"
    assert s.fs_options == {"endpoint_url": "http://127.0.0.1:9000", "anon": False}
    assert (s.task_interval_ms, s.copier_threads, s.fetch_max_wait_ms) == (500, 2, 700)


def test_default_url_is_beside_the_first_log_dir(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "logs")})
    s = RemoteTierSettings.from_broker(config)
    assert s.url == (tmp_path / "remote-tier").as_uri() and not s.enabled


def test_bad_broker_values_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_properties({"log.dirs": str(tmp_path),
                                      "remote.log.reader.threads": "0"})
    assert "remote.log.reader.threads" in str(e.value)


def test_topic_keys() -> None:
    parsed = validate_topic_configs({"remote.storage.enable": "true",
                                     "local.retention.bytes": "1000",
                                     "remote.log.copy.disable": "true",
                                     "remote.log.delete.on.disable": "false"})
    assert parsed["remote.storage.enable"] is True
    with pytest.raises(InvalidConfig) as e:
        validate_topic_configs({"remote.storage.enable": "true", "cleanup.policy": "compact"})
    assert e.value.key == "remote.storage.enable"
    with pytest.raises(InvalidConfig) as e:
        validate_topic_configs({"local.retention.bytes": "2000", "retention.bytes": "1000"})
    assert e.value.key == "local.retention.bytes"


def test_effective_local_retention(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})
    lc = effective_log_config(config, {"remote.storage.enable": "true",
                                       "retention.bytes": "5000"})
    assert lc.remote_storage_enable and lc.effective_local_retention_bytes == 5000
    lc = effective_log_config(config, {"local.retention.ms": "10", "retention.ms": "100"})
    assert (lc.effective_local_retention_ms, lc.retention_ms) == (10, 100)


def test_disabling_remote_storage_needs_delete_on_disable() -> None:
    from odradek.topic_config import check_topic_config_change

    on = {"remote.storage.enable": "true"}
    assert "remote.log.delete.on.disable=true" in (
        check_topic_config_change(on, {"remote.storage.enable": "false"}) or "")
    assert check_topic_config_change(on, {}) is not None
    assert check_topic_config_change(on, {"remote.storage.enable": "false",
                                          "remote.log.delete.on.disable": "true"}) is None
    assert check_topic_config_change(on, {**on, "remote.log.copy.disable": "true"}) is None
    assert check_topic_config_change({}, {"remote.storage.enable": "false"}) is None
