"""OpenAI's Responses API: the client's request (`inbound_request`), its translation to chat and back
(`request_to_chat`, `response_from_chat`, `stream_from_chat`), and the Responses upstream of OpenAI-kind providers
(`upstream`).
"""
