"""Request handlers, one module per API family. Which handler answers which API
is declared in `broker/apis.py` (API_TABLE), not here."""
