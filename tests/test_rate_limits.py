"""Per-token rate limits and the cap on subscriptions per token, against a real server.

Each test starts a server process with the settings it needs (CONVOGRAPH_RATE_LIMIT_*,
CONVOGRAPH_MAX_SUBSCRIPTIONS_PER_TOKEN) over its own database (SQLite, or PostgreSQL under
CONVOGRAPH_TEST_DATABASE_URL) and talks GraphQL over HTTP and graphql-transport-ws to it.
Where a test needs a bucket that does not refill while it runs, the rate is 0.01 per second:
then of any number of requests sent at once exactly `burst` get through, however slow the
machine. Only the refill test depends on time, and it bounds its counts by the time it
measured.
"""

from __future__ import annotations

import pytest

from graph.settings import Settings, SettingsError

RATE = "CONVOGRAPH_RATE_LIMIT_PER_SECOND"
BURST = "CONVOGRAPH_RATE_LIMIT_BURST"
CAP = "CONVOGRAPH_MAX_SUBSCRIPTIONS_PER_TOKEN"


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        (RATE, "-1"),
        (RATE, "fast"),
        (RATE, "inf"),
        (RATE, "nan"),
        (BURST, "0"),
        (BURST, "2.5"),
        (CAP, "-1"),
        (CAP, "many"),
    ],
)
def test_a_bad_limit_setting_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env()


def test_the_burst_defaults_to_twice_the_rate() -> None:
    assert Settings().rate_limit_per_second == 0 and Settings().max_subscriptions_per_token == 0
    assert Settings(rate_limit_per_second=0.01).rate_limit_burst_size == 1
    assert Settings(rate_limit_per_second=2.5).rate_limit_burst_size == 5
    assert Settings(rate_limit_per_second=2.6).rate_limit_burst_size == 6
    assert Settings(rate_limit_per_second=2.5, rate_limit_burst=1).rate_limit_burst_size == 1
