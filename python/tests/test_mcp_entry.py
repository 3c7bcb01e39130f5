"""`python -m reliable.mcp` and the `reliablekit-mcp` command: they run the reliable-mcp server
when it is installed and say exactly what to install when it is not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import reliable.mcp


def test_without_the_server_it_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(reliable.mcp, "find_server", lambda: None)
    assert reliable.mcp.main(["--version"]) == 2
    err = capsys.readouterr().err
    assert 'pip install "reliablekit[mcp]"' in err
    assert "reliable-mcp" in err


def test_the_server_gets_the_arguments_and_the_process(tmp_path):
    fake = tmp_path / "reliable-mcp"
    fake.write_text("#!/bin/sh\necho \"server $*\"\nexit 7\n")
    fake.chmod(0o755)
    code = textwrap.dedent(
        f"""
        import reliable.mcp as m
        m.find_server = lambda: {str(fake)!r}
        raise SystemExit(m.main(["--http", "127.0.0.1:0"]))
        """
    )
    if os.name != "posix":
        return
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "server --http 127.0.0.1:0"
    assert run.returncode == 7
