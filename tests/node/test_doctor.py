"""``swarm doctor`` through click's runner against the test Anvil: a healthy registered node
passes, and each broken setting gives its problem line, its fix and exit status 1."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.cli import main
from node.config import load_config
from node.doctor import Probes, failed, run_checks
from node.identity import unlock_keystore
from node.local.kubo import KuboDaemon
from node.resources import GIB, MIB, SMOL_PARAMETERS, Workload, estimate_resources
from node.storage.endpoint import announceable, encode_endpoint
from node.storage.endpoint_proof import EndpointDomain
from tests.chain_fixtures import ETHER, AnvilNode, ChainControl
from tests.storage.kubo_daemons import kubo_swarm

pytestmark = pytest.mark.integration

PASSWORD = "volunteer-password"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(home: Path, deployment_file: Path, rpc_url: str, **sections: str) -> None:
    """node.toml: the test chain, a keystore and store in ``home``, the tiny model; ``sections``
    replace whole sections (``storage='store = "..."'``)."""
    parts = {
        "chain": f'rpc_url = "{rpc_url}"\ndeployment = "{deployment_file}"',
        "identity": f'keystore = "{home / "keystore.json"}"\npassword_env = "TEST_SWARM_PW"',
        "storage": f'store = "{home / "store"}"',
        "model": f'source = "tiny"\ncheckpoint_dir = "{home / "checkpoints"}"',
        **sections,
    }
    text = "\n\n".join(f"[{name}]\n{body}" for name, body in parts.items())
    (home / "node.toml").write_text(text + "\n")


@pytest.fixture
def home(tmp_path: Path, anvil: AnvilNode, deployment: Deployment, chain: ChainControl) -> Path:
    write_config(tmp_path, deployment.save(tmp_path / "deployment.json"), anvil.url)
    return tmp_path


def swarm(home: Path, *args: str, password: str | None = PASSWORD) -> Result:
    env = {"TEST_SWARM_PW": password}
    return CliRunner().invoke(main, ["--config", str(home / "node.toml"), *args], env=env)


def doctor(home: Path, password: str | None = PASSWORD) -> Result:
    result = swarm(home, "doctor", password=password)
    assert "Traceback" not in result.output
    return result


def line_of(result: Result, name: str) -> str:
    """The report's line of check ``name``."""
    found = [line for line in result.output.splitlines() if line.split()[1:2] == [name]]
    assert len(found) == 1, result.output
    return found[0]


def new_peer(home: Path, chain: ChainControl, *, fund: int = 10 * ETHER) -> str:
    result = swarm(home, "init")
    assert result.exit_code == 0, result.output
    address = re.search(r"address (0x[0-9a-fA-F]{40})", result.output).group(1)
    if fund:
        chain.fund(address, fund)
    return address


def registered_peer(home: Path, chain: ChainControl, stake: str = "2") -> str:
    address = new_peer(home, chain)
    result = swarm(home, "register", "--name", "alice", "--stake", stake)
    assert result.exit_code == 0, result.output
    return address


def test_a_healthy_registered_node_passes_every_check(home: Path, chain: ChainControl) -> None:
    chain.warp_to(max(chain.now(), int(time.time())))  # other tests move the test chain's time
    address = registered_peer(home, chain)
    result = doctor(home)
    assert result.exit_code == 0, result.output
    statuses = {line.split()[1]: line.split()[0] for line in result.output.splitlines()[:-1]}
    assert statuses == {
        "deployment": "ok",
        "rpc": "ok",
        "contract": "ok",
        "keystore": "ok",
        "peer": "ok",
        "funds": "ok",
        "clock": "ok",
        "store": "ok",
        "announced": "skipped",  # a local store folder is not announced
        "peers": "skipped",  # and has no peers
        "memory": "ok",
        "disk": "ok",
    }, result.output
    assert address in line_of(result, "keystore")
    assert "stake 2 ETH (minimum 1 ETH)" in line_of(result, "peer")
    assert result.output.splitlines()[-1] == "no problems found"


def test_wrong_chain_id_in_the_deployment_file(
    home: Path, chain: ChainControl, deployment: Deployment
) -> None:
    registered_peer(home, chain)
    deployment.model_copy(update={"chain_id": 5}).save(home / "deployment.json")
    result = doctor(home)
    assert result.exit_code == 1, result.output
    line = line_of(result, "rpc")
    assert line.startswith("PROBLEM") and "serves chain 31337" in line and "chain 5" in line
    assert "Fix: set [chain] rpc_url to an RPC of chain 5" in line
    assert line_of(result, "contract").startswith("skipped")


