"""Anthropic's Messages format, both ways: as the upstream (`upstream_*`: an OpenAI chat body to Anthropic and its
answer and stream back) and as the client's protocol (`inbound_*`: an Anthropic client's request to the OpenAI chat
pivot, and the pivot's answer and stream back in Anthropic's shape).
"""
