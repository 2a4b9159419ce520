"""The OpenAI chat format as the middle every translation goes through: the walk over a chat body's messages
(``messages``) and what a chat completion carries (``chat_completion``).
"""
