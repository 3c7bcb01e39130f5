"""The MCP server, started the seed's way: ``python -m reliable.mcp`` or the ``reliablekit-mcp``
(or ``reliablekit``) command.

The server is the ``reliable-mcp`` executable (Rust) from the ``reliable-mcp`` wheel, which
``pip install "reliablekit[mcp]"`` brings. This module finds it in the running environment's
scripts folder (a venv's ``bin/``), or else on ``PATH``, and hands the process over to it, so its
arguments, stdin and stdout are the server's (``--help`` lists them; ``--http 127.0.0.1:8931``
serves streamable HTTP). Without it, it says what to install and exits with status 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

__all__ = ["INSTALL", "find_server", "main"]

INSTALL = 'pip install "reliablekit[mcp]"'
"""The command that installs the server next to this package."""

_EXE = "reliable-mcp.exe" if os.name == "nt" else "reliable-mcp"


def find_server() -> str | None:
    """The path of the ``reliable-mcp`` executable, or ``None`` if it is not installed."""
    folders = [sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for folder in folders:
        path = os.path.join(folder, _EXE)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(_EXE)


def main(argv: list[str] | None = None) -> int:
    """Runs the server with ``argv`` (default: this process's arguments)."""
    args = sys.argv[1:] if argv is None else argv
    server = find_server()
    if server is None:
        sys.stderr.write(
            "reliablekit: the MCP server (the reliable-mcp executable) is not installed.\n"
            f"Install it with:\n\n    {INSTALL}\n\n"
            "(or `pip install reliable-mcp`, or from a checkout of reliable: "
            "`cargo install --path mcp`)\n"
        )
        return 2
    if os.name == "posix":
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(server, [server, *args])
    return subprocess.call([server, *args])


if __name__ == "__main__":
    sys.exit(main())
