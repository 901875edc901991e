"""The engine: every contract evaluated, the alignment, waivers applied, the verdict."""
