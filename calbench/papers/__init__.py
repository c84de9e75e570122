"""The paper packs: one folder per paper, its reproduction apart from the library.

Each pack holds the paper's procedure twins, its Hydra configs, its published numbers, its
notes and claims and its page (`calbench.packs` says what a pack holds and how it is found).
A pack imports the library; the library finds packs by looking and never imports one.
"""