def test_no_contract_at_the_address(
    home: Path, chain: ChainControl, deployment: Deployment
) -> None:
    registered_peer(home, chain)
    elsewhere = "0x" + "12" * 20
    deployment.model_copy(update={"coordinator": elsewhere}).save(home / "deployment.json")
    result = doctor(home)
    assert result.exit_code == 1, result.output
    line = line_of(result, "contract")
    assert "no contract code at 0x1212" in line and "Fix: get the current deployment file" in line


def test_a_reset_chain_is_told_by_the_deployment_block_hash(
    home: Path, chain: ChainControl, deployment: Deployment
) -> None:
    registered_peer(home, chain)
    deployment.model_copy(update={"block_hash": "0x" + "ab" * 32}).save(home / "deployment.json")
    result = doctor(home)
    assert result.exit_code == 1, result.output
    assert "the chain was reset" in line_of(result, "contract")


def test_wrong_or_missing_password(home: Path, chain: ChainControl) -> None:
    registered_peer(home, chain)
    wrong = doctor(home, password="not-the-password")
    assert wrong.exit_code == 1, wrong.output
    line = line_of(wrong, "keystore")
    assert "wrong password" in line and "Fix: export TEST_SWARM_PW=" in line
    assert line_of(wrong, "peer").startswith("ok")  # the address needs no password
    missing = doctor(home, password=None)
    assert missing.exit_code == 1
    assert "no password for" in line_of(missing, "keystore")


def test_no_keystore_says_swarm_init(home: Path, chain: ChainControl) -> None:
    result = doctor(home)
    assert result.exit_code == 1
    assert "Fix: swarm init" in line_of(result, "keystore")
    assert line_of(result, "peer").startswith("skipped")


def test_unregistered_and_unfunded_peer(home: Path, chain: ChainControl) -> None:
    address = new_peer(home, chain, fund=0)
    result = doctor(home)
    assert result.exit_code == 1, result.output
    peer = line_of(result, "peer")
    assert f"{address} is not registered" in peer
    assert "Fix: swarm register --name NAME --stake AMOUNT (at least 1 ETH)" in peer
    funds = line_of(result, "funds")
    assert funds.startswith("PROBLEM") and "balance 0 ETH" in funds
    assert "Fix: send at least" in funds and address in funds


def test_stake_below_a_raised_minimum(
    home: Path, chain: ChainControl, client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
) -> None:  # fmt: skip
    registered_peer(home, chain, stake="1")
    owner = client_for(dev_accounts[0])
    owner.schedule_parameters(3 * ETHER, owner.rules_at(chain.current_round()))
    chain.warp_to_round(owner.rules_by_index(owner.rules_count() - 1).from_round)
    result = doctor(home)
    assert result.exit_code == 1, result.output
    line = line_of(result, "peer")
    assert "stake 1 ETH is below the minimum 3 ETH" in line
    assert "Fix: swarm add-stake --amount '2 ETH'" in line


def test_an_exiting_peer(home: Path, chain: ChainControl) -> None:
    registered_peer(home, chain)
    assert swarm(home, "exit").exit_code == 0
    result = doctor(home)
    assert result.exit_code == 1
    assert "is exiting: it left the swarm" in line_of(result, "peer")


def test_an_unreachable_rpc(home: Path, chain: ChainControl, deployment: Deployment) -> None:
    registered_peer(home, chain)
    url = f"http://127.0.0.1:{closed_port()}"
    write_config(home, home / "deployment.json", url)
    result = doctor(home)
    assert result.exit_code == 1, result.output
    line = line_of(result, "rpc")
    assert "unreachable" in line and url in line and "Fix: set [chain] rpc_url" in line
    for name in ("contract", "peer", "funds", "clock"):
        assert line_of(result, name).startswith("skipped"), result.output
    assert line_of(result, "keystore").startswith("ok")


def test_a_clock_an_hour_off(home: Path, chain: ChainControl) -> None:
    registered_peer(home, chain)
    chain.increase_time(3600)
    chain.mine()
    gap = chain.now() - time.time()  # an hour, give or take the chain's own lag behind real time
    result = doctor(home)
    assert result.exit_code == 1, result.output
    line = line_of(result, "clock")
    found = re.search(r"clock is (\d+) s behind the chain's \(allowed: 30 s", line)
    assert found, line
    assert gap > 1800 and abs(int(found[1]) - gap) < 30, (gap, line)
    assert "Fix: sync this machine's clock" in line


