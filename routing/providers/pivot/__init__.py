"""The OpenAI chat format as the middle every translation goes through: what a chat completion carries."""
