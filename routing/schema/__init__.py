"""A self-contained JSON Schema engine: the schemas clients send (``response_format``, tool parameters) checked
for what the gateway can enforce, and model answers validated against them within a bounded cost, with RE2 for
every pattern. It imports nothing else of the project, so the config models, the request checks and the
gateway all use it from below."""
