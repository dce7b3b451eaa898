"""Domain packages: generated corpora, their schemas and labelled question sets.

A domain knows its own data and nothing of the engine: it produces documents
and questions; the caller ingests and evaluates them.
"""
