"""JSON hardware presets shipped with the package."""
