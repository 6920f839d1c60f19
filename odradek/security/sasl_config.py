"""SASL settings of a node, read from Kafka's keys, checked at start-up.

Server side, per listener whose protocol is SASL_PLAINTEXT or SASL_SSL:

    listener.name.<l>.sasl.enabled.mechanisms     else sasl.enabled.mechanisms
    listener.name.<l>.plain.sasl.jaas.config      PlainLoginModule: user_<name>="<password>"
    listener.name.<l>.connections.max.reauth.ms   else connections.max.reauth.ms
    listener.name.<l>.oauthbearer.sasl.jaas.config           OAuthBearerLoginModule: the
        unsecured validator's options (unsecuredValidatorPrincipalClaimName,
        ...ScopeClaimName, ...RequiredScope, ...AllowableClockSkewMs); optional
    listener.name.<l>.oauthbearer.sasl.server.callback.handler.class   only Kafka's
        OAuthBearerUnsecuredValidatorCallbackHandler (the default) is served

SCRAM users are not configured here: their credentials are in the metadata
log (UserScramCredentialRecord), looked up when a client authenticates.

Client side (the node's own connections to other brokers and controllers):
the mechanism is `sasl.mechanism.inter.broker.protocol` towards the
inter-broker listener and `sasl.mechanism.controller.protocol` towards a
controller listener; the user name and password are the `username` and
`password` options of `listener.name.<l>.<mechanism>.sasl.jaas.config`, as in
Kafka.
"""

from __future__ import annotations

from typing import Any, Protocol

from .jaas import JaasEntry, JaasError, parse_jaas_config
from .oauthbearer import UNSECURED_VALIDATOR, ValidatorOptions
from .sasl import SUPPORTED_MECHANISMS, CredentialLookup, SaslClientConfig, SaslServerConfig

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class BrokerConfig(Protocol):
    """What is read of odradek.config.BrokerConfig (security/ imports nothing of
    odradek: the import contracts keep it at the bottom)."""

    @property
    def listeners(self) -> list[Any]: ...  # config.Endpoint: .name
    @property
    def listener_security_protocol_map(self) -> dict[str, str]: ...
    @property
    def inter_broker_listener_name(self) -> str: ...
    def security_protocol(self, listener_name: str) -> str: ...
    def listener_overrides(self, listener: str) -> dict[str, str]: ...
    def get(self, key: str) -> Any: ...


class ConfigError(ValueError):
    """A SASL setting that must stop start-up; the Broker raises it as the
    config's ConfigError (same fields: key, reason, value, message)."""

    def __init__(self, key: str, reason: str, value: object | None = None,
                 *, message: str | None = None) -> None:
        self.key, self.reason, self.value = key, reason, value
        if message is None:
            message = (f"Invalid configuration {key}: {reason}" if value is None
                       else f"Invalid value '{value}' for configuration {key}: {reason}")
        self.message = message
        super().__init__(message)


def _mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    overrides = config.listener_overrides(listener)
    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    if "sasl.enabled.mechanisms" in overrides:
        raw = overrides["sasl.enabled.mechanisms"]
        names = [m.strip() for m in raw.split(",") if m.strip()]
    else:
        key, raw = "sasl.enabled.mechanisms", None
        names = list(config.get("sasl.enabled.mechanisms"))
    names = [m.upper() for m in names]
    unsupported = [m for m in names if m not in SUPPORTED_MECHANISMS]
    if unsupported or not names:
        raise ConfigError(key, f"listener {listener} is SASL; odradek supports the SASL "
                          f"mechanisms {', '.join(SUPPORTED_MECHANISMS)}"
                          + (f", not {', '.join(unsupported)}" if unsupported else ""),
                          raw if raw is not None else ",".join(names))
    return tuple(dict.fromkeys(names))


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> tuple[str, JaasEntry] | None:
    overrides = config.listener_overrides(listener)
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = overrides.get(f"{mechanism.lower()}.sasl.jaas.config")
    if text is None:
        return None
    try:
        return key, parse_jaas_config(text)
    except JaasError as e:
        # the value holds passwords: name the key, not the value
        raise ConfigError(key, str(e), message=f"Invalid configuration {key}: {e}") from None


