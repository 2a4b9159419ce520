"""Streams of every format: SSE framing, decoding upstream events to OpenAI chunks, encoding chunks as the client's
frames, accumulating the answer, and cached answers replayed as streams.
"""
