"""The Gemini API format: an OpenAI chat body to `generateContent`, its answer and its stream back to OpenAI chunks."""
