"""Toolsets, one module each. Tools read ids and settings from the injected runtime, never from
arguments the model can see."""
