"""Every command the README and the docs pages show parses, and the README stays a guide: short,
its troubleshooting lines what the commands print, its memory figure what `swarm doctor` computes,
its measured figures stated once across it and its pages, its links whole.

Commands are read from the ```bash blocks of README.md and docs/*.md, one per line (a line ending
in ``\\`` continues on the next). The rule for what is checked, and what is skipped:

- a line starting with ``#`` is a comment and skipped; shell comments after a command are dropped
  (outputs belong in ```text blocks, never in ```bash ones);
- a line is split into simple commands at ``&&``, ``||``, ``;``, ``|``, ``&`` and parentheses;
  leading ``NAME=value`` assignments are dropped, and so are redirections (``> file``) with their
  target;
- ``swarm``, ``swarm-deploy`` and ``swarm-indexer`` (bare or as ``.venv/bin/...``) are run
  in-process through their click command objects (``[project.scripts]`` of pyproject.toml) with
  click's CliRunner, on the same arguments plus ``--help``: click parses every option before it
  acts on ``--help``, so an option in the wrong place (``swarm audit 41 --config node.toml``: the
  option belongs to ``swarm``, before the subcommand) or a misspelled one fails;
- ``scripts/NAME`` must be an executable file; ``scripts/demo``'s arguments go to
  ``swarm local up`` and are parsed by it the same way;
- ``.venv/bin/python scripts/X.py`` needs the script, ``.venv/bin/python -m M`` the module;
- any other program is outside the project and not run; in README.md it must be one of
  ``OTHER_PROGRAMS`` (so a misspelled project command cannot slip through as "another program").
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))

#: Programs the README may show that are not the project's (shell builtins and system tools).
OTHER_PROGRAMS = {
    "cd", "cp", "curl", "export", "git", "ipfs", "journalctl", "mkdir", "printf", "rm", "source",
    "sudo", "systemctl", "umask", "forge", "cast", "anvil",
}  # fmt: skip
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}
_REDIRECTIONS = {">", ">>", "<", ">&", "<&", "&>", ">|"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Command:
    source: str  # file:line
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.source}: {shlex.join(self.words)}"


def bash_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, logical line) of every ```bash block in ``path``, continuations joined."""
    lines: list[tuple[int, str]] = []
    inside = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fence = line.strip()
        if fence.startswith("```"):
            inside = not inside and fence[3:].strip() == "bash"
            continue
        if not inside:
            continue
        start, text = pending if pending else (number, "")
        text += line
        if text.endswith("\\"):
            pending = (start, text[:-1] + " ")
            continue
        pending = None
        if text.strip() and not text.strip().startswith("#"):
            lines.append((start, text))
    return lines


def simple_commands(path: Path, root: Path = REPO_ROOT) -> list[Command]:
    """Every simple command of ``path``'s bash blocks, by the module docstring's rule."""
    found = []
    for number, line in bash_lines(path):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        tokens = list(lexer)
        skip_next = False
        for token in [*tokens, ";"]:
            if skip_next:
                skip_next = False
                continue
            if token in _REDIRECTIONS:
                skip_next = True
                continue
            if token in _SEPARATORS:
                while words and _ASSIGNMENT.match(words[0]):
                    words.pop(0)
                if words:
                    source = f"{path.relative_to(root)}:{number}"
                    found.append(Command(source, tuple(words)))
                words = []
                continue
            words.append(token)
    return found


def _entry_points() -> dict[str, click.Command]:
    """The console scripts of pyproject.toml as click command objects."""
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    commands = {}
    for name, target in scripts.items():
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):  # a plain wrapper calling the module's main
            command = module.main
        assert isinstance(command, click.Command), f"{name} = {target} is not a click command"
        commands[name] = command
    return commands


def _program(word: str) -> str:
    """``swarm`` for ``swarm``, ``.venv/bin/swarm`` and ``/anywhere/.venv/bin/swarm``."""
    if word.startswith(".venv/bin/") or "/.venv/bin/" in word:
        return word.rsplit("/", 1)[1]
    return word


def problem_with(command: Command, entry_points: dict[str, click.Command]) -> str | None:
    """None when ``command`` parses (or is not the project's); else what is wrong with it."""
    program, args = _program(command.words[0]), list(command.words[1:])
    if program in entry_points:
        return _click_problem(entry_points[program], program, args)
    if program.startswith("scripts/"):
        script = REPO_ROOT / program
        if not (script.is_file() and os.access(script, os.X_OK)):
            return f"{program} is not an executable script"
        if program == "scripts/demo":  # `exec .venv/bin/swarm local up "$@"`
            return _click_problem(entry_points["swarm"], "swarm", ["local", "up", *args])
        return None
    if program == "python":
        if args[:1] == ["-m"]:
            found = importlib.util.find_spec(args[1]) if len(args) > 1 else None
            return None if found else f"no module {args[1:2]}"
        if args and args[0].endswith(".py") and not (REPO_ROOT / args[0]).is_file():
            return f"no script {args[0]}"
        return None
    return None


