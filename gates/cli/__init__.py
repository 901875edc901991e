"""The command line: everything that imports click. `app` builds the commands, `options`
the shared options, `report` the reporting commands; each calls one plain function in
gates.commands."""
