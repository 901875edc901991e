"""The one place where code from the audited repository runs (docs/sandbox.md).

`SandboxHost.support()` says which sandbox this host can start; `prepared()` materializes
the commit under audit and gives the command line that runs a command in it.
"""

from gates.sandbox.session import Isolation, Prepared, Request, SandboxHost, killed_by, prepared
from gates.sandbox.support import SandboxSupport, support

__all__ = [
    "Isolation",
    "Prepared",
    "Request",
    "SandboxHost",
    "SandboxSupport",
    "killed_by",
    "prepared",
    "support",
]
