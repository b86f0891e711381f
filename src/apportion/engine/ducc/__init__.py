"""DUCC's memory-quantum scheduling (seed 001), built on the same engine model."""
