"""The simulator's embeddings are a hashed bag of words: texts that share their words are near, texts that share
none are not, so the response cache's semantic matching is testable without a model."""

from __future__ import annotations

from routing.simulator.wire.embeddings import embedding_vector


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_same_words_in_any_order_or_case_are_the_same_vector() -> None:
    assert embedding_vector("m", "What is the capital of France?", 64) == embedding_vector(
        "m", "france OF the capital is what", 64)


def test_texts_sharing_most_words_are_near_and_others_are_not() -> None:
    question = embedding_vector("m", "what is the capital city of france", 1024)
    paraphrase = embedding_vector("m", "please what is the capital city of france", 1024)
    other = embedding_vector("m", "how do I bake sourdough bread at home", 1024)
    assert cosine(question, paraphrase) > 0.9
    assert abs(cosine(question, other)) < 0.25


def test_vectors_are_unit_length_and_depend_on_the_model() -> None:
    vector = embedding_vector("m", "hello world", 16)
    assert abs(sum(v * v for v in vector) - 1.0) < 1e-4
    assert vector != embedding_vector("n", "hello world", 16)
    assert abs(sum(v * v for v in embedding_vector("m", "!!!", 16)) - 1.0) < 1e-4  # no word: hashed whole