def server_configs(config: BrokerConfig, scram_credentials: CredentialLookup
                   ) -> dict[str, SaslServerConfig]:
    """A SaslServerConfig per SASL listener, by listener name. Raises ConfigError."""
    out: dict[str, SaslServerConfig] = {}
    for endpoint in config.listeners:
        listener = endpoint.name
        if config.security_protocol(listener) not in SASL_PROTOCOLS:
            continue
        mechanisms = _mechanisms(config, listener)
        users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            found = _jaas(config, listener, "PLAIN")
            key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
            if found is None:
                raise ConfigError(key, f"PLAIN is enabled on listener {listener}, so its "
                                  "users must be given here (PlainLoginModule with "
                                  'user_<name>="<password>" options)')
            users = found[1].users()
        overrides = config.listener_overrides(listener)
        reauth_ms = int(config.get("connections.max.reauth.ms"))
        if "connections.max.reauth.ms" in overrides:
            key = f"listener.name.{listener.lower()}.connections.max.reauth.ms"
            try:
                reauth_ms = int(overrides["connections.max.reauth.ms"])
            except ValueError:
                raise ConfigError(key, "expected a number of ms",
                                  overrides["connections.max.reauth.ms"]) from None
            if reauth_ms < 0:
                raise ConfigError(key, "must be at least 0", reauth_ms)
        oauth = _oauth_options(config, listener) if "OAUTHBEARER" in mechanisms \
            else ValidatorOptions()
        out[listener] = SaslServerConfig(listener, mechanisms, users, scram_credentials,
                                         reauth_ms, oauth)
    return out


def _oauth_options(config: BrokerConfig, listener: str) -> ValidatorOptions:
    overrides = config.listener_overrides(listener)
    handler = overrides.get("oauthbearer.sasl.server.callback.handler.class", "").strip()
    if handler and handler != UNSECURED_VALIDATOR:
        raise ConfigError(f"listener.name.{listener.lower()}.oauthbearer.sasl.server."
                          "callback.handler.class", "odradek validates OAUTHBEARER tokens "
                          f"as Kafka's default {UNSECURED_VALIDATOR} only (unsecured JWS, "
                          "for development)", handler)
    found = _jaas(config, listener, "OAUTHBEARER")
    if found is None:
        return ValidatorOptions()
    try:
        return ValidatorOptions.from_jaas(found[1].options)
    except ValueError as e:
        raise ConfigError(found[0], str(e)) from None


def inter_broker_client(config: BrokerConfig) -> SaslClientConfig | None:
    """How this node logs in to other brokers (replication, transaction markers)."""
    return client_config(config, config.inter_broker_listener_name,
                         "sasl.mechanism.inter.broker.protocol")


def controller_client(config: BrokerConfig) -> SaslClientConfig | None:
    """How this node logs in to the controllers: the first of
    controller.listener.names, as Kafka's brokers and voters do."""
    names = [n.strip() for n in str(config.get("controller.listener.names") or "").split(",")
             if n.strip()]
    if not names:
        return None
    return client_config(config, names[0], "sasl.mechanism.controller.protocol")


def client_config(config: BrokerConfig, listener: str, mechanism_key: str) -> SaslClientConfig | None:
    """How this node logs in to `listener` of another node: None unless that
    listener is SASL. `mechanism_key` is sasl.mechanism.inter.broker.protocol or
    sasl.mechanism.controller.protocol. Raises ConfigError."""
    protocol = config.listener_security_protocol_map.get(listener.upper())
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanism = str(config.get(mechanism_key)).upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(mechanism_key, f"listener {listener} is SASL; odradek's own "
                          f"clients speak {', '.join(SUPPORTED_MECHANISMS)}", mechanism)
    found = _jaas(config, listener, mechanism)
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    options = found[1].options if found is not None else {}
    if mechanism == "OAUTHBEARER":
        return _oauth_client(key, options)
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ConfigError(key, f"this node connects to listener {listener} with {mechanism}, "
                          "so it needs the username and password options here")
    return SaslClientConfig(mechanism, username, password)


def _oauth_client(key: str, options: Any) -> SaslClientConfig:
    """An unsecured-JWS OAUTHBEARER login (Kafka's unsecured login callback handler)."""
    sub = options.get("unsecuredLoginStringClaim_sub")
    if not sub:
        raise ConfigError(key, "this node logs in with OAUTHBEARER, so it needs the "
                          "unsecuredLoginStringClaim_sub option here")
    try:
        lifetime_s = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    except ValueError:
        raise ConfigError(key, "unsecuredLoginLifetimeSeconds: not a number") from None
    return SaslClientConfig("OAUTHBEARER", sub, "", lifetime_s)
