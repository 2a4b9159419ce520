"""The OpenAI chat completions format: OpenAI itself and every OpenAI-compatible host (Azure's deployment URL, the
presets with their quirk rules).
"""
