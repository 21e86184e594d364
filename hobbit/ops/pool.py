"""pool ops (being written)."""
