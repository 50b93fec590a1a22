"""The leaderboard page in a real browser: Debian's Chromium driven by Playwright (no browser
download). It loads the page served by the running indexer, checks that the ranking shown is the
chain's, follows a change on the chain through auto-refresh, draws a selected peer's chart, shows
a round still being judged as pending, and saves screenshots to tests/artifacts/leaderboard*.png.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.indexer.scenario import (
    ETHER,
    EXPECTED_DUTY,
    EXPECTED_VERIFIED,
    digest,
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


def test_the_page_shows_a_round_still_being_judged_as_pending(
    browser, chain, client_for, dev_accounts, deployment, tmp_path
) -> None:
    """The scenario's rounds r and r+1 are judged and settled; alice then publishes in round r+7,
    which no committee has judged yet. The chart draws no verified point for r+7 (a gap under a
    "pending" band, not a 0), the table says alice has 1 pending batch, and her batch of r+7
    reads pending."""
    swarm = play(chain, client_for, dev_accounts[1:])
    late = chain.current_round()
    assert late == swarm.round + 7
    swarm.clients["alice"].publish_rollouts(
        late, digest("alice", late), groups=4, completions=32, reward_sum=5000
    )
    service = start_service(chain, deployment, tmp_path)
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        page.goto(service.url + "?refresh=1")
        band = page.locator(f'#chart .pending-band[data-pending="{late}"]')
        band.wait_for(timeout=15_000)
        assert "pending" in band.locator("title").text_content()
        assert page.locator("#chart .pending-band").count() == 1  # the judged rounds are not
        assert "pending" in page.locator("#legend").inner_text()
        drawn = [t.text_content() for t in page.locator("#chart circle title").all()]
        verified = [t for t in drawn if t.startswith("swarm: verified per batch")]
        claimed = [t for t in drawn if t.startswith("swarm: claimed per batch")]
        assert [t.split("round ")[1].split(":")[0] for t in verified] == [
            str(swarm.round),
            str(swarm.round + 1),
        ]  # no point, so no 0, for the pending round
        assert any(f"round {late}:" in t for t in claimed)  # its claims are drawn as claimed

        rows = {
            row.get_attribute("data-address"): row.locator(".pending-batches").inner_text()
            for row in page.locator("#rows tr[data-address]").all()
        }
        assert rows.pop(swarm.address("alice")) == "1 pending"
        assert set(rows.values()) == {"–"}

        page.locator(f'tr[data-address="{swarm.address("alice")}"]').click()
        batch = page.locator(f'#batch-rows tr[data-round="{late}"]')
        batch.wait_for(timeout=10_000)
        assert batch.locator(".verified").inner_text() == "pending"
        assert batch.locator(".outcome").inner_text() == "pending: committee still judging"
        settled = page.locator(f'#batch-rows tr[data-round="{swarm.round}"]')
        assert "pending" not in settled.inner_text()
        assert float(settled.locator(".verified").inner_text()) == 5.0
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "leaderboard-pending.png"), full_page=True)
        assert problems == []
    finally:
        page.close()
        service.stop()
