"""The README's examples, run as written (placeholders filled) against a real server, in order on
one store: a new user's first steps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import mnemo_bin

README = Path(__file__).resolve().parents[1] / "README.md"
#: How long the examples may take together before the test reports them stuck.
EXAMPLES_WAIT_SECS = 120
#: What the README's summarizer calls: a summary with the sections a checkpoint needs.
HOST_MODEL = '''
def call_my_model(instructions, messages):
    return ("## Goal\\nG\\n\\n## Progress\\n### Done\\nD\\n\\n### In Progress\\nP\\n\\n"
            "## Next Steps\\n1. N\\n\\n## Critical Context\\nC\\n")
'''


def test_the_readme_examples_run_as_written_on_one_store(store: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 3, f"the README has {len(blocks)} python examples"
    script = HOST_MODEL
    for block in blocks:
        for placeholder, value in [('"/path/to/store"', repr(str(store))), ('mnemo_bin="mnemo"', f"mnemo_bin={str(mnemo_bin())!r}")]:
            assert placeholder in block, f"an example has no {placeholder}"
            block = block.replace(placeholder, value)
        script += "\n" + block
    env = {**os.environ, "PYTHONPATH": str(README.parent / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=EXAMPLES_WAIT_SECS, env=env
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line]
    # The second example's first notification is the log's first entry.
    assert lines[1] == "1", done.stdout
    # Before `remember`, the recall block was empty; now it holds what the user asked to remember.
    assert lines[-2].startswith("0 Long-term memory"), done.stdout
    assert "The user never uses unwrap in library code." in lines[-1], done.stdout
