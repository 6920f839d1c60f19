"""The web console: `odradek console --bootstrap-server H:P` serves server-rendered
pages about any Kafka-compatible cluster, everything through the Kafka protocol.

Theory of operation. `server.py` is a standard-library ThreadingHTTPServer (one thread
a request, which suits the blocking confluent-kafka clients and the CLI's blocking
`Connection`) and routes paths to the handlers of `pages_*.py`; each handler asks a
module of Kafka calls (`topics.py`, `log_dirs.py`, `messages.py`, `groups.py`,
`transactions.py`, `acls.py`, `users.py`; `client.py` holds the clients) for plain
data and renders a jinja2 template with autoescape on, so every value, including a
record's attacker-controlled key, value and headers, reaches the page escaped. Every
change (topics, produce, offset resets, ACLs, users) is a POST carrying the process's
random form token; the first POST shows a confirmation page, only its confirming POST
acts. See docs/console.md.
"""
