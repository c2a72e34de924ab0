"""The README's set-up section, as a fresh user reads it: exactly two commands (one installs and
starts the app, one installs and runs the tests), with what they need said before them: the
Python version pyproject requires, the `git` program, and a virtual environment (one line)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Set up on a fresh machine")
    end = text.index("\n### ", start)  # the GPU notes that follow are not the fresh-machine set-up
    return text[start:end]


def test_exactly_two_setup_commands():
    commands = [line.strip() for line in _setup_section().splitlines() if line.startswith("    ") and line.strip()]
    assert commands == ['pip install -e ".[cpu]" && streamlit run app.py',
                        'pip install -e ".[test]" && python -m pytest'], commands


def test_the_python_version_git_and_a_virtual_environment_come_first():
    section = _setup_section()
    before = section[: section.index('    pip install -e ".[cpu]"')]
    # (tomllib is Python 3.11+, and the project supports 3.10)
    required = re.search(r'^requires-python\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert required, "pyproject.toml states no requires-python"
    minimum = re.fullmatch(r">=\s*(\d+\.\d+)", required.group(1).strip())
    assert minimum, f"requires-python {required!r}: say it in the README by hand"
    assert f"Python {minimum.group(1)} or newer" in before
    assert "`git`" in before
    assert "`python3 -m venv .venv && . .venv/bin/activate`" in before
