"""One module per wire format the simulator speaks (``<format>_embeddings`` for its embeddings endpoint, ``embeddings``
for OpenAI's, Azure's and Gemini's and the vectors every format shares); ``base`` holds the contract they share."""
