"""Google Vertex AI: Gemini and Claude on Vertex's URLs and credentials, and Google's embedding models."""
