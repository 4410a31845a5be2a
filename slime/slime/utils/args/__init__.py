"""The parts of slime's config, one concern a module; import them from `slime.utils.arguments`."""
