"""Chat models: building one from a setting, its errors, and the embedded local
model with its server."""
