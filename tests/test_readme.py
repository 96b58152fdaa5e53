"""The user guide's command examples run as documented: every ``python -m verl_roles.main ...`` and
``verl-roles ...`` line of the code blocks of README.md and docs/*.md, read by this test (so they
cannot drift),
exits with the documented code (an error line documents 2, `# ... exit N` documents N, ``diff`` 1 unless
"same") and prints each line of the documented output where the README shows one."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, run_in_process, write

README = REPO / "README.md"
# The user guide: the README and the topic pages it links to.
GUIDE = (README, *sorted((REPO / "docs").glob("*.md")))

SHELL_BLOCKS = ("bash", "console", "text", "sh", "shell")
MAIN_PROGRAMS = ("verl-roles-main",)
CLI_PROGRAM = "verl-roles"

# Lines the test cannot run here, and why.
CANNOT_RUN = {
    "hydra/launcher=submitit_slurm": "needs a SLURM cluster",
    "launch": "starts verl's trainer (tests/test_launch.py covers the command with a stand-in trainer)",
}

# Sweep lines of a parallel or cluster-style launcher that tests/test_sweep.py runs, exactly as written
# here, and compares byte for byte with the basic launcher's outputs (what the README promises of them):
# running them here as well would start the same launcher twice for the same check.
LAUNCHER_LINES_RUN_BY_TEST_SWEEP = ("joblib", "submitit_local")

# Flags that configure Hydra's logging for the whole process: such examples run exactly as typed (no
# run folder or logging overrides added); conftest puts the logging back after the test.
AS_TYPED_FLAGS = {
    "--info", "-i", "--cfg", "-c", "--help", "-h", "--hydra-help", "-sc", "--shell-completion",
}


@dataclass(frozen=True)
class Example:
    """One command line of the README, its documented output and the exit code it documents."""

    file: str  # relative to the repository
    line: int
    text: str
    program: str  # "main" or "cli"
    args: tuple[str, ...]
    redirect: str | None
    comment: str
    output: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        stated = re.search(r"exit (\d)", self.comment)
        if stated:
            return int(stated.group(1))
        if any(line.startswith("verl_roles error:") for line in self.output):
            return 2
        if self.program == "cli" and self.args[:1] == ("diff",):
            same = "same" in self.comment or any(line.startswith("same:") for line in self.output)
            return 0 if same else 1
        return 0


def _command(text: str) -> tuple[str, list[str], str | None, str] | None:
    """(program, arguments, stdout redirect, comment) of a shell line running one of our commands."""
    if "verl_roles.main" not in text and CLI_PROGRAM not in text:
        return None
    _, _, comment = text.partition(" #")
    for part in text.split("&&"):
        tokens = shlex.split(part, comments=True)
        redirect = None
        if ">" in tokens:
            at = tokens.index(">")
            tokens, redirect = tokens[:at], tokens[at + 1]
        if tokens[:3] == ["python", "-m", "verl_roles.main"]:
            return "main", tokens[3:], redirect, comment
        if tokens[:1] and tokens[0] in MAIN_PROGRAMS:
            return "main", tokens[1:], redirect, comment
        if tokens[:1] == [CLI_PROGRAM]:
            return "cli", tokens[1:], redirect, comment
    return None


def readme_examples() -> list[Example]:
    found: list[Example] = []
    for page in GUIDE:
        found += _page_examples(page)
    return found


def _page_examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(REPO).as_posix()
    found: list[Example] = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if block.group(1) not in SHELL_BLOCKS:
            continue
        first_line = text.count("\n", 0, block.start(2)) + 1
        lines = block.group(2).splitlines()
        prompted = any(line.startswith("$ ") for line in lines)
        index = 0
        while index < len(lines):
            start = index
            logical = lines[index]
            while logical.rstrip().endswith("\\") and index + 1 < len(lines):
                index += 1
                logical = logical.rstrip()[:-1] + " " + lines[index].strip()
            index += 1
            if prompted and not logical.startswith("$ "):
                continue
            parsed = _command(logical.removeprefix("$ "))
            if parsed is None:
                continue
            output: list[str] = []
            while prompted and index < len(lines) and lines[index].strip():
                if lines[index].startswith("$"):
                    break
                output.append(lines[index])
                index += 1
            program, args, redirect, comment = parsed
            found.append(
                Example(
                    name, first_line + start, logical, program, tuple(args), redirect, comment, tuple(output)
                )
            )
    return found


EXAMPLES = readme_examples()


def test_the_readme_has_examples_of_every_command():
    commands = {e.args[0] for e in EXAMPLES if e.program == "cli"}
    assert {"diff", "explain", "migrate", "export-slime", "show"} <= commands, commands
    assert sum(e.program == "main" for e in EXAMPLES) >= 15


# Files the examples read. Those the README shows are taken from it (the block that starts with the
# given line); the others are what the README's documented output implies.
def _readme_block_starting_with(first_line: str) -> str:
    for page in GUIDE:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M):
            if block.group(1).startswith(first_line):
                return block.group(1)
    raise AssertionError(f"the guide has no yaml block starting with {first_line!r}")


def example_files() -> dict[str, str]:
    return {
        "myconf/role/critic/high_lr.yaml": _readme_block_starting_with("# @package critic"),
        "megatron_ppo.yaml": _readme_block_starting_with("megatron:"),
        # Stacked with high_lr in the README; any option of the critic will do.
        "myconf/role/critic/offload.yaml": "# @package critic\nmegatron:\n  optimizer_offload: true\n",
        # explain's documented chain: lora_rank 8 from myconf: legacy_run.yaml.
        "myconf/legacy_run.yaml": "defaults:\n  - ppo_trainer\n  - _self_\n"
        "actor_rollout_ref:\n  model:\n    lora_rank: 8\n",
        # explain's documented chain: the critic's lr 2e-05 from roles.yaml: megatron[0].
        "roles.yaml": "megatron:\n  - name: default\n    role: critic\n    overrides:\n      lr: 2e-5\n",
    }


def _in_process(example: Example, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    args = list(example.args)
    if example.program == "main":
        from verl_roles.main import main

        where = "hydra.sweep.dir" if {"-m", "--multirun"} & set(args) else "hydra.run.dir"
        quiet = ["hydra/job_logging=none", "hydra/hydra_logging=none"]
        code = main([*args, f"{where}={tmp_path / 'run'}", *quiet])
    else:
        from verl_roles.cli import main

        code = main(args)
    captured = capsys.readouterr()
    if example.redirect is not None:
        write(tmp_path / example.redirect, captured.out)
    return code, captured.out + captured.err


def _as_typed(example: Example, tmp_path: Path) -> tuple[int, str]:
    module = "verl_roles.main" if example.program == "main" else "verl_roles.cli"
    result = run_in_process(list(example.args), cwd=tmp_path, module=module)
    return result.returncode, result.stdout + result.stderr


def _normalized(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.file}:{e.line}" for e in EXAMPLES])
def test_readme_example_runs_as_documented(example: Example, tmp_path, monkeypatch, capsys):
    for needed, reason in CANNOT_RUN.items():
        if needed in example.args:
            pytest.skip(reason)
    for launcher in LAUNCHER_LINES_RUN_BY_TEST_SWEEP:
        if f"hydra/launcher={launcher}" in example.args:
            pytest.skip(f"run by tests/test_sweep.py::test_{launcher}_launcher_gives_the_same_outputs")
    for name, content in example_files().items():
        write(tmp_path / name, content)
    monkeypatch.chdir(tmp_path)
    if example.program == "main" and AS_TYPED_FLAGS & set(example.args):
        code, output = _as_typed(example, tmp_path)
    else:
        code, output = _in_process(example, tmp_path, capsys)
    assert "Traceback" not in output, output
    assert code == example.exit_code, f"{example.file} line {example.line}: {example.text}\n{output}"
    # Each documented line (a wrapped paragraph is several; `...` elides) is in the output.
    actual = _normalized(output)
    for line in example.output:
        for part in _normalized(line).split("..."):
            where = f"{example.file} line {example.line}"
            assert part.strip() in actual, f"{where}: {part.strip()!r} not in\n{output}"


def test_the_guides_links_to_its_pages_and_sections_resolve():
    # README.md and docs/*.md link to each other by file and heading; a moved section must not leave a
    # dead link behind.
    for page in GUIDE:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.is_file(), f"{page.name}: link to missing {target}"
            if anchor:
                assert anchor in _anchors(linked), f"{page.name}: link to missing section {target}"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``: lower case, punctuation dropped, spaces -> -."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", _outside_code(page.read_text(encoding="utf-8")), flags=re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


def _outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_the_layout_page_names_every_module_of_the_package():
    # docs/layout.md is the map of the package: every module is on it, and it names none that is gone.
    layout = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    package = REPO / "verl_roles"
    modules = {p.name for p in package.rglob("*.py") if p.name != "__init__.py" and "conf" not in p.parts}
    named = set(re.findall(r"^\s+([a-z_]+\.py)\s", layout, flags=re.M)) - {"__init__.py"}
    assert modules - named == set(), f"modules missing from docs/layout.md: {sorted(modules - named)}"
    gone = sorted(named - modules)
    assert not gone, f"docs/layout.md names modules that do not exist: {gone}"


def test_the_readme_stays_a_guide():
    # The README is the user guide's front page; developer material lives in docs/ (issue 21).
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 500, f"README.md has {lines} lines; move detail into docs/"
    assert "## Contents" in README.read_text(encoding="utf-8")


def test_the_readme_names_every_file_a_run_writes(tmp_path):
    """The README's table of a run's files is held to what a run writes (Hydra's logging on, as a user
    runs it): a file added to a run folder must be added to the table."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| file | content |"):].split("\n\n", 1)[0]
    named = {name for row in table.splitlines()[2:] for name in re.findall(r"`([^`]+)`", row.split(" | ")[0])}
    result = run_in_process(["hydra.run.dir=run"], tmp_path)
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    written = {str(path.relative_to(run)) for path in run.rglob("*") if path.is_file()}
    assert written - named == set(), "files a run writes that the README's table does not name"
    assert named - written == set(), "files the README's table names that a run does not write"


def test_the_table_of_verl_extras_is_what_pyproject_installs():
    """docs/verl.md's table of install extras is held to pyproject.toml: an extra whose requirements
    change, or a release's extra added, changes the page or fails here."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    page = (REPO / "docs" / "verl.md").read_text(encoding="utf-8")
    table = page[page.index("| extra | installs |"):].split("\n\n", 1)[0].splitlines()[2:]
    rows = {}
    for row in table:
        first, installs = row.strip("|").split(" | ")
        names = re.findall(r"`([^`]+)`", first)
        rows.update({name: re.findall(r"`([^`]+)`", installs) for name in names})
    verl_extras = {name: requirements for name, requirements in extras.items() if name.startswith("verl")}
    assert rows == verl_extras
