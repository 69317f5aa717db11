"""Chat model implementations: vendor providers and offline test doubles."""