def test_the_demo_chain_whose_clock_jumps_is_no_clock_problem(
    home: Path, chain: ChainControl, deployment: Deployment
) -> None:
    """The lockstep demo records clock "jumps" in its deployment file and moves the chain an
    hour ahead a round at a time: its own node's doctor says so instead of "sync your clock";
    a machine ahead of that chain is still a problem."""
    jumping = deployment.model_copy(update={"clock": "jumps"})
    jumping.save(home / "deployment.json")
    registered_peer(home, chain)
    chain.increase_time(3600)
    chain.mine()
    line = line_of(doctor(home), "clock")
    assert line.startswith("ok") and "the local demo moves it forward" in line, line
    config = load_config(home / "node.toml")
    ahead = chain.now() + 120
    checks = run_checks(config, probes=Probes(now=lambda: ahead))
    clock = next(check for check in checks if check.name == "clock")
    assert clock.status == "problem" and "ahead of the chain's" in clock.detail, clock


def test_the_clock_tolerance_is_a_tenth_of_a_round(home: Path, chain: ChainControl) -> None:
    config = load_config(home / "node.toml")
    chain.mine()  # the next block's time, which the check reads, is then the latest's
    chain_now = chain.now()

    def clock_line(offset: float) -> str:
        checks = run_checks(config, probes=Probes(now=lambda: chain_now + offset))
        return next(check for check in checks if check.name == "clock").line()

    assert clock_line(25).startswith("ok")  # rounds of 60 s: 30 s allowed (at least 30 s)
    assert clock_line(-25).startswith("ok")
    assert "ahead of" in clock_line(40) and clock_line(40).startswith("PROBLEM")
    assert "behind" in clock_line(-40) and clock_line(-40).startswith("PROBLEM")


def announce(client: CoordinatorClient, daemon: KuboDaemon) -> None:
    """What swarm run does when it starts: announce the daemon's dialable endpoint, signed by
    the daemon's key."""
    domain = EndpointDomain(client.w3.eth.chain_id, client.address)
    signature = daemon.store().sign(domain.message(client.account_address))
    endpoint = announceable(daemon.endpoint(), signature, allow_private=True)
    client.announce_endpoint(encode_endpoint(endpoint, signature))


def test_kubo_peers_are_found_through_the_chain(
    home: Path, chain: ChainControl, anvil: AnvilNode, tmp_path: Path,
    client_for: Callable[..., CoordinatorClient], dev_accounts: list[LocalAccount],
) -> None:  # fmt: skip
    chain.warp_to(max(chain.now(), int(time.time())))
    with kubo_swarm(tmp_path / "kubo") as daemons:
        ours, theirs = daemons.start("ours"), daemons.start("theirs")
        registered_peer(home, chain)
        write_config(home, home / "deployment.json", anvil.url, storage=f'store = "{ours.api_url}"')
        public = doctor(home)  # a daemon on loopback has nothing a peer elsewhere may dial
        assert ours.peer_id in line_of(public, "store") and public.exit_code == 1
        assert "none that peers may dial" in line_of(public, "announced")
        assert "allow_private_addresses = true" in line_of(public, "announced")
        assert "store" not in line_of(public, "disk")  # the daemon's repository is not ours

        storage = f'store = "{ours.api_url}"\nallow_private_addresses = true'
        write_config(home, home / "deployment.json", anvil.url, storage=storage)
        other = client_for(dev_accounts[1])
        other.register("bob", ETHER)
        squat = {"addrs": list(ours.addrs), "peer_id": ours.peer_id}  # no proof: no claim
        other.announce_endpoint(json.dumps(squat, separators=(",", ":")).encode())
        silent = doctor(home)
        assert "has announced no store endpoint" in line_of(silent, "announced")
        assert "no other peer has announced" in line_of(silent, "peers")

        announce(other, ours)  # the operator's other node on the same daemon: it holds the key
        held = doctor(home)
        assert f"is held by {other.account_address}" in line_of(held, "announced")
        assert "Fix: give this node its own Kubo repository" in line_of(held, "announced")

        announce(other, theirs)  # which frees ours
        announce(client_for(unlock_keystore(home / "keystore.json", PASSWORD)), ours)
        apart = doctor(home)
        assert line_of(apart, "announced").startswith(f"ok       announced  {ours.peer_id} at")
        assert "connected to none of the 1 peers" in line_of(apart, "peers")
        assert "never open the API port" in line_of(apart, "peers")

        ours.store().connect(theirs.endpoint())  # what swarm run does before fetching
        together = doctor(home)
        assert together.exit_code == 0, together.output
        assert "Kubo is connected to 1 of 1 announced peers" in line_of(together, "peers")

        ours.stop()
        again = daemons.start("ours")  # the same peer id on new ports (its API's too)
        storage = f'store = "{again.api_url}"\nallow_private_addresses = true'
        write_config(home, home / "deployment.json", anvil.url, storage=storage)
        moved = doctor(home)
        assert again.peer_id == ours.peer_id and again.addrs != ours.addrs
        line = line_of(moved, "announced")
        assert "the chain has" in line and "Fix: restart swarm run" in line


