"""Security: who a connection is (principals), what it may do (resources,
operations, the authorizer). TLS listeners, SASL and the ACL authorizer are
planned here (issue 12); today every connection is `User:ANONYMOUS` and the
authorizer allows everything, as Kafka does with no `authorizer.class.name`."""
