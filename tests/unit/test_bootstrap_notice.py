"""What `serve` prints beside the bootstrap token: where to use it, also when the system
picks the port."""

from __future__ import annotations

from graph.__main__ import bootstrap_notice
from graph.settings import Settings


def test_the_notice_names_the_address_the_server_listens_on() -> None:
    notice = bootstrap_notice("cvg_x", Settings(host="127.0.0.1", port=8123, secret="s"))
    assert "    cvg_x\n" in notice
    assert "Open http://127.0.0.1:8123/graphql and put it in the Authorization header." in notice


def test_with_port_0_it_points_at_the_port_uvicorn_reports() -> None:
    """It said "Open http://127.0.0.1:0/graphql": the port is the system's pick, known only
    once uvicorn listens, after the notice."""
    notice = bootstrap_notice("cvg_x", Settings(host="127.0.0.1", port=0, secret="s"))
    assert ":0/" not in notice
    assert "the address uvicorn says it is running on" in notice
