"""The README's Python example, run as printed: ``python -m tensordesc demo`` writes its
checkpoint into a scratch ``$TMPDIR``, then the README's Python block runs with the demo
directory's path as its one change, and every ``print`` line must print what its comment
says. The ``python -c`` line the demo ends with runs as printed too."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
DEMO_DIR = "/tmp/tensordesc-demo"


def fenced(text, heading, lang):
    """The first fenced block of ``lang`` after ``heading``."""
    opening = f"```{lang}\n"
    start = text.index(opening, text.index(heading)) + len(opening)
    return text[start : text.index("\n```\n", start) + 1]


def run_demo(tmp):
    """``python -m tensordesc demo`` with ``$TMPDIR`` set to ``tmp``; its output."""
    r = subprocess.run(
        [sys.executable, "-m", "tensordesc", "demo"],
        env=dict(os.environ, TMPDIR=str(tmp)),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    stdout = run_demo(tmp)
    assert (tmp / "tensordesc-demo" / "model.safetensors").is_file()
    return tmp, stdout


def test_the_python_block_prints_what_its_comments_say(demo):
    tmp, _ = demo
    block = fenced(README.read_text(), "### Python", "python")
    assert f'"{DEMO_DIR}/model.safetensors"' in block
    program = block.replace(DEMO_DIR, str(tmp / "tensordesc-demo"))
    r = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp
    )
    assert r.returncode == 0, r.stdout + r.stderr
    promised = [
        line.split("# ", 1)[1].strip()
        for line in block.splitlines()
        if line.startswith("print(")
    ]
    printed = r.stdout.splitlines()
    assert len(printed) == len(promised) >= 3, r.stdout
    for got, want in zip(printed, promised):
        # The comment starts with what the line prints (and may say more).
        assert got.strip() and want.startswith(got.strip()), (got, want)


def test_the_demo_s_python_line_works_as_printed(demo):
    tmp, stdout = demo
    lines = [l.strip() for l in stdout.splitlines() if l.strip().startswith("python -c ")]
    assert len(lines) == 1, stdout
    argv = shlex.split(lines[0])
    r = subprocess.run(
        [sys.executable] + argv[1:], capture_output=True, text=True, cwd=tmp
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("[["), r.stdout