def test_an_unreachable_kubo_api(home: Path, chain: ChainControl, anvil: AnvilNode) -> None:
    registered_peer(home, chain)
    url = f"http://127.0.0.1:{closed_port()}"
    write_config(home, home / "deployment.json", anvil.url, storage=f'store = "{url}"')
    result = doctor(home)
    assert result.exit_code == 1, result.output
    line = line_of(result, "store")
    assert "the Kubo API does not answer id" in line and url in line
    assert "Fix: start the Kubo daemon" in line
    assert line_of(result, "peers").startswith("skipped")


def test_a_store_folder_that_is_not_writable(
    home: Path, chain: ChainControl, anvil: AnvilNode
) -> None:
    registered_peer(home, chain)
    blocker = home / "a-file"
    blocker.write_text("not a folder")
    store = f'store = "{blocker / "store"}"'
    write_config(home, home / "deployment.json", anvil.url, storage=store)
    result = doctor(home)
    assert result.exit_code == 1
    assert "is not writable" in line_of(result, "store")


def test_impossible_memory_settings_are_refused(home: Path, chain: ChainControl) -> None:
    write_config(
        home,
        home / "deployment.json",
        f"http://127.0.0.1:{closed_port()}",
        model=f'source = "smollm2-135m"\ncheckpoint_dir = "{home / "checkpoints"}"',
        sampling="group_size = 32",
        tasks='preset = "paper-strict"',  # its limit, 512 tokens per completion, allows long ones
        generation="max_new_tokens = 512",
    )
    config = load_config(home / "node.toml")
    checks = run_checks(config, probes=Probes(memory_available=lambda: 8 * GIB))
    memory = next(check for check in checks if check.name == "memory")
    assert memory.status == "problem", memory.line()
    assert "G 32" in memory.detail and "max_new_tokens 512" in memory.detail
    assert "Fix: lower [training] micro_batch_size" in memory.line()
    roomy = run_checks(config, probes=Probes(memory_available=lambda: 64 * GIB))
    assert next(check for check in roomy if check.name == "memory").status == "ok"


def test_too_little_disk(home: Path, chain: ChainControl) -> None:
    config = load_config(home / "node.toml")
    checks = run_checks(config, probes=Probes(disk_free=lambda path: 5 * MIB))
    disk = next(check for check in checks if check.name == "disk")
    assert disk.status == "problem" and "Fix: free space there or set" in disk.line()
    assert failed(checks)


def test_the_estimate_reproduces_the_measured_grpo_step() -> None:
    """docs/BENCHMARKS.md, Policy: one step on 8 sequences of 1,224 tokens in all (776 of them
    completion) peaked at 3.0 GiB RSS, and at 1.74 GiB in micro-batches of 2."""

    def peak(micro_batch: int) -> float:
        work = Workload(
            parameters=SMOL_PARAMETERS, tasks_per_round=1, group_size=8, trained_groups=1,
            max_new_tokens=776 // 8, micro_batch_size=micro_batch, lora_rank=16,
            prompt_tokens=(1224 - 776) // 8,
        )  # fmt: skip
        estimate = estimate_resources(work)
        assert estimate.training > estimate.generation  # the step is the peak here
        return estimate.memory / GIB

    assert peak(8) == pytest.approx(3.0, abs=0.05)
    assert peak(2) == pytest.approx(1.74, abs=0.05)


def test_the_default_settings_fit_a_small_machine() -> None:
    """The defaults (SmolLM2, 8 tasks x G 8, 48 new tokens, micro-batches of 8) need ~3.5 GiB;
    G 32 with 2,048 new tokens needs over 20 GiB, most of it the GRPO step."""
    default = estimate_resources(Workload(SMOL_PARAMETERS, 8, 8, 8, 48, 8, 16))
    assert 3 * GIB < default.memory < 4 * GIB
    assert 15 * MIB < default.checkpoint_disk < 60 * MIB
    huge = estimate_resources(Workload(SMOL_PARAMETERS, 8, 32, 8, 2048, 8, 16))
    assert huge.memory > 20 * GIB and huge.training > huge.generation
