"""The fast unit layer: the pure logic (domain rules, cursors, the JSON codec, the scope
rules, the query limits) tested as its callers rely on it. No database, no server, no
network: `pytest tests/unit` runs in seconds."""
