"""The `--format` names of `gates audit`, kept apart so the CLI can offer them without
importing the reporters (a test keeps this list and REPORTERS equal)."""

FORMATS = ("text", "json", "junit", "github")
