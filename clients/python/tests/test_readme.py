"""Every ```python block of README.md runs against the real daemon."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from conftest import Daemon

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
TOP_README = Path(__file__).resolve().parents[3] / "README.md"
TOP_BLOCKS = re.findall(r"```python\n(.*?)```", TOP_README.read_text(), re.S)

# What each block must print (its first lines' gist), in README order.
WANT = [
    "github",                 # route, classify, analyze
    "tools/list_changed:",    # the watch saw the analysis
    "additive ('github',)",   # asyncio watch
    "INVALID_ARGUMENT",       # errors
    "True ('github',",        # smart routing
    "password False",         # terminal
]


def test_readme_has_the_blocks() -> None:
    assert len(BLOCKS) == len(WANT)
    assert len(TOP_BLOCKS) == 1


def _run(block: str, address: str) -> str:
    code = block.replace("127.0.0.1:50051", address)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    return out.getvalue()


def test_top_readme_example(daemon: Daemon) -> None:
    out = _run(TOP_BLOCKS[0], daemon.address)
    lines = out.splitlines()
    assert lines[0] == "github list_notifications", out
    assert "'github'" in lines[1], out


@pytest.mark.parametrize(("block", "want"), list(zip(BLOCKS, WANT)), ids=[w.split()[0] for w in WANT])
def test_readme_example(daemon: Daemon, block: str, want: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENABLE_SMART_ROUTING", "SMART_ROUTING_MAX_TOOLS", "SMART_ROUTING_MAX_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    out = _run(block, daemon.address)
    assert want in out, out
