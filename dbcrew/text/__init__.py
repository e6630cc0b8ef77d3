"""Text matching shared by the error tree and the knowledge base: tokens, an offline embedder, a vector index."""

from dbcrew.text.embedding import VectorIndex, embed
from dbcrew.text.tokens import tokens

__all__ = ["VectorIndex", "embed", "tokens"]