def _click_problem(command: click.Command, program: str, args: list[str]) -> str | None:
    result = CliRunner().invoke(command, [*args, "--help"], prog_name=program)
    if result.exit_code == 0 and result.exception is None:
        return None
    return (result.output.strip().splitlines() or [repr(result.exception)])[-1]


def readme_problems() -> list[str]:
    entry_points = _entry_points()
    problems = []
    for command in simple_commands(README):
        program = _program(command.words[0])
        known = program in entry_points or program in OTHER_PROGRAMS or program == "python"
        if not known and not program.startswith("scripts/") and not program.startswith("$("):
            problems.append(f"{command}: unknown program {program!r} (add it to OTHER_PROGRAMS?)")
            continue
        problem = problem_with(command, entry_points)
        if problem:
            problems.append(f"{command}: {problem}")
    return problems


# ------------------------------------------------------------------------------------ tests


def test_the_rule_catches_an_option_after_its_subcommand() -> None:
    entry_points = _entry_points()
    wrong = Command("example", (".venv/bin/swarm", "audit", "41", "--config", "node.toml"))
    right = Command("example", (".venv/bin/swarm", "--config", "node.toml", "audit", "41"))
    assert "No such option" in (problem_with(wrong, entry_points) or "")
    assert problem_with(right, entry_points) is None
    demo = Command("example", ("scripts/demo", "--model", "tiny", "--rounds", "2"))
    assert problem_with(demo, entry_points) is None
    assert problem_with(Command("example", ("scripts/demo", "--round", "2")), entry_points)


def test_the_extractor_splits_lines_as_the_shell_does(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\n"
        "# a comment\n"
        "A=1 swarm init && swarm register --name a \\\n"
        "  --stake 0.05   # trailing comment\n"
        ".venv/bin/swarm config example > node.toml\n"
        "```\n"
        "```text\n"
        "swarm not a command: an output\n"
        "```\n",
        encoding="utf-8",
    )
    words = [command.words for command in simple_commands(page, root=tmp_path)]
    assert words == [
        ("swarm", "init"),
        ("swarm", "register", "--name", "a", "--stake", "0.05"),
        (".venv/bin/swarm", "config", "example"),
    ]


def test_every_readme_command_parses() -> None:
    commands = simple_commands(README)
    assert len(commands) >= 8, "the README shows hardly any command: is the extractor broken?"
    problems = readme_problems()
    assert not problems, "README commands that do not parse:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.name)
def test_every_docs_command_of_the_project_parses(page: Path) -> None:
    entry_points = _entry_points()
    problems = [
        f"{command}: {problem}"
        for command in simple_commands(page)
        if (problem := problem_with(command, entry_points))
    ]
    assert not problems, f"{page.name} commands that do not parse:\n" + "\n".join(problems)


def test_readme_copy_paste_commands_need_no_activated_venv() -> None:
    bare = [
        str(command)
        for command in simple_commands(README)
        if command.words[0] in ("swarm", "swarm-deploy", "swarm-indexer")
    ]
    assert not bare, "write .venv/bin/swarm (not on PATH without the venv):\n" + "\n".join(bare)


# ------------------------------------------------------------------- the README stays a guide

#: The pages the README hands its details to (docs/PROTOCOL.md, DESIGN.md, EXPERIMENT.md, LOG.md
#: and API.md have rules of their own).
GUIDE_PAGES = [
    README,
    *(
        REPO_ROOT / "docs" / name
        for name in (
            "INSTALL.md", "NODE.md", "LOCAL_SWARM.md", "CONTRACT.md", "DATA_PLANE.md",
            "POLICY.md", "INDEXER.md", "EXPERIMENT_HARNESS.md", "BENCHMARKS.md", "TESTS.md",
            "KNOWN_LIMITS.md",
        )
    ),
]  # fmt: skip
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            inside = not inside
        match = None if inside else re.match(r"#{1,6} (.+)", line)
        if match:
            slug, n = _slug(match.group(1)), 1
            while (slug if n == 1 else f"{slug}-{n - 1}") in anchors:
                n += 1
            anchors.add(slug if n == 1 else f"{slug}-{n - 1}")
    return anchors


