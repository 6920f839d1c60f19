"""Security: who a connection is (principals), what it may do (resources,
operations, the authorizer), and TLS for listeners and the broker's own clients
(tls.py). SASL and the ACL authorizer are planned here (issue 12); today a
connection is `User:ANONYMOUS` unless a TLS client certificate names it, and the
authorizer allows everything, as Kafka does with no `authorizer.class.name`."""
