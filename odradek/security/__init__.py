"""Security: who a connection is (principals), what it may do (resources,
operations, the authorizer), and TLS and SASL for listeners and the broker's own
clients.

resources.py (Kafka's resource types, operations, principals), authorizer.py (the
interface the request pipeline calls; `AllowAll` when no `authorizer.class.name` is
set, as Kafka), acl.py (the ACL authorizer, Kafka's StandardAuthorizer semantics),
tls.py (contexts, listeners, the sans-I/O session) over keystores.py (key and trust
stores) and ssl_principal.py (certificate DN to principal), sasl.py (a connection's
SASL exchange, sans I/O) with scram.py, jaas.py and sasl_config.py. Imports only the
config definition modules of odradek."""
