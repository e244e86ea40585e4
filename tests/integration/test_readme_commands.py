"""The documentation as written (README.md, then the pages of docs/ in mkdocs.yml's order): every
fenced block is classified, and the runnable ones run against one dev stack, in that order.

Each fence is preceded by `<!-- readme-test: KIND -->`:

- `run`: a `bash` block runs in `bash -eo pipefail`, a `python` block with this
  interpreter, against a dev stack (`turnout dev`, started here on free ports
  with the operator key the README tells newcomers to use); must exit 0 and
  print no error body;
- `config`: a whole configuration file, checked with `turnout config check`;
- `config-fragment`: top-level sections set in the demo catalog, checked so;
- `skip: <reason>`: not runnable here (the reason is required).

The README's `127.0.0.1:8080` and `:9100` become the stack's ports; nothing
else is rewritten, so a command that drifts from the product fails here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from support.docs import README, ROOT, pages
from support.procs import free_port, require_redis

pytestmark = pytest.mark.integration

OPERATOR_KEY = "op-local-dev-0001"  # what the README says to start the dev stack with
DEMO_KEY = "tk-demo-local-only-0001"
MARKER = re.compile(r"<!-- readme-test: (run|config|config-fragment|skip: \S.*) -->$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    kind: str
    text: str

    @property
    def where(self) -> str:
        """`README.md:40`, `docs/routing.md:112`: the page and the fence's line."""
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    """Every fenced block of every page, in reading order, with its marker (a missing marker is a
    `missing` kind)."""
    return [block for page in pages() for block in page_blocks(page)]


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page."""
    lines = page.read_text().splitlines()
    name = str(page.relative_to(ROOT))
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            marker = MARKER.match(lines[i - 1]) if i else None
            out.append(
                Block(
                    name,
                    i + 1,
                    lines[i][3:].strip(),
                    marker.group(1) if marker else "missing",
                    "\n".join(lines[i + 1 : end]) + "\n",
                )
            )
            i = end
        i += 1
    return out


BLOCKS = blocks()


CLI_USE = re.compile(r"(?<![\w./-])turnout (?:dev|sim|ingress|worker|config|admin|audit|logs)\b")
ACTIVATE = ". .venv/bin/activate"


def test_the_cli_is_first_used_after_saying_how_to_reach_it() -> None:
    """`turnout` is `.venv/bin/turnout` after `scripts/dev`, not on PATH: the README says to
    activate the venv before its first `turnout …` command, and every block then calls it bare."""
    lines = [line for line in README.read_text().splitlines() if not line.startswith("<!--")]
    first_use = next(i for i, line in enumerate(lines) if CLI_USE.search(line))
    note = next((i for i, line in enumerate(lines) if ACTIVATE in line), None)
    assert note is not None and note < first_use, f"first `turnout` command: {lines[first_use]!r}"
    prefixed = [b.where for b in BLOCKS if ".venv/bin/turnout" in b.text]
    assert not prefixed, f"blocks calling .venv/bin/turnout rather than turnout (venv active): {prefixed}"


def test_every_readme_block_is_classified() -> None:
    missing = [b.where for b in BLOCKS if b.kind == "missing"]
    assert not missing, f"fences without a `<!-- readme-test: ... -->` line before them: {missing}"
    assert sum(b.kind == "run" for b in BLOCKS) >= 6


@dataclass
class DevStack:
    port: int
    sim_port: int
    env: dict[str, str]
    workdir: Path

    def localise(self, text: str) -> str:
        return text.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}").replace(":9100", f":{self.sim_port}")


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    """`turnout dev` as the README starts it (demo catalog, operator key), in a scratch directory."""
    require_redis()
    workdir = tmp_path_factory.mktemp("readme")
    port, sim_port = free_port(), free_port()
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "TURNOUT_OPERATOR_KEY": OPERATOR_KEY,
        "TURNOUT_METRICS_PORT": "0",
    }
    for name in ("TURNOUT_CONFIG", "TURNOUT_REDIS_URL", "TURNOUT_URL", "TURNOUT_ADMIN_KEY", "TURNOUT_SECRET_KEY"):
        env.pop(name, None)
    log = (workdir / "dev.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnout_cli.main", "dev", "--port", str(port), "--sim-port", str(sim_port)],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (workdir / "dev.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health/readiness", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (workdir / "dev.log").read_text()
            time.sleep(0.2)
        yield DevStack(
            port,
            sim_port,
            {
                **env,
                "TURNOUT_URL": f"http://127.0.0.1:{port}",
                "ADMIN_KEY": DEMO_KEY,
                "OPENAI_API_KEY": "sk-x",
                "GROQ_API_KEY": "gsk-x",
                "AZURE_OPENAI_KEY": "azure-x",
                "AZURE_SWE_KEY": "azure-swe-x",
                "AWS_ACCESS_KEY_ID": "AKIAREADMEEXAMPLE001",
                "AWS_SECRET_ACCESS_KEY": "readme-secret-x",
                "ANTHROPIC_API_KEY": "sk-ant-x",
                "TURNOUT_KEY_CI_BOT": "tk-readme-ci-bot-0001",
                "VLLM_KEY": "vllm-readme-x",
                "ROUTE_TOKEN": "route-readme-x",
            },
            workdir,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _run(dev: DevStack, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, cwd=dev.workdir, env=dev.env, timeout=120, check=False
    )


RUNNABLE = [b for b in BLOCKS if b.kind in ("run", "config", "config-fragment")]


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.where}-{b.kind}" for b in RUNNABLE])
def test_readme_block_works_as_written(dev: DevStack, block: Block) -> None:
    text = dev.localise(block.text)
    if block.kind == "config":
        path = dev.workdir / f"{block.page.replace('/', '-')}-{block.line}.yaml"
        path.write_text(text)
        done = _run(dev, [sys.executable, "-m", "turnout_cli.main", "config", "check", str(path)])
    elif block.kind == "config-fragment":
        path = dev.workdir / f"{block.page.replace('/', '-')}-{block.line}.yaml"
        merged = {**yaml.safe_load((dev.workdir / ".turnout" / "demo.yaml").read_text()), **yaml.safe_load(text)}
        path.write_text(yaml.safe_dump(merged))
        done = _run(dev, [sys.executable, "-m", "turnout_cli.main", "config", "check", str(path)])
    elif block.lang == "python":
        done = _run(dev, [sys.executable, "-"], stdin=text)
    else:
        assert block.lang == "bash", f"{block.where}: a `run` block must be bash or python"
        done = _run(dev, ["bash", "-eo", "pipefail", "-c", text])
    report = f"{block.where}:\n{text}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, report
    assert '"error"' not in done.stdout and "Traceback" not in done.stderr, report
    if "curl -i" in text:
        assert re.search(r"^HTTP/\S+ 200", done.stdout, re.MULTILINE), report
