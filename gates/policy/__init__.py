"""The policy in force: gates.toml, the contract set, waivers, trust anchors and the sides."""
