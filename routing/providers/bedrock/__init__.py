"""Amazon Bedrock's Converse format: an OpenAI chat body to Converse, its answer, its AWS event stream back to OpenAI
chunks, and embeddings.
"""
