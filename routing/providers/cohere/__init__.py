"""Cohere's Chat v2 and Embed v2 formats: an OpenAI chat body to `/v2/chat`, its answer and stream back, and
embeddings.
"""
