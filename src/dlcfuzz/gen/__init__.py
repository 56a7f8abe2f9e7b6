"""Graph generation strategies (one module each)."""
