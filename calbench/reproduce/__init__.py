"""The papers' published numbers as data, and the report that sets calbench's beside them
(`calbench reproduce PRESET`)."""
