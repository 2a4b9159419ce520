"""What every wire format shares: typed reads of JSON bodies, usage, ids, finish reasons, media, reasoning budgets, the
ids that carry thinking and signatures, embedding vectors.
"""
