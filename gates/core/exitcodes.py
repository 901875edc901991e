"""Exit codes shared by every command: 0 pass/ok, 1 blocked or check failed, 2 error."""

OK = 0
BLOCKED = 1
ERROR = 2
