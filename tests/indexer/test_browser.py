"""The leaderboard page in a real browser: Debian's Chromium driven by Playwright (no browser
download). It loads the page served by the running indexer, checks that the ranking shown is the
chain's, follows a change on the chain through auto-refresh, draws a selected peer's chart, and saves
a screenshot to tests/artifacts/leaderboard.png.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.indexer.scenario import (
    ETHER,
    EXPECTED_DUTY,
    EXPECTED_VERIFIED,
    play,
    play_tie,
    settle_tie,
)
from tests.indexer.test_api import caught_up, start_service
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = Path(os.environ.get("SWARM_TEST_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        message = (
            f"Chromium not found at {CHROMIUM}: scripts/bootstrap installs Debian's chromium "
            "when run as root (or set SWARM_TEST_CHROMIUM to a Chromium binary)"
        )
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield instance
        instance.close()


def test_the_page_shows_the_chains_ranking(
    browser, chain, client_for, dev_accounts, deployment, tmp_path
) -> None:
    swarm = play(chain, client_for, dev_accounts[1:])
    service = start_service(chain, deployment, tmp_path)
    problems: list[str] = []
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: problems.append(message.text) if message.type == "error" else None,
    )
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        page.goto(service.url + "?refresh=1")
        rows = page.locator("#rows tr[data-address]")
        rows.nth(5).wait_for(timeout=15_000)

        shown = [
            {
                "address": row.get_attribute("data-address"),
                "rank": row.locator(".rank").inner_text(),
                "name": row.locator(".name").inner_text().split("\n")[0].strip(),
                "verified": float(row.locator(".verified").inner_text().replace(",", "")),
                "stake": float(row.locator(".stake").inner_text().replace(",", "")),
                "duty": (
                    int(row.locator(".duty-done").inner_text()),
                    int(row.locator(".duty-missed").inner_text()),
                ),
            }
            for row in rows.all()
        ]
        names = swarm.names_by_address()
        assert [names[r["address"]] for r in shown] == swarm.ranking()
        assert [r["rank"] for r in shown] == ["1", "2", "3", "4", "5", "6"]
        for row in shown:
            name = names[row["address"]]
            assert row["name"].startswith(name)
            assert row["verified"] == EXPECTED_VERIFIED[name] / 1000
            on_chain = swarm.clients[name].peer_info(row["address"]).stake
            assert row["stake"] == on_chain / ETHER
            seats, done = EXPECTED_DUTY[name]
            assert row["duty"] == (done, seats - done)
        assert "1" in page.locator("tr[data-address] .slashed").inner_text()

        # a change on the chain reaches the page through auto-refresh
        swarm.clients["frank"].add_stake(5 * ETHER)
        frank = page.locator(f'tr[data-address="{swarm.address("frank")}"] .stake')
        wait_for(lambda: frank.inner_text() == "5.9", timeout=20, what="frank's new stake")

        # selecting a peer draws its reward over rounds beside the swarm's
        page.locator(f'tr[data-address="{swarm.address("carol")}"]').click()
        page.locator('path[data-series="carol: verified"]').wait_for(timeout=10_000)
        assert page.locator('path[data-series="swarm: verified per batch"]').count() == 1
        assert "carol" in page.locator("#chart-peer").inner_text()
        # ...and lists its batches with the committee's weights and the outcome
        upheld = page.locator(f'#batch-rows tr[data-round="{swarm.round}"]')
        upheld.wait_for(timeout=10_000)
        assert upheld.locator(".flag-weight").inner_text() == "4"
        assert upheld.locator(".agree-weight").inner_text() == "1"
        assert "upheld" in upheld.locator(".outcome").inner_text()
        assert "live" in page.locator("#health").inner_text()

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "leaderboard.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 10_000
        assert problems == []
    finally:
        page.close()
        service.stop()


def test_the_page_shows_an_inconclusive_batch_as_such(
    browser, chain, client_for, dev_accounts, deployment, tmp_path
) -> None:
    """A tie (scenario.play_tie) settled Inconclusive: its batch reads inconclusive, earns 0, and
    is shown neither as rejected nor as upheld."""
    swarm = play_tie(chain, client_for, dev_accounts[1:])
    settle_tie(swarm)
    service = start_service(chain, deployment, tmp_path)
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        page.goto(service.url + "?refresh=1")
        page.locator(f'tr[data-address="{swarm.address("sam")}"]').click()
        batch = page.locator(f'#batch-rows tr[data-round="{swarm.round}"]')
        batch.wait_for(timeout=10_000)
        outcome = batch.locator(".outcome")
        assert "inconclusive" in outcome.inner_text()
        assert "rejected" not in outcome.inner_text() and "upheld" not in outcome.inner_text()
        assert "inconclusive" in (outcome.get_attribute("class") or "")
        assert float(batch.locator(".verified").inner_text()) == 0
        assert problems == []
    finally:
        page.close()
        service.stop()