def test_anchors_are_githubs() -> None:
    assert _slug("What `swarm run` does") == "what-swarm-run-does"
    assert _slug("Exchange check: the chain and the in-process exchange give the same rows") == (
        "exchange-check-the-chain-and-the-in-process-exchange-give-the-same-rows"
    )


def test_the_readme_is_a_short_guide() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 260
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "Two commands",
        "Join a testnet",
        "Everyday commands",
        "Troubleshooting",
        "Read more",
    ]


def test_every_guide_page_exists_and_the_readme_links_it() -> None:
    text = README.read_text(encoding="utf-8")
    for page in GUIDE_PAGES[1:]:
        assert page.is_file(), page
        assert f"(docs/{page.name})" in text, f"the README does not link docs/{page.name}"


@pytest.mark.parametrize("page", GUIDE_PAGES, ids=lambda path: path.name)
def test_guide_pages_name_no_issue_and_no_machine_of_their_own(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"\bissues? \d+", text, re.IGNORECASE), "issue numbers belong in the log"
    assert "this machine" not in text.lower()


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda path: path.name)
def test_relative_links_lead_to_files_and_headings_that_exist(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        linked = (page.parent / name).resolve() if name else page
        if name and not linked.exists():
            if linked.name == "API.md":  # written alongside; its own author adds it
                continue
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{page.name}:\n" + "\n".join(broken)


def test_the_memory_stated_for_the_defaults_is_what_doctor_computes() -> None:
    from node.config import NodeConfig
    from node.doctor.machine import workload
    from node.resources import GIB, estimate_resources

    work = workload(NodeConfig())
    assert work is not None
    computed = f"~{estimate_resources(work).memory / GIB:.1f} GiB"
    stated = []
    for page in GUIDE_PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        stated += re.findall(r"\bdefaults?\b[^.;]*?(~\d+(?:\.\d+)? GiB)", text, re.IGNORECASE)
    assert stated, "no page states the defaults' memory"
    assert set(stated) == {computed}, f"stated {sorted(set(stated))}; doctor computes {computed}"


#: Measured figures that must be stated once across the README and its pages (a second copy is
#: how two install times or two test times came to disagree).
ONCE = ["3 min 38 s", "1,026 s", "16 min 39 s", "61 s", "none of the 40 nodes", "3.10x", "5.5 GB"]


@pytest.mark.parametrize("figure", ONCE)
def test_a_measured_figure_appears_once(figure: str) -> None:
    texts = {page.name: " ".join(page.read_text(encoding="utf-8").split()) for page in GUIDE_PAGES}
    where = {name: text.count(figure) for name, text in texts.items() if figure in text}
    assert sum(where.values()) == 1, where


# ------------------------------------------------- the troubleshooting lines are what users see


def _troubleshooting() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    return " ".join(section.split())


def _last_line(output: str) -> str:
    return " ".join(output.strip().splitlines()[-1].split())


def test_the_troubleshooting_lines_are_what_the_commands_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mistakes that need no chain, made for real; each one's line is quoted in the README
    (with the README's paths: ``node.toml`` in the current folder, the keystore in ~/.swarm)."""
    from node.cli import main
    from node.identity import create_keystore

    monkeypatch.chdir(tmp_path)
    home = "/home/you/.swarm"
    keystore = tmp_path / "keystore.json"
    runner = CliRunner(env={"SWARM_KEYSTORE_PASSWORD": None, "SWARM_CONFIG": None})

    def line(args: list[str], env: dict[str, str | None] | None = None) -> str:
        result = runner.invoke(main, args, env=env)
        assert result.exit_code != 0, result.output
        return _last_line(result.output.replace(str(tmp_path), home))

    def config(text: str) -> None:
        (tmp_path / "node.toml").write_text(text, encoding="utf-8")

    seen = [
        line(["audit", "41", "--config", "node.toml"]),
        line(["--config", "node.toml", "status"]),
    ]
    config('[chain]\nrpc_url = "127.0.0.1:8545"\n')
    seen.append(line(["status"]))
    config(f'[identity]\nkeystore = "{keystore}"\n')
    seen.append(line(["status"]))
    seen.append(line(["init"]))
    create_keystore(keystore, "a long passphrase", kdf_n=2**4)
    seen.append(line(["status"]))  # the deployment file is missing
    wrong = {"SWARM_KEYSTORE_PASSWORD": "another passphrase"}
    seen.append(line(["register", "--name", "alice", "--stake", "0.05"], env=wrong))
    keystore.write_text("not a keystore", encoding="utf-8")
    seen.append(line(["status"]))
    quoted = _troubleshooting()
    missing = [seen_line for seen_line in seen if seen_line not in quoted]
    assert not missing, "README Troubleshooting does not quote:\n" + "\n".join(missing)
